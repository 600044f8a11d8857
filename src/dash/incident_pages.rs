//! The incidents' markup: the overview's list, `/incidents`, one incident's
//! page, and the line a member signal's page links it with. Functions of
//! what was read; every string of an incident comes from spans or is built
//! from them (titles, tools, reasons), so all of it goes through `esc` /
//! `seg`.

use std::fmt::Write;

use super::html::{esc, page, seg, state};
use crate::incident::body::minute;
use crate::incident::{Incident, IncidentState};
use crate::read::incidents::{IncidentAnswer, StateCounts, Which};

/// A severity pill.
fn severity(s: &str) -> String {
    format!(r#"<span class="pill sev-{0}">{0}</span>"#, esc(s))
}

/// The incidents as a table, each linked to its page.
fn rows(list: &[&Incident]) -> String {
    let mut s = String::from(
        r#"<table class="incidents"><tr><th>id</th><th>state</th><th>severity</th><th>incident</th><th class="n">signals</th><th>last seen</th></tr>"#,
    );
    for i in list {
        let _ = write!(
            s,
            r#"<tr><td><a href="/incidents/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td class="n">{}</td><td>{}</td></tr>"#,
            seg(&i.id),
            esc(&i.id),
            state(i.state.as_str()),
            severity(&i.severity),
            esc(&i.title),
            i.members.len(),
            esc(&minute(i.last_seen_ns))
        );
    }
    s.push_str("</table>");
    s
}

/// The overview's section: the open and acknowledged incidents, and how
/// many resolved ones there are behind a link. `Err`: why they could not be
/// read (the rest of the overview still renders).
pub fn overview_section(incidents: Result<&[Incident], &str>) -> String {
    let mut b = String::from(r#"<h2>Incidents</h2><div id="incidents">"#);
    match incidents {
        Err(why) => {
            let _ = write!(
                b,
                r#"<p class="bad">The incidents could not be read: {}</p>"#,
                esc(why)
            );
        }
        Ok(all) => {
            let open = crate::read::incidents::ordered(all, Which::Unresolved);
            if open.is_empty() {
                b.push_str(r#"<p class="muted">No open incidents.</p>"#);
            } else {
                b.push_str(&rows(&open));
            }
            let c = StateCounts::of(all);
            let _ = write!(
                b,
                r#"<p class="muted" id="incidents-resolved">{} resolved · <a href="/incidents?state=all">all incidents</a></p>"#,
                c.resolved
            );
        }
    }
    b.push_str("</div>");
    b
}

/// `/incidents`.
pub fn list(list: &[&Incident], which: Which, counts: StateCounts) -> String {
    let mut b = String::from("<h1>Incidents</h1><p>Filter: ");
    for (label, q, n) in [
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
    ] {
        let on = if label == which.words() {
            r#" class="on""#
        } else {
            ""
        };
        let _ = write!(b, r#"<a{on} href="/incidents{q}">{label}</a> ({n}) · "#);
    }
    b.push_str(r#"<span class="muted">An incident is the open signals with one likely cause: the same tool, the same dependency, or one error class across a service's tools within the hour.</span></p>"#);
    if list.is_empty() {
        let _ = write!(
            b,
            r#"<p class="muted" id="no-incidents">No {} incidents.</p>"#,
            which.words()
        );
    } else {
        b.push_str(r#"<div id="incident-list">"#);
        b.push_str(&rows(list));
        b.push_str("</div>");
    }
    page("Incidents", &b)
}

/// A signal id as a link to its page.
fn signal_link(id: &str) -> String {
    format!(
        r#"<a class="sid" href="/signals/{}">{}</a>"#,
        seg(id),
        esc(id)
    )
}

/// One incident's page.
pub fn incident(a: &IncidentAnswer) -> String {
    let i = &a.incident;
    let mut b = String::new();
    let _ = write!(
        b,
        r#"<h1>{}</h1><p id="incident-head"><code>{}</code> · <span id="state">{}</span> · <span id="severity">{}</span> · opened {} · first finding {} · last finding {}{}</p>"#,
        esc(&i.title),
        esc(&i.id),
        state(i.state.as_str()),
        severity(&i.severity),
        esc(&minute(i.opened_ns)),
        esc(&minute(i.first_seen_ns)),
        esc(&minute(i.last_seen_ns)),
        i.resolved_ns
            .map(|r| format!(" · resolved {}", esc(&minute(r))))
            .unwrap_or_default()
    );
    let tools: Vec<String> = i
        .tools
        .iter()
        .map(|t| format!(r#"<a href="/tools/{}">{}</a>"#, seg(t), esc(t)))
        .collect();
    let _ = write!(
        b,
        r#"<dl id="cause"><dt>Cause</dt><dd>{}</dd><dt>Dependency</dt><dd>{}</dd><dt>Service</dt><dd>{}</dd><dt>Tools</dt><dd>{}</dd><dt>Error class</dt><dd>{}</dd></dl>"#,
        esc(&i.cause),
        esc(i
            .dependency
            .as_deref()
            .unwrap_or("— (the spans do not say)")),
        esc(i.service.as_deref().unwrap_or("—")),
        tools.join(", "),
        esc(&i.error_class)
    );
    let m = &i.impact;
    let _ = write!(
        b,
        r#"<h2>Impact</h2><div class="counters" id="impact"><div class="counter"><b>{}</b>agent turns</div><div class="counter"><b>{}</b>sessions</div><div class="counter"><b>{}</b>calls of its tools</div><div class="counter"><b>{}</b>failed calls</div><div class="counter"><b>{}</b>wasted retries</div><div class="counter"><b>{:.0} s</b>spent on attempts that could not succeed</div></div>"#,
        m.turns,
        m.sessions,
        m.calls,
        m.failed_calls,
        m.wasted_calls,
        m.wasted_seconds.max(0.0)
    );
    b.push_str("<h2>What to do</h2>");
    match &i.remedy {
        Some(r) => {
            let _ = write!(
                b,
                r#"<dl id="remedy"><dt>Will waiting fix it?</dt><dd>{}</dd><dt>When to cut it off</dt><dd>{}</dd><dt>What to change before the next attempt</dt><dd>{}</dd></dl>"#,
                esc(&r.waiting_fixes),
                esc(&r.cut_off),
                esc(&r.change)
            );
        }
        None => b.push_str(r#"<p class="muted" id="remedy">No remedy: no member carries one (the next sweep writes them).</p>"#),
    }
    let lead = i.remedy.as_ref().map(|r| r.summary.as_str());
    let others: Vec<_> = i
        .remedies
        .iter()
        .filter(|r| Some(r.summary.as_str()) != lead)
        .collect();
    if !others.is_empty() {
        b.push_str(r#"<h3>The other members' remedies</h3><ul id="remedies">"#);
        for r in others {
            let ids: Vec<String> = r.signal_ids.iter().map(|s| signal_link(s)).collect();
            let _ = write!(
                b,
                "<li>{} <span class=\"muted\">({}: {})</span></li>",
                esc(&r.summary),
                esc(&r.kind),
                ids.join(", ")
            );
        }
        b.push_str("</ul>");
    }
    b.push_str(r#"<h2>Timeline</h2><table id="timeline"><tr><th>when</th><th>what</th><th></th><th>signal</th></tr>"#);
    for t in &i.timeline {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&minute(t.at_ns)),
            esc(&t.what.replace('_', " ")),
            esc(&t.text),
            t.signal_id.as_deref().map(signal_link).unwrap_or_default()
        );
    }
    b.push_str("</table>");
    b.push_str(r#"<h2>Members</h2><table id="members"><tr><th>signal</th><th>state</th><th>severity</th><th>kind</th><th>tool</th><th>why it is here</th><th>joined</th><th>last seen</th><th class="n">findings</th><th>dependency</th></tr>"#);
    for s in &i.members {
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href="/tools/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td class="n">{}</td><td>{}</td></tr>"#,
            signal_link(&s.signal_id),
            state(&s.state),
            severity(&s.severity),
            esc(&s.kind),
            seg(&s.tool),
            esc(&s.tool),
            esc(&s.reason),
            esc(&minute(s.joined_ns)),
            esc(&minute(s.last_seen_ns)),
            s.findings,
            esc(s.dependency.as_deref().unwrap_or(""))
        );
    }
    b.push_str("</table>");
    b.push_str(r#"<h2>Evidence</h2><table id="evidence"><tr><th>trace</th><th>day</th><th class="n">calls</th><th class="n">failed</th><th>rhythm</th><th>outcome</th><th class="n">wasted</th><th>signal</th><th>tool</th></tr>"#);
    for e in &i.evidence {
        let v = &e.evidence;
        let _ = write!(
            b,
            r#"<tr><td><a class="trace" href="/traces/{}?day={}">{}</a></td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td>{}</td><td class="n">{:.1} s</td><td>{}</td><td>{}</td></tr>"#,
            seg(&v.trace_id),
            seg(&v.day),
            esc(&v.trace_id),
            esc(&v.day),
            v.calls,
            v.failures,
            esc(v.rhythm.as_deref().unwrap_or("")),
            esc(v.outcome.as_deref().unwrap_or("")),
            v.wasted_seconds,
            signal_link(&e.signal_id),
            esc(&e.tool)
        );
    }
    b.push_str("</table>");
    if i.evidence_more > 0 {
        let _ = write!(
            b,
            r#"<p class="muted">+{} more traces (on the members' pages)</p>"#,
            i.evidence_more
        );
    }
    b.push_str(
        r#"<h2>State history</h2><table id="history"><tr><th>when</th><th>from</th><th>to</th><th>why</th></tr>"#,
    );
    for h in &a.history {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&h.at),
            esc(h.from.as_deref().unwrap_or("—")),
            esc(&h.to),
            esc(&h.reason)
        );
    }
    b.push_str("</table>");
    let _ = write!(
        b,
        r#"<p class="muted">Opened {}; as the last sweep left it (a member muted or resolved by hand counts from the next sweep). <a href="/incidents">All open incidents</a> · <a href="/api/incidents/{}">JSON</a></p>"#,
        esc(&minute(i.opened_ns)),
        seg(&i.id)
    );
    page(&i.id, &b)
}

/// The line a member signal's page shows: the incident it is part of.
pub fn part_of(id: &str, incident: Option<&Incident>) -> String {
    let about = incident
        .map(|i| format!(" {} {}", state(i.state.as_str()), esc(&i.title)))
        .unwrap_or_default();
    let resolved = incident.is_some_and(|i| i.state == IncidentState::Resolved);
    format!(
        r#"<p id="incident">{} <a href="/incidents/{}">{}</a>{about}</p>"#,
        if resolved { "Was part of" } else { "Part of" },
        seg(id),
        esc(id)
    )
}
