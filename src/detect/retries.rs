//! Retries that cannot help (detection.md §4.3): the same request retried
//! after a deterministic failure; retries that can hurt (§4.4): the same
//! request sent again after it succeeded — the double booking (both need the
//! arguments hash: without it, "the same request" is unknown); and retry
//! loops stacked inside retry loops (§4.5), N × M attempts.

use std::collections::BTreeMap;

use super::calls::{by_turn_and_tool, Call};
use super::driver::{drive, CostParams, Drive, ModelCall};
use crate::model::{day_of_ns, ErrorClass};

/// Retries of a request that failed deterministically.
#[derive(Debug, Clone, PartialEq)]
pub struct WastedRetry {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub day: i32,
    pub first_start_ns: i64,
    pub class: ErrorClass,
    /// Every attempt, the first included.
    pub attempts: usize,
    /// Durations of the retries and the gaps before them.
    pub wasted_seconds: f64,
    pub span_ids: Vec<String>,
    /// Who made the retries (§4.2, "Driver").
    pub drive: Drive,
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
    /// When the first repeat started.
    pub first_repeat_ns: i64,
    /// Calls of the same request after it.
    pub repeats: usize,
    pub repeat_span_ids: Vec<String>,
}

/// (turn, tool, arguments hash) and the calls of that request.
type Requests<'a> = Vec<((&'a str, &'a str, &'a str), Vec<&'a Call>)>;

/// Calls grouped by (turn, tool, arguments hash), in that order, each group
/// in start order; calls without an arguments hash are left out.
fn same_requests(calls: &[Call]) -> Requests<'_> {
    let mut out = Vec::new();
    for ((turn, tool), group) in by_turn_and_tool(calls) {
        let mut by_args: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
        for c in group {
            if let Some(args) = c.args_hash.as_deref() {
                by_args.entry(args).or_default().push(c);
            }
        }
        out.extend(by_args.into_iter().map(|(args, g)| ((turn, tool, args), g)));
    }
    out
}

/// Requests retried after a deterministic failure, every retry failing the
/// same way; every driver `code` (no model calls known).
pub fn wasted_retries(calls: &[Call]) -> Vec<WastedRetry> {
    wasted_retries_driven(calls, &Default::default(), &CostParams::default())
}

/// [`wasted_retries`], each with its driver among its turn's `models`
/// (per turn id), model calls priced with `cost`.
pub fn wasted_retries_driven(
    calls: &[Call],
    models: &BTreeMap<String, Vec<ModelCall>>,
    cost: &CostParams,
) -> Vec<WastedRetry> {
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
            first_start_ns: first.start_ns,
            class: first.class,
            attempts: group.len(),
            wasted_seconds: wasted_ns as f64 / 1e9,
            span_ids: group.iter().map(|c| c.span_id.clone()).collect(),
            // Between rounds, as the storms' chains count it: calls that
            // overlap are one attempt, with no gap between them.
            drive: drive(
                &super::chains::rounds(&group.iter().map(|c| c.attempt()).collect::<Vec<_>>()),
                models.get(turn).map_or(&[], Vec::as_slice),
                cost,
            ),
        });
    }
    out.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then_with(|| a.turn.cmp(&b.turn))
    });
    out
}

/// Requests sent again after a call of them succeeded — unless the
/// request is polling (its result keeps changing, or its gaps grow:
/// [`super::chains::polling`]; `growth` is that gap ratio), or the turn did
/// something else in between that may have changed the state (a coding
/// agent running the same tests after each edit): every call between the
/// success and the repeat must be of a read-only tool (`read_only`) or of
/// this request. Empty arguments carry no hash and are never judged.
pub fn retries_after_success(
    calls: &[Call],
    growth: f64,
    read_only: impl Fn(&str) -> bool,
) -> Vec<RetryAfterSuccess> {
    // Each turn's known calls by their place in it (a tool called once in a
    // turn is not among `calls`: a gap in the places is an unknown call).
    let mut places: BTreeMap<(&str, u32), &Call> = BTreeMap::new();
    for c in calls {
        places.insert((c.turn.as_str(), c.seq), c);
    }
    let quiet_between = |ok: &Call, repeat: &Call| -> bool {
        (ok.seq + 1..repeat.seq).all(|seq| {
            places.get(&(ok.turn.as_str(), seq)).is_some_and(|c| {
                (c.tool == ok.tool && c.args_hash == ok.args_hash) || read_only(&c.tool)
            })
        })
    };
    let mut out = Vec::new();
    for ((turn, tool, _), group) in same_requests(calls) {
        let Some(ok) = group.iter().position(|c| !c.failed()) else {
            continue;
        };
        let attempts: Vec<super::chains::Attempt<'_>> = group.iter().map(|c| c.attempt()).collect();
        if super::chains::polling(&attempts, growth) {
            continue;
        }
        // Calls that started after the success ended (not overlapping it),
        // with nothing that may have changed the state in between.
        let mut repeats: Vec<&Call> = Vec::new();
        let mut last = group[ok];
        for c in group[ok + 1..].iter().copied() {
            if c.start_ns < group[ok].end_ns {
                continue;
            }
            if !quiet_between(last, c) {
                break;
            }
            repeats.push(c);
            last = c;
        }
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
            first_repeat_ns: repeats[0].start_ns,
            repeats: repeats.len(),
            repeat_span_ids: repeats.iter().map(|c| c.span_id.clone()).collect(),
        });
    }
    out.sort_by(|a, b| b.repeats.cmp(&a.repeats).then_with(|| a.turn.cmp(&b.turn)));
    out
}

/// One tool's attempts in one turn split under several parents that each
/// retried: a retry loop inside a retry loop.
#[derive(Debug, Clone, PartialEq)]
pub struct StackedRetries {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub day: i32,
    pub first_start_ns: i64,
    /// (parent span id, attempts under it), in time order.
    pub layers: Vec<(String, usize)>,
    pub attempts: usize,
    pub failures: usize,
    /// The most common class among the failures.
    pub class: ErrorClass,
}

/// Turns where a tool's attempts sit under ≥ 2 parents that each retried
/// ≥ 2 times (≥ 3 attempts) with at least one failure.
pub fn stacked_retries(calls: &[Call]) -> Vec<StackedRetries> {
    let mut out = Vec::new();
    for ((turn, tool), group) in by_turn_and_tool(calls) {
        let mut parents: Vec<(&str, Vec<&Call>)> = Vec::new();
        for c in &group {
            let p = c.parent_span_id.as_deref().unwrap_or("");
            match parents.iter_mut().find(|(q, _)| *q == p) {
                Some((_, v)) => v.push(c),
                None => parents.push((p, vec![c])),
            }
        }
        let layers: Vec<&(&str, Vec<&Call>)> = parents
            .iter()
            .filter(|(p, v)| !p.is_empty() && v.len() >= 3 && v.iter().any(|c| c.failed()))
            .collect();
        if layers.len() < 2 {
            continue;
        }
        let class =
            super::dominant_class(group.iter().filter(|c| c.failed()).map(|c| (c.class, 1)));
        out.push(StackedRetries {
            tool: tool.to_string(),
            service: group[0].service.clone(),
            turn: turn.to_string(),
            trace_id: group[0].trace_id.clone(),
            day: day_of_ns(group[0].start_ns),
            first_start_ns: group[0].start_ns,
            layers: layers
                .iter()
                .map(|(p, v)| (p.to_string(), v.len()))
                .collect(),
            attempts: group.len(),
            failures: group.iter().filter(|c| c.failed()).count(),
            class,
        });
    }
    out.sort_by(|a, b| {
        b.attempts
            .cmp(&a.attempts)
            .then_with(|| a.turn.cmp(&b.turn))
    });
    out
}
