//! The incidents' markup: the overview's list, `/incidents`, one incident's
//! page, and the line a member signal's page links it with. Functions of
//! what was read; every string of an incident comes from spans or is built
//! from them (titles, tools, reasons): the templates escape all of it, and
//! URL segments go through `seg`.

use maud::{html, Markup};

use super::html::{page, seg, state};
use crate::incident::body::minute;
use crate::incident::{Incident, IncidentState};
use crate::read::incidents::{IncidentAnswer, StateCounts, Which};

/// A severity pill.
fn severity(s: &str) -> Markup {
    html! { span class={ "pill sev-" (s) } { (s) } }
}

/// The incidents as a table, each linked to its page.
fn rows(list: &[&Incident]) -> Markup {
    html! {
        table class="incidents" {
            tr {
                th { "id" } th { "state" } th { "severity" } th { "incident" }
                th class="n" { "signals" } th { "last seen" }
            }
            @for i in list {
                tr {
                    td { a href={ "/incidents/" (seg(&i.id)) } { (i.id) } }
                    td { (state(i.state.as_str())) }
                    td { (severity(&i.severity)) }
                    td { (i.title) }
                    td class="n" { (i.members.len()) }
                    td { (minute(i.last_seen_ns)) }
                }
            }
        }
    }
}

/// The overview's section: the open and acknowledged incidents, and how
/// many resolved ones there are behind a link. `Err`: why they could not be
/// read (the rest of the overview still renders).
pub fn overview_section(incidents: Result<&[Incident], &str>) -> Markup {
    html! {
        h2 { "Incidents" }
        div id="incidents" {
            @match incidents {
                Err(why) => p class="bad" { "The incidents could not be read: " (why) },
                Ok(all) => {
                    @let open = crate::read::incidents::ordered(all, Which::Unresolved);
                    @if open.is_empty() {
                        p class="muted" { "No open incidents." }
                    } @else {
                        (rows(&open))
                    }
                    p class="muted" id="incidents-resolved" {
                        (StateCounts::of(all).resolved) " resolved · "
                        a href="/incidents?state=all" { "all incidents" }
                    }
                }
            }
        }
    }
}

/// `/incidents`.
pub fn list(list: &[&Incident], which: Which, counts: StateCounts) -> String {
    let filters = [
        (
            "open and acknowledged",
            "",
            counts.open + counts.acknowledged,
        ),
        ("open", "?state=open", counts.open),
        ("acknowledged", "?state=acknowledged", counts.acknowledged),
        ("resolved", "?state=resolved", counts.resolved),
        (
            "all",
            "?state=all",
            counts.open + counts.acknowledged + counts.resolved,
        ),
    ];
    let b = html! {
        h1 { "Incidents" }
        p {
            "Filter: "
            @for (label, q, n) in filters {
                a class=[(label == which.words()).then_some("on")] href={ "/incidents" (q) } { (label) }
                " (" (n) ") · "
            }
            span class="muted" {
                "An incident is the open signals with one likely cause: the same tool, the same dependency, or one error class across a service's tools within the hour."
            }
        }
        @if list.is_empty() {
            p class="muted" id="no-incidents" { "No " (which.words()) " incidents." }
        } @else {
            div id="incident-list" { (rows(list)) }
        }
    };
    page("Incidents", b)
}

/// A signal id as a link to its page.
fn signal_link(id: &str) -> Markup {
    html! { a class="sid" href={ "/signals/" (seg(id)) } { (id) } }
}

/// The incident's head line and its cause.
fn head(i: &Incident) -> Markup {
    html! {
        h1 { (i.title) }
        p id="incident-head" {
            code { (i.id) }
            " · " span id="state" { (state(i.state.as_str())) }
            " · " span id="severity" { (severity(&i.severity)) }
            " · opened " (minute(i.opened_ns))
            " · first finding " (minute(i.first_seen_ns))
            " · last finding " (minute(i.last_seen_ns))
            @if let Some(r) = i.resolved_ns { " · resolved " (minute(r)) }
        }
        dl id="cause" {
            dt { "Cause" } dd { (i.cause) }
            dt { "Dependency" } dd { (i.dependency.as_deref().unwrap_or("— (the spans do not say)")) }
            dt { "Service" } dd { (i.service.as_deref().unwrap_or("—")) }
            dt { "Tools" }
            dd {
                @for (n, t) in i.tools.iter().enumerate() {
                    @if n > 0 { ", " }
                    a href={ "/tools/" (seg(t)) } { (t) }
                }
            }
            dt { "Error class" } dd { (i.error_class) }
        }
    }
}

/// The incident's impact and what to do: its remedy, and the other
/// members' remedies.
fn impact_and_remedies(i: &Incident) -> Markup {
    let m = &i.impact;
    let lead = i.remedy.as_ref().map(|r| r.summary.as_str());
    let others: Vec<_> = i
        .remedies
        .iter()
        .filter(|r| Some(r.summary.as_str()) != lead)
        .collect();
    html! {
        h2 { "Impact" }
        div class="counters" id="impact" {
            div class="counter" { b { (m.turns) } "agent turns" }
            div class="counter" { b { (m.sessions) } "sessions" }
            div class="counter" { b { (m.calls) } "calls of its tools" }
            div class="counter" { b { (m.failed_calls) } "failed calls" }
            div class="counter" { b { (m.wasted_calls) } "wasted retries" }
            div class="counter" {
                b { (format!("{:.0} s", m.wasted_seconds.max(0.0))) }
                "spent on attempts that could not succeed"
            }
        }
        h2 { "What to do" }
        @match &i.remedy {
            Some(r) => dl id="remedy" {
                dt { "Will waiting fix it?" } dd { (r.waiting_fixes) }
                dt { "When to cut it off" } dd { (r.cut_off) }
                dt { "What to change before the next attempt" } dd { (r.change) }
            },
            None => p class="muted" id="remedy" {
                "No remedy: no member carries one (the next sweep writes them)."
            },
        }
        @if !others.is_empty() {
            h3 { "The other members' remedies" }
            ul id="remedies" {
                @for r in others {
                    li {
                        (r.summary) " "
                        span class="muted" {
                            "(" (r.kind) ": "
                            @for (n, s) in r.signal_ids.iter().enumerate() {
                                @if n > 0 { ", " }
                                (signal_link(s))
                            }
                            ")"
                        }
                    }
                }
            }
        }
    }
}

/// The incident's timeline and its members.
fn timeline_and_members(i: &Incident) -> Markup {
    html! {
        h2 { "Timeline" }
        table id="timeline" {
            tr { th { "when" } th { "what" } th {} th { "signal" } }
            @for t in &i.timeline {
                tr {
                    td { (minute(t.at_ns)) }
                    td { (t.what.replace('_', " ")) }
                    td { (t.text) }
                    td { @if let Some(id) = t.signal_id.as_deref() { (signal_link(id)) } }
                }
            }
        }
        h2 { "Members" }
        table id="members" {
            tr {
                th { "signal" } th { "state" } th { "severity" } th { "kind" } th { "tool" }
                th { "why it is here" } th { "joined" } th { "last seen" }
                th class="n" { "findings" } th { "dependency" }
            }
            @for s in &i.members {
                tr {
                    td { (signal_link(&s.signal_id)) }
                    td { (state(&s.state)) }
                    td { (severity(&s.severity)) }
                    td { (s.kind) }
                    td { a href={ "/tools/" (seg(&s.tool)) } { (s.tool) } }
                    td { (s.reason) }
                    td { (minute(s.joined_ns)) }
                    td { (minute(s.last_seen_ns)) }
                    td class="n" { (s.findings) }
                    td { (s.dependency.as_deref().unwrap_or("")) }
                }
            }
        }
    }
}

/// The incident's evidence: its members' traces.
fn evidence(i: &Incident) -> Markup {
    html! {
        h2 { "Evidence" }
        table id="evidence" {
            tr {
                th { "trace" } th { "day" } th class="n" { "calls" } th class="n" { "failed" }
                th { "rhythm" } th { "outcome" } th class="n" { "wasted" } th { "signal" } th { "tool" }
            }
            @for e in &i.evidence {
                @let v = &e.evidence;
                tr {
                    td {
                        a class="trace" href={ "/traces/" (seg(&v.trace_id)) "?day=" (seg(&v.day)) } {
                            (v.trace_id)
                        }
                    }
                    td { (v.day) }
                    td class="n" { (v.calls) }
                    td class="n" { (v.failures) }
                    td { (v.rhythm.as_deref().unwrap_or("")) }
                    td { (v.outcome.as_deref().unwrap_or("")) }
                    td class="n" { (format!("{:.1} s", v.wasted_seconds)) }
                    td { (signal_link(&e.signal_id)) }
                    td { (e.tool) }
                }
            }
        }
        @if i.evidence_more > 0 {
            p class="muted" { "+" (i.evidence_more) " more traces (on the members' pages)" }
        }
    }
}

/// One incident's page.
pub fn incident(a: &IncidentAnswer) -> String {
    let i = &a.incident;
    let b = html! {
        (head(i))
        (impact_and_remedies(i))
        (timeline_and_members(i))
        (evidence(i))
        h2 { "State history" }
        table id="history" {
            tr { th { "when" } th { "from" } th { "to" } th { "why" } }
            @for h in &a.history {
                tr {
                    td { (h.at) }
                    td { (h.from.as_deref().unwrap_or("—")) }
                    td { (h.to) }
                    td { (h.reason) }
                }
            }
        }
        p class="muted" {
            "Opened " (minute(i.opened_ns))
            "; as the last sweep left it (a member muted or resolved by hand counts from the next sweep). "
            a href="/incidents" { "All open incidents" }
            " · "
            a href={ "/api/incidents/" (seg(&i.id)) } { "JSON" }
        }
    };
    page(&i.id, b)
}

/// The line a member signal's page shows: the incident it is part of.
pub fn part_of(id: &str, incident: Option<&Incident>) -> Markup {
    let resolved = incident.is_some_and(|i| i.state == IncidentState::Resolved);
    html! {
        p id="incident" {
            (if resolved { "Was part of" } else { "Part of" })
            " " a href={ "/incidents/" (seg(id)) } { (id) }
            @if let Some(i) = incident { " " (state(i.state.as_str())) " " (i.title) }
        }
    }
}
