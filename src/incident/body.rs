//! An incident written from its members, by rule: the title names the
//! broken thing ("quote-mcp down: get_quote, get_fx_rate failing since
//! 2026-08-02 14:02Z (unavailable)"), the timeline (first finding, each
//! member joining, the peak day, the last finding, the resolution), the
//! impact, the members' remedies merged and their evidence worst first.

use std::collections::{BTreeMap, BTreeSet};

use super::group::{where_of, Cause, Facts};
use super::{Impact, Incident, IncidentEvidence, IncidentState, Member, MemberRemedy, Moment};
use crate::model::{day_from_str, day_to_string, NANOS_PER_DAY};
use crate::signal::{Kind, Severity, Signal};

/// A member as the store keeps it: the signal, when and why it joined.
pub struct Joined<'a> {
    pub signal: &'a Signal,
    pub joined_ns: i64,
    pub reason: String,
}

/// "2026-07-29 14:02Z".
pub fn minute(ns: i64) -> String {
    let s = crate::time::rfc3339(ns);
    // RFC 3339 as `YYYY-MM-DDTHH:MM:SS…Z`.
    match (s.get(..10), s.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t}Z"),
        _ => s,
    }
}

fn kind_words(kind: Kind) -> &'static str {
    match kind {
        Kind::ErrorRateSpike => "error-rate spike",
        Kind::RetryStorm => "retry storm",
        Kind::WastedRetries => "wasted retries",
        Kind::RetryAfterSuccess => "retry after success",
        Kind::StackedRetries => "stacked retries",
        Kind::LatencySpike => "latency spike",
        Kind::ToolLoop => "tool loop",
        Kind::ToolSilent => "silent tool",
        Kind::NoSuccess => "no success",
        Kind::IgnoredRetryAfter => "ignored Retry-After",
    }
}

/// The order members are led by: most severe, then most findings, then id.
fn lead_order(a: &Signal, b: &Signal) -> std::cmp::Ordering {
    b.draft
        .severity()
        .cmp(&a.draft.severity())
        .then_with(|| b.draft.findings.cmp(&a.draft.findings))
        .then_with(|| a.draft.first_seen_ns.cmp(&b.draft.first_seen_ns))
        .then_with(|| a.draft.id.cmp(&b.draft.id))
}

/// The incident `id` with `key` and `cause`, from `members` (in joining
/// order); `opened_ns` when it first opened, `evidence_limit` traces kept.
pub fn build(
    id: &str,
    cause: &Cause,
    members: &[Joined<'_>],
    facts: &Facts,
    opened_ns: i64,
    resolved_ns: Option<i64>,
    evidence_limit: usize,
) -> Incident {
    let signals: Vec<&Signal> = members.iter().map(|m| m.signal).collect();
    let state = IncidentState::of(signals.iter().map(|s| s.state));
    // Members that still count: the open and muted ones, or all once resolved.
    let live: Vec<&Signal> = if state == IncidentState::Resolved {
        signals.clone()
    } else {
        signals
            .iter()
            .copied()
            .filter(|s| s.state.is_open() || s.state == crate::signal::Lifecycle::Muted)
            .collect()
    };
    // What the incident is now: its live members while open (a resolved
    // member from an earlier episode does not date or name it), all once
    // resolved.
    let basis: Vec<&Signal> = live.clone();
    let mut tools: Vec<String> = Vec::new();
    for s in &basis {
        if !tools.contains(&s.draft.tool) {
            tools.push(s.draft.tool.clone());
        }
    }
    let severity = live
        .iter()
        .map(|s| s.draft.severity())
        .max()
        .unwrap_or(Severity::Info);
    // The dominant class: the failing class with the most findings.
    let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &basis {
        if s.draft.error_class != "ok" {
            *classes.entry(s.draft.error_class.as_str()).or_default() += s.draft.findings;
        }
    }
    let error_class = classes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map_or("ok", |(c, _)| c)
        .to_string();
    // When it began: the first failing call a per-turn member saw, unless a
    // daily member flagged an earlier day (which knows only its day).
    let is_daily = |s: &Signal| s.draft.kind.is_daily();
    let turn_first = basis
        .iter()
        .filter(|s| !is_daily(s))
        .map(|s| s.draft.first_seen_ns)
        .min();
    let day_first = basis
        .iter()
        .filter(|s| is_daily(s))
        .map(|s| s.draft.first_seen_ns)
        .min();
    let first_seen_ns = match (turn_first, day_first) {
        (Some(t), Some(d)) if crate::model::day_of_ns(t) <= crate::model::day_of_ns(d) => t,
        (Some(t), None) => t,
        (_, Some(d)) => d,
        (None, None) => 0,
    };
    let last_seen_ns = basis
        .iter()
        .map(|s| s.draft.last_seen_ns)
        .max()
        .unwrap_or(0);
    let since = if Some(first_seen_ns) == turn_first {
        minute(first_seen_ns)
    } else {
        day_to_string(crate::model::day_of_ns(first_seen_ns))
    };
    let (dependency, service) = match cause {
        Cause::Dependency(d) => (Some(d.clone()), where_of(signals[0], facts).1),
        Cause::Burst { service, .. } => (None, Some(service.clone())),
        _ => where_of(signals[0], facts),
    };
    let class_words = error_class.replace('_', " ");
    let kinds: Vec<&str> = {
        let mut k: Vec<Kind> = signals.iter().map(|s| s.draft.kind).collect();
        k.sort();
        k.dedup();
        k.into_iter().map(kind_words).collect()
    };
    let title = match cause {
        Cause::Dependency(d) => format!(
            "{d} down: {} failing since {since} ({class_words})",
            tools.join(", ")
        ),
        // A tool that only went quiet is not failing.
        Cause::Tool(t) if signals.iter().all(|s| s.draft.kind == Kind::ToolSilent) => {
            format!("{t} silent since {since}: {}", kinds.join(", "))
        }
        Cause::Tool(t) => format!(
            "{t} failing since {since} ({class_words}): {}",
            kinds.join(", ")
        ),
        Cause::Burst { service, .. } => format!(
            "{class_words} across {} tools of {service}: {} since {since}",
            tools.len(),
            tools.join(", ")
        ),
        Cause::Own(_) => signals[0].draft.title.clone(),
    };
    let mut member_rows: Vec<Member> = members
        .iter()
        .map(|m| {
            let d = &m.signal.draft;
            Member {
                signal_id: d.id.clone(),
                kind: d.kind.as_str().to_string(),
                tool: d.tool.clone(),
                error_class: d.error_class.clone(),
                severity: d.severity().as_str().to_string(),
                state: m.signal.state.as_str().to_string(),
                title: d.title.clone(),
                joined_ns: m.joined_ns,
                reason: m.reason.clone(),
                first_seen_ns: d.first_seen_ns,
                last_seen_ns: d.last_seen_ns,
                findings: d.findings,
                dependency: where_of(m.signal, facts).0,
            }
        })
        .collect();
    member_rows.sort_by(|a, b| {
        a.joined_ns
            .cmp(&b.joined_ns)
            .then_with(|| a.signal_id.cmp(&b.signal_id))
    });
    // Impact over the members' tools and days.
    let mut tool_days: BTreeSet<(String, i32)> = BTreeSet::new();
    let mut reach_turns: BTreeSet<&str> = BTreeSet::new();
    let mut reach_sessions: BTreeSet<&str> = BTreeSet::new();
    let mut own = Impact::default();
    for s in &signals {
        if super::group::joins(s.draft.kind) {
            for day in s.draft.days.iter().filter_map(|d| day_from_str(d)) {
                tool_days.insert((s.draft.tool.clone(), day));
            }
        } else {
            // A retry after success or a loop: its own repeated calls, not
            // the tool's day (whose failures are another cause's).
            for e in &s.draft.evidence {
                own.calls += e.calls as u64;
                own.failed_calls += e.failures as u64;
                own.wasted_calls += e.calls.saturating_sub(1) as u64;
                own.wasted_seconds += e.wasted_seconds;
            }
        }
        if let Some(r) = facts.reach.get(&s.draft.key) {
            reach_turns.extend(r.turns.iter().map(String::as_str));
            reach_sessions.extend(r.sessions.iter().map(String::as_str));
        }
        for e in &s.draft.evidence {
            reach_turns.extend(e.turn_id.as_deref());
            reach_sessions.extend(e.session_id.as_deref());
        }
    }
    let mut impact = Impact {
        turns: reach_turns.len(),
        sessions: reach_sessions.len(),
        ..own
    };
    let mut per_day: BTreeMap<i32, (u64, u64)> = BTreeMap::new();
    for key in &tool_days {
        if let Some(f) = facts.daily.get(key) {
            impact.calls += f.calls;
            impact.failed_calls += f.errors;
            impact.wasted_calls += f.wasted;
            impact.wasted_seconds += f.wasted_seconds;
            let e = per_day.entry(key.1).or_default();
            e.0 += f.errors;
            e.1 += f.calls;
        }
    }
    impact.wasted_seconds = (impact.wasted_seconds * 10.0).round() / 10.0;
    // The timeline.
    let mut timeline = Vec::new();
    if let Some(first) = signals
        .iter()
        .min_by_key(|s| (s.draft.first_seen_ns, &s.draft.id))
    {
        timeline.push(Moment {
            at_ns: first.draft.first_seen_ns.max(first_seen_ns),
            what: "first_finding".into(),
            text: format!("first finding: {}", first.draft.title),
            signal_id: Some(first.draft.id.clone()),
        });
    }
    for m in member_rows.iter().filter(|m| m.reason != "first finding") {
        timeline.push(Moment {
            at_ns: m.joined_ns,
            what: "joined".into(),
            text: format!("{} joined ({}): {}", m.signal_id, m.reason, m.title),
            signal_id: Some(m.signal_id.clone()),
        });
    }
    if let Some((day, (errors, calls))) = per_day
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then_with(|| b.0.cmp(a.0)))
        .filter(|(_, (errors, _))| *errors > 0)
    {
        // Within the incident's span, so it sorts after its first finding.
        let at =
            (i64::from(*day) * NANOS_PER_DAY).clamp(first_seen_ns, last_seen_ns.max(first_seen_ns));
        timeline.push(Moment {
            at_ns: at,
            what: "peak".into(),
            text: format!(
                "peak: {errors} of {calls} calls failed on {}",
                day_to_string(*day)
            ),
            signal_id: None,
        });
    }
    if let Some(last) = signals
        .iter()
        .max_by_key(|s| (s.draft.last_seen_ns, &s.draft.id))
    {
        timeline.push(Moment {
            at_ns: last.draft.last_seen_ns,
            what: "last_finding".into(),
            text: format!("last finding: {}", last.draft.title),
            signal_id: Some(last.draft.id.clone()),
        });
    }
    if let Some(at) = resolved_ns.filter(|_| state == IncidentState::Resolved) {
        timeline.push(Moment {
            at_ns: at,
            what: "resolved".into(),
            text: "resolved: every member is quiet".into(),
            signal_id: None,
        });
    }
    // Stable: at one instant, the order written (first finding, joins, peak, last).
    timeline.sort_by_key(|m| m.at_ns);
    // Remedies: the lead member's, and each member's said once.
    let mut led: Vec<&Signal> = live.clone();
    led.sort_by(|a, b| lead_order(a, b));
    let mut remedy = led.iter().find_map(|s| s.draft.remedy.clone());
    // A dependency down behind several tools: one breaker for all of them.
    if let (Cause::Dependency(dep), Some(r)) = (cause, remedy.as_mut()) {
        if tools.len() > 1 {
            let whole = format!(
                "{dep} is down behind {} tools ({}): trip one circuit breaker for {dep} so all of them fail fast together, instead of a retry loop per tool.",
                tools.len(),
                tools.join(", ")
            );
            r.change = format!("{whole} {}", r.change);
            r.summary = format!("{whole} {}", r.summary);
        }
    }
    let mut remedies: Vec<MemberRemedy> = Vec::new();
    for s in &led {
        let Some(r) = &s.draft.remedy else { continue };
        match remedies.iter_mut().find(|m| m.summary == r.summary) {
            Some(m) => m.signal_ids.push(s.draft.id.clone()),
            None => remedies.push(MemberRemedy {
                signal_ids: vec![s.draft.id.clone()],
                kind: s.draft.kind.as_str().to_string(),
                summary: r.summary.clone(),
            }),
        }
    }
    // Evidence: each trace once, worst first.
    let mut evidence: Vec<IncidentEvidence> = Vec::new();
    for s in &led {
        for e in &s.draft.evidence {
            if !evidence.iter().any(|x| x.evidence.trace_id == e.trace_id) {
                evidence.push(IncidentEvidence {
                    signal_id: s.draft.id.clone(),
                    tool: s.draft.tool.clone(),
                    evidence: e.clone(),
                });
            }
        }
    }
    evidence.sort_by(|a, b| {
        b.evidence
            .failures
            .cmp(&a.evidence.failures)
            .then_with(|| b.evidence.calls.cmp(&a.evidence.calls))
            .then_with(|| a.evidence.trace_id.cmp(&b.evidence.trace_id))
    });
    let more = evidence.len().saturating_sub(evidence_limit)
        + led.iter().map(|s| s.draft.evidence_more).sum::<usize>();
    evidence.truncate(evidence_limit);
    Incident {
        id: id.to_string(),
        key: cause.key(),
        state,
        title,
        cause: cause.words(),
        severity: severity.as_str().to_string(),
        dependency,
        service,
        tools,
        error_class,
        first_seen_ns,
        last_seen_ns,
        findings: signals.iter().map(|s| s.draft.findings).sum(),
        opened_ns,
        resolved_ns: resolved_ns.filter(|_| state == IncidentState::Resolved),
        members: member_rows,
        timeline,
        impact,
        remedy,
        remedies,
        evidence,
        evidence_more: more,
    }
}
