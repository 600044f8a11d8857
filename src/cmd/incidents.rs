//! `stormwatch incidents list|show`: what is broken, read from the incidents
//! the sweeps keep in `state.sqlite` — the list open ones first, one
//! incident whole (cause, members and why each joined, timeline, impact,
//! remedy, evidence traces, state history) as text, JSON or Markdown.

use std::io::Write;
use std::path::Path;

use super::{Format, Status};
use crate::incident::body::minute;
use crate::incident::{Impact, IncidentError};
use crate::read::incidents::{ordered, IncidentAnswer, IncidentLine, StateCounts, Which};
use crate::signal::StateDb;

/// The state of the store at `data_dir` (which must be a store).
fn state(data_dir: &Path) -> anyhow::Result<StateDb> {
    let reader = crate::store::Reader::open(data_dir)?;
    Ok(StateDb::open(&reader.layout().state_db())?)
}

/// "4 agent turns, 2 sessions, 53 of 60 calls failed, 49 wasted retries (289.1 s)".
fn impact(i: &Impact) -> String {
    format!(
        "{} agent turn(s), {} session(s), {} of {} calls failed, {} wasted retries ({:.1} s)",
        i.turns, i.sessions, i.failed_calls, i.calls, i.wasted_calls, i.wasted_seconds
    )
}

/// Markdown text: no table cell broken, no markup passed through.
fn md(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

/// `incidents list [--state …]`: open ones first (JSON: an array of lines).
pub fn list(
    data_dir: &Path,
    which: Which,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let all = crate::incident::store::list(state(data_dir)?.conn())?;
    let list = ordered(&all, which);
    match format {
        Format::Json => {
            let lines: Vec<IncidentLine> = list.iter().map(|i| IncidentLine::of(i)).collect();
            writeln!(out, "{:#}", serde_json::to_value(&lines)?)?;
        }
        Format::Markdown => {
            writeln!(
                out,
                "| id | state | severity | incident | signals | last seen |\n|---|---|---|---|---|---|"
            )?;
            for i in &list {
                let members: Vec<&str> = i.members.iter().map(|m| m.signal_id.as_str()).collect();
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    md(&i.id),
                    i.state.as_str(),
                    md(&i.severity),
                    md(&i.title),
                    md(&members.join(", ")),
                    minute(i.last_seen_ns)
                )?;
            }
            if list.is_empty() {
                writeln!(
                    out,
                    "| — | — | — | no {} incidents | — | — |",
                    which.words()
                )?;
            }
        }
        Format::Text => {
            if all.is_empty() {
                writeln!(out, "no incidents yet (run `stormwatch sweep`)")?;
                return Ok(Status::Success);
            }
            if list.is_empty() {
                writeln!(out, "no {} incidents", which.words())?;
            }
            for i in &list {
                writeln!(
                    out,
                    "{}  {:<12}  {:<8}  {}  ({} signal(s), last seen {})",
                    i.id,
                    i.state.as_str(),
                    i.severity,
                    i.title,
                    i.members.len(),
                    minute(i.last_seen_ns)
                )?;
            }
            let c = StateCounts::of(&all);
            if which == Which::Unresolved && c.resolved > 0 {
                writeln!(
                    out,
                    "{} resolved (`stormwatch incidents list --state all`)",
                    c.resolved
                )?;
            }
        }
    }
    Ok(Status::Success)
}

/// `incidents show ID`: an unknown id is an error naming `incidents list`.
pub fn show(
    data_dir: &Path,
    id: &str,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let db = state(data_dir)?;
    let a = crate::read::incidents::answer(&db, id)?
        .ok_or_else(|| IncidentError::NoSuchIncident(id.to_string()))?;
    match format {
        Format::Json => writeln!(out, "{:#}", serde_json::to_value(&a)?)?,
        Format::Text => write!(out, "{}", text(&a))?,
        Format::Markdown => write!(out, "{}", markdown(&a))?,
    }
    Ok(Status::Success)
}

/// The member whose remedy leads (the first remedy's first signal).
fn lead_of(a: &IncidentAnswer) -> Option<&str> {
    let i = &a.incident;
    let r = i.remedy.as_ref()?;
    i.remedies
        .iter()
        .find(|m| m.summary == r.summary)
        .and_then(|m| m.signal_ids.first())
        .map(String::as_str)
}

fn text(a: &IncidentAnswer) -> String {
    use std::fmt::Write;
    let i = &a.incident;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}  [{}]  {}  {}",
        i.id,
        i.state.as_str(),
        i.severity,
        i.title
    );
    let _ = writeln!(s, "cause: {}", i.cause);
    let _ = writeln!(
        s,
        "dependency: {}; service: {}; tools: {}; error class: {}",
        i.dependency.as_deref().unwrap_or("-"),
        i.service.as_deref().unwrap_or("-"),
        i.tools.join(", "),
        i.error_class
    );
    let _ = writeln!(
        s,
        "first finding {}, last finding {}, opened {}{}",
        minute(i.first_seen_ns),
        minute(i.last_seen_ns),
        minute(i.opened_ns),
        i.resolved_ns
            .map(|r| format!(", resolved {}", minute(r)))
            .unwrap_or_default()
    );
    let _ = writeln!(s, "impact: {}", impact(&i.impact));
    s.push_str("\nmembers:\n");
    for m in &i.members {
        let _ = writeln!(
            s,
            "  {}  [{}]  {}  {}  {}: {}\n      {}",
            m.signal_id, m.state, m.severity, m.kind, m.tool, m.reason, m.title
        );
    }
    s.push_str("\ntimeline:\n");
    for t in &i.timeline {
        let _ = writeln!(s, "  {}  {}", minute(t.at_ns), t.text);
    }
    match &i.remedy {
        Some(r) => {
            let _ = writeln!(
                s,
                "\nwhat to do{}:\n  will waiting fix it? {}\n  when to cut it off: {}\n  what to change before the next attempt: {}",
                lead_of(a)
                    .map(|l| format!(" ({l}'s remedy)"))
                    .unwrap_or_default(),
                r.waiting_fixes,
                r.cut_off,
                r.change
            );
            for o in i.remedies.iter().filter(|o| o.summary != r.summary) {
                let _ = writeln!(s, "  also ({}): {}", o.signal_ids.join(", "), o.summary);
            }
        }
        None => s.push_str("\nwhat to do: no member carries a remedy yet\n"),
    }
    s.push_str("\nevidence:\n");
    for e in &i.evidence {
        let v = &e.evidence;
        let _ = writeln!(
            s,
            "  trace {}  {}  {} calls, {} failed{}, {:.1} s wasted  ({}, {})",
            v.trace_id,
            v.day,
            v.calls,
            v.failures,
            v.rhythm
                .as_deref()
                .map(|r| format!(", {r}"))
                .unwrap_or_default(),
            v.wasted_seconds,
            e.signal_id,
            e.tool
        );
    }
    if i.evidence_more > 0 {
        let _ = writeln!(
            s,
            "  +{} more (stormwatch signals show ID)",
            i.evidence_more
        );
    }
    s.push_str("\nhistory:\n");
    for h in &a.history {
        let _ = writeln!(
            s,
            "  {}  {} -> {}  ({})",
            h.at,
            h.from.as_deref().unwrap_or("-"),
            h.to,
            h.reason
        );
    }
    s
}

fn markdown(a: &IncidentAnswer) -> String {
    use std::fmt::Write;
    let i = &a.incident;
    let mut s = String::new();
    let _ = writeln!(s, "## {}: {}\n", md(&i.id), md(&i.title));
    let _ = writeln!(
        s,
        "**{}** · **{}** · {}\n",
        i.state.as_str(),
        md(&i.severity),
        md(&i.cause)
    );
    let _ = writeln!(
        s,
        "- **Dependency:** {}\n- **Service:** {}\n- **Tools:** {}\n- **Error class:** {}\n- **First finding:** {}; **last finding:** {}; **opened:** {}{}\n- **Impact:** {}\n",
        md(i.dependency.as_deref().unwrap_or("—")),
        md(i.service.as_deref().unwrap_or("—")),
        md(&i.tools.join(", ")),
        md(&i.error_class),
        minute(i.first_seen_ns),
        minute(i.last_seen_ns),
        minute(i.opened_ns),
        i.resolved_ns
            .map(|r| format!("; **resolved:** {}", minute(r)))
            .unwrap_or_default(),
        md(&impact(&i.impact))
    );
    if let Some(r) = &i.remedy {
        let _ = writeln!(
            s,
            "### What to do\n\n- **Will waiting fix it?** {}\n- **When to cut it off:** {}\n- **What to change before the next attempt:** {}",
            md(&r.waiting_fixes),
            md(&r.cut_off),
            md(&r.change)
        );
        for o in i.remedies.iter().filter(|o| o.summary != r.summary) {
            let _ = writeln!(
                s,
                "- Also ({}): {}",
                md(&o.signal_ids.join(", ")),
                md(&o.summary)
            );
        }
        s.push('\n');
    }
    s.push_str("### Members\n\n| signal | state | severity | kind | tool | why it is here |\n|---|---|---|---|---|---|\n");
    for m in &i.members {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            md(&m.signal_id),
            md(&m.state),
            md(&m.severity),
            md(&m.kind),
            md(&m.tool),
            md(&m.reason)
        );
    }
    s.push_str("\n### Timeline\n\n");
    for t in &i.timeline {
        let _ = writeln!(s, "- **{}** {}", minute(t.at_ns), md(&t.text));
    }
    s.push_str("\n### Evidence\n\n| trace | day | calls | failed | rhythm | wasted | signal |\n|---|---|---|---|---|---|---|\n");
    for e in &i.evidence {
        let v = &e.evidence;
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {:.1} s | {} |",
            md(&v.trace_id),
            md(&v.day),
            v.calls,
            v.failures,
            md(v.rhythm.as_deref().unwrap_or("")),
            v.wasted_seconds,
            md(&e.signal_id)
        );
    }
    s
}
