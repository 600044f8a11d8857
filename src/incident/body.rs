//! An incident written from its members, by rule: the title names the
//! broken thing ("quote-mcp down: get_quote, get_fx_rate failing since
//! 2026-08-02 14:02Z (unavailable)"), the timeline (first finding, each
//! member joining, the peak day, the last finding, the resolution), the
//! impact, the members' remedies merged and their evidence worst first.

mod impact;
mod timeline;

use std::collections::BTreeMap;

use self::impact::impact;
use self::timeline::timeline;
use super::group::{where_of, Cause, Facts};
use super::{Incident, IncidentEvidence, IncidentState, Member, MemberRemedy};
use crate::model::day_to_string;
use crate::signal::{Kind, Remedy, Severity, Signal};

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
    let resolved_ns = resolved_ns.filter(|_| state == IncidentState::Resolved);
    // What the incident is now: its live members while open (a resolved
    // member from an earlier episode does not date or name it), all once
    // resolved.
    let live = live(&signals, state);
    let tools = tools_of(&live);
    let severity = live
        .iter()
        .map(|s| s.draft.severity())
        .max()
        .unwrap_or(Severity::Info);
    let error_class = dominant_class(&live);
    let began = Began::of(&live);
    let last_seen_ns = live.iter().map(|s| s.draft.last_seen_ns).max().unwrap_or(0);
    let (dependency, service) = match cause {
        Cause::Dependency(d) => (Some(d.clone()), where_of(signals[0], facts).1),
        Cause::Burst { service, .. } => (None, Some(service.clone())),
        _ => where_of(signals[0], facts),
    };
    let title = title(cause, &signals, &tools, &error_class, &began.since);
    let member_rows = member_rows(members, facts);
    let (impact, per_day) = impact(&signals, facts);
    let timeline = timeline(
        &signals,
        &member_rows,
        &per_day,
        (began.first_seen_ns, last_seen_ns),
        resolved_ns,
    );
    let mut led: Vec<&Signal> = live.clone();
    led.sort_by(|a, b| lead_order(a, b));
    let (evidence, evidence_more) = evidence(&led, evidence_limit);
    Incident {
        id: id.to_string(),
        key: cause.key(),
        state,
        title,
        cause: cause.words(),
        severity: severity.as_str().to_string(),
        dependency,
        service,
        error_class,
        first_seen_ns: began.first_seen_ns,
        last_seen_ns,
        findings: signals.iter().map(|s| s.draft.findings).sum(),
        opened_ns,
        resolved_ns,
        members: member_rows,
        timeline,
        impact,
        remedy: lead_remedy(cause, &led, &tools),
        remedies: member_remedies(&led),
        tools,
        evidence,
        evidence_more,
    }
}

/// Members that still count: the open and muted ones, or all once resolved.
fn live<'a>(signals: &[&'a Signal], state: IncidentState) -> Vec<&'a Signal> {
    if state == IncidentState::Resolved {
        signals.to_vec()
    } else {
        signals
            .iter()
            .copied()
            .filter(|s| s.state.is_open() || s.state == crate::signal::Lifecycle::Muted)
            .collect()
    }
}

/// The members' tools, each once, in the members' order.
fn tools_of(basis: &[&Signal]) -> Vec<String> {
    let mut tools: Vec<String> = Vec::new();
    for s in basis {
        if !tools.contains(&s.draft.tool) {
            tools.push(s.draft.tool.clone());
        }
    }
    tools
}

/// The dominant class: the failing class with the most findings (`ok`
/// when none failed).
fn dominant_class(basis: &[&Signal]) -> String {
    let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
    for s in basis {
        if s.draft.error_class != "ok" {
            *classes.entry(s.draft.error_class.as_str()).or_default() += s.draft.findings;
        }
    }
    classes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map_or("ok", |(c, _)| c)
        .to_string()
}

/// When an incident began, and that moment in its title's words.
struct Began {
    first_seen_ns: i64,
    /// The minute of a per-turn member's first failing call, or the day a
    /// daily member flagged.
    since: String,
}

impl Began {
    /// The first failing call a per-turn member saw, unless a daily member
    /// flagged an earlier day (which knows only its day).
    fn of(basis: &[&Signal]) -> Began {
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
        let since = if Some(first_seen_ns) == turn_first {
            minute(first_seen_ns)
        } else {
            day_to_string(crate::model::day_of_ns(first_seen_ns))
        };
        Began {
            first_seen_ns,
            since,
        }
    }
}

/// The title by cause: what is broken, since when, and how.
fn title(
    cause: &Cause,
    signals: &[&Signal],
    tools: &[String],
    error_class: &str,
    since: &str,
) -> String {
    let class_words = error_class.replace('_', " ");
    let kinds: Vec<&str> = {
        let mut k: Vec<Kind> = signals.iter().map(|s| s.draft.kind).collect();
        k.sort();
        k.dedup();
        k.into_iter().map(kind_words).collect()
    };
    match cause {
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
    }
}

/// The members as rows, in joining order.
fn member_rows(members: &[Joined<'_>], facts: &Facts) -> Vec<Member> {
    let mut rows: Vec<Member> = members
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
    rows.sort_by(|a, b| {
        a.joined_ns
            .cmp(&b.joined_ns)
            .then_with(|| a.signal_id.cmp(&b.signal_id))
    });
    rows
}

/// The lead member's remedy (`led` in lead order); a dependency down
/// behind several tools gets one breaker for all of them.
fn lead_remedy(cause: &Cause, led: &[&Signal], tools: &[String]) -> Option<Remedy> {
    let mut remedy = led.iter().find_map(|s| s.draft.remedy.clone());
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
    remedy
}

/// Each member's remedy said once, with the members that share it.
fn member_remedies(led: &[&Signal]) -> Vec<MemberRemedy> {
    let mut remedies: Vec<MemberRemedy> = Vec::new();
    for s in led {
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
    remedies
}

/// Evidence: each trace once, worst first, at most `limit` kept; and how
/// many more there were (the members' own overflow included).
fn evidence(led: &[&Signal], limit: usize) -> (Vec<IncidentEvidence>, usize) {
    let mut evidence: Vec<IncidentEvidence> = Vec::new();
    for s in led {
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
    let more = evidence.len().saturating_sub(limit)
        + led.iter().map(|s| s.draft.evidence_more).sum::<usize>();
    evidence.truncate(limit);
    (evidence, more)
}
