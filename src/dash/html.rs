//! HTML, server-rendered: a layout, and the small pieces every page uses.
//! Every piece of span data goes through [`esc`] (text and attributes) or
//! [`seg`] (a URL path segment); nothing untrusted reaches the page raw.
//! No inline `<style>`, `<script>` or `style=`: the stylesheet and the
//! overview's script are served files (`super::assets`).

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

/// A whole page. Its style is the served stylesheet (`super::assets`): no
/// page carries inline style or script, which the CSP would refuse.
pub fn page(title: &str, body: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{} · stormwatch</title>
<link rel="icon" href="data:,"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{}"></head><body>
<header><a href="/">stormwatch</a><a href="/incidents">Incidents</a><a href="/signals">Signals</a><a href="/coverage">Coverage</a><a href="/api/openapi.json">API</a></header>
<main>{body}</main></body></html>"#,
        esc(title),
        super::assets::css_href()
    )
}

/// A state pill.
pub fn state(s: &str) -> String {
    format!(r#"<span class="pill state-{0}">{0}</span>"#, esc(s))
}

/// A percentage.
pub fn pct(r: f64) -> String {
    if r > 0.0 && r < 0.001 {
        "&lt;0.1%".into()
    } else {
        format!("{:.1}%", r * 100.0)
    }
}
