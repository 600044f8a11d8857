//! Ignored Retry-After (detection.md §4.9): a failed call that was told how
//! long to wait (its `retry_after_ms`, read at ingest: its own span's or
//! the HTTP client span's under it), and a retry that came sooner. In a
//! retry chain ([`super::chains`]), after a failed round that stated a
//! wait, the next round is early when it starts more than `tolerance_ms`
//! before the round's deadline: the latest of its failed calls' deadlines,
//! each the end of the span that stated the wait plus the wait. A chain is
//! `ignored_retry_after` when at least `min_early` retries came early and
//! they are more than `share` of the retries that had a stated wait — the
//! client that "continued to hit at the same rate after a 429".
//! Every chain's waits are its evidence (a storm's too), per retry: the
//! stated wait, the gap taken, whether it was early.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::calls::{by_turn_and_tool, TurnCalls};
use super::chains::{chains, rounds, Attempt, Round};
use crate::model::{day_of_ns, ErrorClass};

/// `[detect.retry_after]` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryAfterParams {
    /// At least this many retries of a chain came before the stated wait…
    pub min_early: usize,
    /// … and they are more than this share of its retries that had one.
    pub share: f64,
    /// A retry this much (ms) before the wait is over still honours it
    /// (clocks of two processes; whole seconds in a header, a date's second).
    pub tolerance_ms: f64,
}

impl Default for RetryAfterParams {
    fn default() -> Self {
        RetryAfterParams {
            min_early: 2,
            share: 0.5,
            tolerance_ms: 1000.0,
        }
    }
}

impl RetryAfterParams {
    /// What is wrong with the parameters, as (key, why).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.min_early < 1 {
            return Some((
                "min_early",
                format!("must be at least 1, got {}", self.min_early),
            ));
        }
        if !(0.0..1.0).contains(&self.share) {
            return Some((
                "share",
                format!("must be from 0 to below 1, got {}", self.share),
            ));
        }
        if !(0.0..=60_000.0).contains(&self.tolerance_ms) {
            return Some((
                "tolerance_ms",
                format!(
                    "must be from 0 to 60000 (a minute), got {}",
                    self.tolerance_ms
                ),
            ));
        }
        None
    }

    /// Whether a chain's waits make it `ignored_retry_after`.
    pub fn ignored(&self, waits: &[RetryWait]) -> bool {
        let early = waits.iter().filter(|w| w.early).count();
        early >= self.min_early && early as f64 > self.share * waits.len() as f64
    }
}

/// One retry after a failed round that stated a wait.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RetryWait {
    /// The retry's place in its chain (1: the first retry).
    pub retry: usize,
    /// The wait the failed round before it stated (ms).
    pub stated_ms: i64,
    /// The gap it took after the end of the span that stated the wait
    /// (the failed call's, or its HTTP child's; ms, never negative).
    pub gap_ms: f64,
    /// It started before the stated wait was over (less the tolerance):
    /// before the failed round's deadline, the latest of its failed calls'
    /// (each the end of the span that stated its wait, plus the wait).
    pub early: bool,
}

/// The wait a round states: of its failed calls that were told one, the
/// one that is over last — (its wait in ms, the end of the span that
/// stated it, its deadline), in ns. A call's wait counts from the end of
/// the span that stated it: its own, or its HTTP child's, which may end
/// long before the call (a tool that slept the wait out inside itself).
pub fn round_wait(attempts: &[Attempt<'_>], round: &Round) -> Option<(i64, i64, i64)> {
    attempts[round.calls.clone()]
        .iter()
        .filter(|a| a.failed())
        .filter_map(|a| {
            let ms = a.retry_after_ms?;
            let from = a.wait_from_ns.unwrap_or(a.end_ns);
            Some((ms, from, from.saturating_add(ms.saturating_mul(1_000_000))))
        })
        .max_by_key(|&(ms, from, deadline)| (deadline, ms, from))
}

/// The waits of a chain's retries (`chain`: indices into `rs`): one per
/// round after a failed round that stated a wait. A retry is early when it
/// starts more than `tolerance_ms` before the round's deadline; its gap is
/// measured from the end of the span that stated that deadline's wait.
pub fn waits(
    attempts: &[Attempt<'_>],
    rs: &[Round],
    chain: Range<usize>,
    tolerance_ms: f64,
) -> Vec<RetryWait> {
    let mut out = Vec::new();
    for r in chain.start + 1..chain.end {
        let prev = &rs[r - 1];
        let Some((stated, from, deadline)) = round_wait(attempts, prev).filter(|_| prev.failed())
        else {
            continue;
        };
        let gap_ms = (rs[r].start_ns - from).max(0) as f64 / 1e6;
        out.push(RetryWait {
            retry: r - chain.start,
            stated_ms: stated,
            gap_ms,
            early: (rs[r].start_ns as f64) + tolerance_ms * 1e6 < deadline as f64,
        });
    }
    out
}

/// The one wait a chain's evidence names (titles and remedies alike): the
/// lower median of its stated waits — always a wait that was stated (an
/// even count takes the lower of the middle two, never their mean).
pub fn stated_wait(waits: &[RetryWait]) -> Option<i64> {
    let mut ms: Vec<i64> = waits.iter().map(|w| w.stated_ms).collect();
    ms.sort_unstable();
    ms.get(ms.len().checked_sub(1)? / 2).copied()
}

/// A chain whose retries mostly came before the wait they were told.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoredRetryAfter {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub session_id: Option<String>,
    /// UTC day the turn began.
    pub day: i32,
    pub rounds: usize,
    pub failures: usize,
    /// The most common class of the failures that stated a wait.
    pub class: ErrorClass,
    pub waits: Vec<RetryWait>,
    /// The wait its evidence names ([`stated_wait`], ms).
    pub stated_ms: i64,
    pub recovered: bool,
    pub first_start_ns: i64,
    pub last_end_ns: i64,
    pub turn_duration_s: f64,
    pub turn_spans: usize,
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
}

impl IgnoredRetryAfter {
    pub fn early(&self) -> usize {
        self.waits.iter().filter(|w| w.early).count()
    }
}

/// Every chain among settled turns whose retries ignored the stated wait,
/// most early retries first.
pub fn ignored_retry_after(
    tc: &TurnCalls,
    now_ns: i64,
    settle_seconds: i64,
    p: &RetryAfterParams,
) -> Vec<IgnoredRetryAfter> {
    let mut out = Vec::new();
    for ((turn_id, tool), group) in by_turn_and_tool(&tc.calls) {
        let Some(turn) = tc.turns.get(turn_id) else {
            continue;
        };
        if !turn.settled(now_ns, settle_seconds)
            || !group.iter().any(|c| c.retry_after_ms.is_some())
        {
            continue;
        }
        let attempts: Vec<Attempt<'_>> = group.iter().map(|c| c.attempt()).collect();
        let rs = rounds(&attempts);
        for chain in chains(&rs) {
            let ws = waits(&attempts, &rs, chain.rounds.clone(), p.tolerance_ms);
            if !p.ignored(&ws) {
                continue;
            }
            let crs = &rs[chain.rounds.clone()];
            let members = &group[crs[0].calls.start..crs[crs.len() - 1].calls.end];
            let mut classes: BTreeMap<ErrorClass, u64> = BTreeMap::new();
            for c in members
                .iter()
                .filter(|c| c.failed() && c.retry_after_ms.is_some())
            {
                *classes.entry(c.class).or_insert(0) += 1;
            }
            let h = tc.healthy.get(tool).copied().unwrap_or_default();
            out.push(IgnoredRetryAfter {
                tool: tool.to_string(),
                service: members[0].service.clone(),
                turn: turn_id.to_string(),
                trace_id: members[0].trace_id.clone(),
                session_id: members
                    .iter()
                    .find_map(|c| c.session_id.clone())
                    .or_else(|| turn.session_id.clone()),
                day: day_of_ns(turn.began_ns),
                rounds: crs.len(),
                failures: members.iter().filter(|c| c.failed()).count(),
                class: super::dominant_class(classes),
                stated_ms: stated_wait(&ws).unwrap_or(0),
                waits: ws,
                recovered: chain.recovered,
                first_start_ns: crs[0].start_ns,
                last_end_ns: crs[crs.len() - 1].end_ns,
                turn_duration_s: turn.duration_ns() as f64 / 1e9,
                turn_spans: turn.spans,
                healthy_turn_duration_s: h.duration_s,
                healthy_turn_spans: h.spans,
            });
        }
    }
    out.sort_by(|a, b| {
        b.early()
            .cmp(&a.early())
            .then_with(|| a.turn.cmp(&b.turn))
            .then_with(|| a.first_start_ns.cmp(&b.first_start_ns))
    });
    out
}

/// A wait in words: `250 ms`, `1.5 s`, `30 s`, `2 min`, `90 min`, `2.5 h`
/// (seconds below 2 min, minutes below 2 h).
pub fn words(ms: i64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    };
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{} s", trim(ms as f64 / 1000.0))
    } else if ms < 7_200_000 {
        format!("{} min", trim(ms as f64 / 60_000.0))
    } else {
        format!("{} h", trim(ms as f64 / 3_600_000.0))
    }
}
