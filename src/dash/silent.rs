//! The tool page's silent days (docs/detection.md §4.8): the days a
//! `tool_silent` or `no_success` signal of the tool flagged, each with its
//! calls, successes and the agent's turns, and the last success's trace.

use std::fmt::Write;

use super::html::{esc, seg};
use crate::signal::{Kind, Signal};

/// The section, or nothing when the tool has no such signal.
pub fn section(tool: &str, signals: &[Signal]) -> String {
    let mine: Vec<&Signal> = signals
        .iter()
        .filter(|s| s.draft.tool == tool)
        .filter(|s| matches!(s.draft.kind, Kind::ToolSilent | Kind::NoSuccess))
        .collect();
    if mine.is_empty() {
        return String::new();
    }
    let mut b = String::from(
        "<h2>Silent days</h2><table id=\"silent\"><tr><th>signal</th><th>state</th><th>day</th>\
         <th class=\"n\">calls</th><th class=\"n\">successes</th><th class=\"n\">agent turns</th><th>last success</th></tr>",
    );
    for s in mine {
        let d = &s.draft;
        let e = d.evidence.first();
        let last = match e.filter(|e| !e.trace_id.is_empty()) {
            Some(e) => format!(
                "<a href=\"/traces/{}\">{}</a>",
                seg(&e.trace_id),
                esc(&e.trace_id)
            ),
            None => "none stored".to_string(),
        };
        let counts = e.map(|e| e.daily.as_slice()).unwrap_or_default();
        for day in &d.days {
            let c = counts.iter().find(|c| &c.day == day);
            let _ = write!(
                b,
                "<tr class=\"flagged\" data-kind=\"{}\" data-day=\"{}\"><td><a href=\"/signals/{}\">{}</a> {}</td><td>{}</td><td>{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{last}</td></tr>",
                d.kind.as_str(),
                esc(day),
                seg(&d.id),
                esc(&d.id),
                esc(&d.title),
                s.state.as_str(),
                esc(day),
                c.map_or("–".to_string(), |c| c.calls.to_string()),
                c.map_or("–".to_string(), |c| c.successes.to_string()),
                c.and_then(|c| c.turns).map_or("–".to_string(), |t| t.to_string()),
            );
        }
    }
    b.push_str("</table>");
    b
}
