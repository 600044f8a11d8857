//! One trace's page: its spans as a waterfall, a page of spans at a time,
//! each attempt judged, each retry's wait and who asked for it.

use maud::{html, Markup};

use super::seg;
use crate::dash::html::page;
use crate::read::trace::{SpanView, TraceView};

pub const PAGE_SPANS: usize = 500;

/// The legend of the waterfall's colours.
fn legend() -> Markup {
    html! {
        p class="legend" {
            span { i class="sw rescued" {} "retry rescued a blip" }
            span { i class="sw wasted" {} "retry wasted (deterministic error or dead feed)" }
            span { i class="sw after_success" {} "retry after success" }
            span { i class="sw failed" {} "first attempt failed" }
            span { i class="sw tool" {} "tool call" }
        }
    }
}

/// The row before a retry after a failure: the wait, the rhythm, who asked
/// for it, and the Retry-After it was told (waited out or not).
fn gap_row(s: &SpanView, g: f64) -> Markup {
    let wait = if g < 1000.0 {
        format!("{g:.0} ms")
    } else {
        format!("{:.1} s", g / 1000.0)
    };
    let by = match s.driver.as_deref() {
        Some("model") => " · the model asked again",
        Some("code") => " · retried by code",
        _ => "",
    };
    html! {
        tr class="gap" {
            td {}
            td colspan="2" {
                "↳ " (s.tool.as_deref().unwrap_or("")) " after " (wait) " · "
                (s.rhythm.as_deref().unwrap_or("retry")) (by)
                @match (s.retry_after_ms, s.early) {
                    (Some(ms), Some(true)) => {
                        " · " strong class="early" {
                            "early: Retry-After " (crate::detect::retry_after::words(ms))
                        }
                    }
                    (Some(ms), _) => {
                        " · waited out Retry-After " (crate::detect::retry_after::words(ms))
                    }
                    _ => {}
                }
            }
        }
    }
}

/// One span's row: its name with its attributes, its attempt, its bar.
fn span_row(v: &TraceView, s: &SpanView, total: f64) -> Markup {
    let left = (s.start_ns - v.start_ns) as f64 / total * 100.0;
    let width = ((s.end_ns - s.start_ns) as f64 / total * 100.0).max(0.3);
    let class = if s.verdict.is_empty() {
        "bar".to_string()
    } else {
        format!("bar tool {}", s.verdict)
    };
    html! {
        tr class="span" data-verdict=(s.verdict) {
            td {
                details {
                    summary { (s.name) }
                    pre { (s.attributes) }
                    p class="muted" { (s.service) " · span " (s.span_id) " · " (s.error_class) }
                }
            }
            td { @if let Some(a) = s.attempt { "#" (a) " " (s.verdict) } }
            td {
                svg class="wf" aria-hidden="true" {
                    rect class=(class) x={ (format!("{left:.3}")) "%" } y="2"
                        width={ (format!("{width:.3}")) "%" } height="14" rx="2" {
                        title {
                            (format!("{:.1}", (s.end_ns - s.start_ns) as f64 / 1e6)) " ms " (s.error_class)
                        }
                    }
                }
            }
        }
    }
}

pub fn trace(v: &TraceView, page_no: usize, day: Option<&str>) -> String {
    let total = (v.end_ns - v.start_ns).max(1) as f64;
    let pages = v.spans.len().div_ceil(PAGE_SPANS).max(1);
    let dayq = day.map(|d| format!("&day={}", seg(d))).unwrap_or_default();
    // Each span shown, and whether a turn starts at it.
    let mut last_turn = "";
    let shown: Vec<(bool, &SpanView)> = v
        .spans
        .iter()
        .skip((page_no.max(1) - 1) * PAGE_SPANS)
        .take(PAGE_SPANS)
        .map(|s| {
            let new = s.turn != last_turn;
            last_turn = &s.turn;
            (new, s)
        })
        .collect();
    let b = html! {
        h1 { "Trace " code { (v.trace_id) } }
        p {
            (v.spans.len()) " spans in " (v.turns) " turn(s), "
            (format!("{:.1} s; {:.1} s", total / 1e9, v.wasted_seconds))
            " of attempts that could not help."
        }
        "\n"
        (legend())
        @if pages > 1 {
            p {
                "Page: "
                @for p in 1..=pages {
                    a href={ "/traces/" (seg(&v.trace_id)) "?page=" (p) (dayq) } { (p) } " "
                }
                "of " (pages) " (" (PAGE_SPANS) " spans a page)"
            }
        }
        table id="waterfall" {
            tr { th { "span" } th { "attempt" } th class="time" { "time" } }
            @for (new_turn, s) in shown {
                @if new_turn {
                    tr class="turn" { td colspan="3" { "turn " (s.turn) } }
                }
                @if let Some(g) = s.gap_ms {
                    (gap_row(s, g))
                }
                (span_row(v, s, total))
            }
        }
    };
    page(&format!("Trace {}", v.trace_id), b)
}
