//! The tool page's silent days (docs/detection.md §4.8): the days a
//! `tool_silent` or `no_success` signal of the tool flagged, each with its
//! calls, successes and the agent's turns, and the last success's trace.

use maud::{html, Markup};

use super::html::seg;
use crate::signal::{Kind, Signal};

/// The section, or nothing when the tool has no such signal.
pub fn section(tool: &str, signals: &[Signal]) -> Markup {
    let mine: Vec<&Signal> = signals
        .iter()
        .filter(|s| s.draft.tool == tool)
        .filter(|s| matches!(s.draft.kind, Kind::ToolSilent | Kind::NoSuccess))
        .collect();
    if mine.is_empty() {
        return html! {};
    }
    let count = |n: Option<u64>| n.map_or("–".to_string(), |n| n.to_string());
    html! {
        h2 { "Silent days" }
        table id="silent" {
            tr {
                th { "signal" } th { "state" } th { "day" } th class="n" { "calls" }
                th class="n" { "successes" } th class="n" { "agent turns" } th { "last success" }
            }
            @for s in &mine {
                @let d = &s.draft;
                @let e = d.evidence.first();
                @let counts = e.map(|e| e.daily.as_slice()).unwrap_or_default();
                @for day in &d.days {
                    @let c = counts.iter().find(|c| &c.day == day);
                    tr class="flagged" data-kind=(d.kind.as_str()) data-day=(day) {
                        td { a href={ "/signals/" (seg(&d.id)) } { (d.id) } " " (d.title) }
                        td { (s.state.as_str()) }
                        td { (day) }
                        td class="n" { (count(c.map(|c| c.calls))) }
                        td class="n" { (count(c.map(|c| c.successes))) }
                        td class="n" { (count(c.and_then(|c| c.turns))) }
                        td {
                            @match e.filter(|e| !e.trace_id.is_empty()) {
                                Some(e) => a href={ "/traces/" (seg(&e.trace_id)) } { (e.trace_id) },
                                None => "none stored",
                            }
                        }
                    }
                }
            }
        }
    }
}
