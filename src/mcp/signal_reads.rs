//! The signal tools' answers (`list_signals`, `get_signal`,
//! `get_signal_traces`): what each returns (the types its `outputSchema` is
//! generated from) and how it is read from the signal state.

use schemars::JsonSchema;
use serde::Serialize;

use super::page::{page, BUDGET_CHARS};
use super::reads::today;
use super::{Context, McpError};
use crate::model::day_from_str;
use crate::signal::{Evidence, Lifecycle, Remedy, Signal};
use crate::time::rfc3339;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SignalLine {
    pub id: String,
    pub kind: String,
    pub tool: String,
    pub class: String,
    pub state: String,
    pub severity: String,
    pub title: String,
    pub first_seen: String,
    pub last_seen: String,
    /// Evidence traces kept (`list_signal_traces` gives them).
    pub evidence: usize,
    /// The remedy in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

impl SignalLine {
    pub fn of(s: &Signal) -> SignalLine {
        let d = &s.draft;
        SignalLine {
            id: d.id.clone(),
            kind: d.kind.as_str().to_string(),
            tool: d.tool.clone(),
            class: d.error_class.clone(),
            state: s.state.as_str().to_string(),
            severity: d.severity().as_str().to_string(),
            title: d.title.clone(),
            first_seen: rfc3339(d.first_seen_ns),
            last_seen: rfc3339(d.last_seen_ns),
            evidence: d.evidence.len() + d.evidence_more,
            remedy: d.remedy.as_ref().map(|r| r.summary.clone()),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalsAnswer {
    pub signals: Vec<SignalLine>,
    pub total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// `since`: a date, or a number of days back from the newest day with data
/// (`7d`: that day and the six before), like the tools' windows.
fn since_ns(since: &str, last_day: Option<i32>) -> Result<i64, McpError> {
    let bad = || {
        McpError::Argument(format!(
            "since: expected a date like 2026-07-29 or a number of days like 7d, got {since:?}"
        ))
    };
    if let Some(n) = since.strip_suffix('d') {
        let n: i32 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(bad)?;
        let last = last_day.unwrap_or_else(today);
        return Ok(i64::from(last - n + 1) * crate::model::NANOS_PER_DAY);
    }
    day_from_str(since)
        .map(|d| i64::from(d) * crate::model::NANOS_PER_DAY)
        .ok_or_else(bad)
}

pub struct SignalFilter<'a> {
    pub state: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub since: Option<&'a str>,
}

pub fn list_signals(
    ctx: &Context,
    f: &SignalFilter<'_>,
    cursor: Option<&str>,
    limit: Option<usize>,
) -> Result<SignalsAnswer, McpError> {
    if let Some(st) = f.state {
        if st != "open" && Lifecycle::parse(st).is_none() {
            return Err(McpError::Argument(format!(
                "state: expected open, new, ongoing, resolved, regressed or muted, got {st:?}"
            )));
        }
    }
    const KINDS: [&str; 10] = [
        "error_rate_spike",
        "retry_storm",
        "wasted_retries",
        "retry_after_success",
        "stacked_retries",
        "latency_spike",
        "tool_loop",
        "tool_silent",
        "no_success",
        "ignored_retry_after",
    ];
    if let Some(k) = f.kind.filter(|k| !KINDS.contains(k)) {
        return Err(McpError::Argument(format!(
            "kind: expected one of {}, got {k:?}",
            KINDS.join(", ")
        )));
    }
    let last_day = ctx.rollup()?.last_day();
    let since = f.since.map(|s| since_ns(s, last_day)).transpose()?;
    let all = ctx.signals()?;
    let mut list: Vec<&Signal> = all
        .iter()
        .filter(|s| match f.state {
            None => true,
            Some("open") => s.state.is_open(),
            Some(st) => s.state.as_str() == st,
        })
        .filter(|s| f.kind.is_none_or(|k| s.draft.kind.as_str() == k))
        .filter(|s| f.tool.is_none_or(|t| s.draft.tool == t))
        .filter(|s| since.is_none_or(|ns| s.draft.last_seen_ns >= ns))
        .collect();
    list.sort_by(|a, b| {
        b.draft
            .last_seen_ns
            .cmp(&a.draft.last_seen_ns)
            .then_with(|| a.draft.id.cmp(&b.draft.id))
    });
    let lines: Vec<SignalLine> = list.into_iter().map(SignalLine::of).collect();
    let p = page(&lines, cursor, limit, 100, BUDGET_CHARS, "signals")?;
    Ok(SignalsAnswer {
        signals: p.items,
        total: p.total,
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryLine {
    pub at: String,
    pub from: Option<String>,
    pub to: String,
    pub reason: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalAnswer {
    #[serde(flatten)]
    pub line: SignalLine,
    pub key: String,
    /// UTC days it fired on.
    pub days: Vec<String>,
    pub findings: usize,
    /// Seconds spent on attempts that could not help, over every finding.
    pub wasted_seconds: f64,
    pub muted_until: Option<String>,
    /// Will waiting fix it, when to cut it off, what to change: built by
    /// rule from the evidence (none on a signal no sweep has seen since
    /// remedies existed).
    pub remedy_detail: Option<Remedy>,
    pub history: Vec<HistoryLine>,
}

fn known_signal(ctx: &Context, id: &str) -> Result<Signal, McpError> {
    ctx.signals()?
        .iter()
        .find(|s| s.draft.id == id)
        .cloned()
        .ok_or_else(|| no_signal(id))
}

fn no_signal(id: &str) -> McpError {
    McpError::NotFound(format!(
        "no signal {id:?}; list_signals gives the ids (like SW-BCDF)"
    ))
}

/// The signal `id`, or a message naming where the ids are.
pub fn known_signal_in(db: &crate::signal::StateDb, id: &str) -> Result<Signal, McpError> {
    db.get(id).map_err(|e| match e {
        crate::signal::StateError::NoSuchSignal(_) => no_signal(id),
        e => e.into(),
    })
}

pub fn get_signal(ctx: &Context, id: &str) -> Result<SignalAnswer, McpError> {
    let s = known_signal(ctx, id)?;
    let history = ctx.state()?.history(id)?;
    let d = &s.draft;
    Ok(SignalAnswer {
        line: SignalLine::of(&s),
        key: d.key.clone(),
        days: d.days.clone(),
        findings: d.findings,
        wasted_seconds: d.wasted_seconds,
        muted_until: s.muted_until_ns.map(rfc3339),
        remedy_detail: d.remedy.clone(),
        history: history
            .into_iter()
            .map(|(at, from, to, reason)| HistoryLine {
                at: rfc3339(at),
                from,
                to,
                reason,
            })
            .collect(),
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TracesAnswer {
    pub signal: String,
    pub title: String,
    /// Evidence turns: trace and turn, session, day, calls (a storm's
    /// rounds), failures, rhythm (`no_backoff`, `fixed`, `exponential`,
    /// `irregular`; `layers 3×3` for stacked retries), outcome, wasted
    /// seconds, the turn against the tool's healthy turn, the share of
    /// retries that repeated their arguments, failures by class, and
    /// (stacked retries) the parent spans.
    pub traces: Vec<Evidence>,
    /// Evidence traces the sweep counted but did not keep.
    pub not_kept: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

pub fn signal_traces(
    ctx: &Context,
    id: &str,
    day: Option<&str>,
    cursor: Option<&str>,
    limit: Option<usize>,
) -> Result<TracesAnswer, McpError> {
    if let Some(d) = day.filter(|d| day_from_str(d).is_none()) {
        return Err(McpError::Argument(format!(
            "day: expected a date like 2026-07-29, got {d:?}"
        )));
    }
    let s = known_signal(ctx, id)?;
    let lines: Vec<Evidence> = s
        .draft
        .evidence
        .iter()
        .filter(|e| day.is_none_or(|d| e.day == d))
        .cloned()
        .collect();
    let p = page(&lines, cursor, limit, 50, BUDGET_CHARS, "traces")?;
    Ok(TracesAnswer {
        signal: s.draft.id.clone(),
        title: s.draft.title.clone(),
        traces: p.items,
        not_kept: s.draft.evidence_more,
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}
