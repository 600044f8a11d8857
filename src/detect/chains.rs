//! Retry chains (detection.md §4.2): what a retry is. In one turn's calls of
//! one tool, in start order, overlapping calls are one round (a parallel
//! fan-out, not a retry). A chain starts at a failed round; the next round
//! extends it while the round before it failed; the first success ends it
//! and is its outcome. So every round of a chain after the first is a retry
//! of a failure, whatever its arguments — an agent asking a dead feed fifteen
//! different questions keeps knocking on the same door — while calls after a
//! success start afresh: fourteen different `bash` commands with two
//! scattered failures hold no chain longer than two.
//!
//! The per-attempt verdicts (the trace view's colours, the tool page's
//! recovery rate) and polling (a repeat whose result keeps changing is the
//! agent waiting, not re-doing) live here too, so every rule reads one
//! definition.

use std::ops::Range;

use crate::model::ErrorClass;

/// One call as the chain rules see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attempt<'a> {
    pub class: ErrorClass,
    /// Hash of the (non-empty) arguments, when recorded.
    pub args: Option<&'a str>,
    /// Hash of the result, when recorded.
    pub result: Option<&'a str>,
    pub start_ns: i64,
    pub end_ns: i64,
    /// How long a failed call was told to wait (ms), when it was.
    pub retry_after_ms: Option<i64>,
    /// When that wait began (ns): the end of the span that stated it; none
    /// means the call's own end.
    pub wait_from_ns: Option<i64>,
}

impl Attempt<'_> {
    /// A failure ([`ErrorClass::is_failure`]). Callers leave control flow
    /// (`interrupted`, `cancelled`) out of the attempts: it is neither a
    /// failure nor the success that would end a chain.
    pub fn failed(&self) -> bool {
        self.class.is_failure()
    }
}

/// Whether two calls are the same request: the same arguments, or either's
/// unknown.
pub fn same_args(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Calls whose time ranges overlap, taken as one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// The attempts of the round (indices into the attempts, contiguous).
    pub calls: Range<usize>,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The class of its first failed call; `None` when none failed.
    pub class: Option<ErrorClass>,
}

impl Round {
    pub fn failed(&self) -> bool {
        self.class.is_some()
    }
}

/// How much two calls must overlap to be one round: the JS OpenTelemetry
/// SDK writes start times in whole milliseconds, so a call that began right
/// after another ended can seem to start up to 1 ms before that end.
pub const OVERLAP_SLACK_NS: i64 = 1_000_000;

/// The rounds of attempts in start order.
pub fn rounds(attempts: &[Attempt<'_>]) -> Vec<Round> {
    let mut out: Vec<Round> = Vec::new();
    for (i, a) in attempts.iter().enumerate() {
        match out.last_mut() {
            // Overlapping by more than the slack, or starting together.
            Some(r) if a.start_ns + OVERLAP_SLACK_NS < r.end_ns || a.start_ns <= r.start_ns => {
                r.end_ns = r.end_ns.max(a.end_ns);
                r.calls.end = i + 1;
                if r.class.is_none() && a.failed() {
                    r.class = Some(a.class);
                }
            }
            _ => out.push(Round {
                calls: i..i + 1,
                start_ns: a.start_ns,
                end_ns: a.end_ns,
                class: a.failed().then_some(a.class),
            }),
        }
    }
    out
}

/// A chain of rounds: failures, each retried, up to the first success.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// Indices into the rounds.
    pub rounds: Range<usize>,
    /// It ended with a success (its last round).
    pub recovered: bool,
}

impl Chain {
    pub fn len(&self) -> usize {
        self.rounds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rounds.is_empty()
    }
}

/// The chains among rounds, in order.
pub fn chains(rounds: &[Round]) -> Vec<Chain> {
    let mut out = Vec::new();
    let mut open: Option<usize> = None;
    for (r, round) in rounds.iter().enumerate() {
        match (open, round.failed()) {
            (None, true) => open = Some(r),
            (None, false) => {}
            (Some(_), true) => {}
            (Some(start), false) => {
                out.push(Chain {
                    rounds: start..r + 1,
                    recovered: true,
                });
                open = None;
            }
        }
    }
    if let Some(start) = open {
        out.push(Chain {
            rounds: start..rounds.len(),
            recovered: false,
        });
    }
    out
}

/// Gaps between successive rounds (ms), never negative.
pub fn gaps_ms(rounds: &[Round]) -> Vec<f64> {
    rounds
        .windows(2)
        .map(|w| (w[1].start_ns - w[0].end_ns).max(0) as f64 / 1e6)
        .collect()
}

/// Whether the calls of one request (same tool, same arguments, in start
/// order) are polling — a shape, not identical results: three or more
/// calls, and either the gaps between its successful calls (three or more
/// of them) keep growing (median ratio ≥ `growth`; a status poll whose
/// result carries a counter or a timestamp is still a poll; a retry
/// loop's backoff between failures is not), or the results recorded (on
/// three calls or more: a failed call records none) read a state that
/// stayed, then changed — the same result twice in a row somewhere, and
/// the last unlike the first (`running` → `running` → `succeeded`). Three
/// different confirmations at an even pace are three bookings, not a poll.
pub fn polling(calls: &[Attempt<'_>], growth: f64) -> bool {
    if calls.len() < 3 {
        return false;
    }
    let results: Vec<&str> = calls.iter().filter_map(|c| c.result).collect();
    if results.len() >= 3 {
        let stayed = results.windows(2).any(|w| w[0] == w[1]);
        if stayed && results.first() != results.last() {
            return true;
        }
    }
    let ok: Vec<&Attempt<'_>> = calls.iter().filter(|c| c.class == ErrorClass::Ok).collect();
    if ok.len() < 3 {
        return false;
    }
    let gaps: Vec<f64> = ok
        .windows(2)
        .map(|w| (w[1].start_ns - w[0].end_ns).max(0) as f64)
        .collect();
    let ratios: Vec<f64> = gaps
        .windows(2)
        .filter(|w| w[0] > 0.0)
        .map(|w| w[1] / w[0])
        .collect();
    super::median(ratios).is_some_and(|r| r >= growth)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A call that is no retry, and succeeded.
    Ok,
    /// A call that is no retry, and failed.
    Failed,
    /// A retry in a chain that recovered.
    Rescued,
    /// A retry that could not help: its chain gave up, or it repeated a
    /// deterministic failure with the same arguments.
    Wasted,
    /// The same request again after it had succeeded (not polling).
    AfterSuccess,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "tool",
            Verdict::Failed => "failed",
            Verdict::Rescued => "rescued",
            Verdict::Wasted => "wasted",
            Verdict::AfterSuccess => "after_success",
        }
    }

    pub fn is_retry(self) -> bool {
        matches!(
            self,
            Verdict::Rescued | Verdict::Wasted | Verdict::AfterSuccess
        )
    }
}

/// The verdict of every attempt of one turn's calls of one tool (in start
/// order). `growth` is the gap ratio that makes a repeat polling.
pub fn judge(attempts: &[Attempt<'_>], growth: f64) -> Vec<Verdict> {
    let rs = rounds(attempts);
    let mut out: Vec<Verdict> = attempts
        .iter()
        .map(|a| {
            if a.failed() {
                Verdict::Failed
            } else {
                Verdict::Ok
            }
        })
        .collect();
    for chain in chains(&rs) {
        for r in chain.rounds.start + 1..chain.rounds.end {
            let prev = &rs[r - 1];
            let prev_args = attempts[prev.calls.start].args;
            // The success that ended a recovered chain rescued it.
            let closing = chain.recovered && r + 1 == chain.rounds.end;
            for k in rs[r].calls.clone() {
                let same = same_args(attempts[k].args, prev_args);
                // Another request after a failure waiting cannot fix (a
                // command that exited 1, then a different command) is the
                // agent doing something else, not retrying.
                if !same && prev.class.and_then(ErrorClass::retryable) != Some(true) {
                    continue;
                }
                let deterministic = prev.class.and_then(ErrorClass::retryable) == Some(false);
                out[k] = if !chain.recovered || (deterministic && same && !closing) {
                    Verdict::Wasted
                } else {
                    Verdict::Rescued
                };
            }
        }
    }
    // Repeats of a request that had succeeded (in a chain too: a retry that
    // resends a request which already went through is the double booking).
    let mut requests: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (k, a) in attempts.iter().enumerate() {
        if let Some(args) = a.args {
            requests.entry(args).or_default().push(k);
        }
    }
    for ks in requests.values() {
        if ks.len() < 2 {
            continue;
        }
        let request: Vec<Attempt<'_>> = ks.iter().map(|&k| attempts[k]).collect();
        if polling(&request, growth) {
            continue;
        }
        let mut first_ok_end: Option<i64> = None;
        for &k in ks {
            let a = &attempts[k];
            // A request that had succeeded is a repeat, in a chain or not.
            if first_ok_end.is_some_and(|e| e <= a.start_ns) {
                out[k] = Verdict::AfterSuccess;
            }
            if !a.failed() && first_ok_end.is_none() {
                first_ok_end = Some(a.end_ns);
            }
        }
    }
    out
}
