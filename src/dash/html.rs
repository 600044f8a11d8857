//! HTML, server-rendered with maud: a layout, and the small pieces every
//! page uses. A template escapes every value it is given (text and
//! attributes alike); markup enters one only as [`maud::Markup`] made by
//! another template, or as `PreEscaped` for the charts plotters drew, so
//! span data cannot reach a page raw. URL path segments go through [`seg`].
//! No inline `<style>`, `<script>` or `style=`: the stylesheet and the
//! overview's script are served files (`super::assets`).

use maud::{html, Markup, PreEscaped};

/// Escape text for HTML text and quoted attribute values, for text put into
/// markup outside a template (the templates escape on their own).
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
pub fn page(title: &str, body: Markup) -> String {
    html! {
        (PreEscaped("<!doctype html>"))
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · stormwatch" }
                "\n"
                link rel="icon" href="data:,";
                meta name="viewport" content="width=device-width, initial-scale=1";
                "\n"
                link rel="stylesheet" href=(super::assets::css_href());
            }
            body {
                "\n"
                header {
                    a href="/" { "stormwatch" }
                    a href="/incidents" { "Incidents" }
                    a href="/signals" { "Signals" }
                    a href="/coverage" { "Coverage" }
                    a href="/api/openapi.json" { "API" }
                }
                "\n"
                main { (body) }
            }
        }
    }
    .into_string()
}

/// A state pill.
pub fn state(s: &str) -> Markup {
    html! { span class={ "pill state-" (s) } { (s) } }
}

/// A percentage, as text.
pub fn pct(r: f64) -> String {
    if r > 0.0 && r < 0.001 {
        "<0.1%".into()
    } else {
        format!("{:.1}%", r * 100.0)
    }
}
