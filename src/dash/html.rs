//! HTML, server-rendered: a layout, and the small pieces every page uses.
//! Every piece of span data goes through [`esc`] (text and attributes) or
//! [`seg`] (a URL path segment); nothing untrusted reaches the page raw.

/// Escape text for HTML text and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Percent-encode one URL path segment (or query value).
pub fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

const CSS: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:12px 16px;max-width:1280px}
h1{font-size:20px;margin:8px 0} h2{font-size:16px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600} td.n{text-align:right;font-variant-numeric:tabular-nums}
.err{color:#d62728;font-weight:600} .muted{color:#6b7280}
.pill{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e5e7eb}
.state-new,.state-regressed{background:#fde2e2;color:#991b1b} .state-ongoing{background:#fef3c7;color:#92400e}
.state-resolved{background:#dcfce7;color:#166534} .state-muted{background:#e5e7eb;color:#374151}
.counters{display:flex;gap:12px;margin:8px 0} .counter{background:#fff;border:1px solid #e5e7eb;padding:8px 12px;border-radius:6px}
.counter b{font-size:20px;display:block}
.range a{margin-right:8px} .range a.on{font-weight:700;text-decoration:none;color:#111}
.chart{background:#fff;border:1px solid #e5e7eb;margin:6px 0}
.wf{position:relative;height:18px;background:#f3f4f6;min-width:300px}
.bar{position:absolute;top:2px;height:14px;border-radius:2px;background:#9ca3af}
.bar.tool{background:#4e79a7} .bar.failed{background:#f59e0b}
.bar.rescued{background:#2ca02c} .bar.wasted{background:#d62728} .bar.after_success{background:#ff9f1c}
tr.turn td{background:#eef2ff;font-weight:600}
tr.gap td{color:#6b7280;font-size:12px}
.legend span{display:inline-block;margin-right:10px} .sw{display:inline-block;width:10px;height:10px;margin-right:4px}
.chart .legend{margin:4px 10px} .legend span span{margin-right:0} .legend .sw+.sw{margin-left:-4px}
details summary{cursor:pointer;color:#374151}
form.inline{display:inline} button{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-all;max-width:640px;margin:4px 0}
table#waterfall{table-layout:fixed} table#waterfall td:first-child{overflow:hidden}
#feed li{margin:2px 0}
"#;

/// A whole page.
pub fn page(title: &str, body: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{} · stormwatch</title>
<link rel="icon" href="data:,"><meta name="viewport" content="width=device-width, initial-scale=1">
<style>{CSS}</style></head><body>
<header><a href="/">stormwatch</a><a href="/signals">Signals</a><a href="/api/openapi.json">API</a></header>
<main>{body}</main></body></html>"#,
        esc(title)
    )
}

/// A state pill.
pub fn state(s: &str) -> String {
    format!(r#"<span class="pill state-{0}">{0}</span>"#, esc(s))
}

/// A percentage.
pub fn pct(r: f64) -> String {
    if r > 0.0 && r < 0.001 {
        "<0.1%".into()
    } else {
        format!("{:.1}%", r * 100.0)
    }
}
