//! What a sweep tells: its JSON contract, the short text report and Markdown.

use super::SweepReport;
use crate::signal::Signal;
use crate::time::rfc3339;

/// The JSON contract of `sweep --format json` (documented in the README).
pub fn to_json(report: &SweepReport) -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "now": rfc3339(report.now_ns),
        "since": report.since_day,
        "horizon": rfc3339(report.horizon_ns),
        "settling_until": report.settling_until_ns.map(rfc3339),
        "spans_scanned": report.spans_scanned,
        "days_scanned": report.days_scanned,
        "days_reused": report.days_reused,
        "days_from_summary": report.days_from_summary,
        "days_sealed": report.days_summarized,
        "signals": report.signals.iter().map(signal_json).collect::<Vec<_>>(),
        "changes": report.changes,
        "incidents": report.incidents,
        "incident_changes": report.incident_changes,
        "alerts_queued": report.queued,
    })
}

pub fn signal_json(s: &Signal) -> serde_json::Value {
    let d = &s.draft;
    serde_json::json!({
        "id": d.id,
        "key": d.key,
        "kind": d.kind,
        "severity": d.severity().as_str(),
        "tool": d.tool,
        "error_class": d.error_class,
        "title": d.title,
        "state": s.state,
        "first_seen": rfc3339(d.first_seen_ns),
        "last_seen": rfc3339(d.last_seen_ns),
        "days": d.days,
        "findings": d.findings,
        "evidence": d.evidence,
        "evidence_more": d.evidence_more,
        "remedy": d.remedy,
        "muted_until": s.muted_until_ns.map(rfc3339),
    })
}

/// The short human report: incidents first (what is broken), then each
/// signal.
pub fn to_text(report: &SweepReport) -> String {
    let mut out = format!(
        "stormwatch sweep at {} over {} .. now ({} day(s) read, {} unchanged): {} incident(s), {} signal(s), {} change(s)\n",
        rfc3339(report.now_ns),
        report.since_day,
        report.days_scanned,
        report.days_reused,
        report.incidents.len(),
        report.signals.len(),
        report.changes.len()
    );
    if let Some(t) = report.settling_until_ns {
        out.push_str(&format!(
            "(spans ended less than detect.retry_storm.settle_seconds ago: their turns are judged once quiet, from {}; sweep again then)\n",
            rfc3339(t)
        ));
    }
    if !report.queued.is_empty() {
        let mut per: std::collections::BTreeMap<&str, usize> = Default::default();
        for q in &report.queued {
            *per.entry(q.target.as_str()).or_default() += 1;
        }
        let targets: Vec<String> = per.iter().map(|(t, n)| format!("{t} {n}")).collect();
        out.push_str(&format!(
            "{} alert message(s) queued ({}); `stormwatch alerts list` shows them, serve's sender or `stormwatch alerts flush` delivers them\n",
            report.queued.len(),
            targets.join(", ")
        ));
    }
    for i in &report.incidents {
        out.push_str(&format!(
            "\n{}  [{}, {}]  {}\n",
            i.id,
            i.state.as_str(),
            i.severity,
            i.title
        ));
        for m in &i.members {
            out.push_str(&format!(
                "    {}  [{}]  {} ({})\n",
                m.signal_id, m.state, m.title, m.reason
            ));
        }
        out.push_str(&format!("    impact: {}\n", impact_line(&i.impact)));
    }
    if !report.incidents.is_empty() {
        out.push_str("\nsignals:\n");
    }
    for s in &report.signals {
        let d = &s.draft;
        out.push_str(&format!(
            "\n{}  [{}]  {}\n",
            d.id,
            s.state.as_str(),
            d.title
        ));
        out.push_str(&format!(
            "    {} finding(s) on {}\n",
            d.findings,
            d.days.join(", ")
        ));
        for e in &d.evidence {
            let rhythm = e
                .rhythm
                .as_deref()
                .map(|r| format!(", {r}"))
                .unwrap_or_default();
            let vs = match (e.turn_duration_s, e.healthy_turn_duration_s) {
                (Some(t), Some(h)) if h > 0.0 => format!(", turn {t:.1} s vs {h:.1} s healthy"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "    trace {}  {} calls, {} failed{rhythm}, {:.1} s wasted{vs}\n",
                e.trace_id, e.calls, e.failures, e.wasted_seconds
            ));
        }
        if d.evidence_more > 0 {
            out.push_str(&format!("    +{} more trace(s)\n", d.evidence_more));
        }
        if let Some(r) = &d.remedy {
            out.push_str(&format!("    what to do: {}\n", r.summary));
        }
    }
    out
}

/// Markdown, for a pull request or an issue.
pub fn to_markdown(report: &SweepReport) -> String {
    let esc = |s: &str| {
        s.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!("## stormwatch sweep — {}\n\n", rfc3339(report.now_ns));
    if !report.incidents.is_empty() {
        out.push_str("### Incidents\n\n| id | state | severity | incident | members | impact |\n|---|---|---|---|---|---|\n");
        for i in &report.incidents {
            let members: Vec<&str> = i.members.iter().map(|m| m.signal_id.as_str()).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                i.id,
                i.state.as_str(),
                i.severity,
                esc(&i.title),
                members.join(", "),
                esc(&impact_line(&i.impact))
            ));
        }
        out.push_str("\n### Signals\n\n");
    }
    out.push_str("| id | state | signal | findings | days |\n|---|---|---|---|---|\n");
    for s in &report.signals {
        let d = &s.draft;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            d.id,
            s.state.as_str(),
            esc(&d.title),
            d.findings,
            d.days.join(", ")
        ));
    }
    if report.signals.is_empty() {
        out.push_str("| — | — | no signals | — | — |\n");
    }
    // What to do about each: the remedy's three answers.
    for s in &report.signals {
        let Some(r) = &s.draft.remedy else { continue };
        out.push_str(&format!(
            "\n### {} — what to do\n\n- **Will waiting fix it?** {}\n- **When to cut it off:** {}\n- **What to change before the next attempt:** {}\n",
            s.draft.id,
            esc(&r.waiting_fixes),
            esc(&r.cut_off),
            esc(&r.change)
        ));
    }
    out
}

/// "12 turns, 3 sessions, 64 of 150 calls failed, 40 wasted (51.2 s)".
pub fn impact_line(i: &crate::incident::Impact) -> String {
    format!(
        "{} turn(s), {} session(s), {} of {} calls failed, {} wasted retries ({:.1} s)",
        i.turns, i.sessions, i.failed_calls, i.calls, i.wasted_calls, i.wasted_seconds
    )
}
