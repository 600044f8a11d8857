//! The signals' list and one signal's page: its remedy, the actions, its
//! evidence and its timeline.

use maud::{html, Markup};

use super::{evidence_row, seg, signal_rows, state};
use crate::dash::html::page;
use crate::signal::Signal;
use crate::time::rfc3339;

pub fn signals(list: &[Signal], filter: &str) -> String {
    let refs: Vec<&Signal> = list.iter().collect();
    let b = html! {
        h1 { "Signals" }
        p {
            "Filter: "
            @for (label, q) in [
                ("all", ""),
                ("open", "?state=open"),
                ("muted", "?state=muted"),
                ("resolved", "?state=resolved"),
                ("retry storms", "?kind=retry_storm"),
            ] {
                a href={ "/signals" (q) } { (label) } " · "
            }
            span class="muted" { (filter) }
        }
        (signal_rows(&refs))
    };
    page("Signals", b)
}

/// The mute / unmute / resolve buttons, each a form posting to the API.
fn actions(id: &str) -> Markup {
    let id = seg(id);
    html! {
        p {
            form class="inline" method="post" action={ "/api/signals/" (id) "/mute" } {
                button id="mute" { "Mute" }
            }
            "\n"
            form class="inline" method="post" action={ "/api/signals/" (id) "/mute?until_escalates=true" } {
                button id="mute-esc" { "Mute until it escalates" }
            }
            "\n"
            form class="inline" method="post" action={ "/api/signals/" (id) "/unmute" } {
                button id="unmute" { "Unmute" }
            }
            "\n"
            form class="inline" method="post" action={ "/api/signals/" (id) "/resolve" } {
                button id="resolve" { "Resolve" }
            }
        }
    }
}

/// A signal's page; `incident` is the line naming the incident it is part
/// of (`incident_pages::part_of`), empty when it is part of none.
pub fn signal(
    s: &Signal,
    history: &[(i64, Option<String>, String, String)],
    incident: Markup,
) -> String {
    let d = &s.draft;
    let b = html! {
        h1 { (d.title) }
        p {
            code { (d.id) } " · " span id="state" { (state(s.state.as_str())) }
            " · " a href={ "/tools/" (seg(&d.tool)) } { (d.tool) }
            " · first seen " (rfc3339(d.first_seen_ns))
            " · last seen " (rfc3339(d.last_seen_ns))
            " · " (d.findings) " finding(s) on " (d.days.join(", "))
        }
        (incident)
        div class="counters" {
            div class="counter" id="wasted" {
                b { (format!("{:.0} s", d.wasted_seconds.max(0.0))) }
                "spent on attempts that could not succeed"
            }
        }
        @if let Some(r) = &d.remedy {
            h2 { "What to do" }
            dl id="remedy" {
                dt { "Will waiting fix it?" } dd { (r.waiting_fixes) }
                dt { "When to cut it off" } dd { (r.cut_off) }
                dt { "What to change before the next attempt" } dd { (r.change) }
            }
        }
        (actions(&d.id))
        h2 { "Evidence" }
        table id="evidence" {
            tr {
                th { "trace" } th { "day" } th class="n" { "calls" } th class="n" { "failed" }
                th { "rhythm" } th { "outcome" } th class="n" { "wasted" } th { "turn vs healthy" }
            }
            @for e in &d.evidence {
                tr {
                    (evidence_row(e, "trace"))
                    td { (e.outcome.as_deref().unwrap_or("")) }
                    td class="n" { (format!("{:.1} s", e.wasted_seconds)) }
                    td {
                        @if let (Some(t), Some(h)) = (e.turn_duration_s, e.healthy_turn_duration_s) {
                            (format!("{t:.1} s vs {h:.1} s"))
                        }
                    }
                }
            }
        }
        @if d.evidence_more > 0 {
            p class="muted" { "+" (d.evidence_more) " more traces" }
        }
        h2 { "Timeline" }
        table {
            tr { th { "when" } th { "from" } th { "to" } th { "why" } }
            @for (at, from, to, why) in history {
                tr {
                    td { (rfc3339(*at)) }
                    td { (from.as_deref().unwrap_or("—")) }
                    td { (to) }
                    td { (why) }
                }
            }
        }
    };
    page(&d.id, b)
}
