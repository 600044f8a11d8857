//! Retries that cannot help (detection.md §4.3): the same request retried
//! after a deterministic failure; and retries that can hurt (§4.4): the
//! same request sent again after it succeeded — the double booking.
//! Both need the arguments hash: without it, "the same request" is unknown.

use std::collections::BTreeMap;

use super::calls::Call;
use crate::model::{day_of_ns, ErrorClass};

/// Retries of a request that failed deterministically.
#[derive(Debug, Clone, PartialEq)]
pub struct WastedRetry {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub day: i32,
    pub class: ErrorClass,
    /// Every attempt, the first included.
    pub attempts: usize,
    /// Durations of the retries and the gaps before them.
    pub wasted_seconds: f64,
    pub span_ids: Vec<String>,
}

/// A request sent again after it had succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryAfterSuccess {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub day: i32,
    /// The call that succeeded first.
    pub succeeded_span_id: String,
    /// Calls of the same request after it.
    pub repeats: usize,
    pub repeat_span_ids: Vec<String>,
}

fn same_requests(calls: &[Call]) -> BTreeMap<(&str, &str, &str), Vec<&Call>> {
    let mut groups: BTreeMap<(&str, &str, &str), Vec<&Call>> = BTreeMap::new();
    for c in calls {
        if let Some(args) = c.args_hash.as_deref() {
            groups
                .entry((c.turn.as_str(), c.tool.as_str(), args))
                .or_default()
                .push(c);
        }
    }
    for g in groups.values_mut() {
        g.sort_by_key(|c| c.start_ns);
    }
    groups
}

/// Requests retried after a deterministic failure, every retry failing the same way.
pub fn wasted_retries(calls: &[Call]) -> Vec<WastedRetry> {
    let mut out = Vec::new();
    for ((turn, tool, _), group) in same_requests(calls) {
        let first = group[0];
        if group.len() < 2 || first.class.retryable() != Some(false) {
            continue;
        }
        if !group[1..].iter().all(|c| c.class == first.class) {
            continue;
        }
        let wasted_ns: i64 = group
            .windows(2)
            .map(|w| (w[1].start_ns - w[0].end_ns).max(0) + (w[1].end_ns - w[1].start_ns))
            .sum();
        out.push(WastedRetry {
            tool: tool.to_string(),
            service: first.service.clone(),
            turn: turn.to_string(),
            trace_id: first.trace_id.clone(),
            day: day_of_ns(first.start_ns),
            class: first.class,
            attempts: group.len(),
            wasted_seconds: wasted_ns as f64 / 1e9,
            span_ids: group.iter().map(|c| c.span_id.clone()).collect(),
        });
    }
    out.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then_with(|| a.turn.cmp(&b.turn))
    });
    out
}

/// Requests sent again after a call of them succeeded.
pub fn retries_after_success(calls: &[Call]) -> Vec<RetryAfterSuccess> {
    let mut out = Vec::new();
    for ((turn, tool, _), group) in same_requests(calls) {
        let Some(ok) = group.iter().position(|c| !c.failed()) else {
            continue;
        };
        // Calls that started after the success ended (not overlapping it).
        let repeats: Vec<&Call> = group[ok + 1..]
            .iter()
            .copied()
            .filter(|c| c.start_ns >= group[ok].end_ns)
            .collect();
        if repeats.is_empty() {
            continue;
        }
        out.push(RetryAfterSuccess {
            tool: tool.to_string(),
            service: group[ok].service.clone(),
            turn: turn.to_string(),
            trace_id: group[ok].trace_id.clone(),
            day: day_of_ns(group[ok].start_ns),
            succeeded_span_id: group[ok].span_id.clone(),
            repeats: repeats.len(),
            repeat_span_ids: repeats.iter().map(|c| c.span_id.clone()).collect(),
        });
    }
    out.sort_by(|a, b| b.repeats.cmp(&a.repeats).then_with(|| a.turn.cmp(&b.turn)));
    out
}
