//! Retry storms (detection.md §4.2): a retry chain (see [`super::chains`])
//! of `storm_min_calls` rounds or more — a turn that kept knocking on a
//! failing tool. The gaps between the chain's rounds give the rhythm; the
//! outcome, the seconds spent on attempts that could not help, and how
//! often a retry repeated the previous arguments are the evidence.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::calls::{by_turn_and_tool, TurnCalls};
use super::chains::{chains, gaps_ms, rounds, Attempt, Round};
use super::driver::{drive, CostParams, ModelCall};
use super::median;
use crate::model::{day_of_ns, ErrorClass};

/// `[detect.retry_storm]` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StormParams {
    /// Rounds of one tool in one turn that make a storm…
    pub storm_min_calls: usize,
    /// … with at least this many failed calls.
    pub min_failures: usize,
    /// Median gap under this: `no_backoff`.
    pub no_backoff_ms: f64,
    /// Median ratio of successive gaps at or above this: `exponential`.
    pub exponential_ratio: f64,
    /// Gaps whose spread is under this fraction of their mean: `fixed`.
    pub fixed_variation: f64,
    /// A trace is judged once none of its spans ended for this long.
    pub settle_seconds: i64,
}

impl Default for StormParams {
    fn default() -> Self {
        StormParams {
            storm_min_calls: 5,
            min_failures: 2,
            no_backoff_ms: 100.0,
            exponential_ratio: 1.5,
            fixed_variation: 0.3,
            settle_seconds: 90,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rhythm {
    NoBackoff,
    Fixed,
    Exponential,
    Irregular,
}

impl Rhythm {
    pub fn as_str(self) -> &'static str {
        match self {
            Rhythm::NoBackoff => "no_backoff",
            Rhythm::Fixed => "fixed",
            Rhythm::Exponential => "exponential",
            Rhythm::Irregular => "irregular",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Recovered,
    GaveUp,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Recovered => "recovered",
            Outcome::GaveUp => "gave_up",
        }
    }
}

/// One storm: a turn that kept calling one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Storm {
    pub tool: String,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub session_id: Option<String>,
    /// UTC day the turn began.
    pub day: i32,
    pub calls: usize,
    pub rounds: usize,
    pub failures: usize,
    pub rhythm: Rhythm,
    pub outcome: Outcome,
    pub median_gap_ms: f64,
    pub gaps_ms: Vec<f64>,
    pub wasted_seconds: f64,
    /// Failed calls by class.
    pub classes: BTreeMap<ErrorClass, usize>,
    /// The share of retries (rounds after the first) whose arguments are
    /// those of the round before; `None` when arguments were not recorded.
    pub same_args: Option<f64>,
    pub first_start_ns: i64,
    pub last_end_ns: i64,
    pub turn_duration_s: f64,
    pub turn_spans: usize,
    /// The tool's median healthy turn (no failed call of the tool), for comparison.
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
    /// Its retries after a failure that stated a wait (§4.9): the wait,
    /// the gap taken, whether it came early.
    pub waits: Vec<super::retry_after::RetryWait>,
    /// Who made the retries (§4.2, "Driver"), and the model round trips
    /// between them.
    pub drive: super::driver::Drive,
}

/// The rhythm of a sequence of gaps (milliseconds).
pub fn rhythm(gaps_ms: &[f64], p: &StormParams) -> Rhythm {
    let Some(med) = median(gaps_ms.to_vec()) else {
        return Rhythm::Irregular;
    };
    if med < p.no_backoff_ms {
        return Rhythm::NoBackoff;
    }
    let ratios: Vec<f64> = gaps_ms
        .windows(2)
        .filter(|w| w[0] > 0.0)
        .map(|w| w[1] / w[0])
        .collect();
    if median(ratios).is_some_and(|r| r >= p.exponential_ratio) {
        return Rhythm::Exponential;
    }
    let mean = gaps_ms.iter().sum::<f64>() / gaps_ms.len() as f64;
    let spread = gaps_ms.iter().cloned().fold(f64::MIN, f64::max)
        - gaps_ms.iter().cloned().fold(f64::MAX, f64::min);
    if mean > 0.0 && spread / mean < p.fixed_variation {
        Rhythm::Fixed
    } else {
        Rhythm::Irregular
    }
}

/// Every storm among settled turns, worst (most wasted seconds) first;
/// model calls costed from their own spans only.
pub fn retry_storms(tc: &TurnCalls, now_ns: i64, p: &StormParams) -> Vec<Storm> {
    let tolerance = super::retry_after::RetryAfterParams::default().tolerance_ms;
    retry_storms_with(tc, now_ns, p, tolerance, &CostParams::default())
}

/// [`retry_storms`], a retry counted early when it came more than
/// `tolerance_ms` before its stated wait was over (`[detect.retry_after]`), model
/// calls priced with `cost` where their spans record none (`[cost]`).
pub fn retry_storms_with(
    tc: &TurnCalls,
    now_ns: i64,
    p: &StormParams,
    tolerance_ms: f64,
    cost: &CostParams,
) -> Vec<Storm> {
    let (turns, healthy) = (&tc.turns, &tc.healthy);
    let mut out = Vec::new();
    for ((turn_id, tool), group) in by_turn_and_tool(&tc.calls) {
        let Some(turn) = turns.get(turn_id) else {
            continue;
        };
        if !turn.settled(now_ns, p.settle_seconds) {
            continue;
        }
        let attempts: Vec<Attempt<'_>> = group.iter().map(|c| c.attempt()).collect();
        let rs = rounds(&attempts);
        for chain in chains(&rs) {
            if chain.len() < p.storm_min_calls {
                continue;
            }
            let crs = &rs[chain.rounds.clone()];
            let first_call = crs[0].calls.start;
            let last_call = crs[crs.len() - 1].calls.end;
            let members = &group[first_call..last_call];
            let failures = members.iter().filter(|c| c.failed()).count();
            if failures < p.min_failures {
                continue;
            }
            let gaps_ms = gaps_ms(crs);
            let rhythm = rhythm(&gaps_ms, p);
            let outcome = if chain.recovered {
                Outcome::Recovered
            } else {
                Outcome::GaveUp
            };
            // Backoff that grows and ends ok is a healthy retry policy
            // (§4.2); retries of nothing but deterministic errors are §4.3's
            // wasted retries, not a storm.
            let deterministic_only = members
                .iter()
                .filter(|c| c.failed())
                .all(|c| c.class.retryable() == Some(false));
            // An agent trying one different thing after another (a coding
            // agent's commands failing with `exit 1`) is working, not
            // knocking: a chain that mostly varies its arguments is a storm
            // only when its failures are mostly of the kind waiting fixes —
            // a dead dependency.
            let same_share = same_args(&attempts, crs);
            let retryable = members
                .iter()
                .filter(|c| c.class.retryable() == Some(true))
                .count();
            let varied = same_share.is_some_and(|s| s < 0.5);
            // A retry that waited out every wait the failure before it
            // stated (Retry-After, §4.9) and ended ok is the server's own
            // pacing, as healthy as growing backoff.
            let waits =
                super::retry_after::waits(&attempts, &rs, chain.rounds.clone(), tolerance_ms);
            let honoured =
                !waits.is_empty() && waits.len() + 1 == crs.len() && waits.iter().all(|w| !w.early);
            if ((rhythm == Rhythm::Exponential || honoured) && outcome == Outcome::Recovered)
                || deterministic_only
                || (varied && retryable * 2 < failures)
            {
                continue;
            }
            let mut classes = BTreeMap::new();
            for c in members.iter().filter(|c| c.failed()) {
                *classes.entry(c.class).or_insert(0) += 1;
            }
            let h = healthy.get(tool).copied().unwrap_or_default();
            out.push(Storm {
                tool: tool.to_string(),
                service: members[0].service.clone(),
                turn: turn_id.to_string(),
                trace_id: members[0].trace_id.clone(),
                session_id: members
                    .iter()
                    .find_map(|c| c.session_id.clone())
                    .or_else(|| turn.session_id.clone()),
                day: day_of_ns(turn.began_ns),
                calls: members.len(),
                rounds: crs.len(),
                failures,
                rhythm,
                outcome,
                median_gap_ms: median(gaps_ms.clone()).unwrap_or(0.0),
                wasted_seconds: wasted_seconds(&attempts, crs, outcome),
                gaps_ms,
                classes,
                same_args: same_share,
                first_start_ns: crs[0].start_ns,
                last_end_ns: crs[crs.len() - 1].end_ns,
                turn_duration_s: turn.duration_ns() as f64 / 1e9,
                turn_spans: turn.spans,
                healthy_turn_duration_s: h.duration_s,
                healthy_turn_spans: h.spans,
                waits,
                drive: drive(crs, models_of(tc, turn_id), cost),
            });
        }
    }
    out.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then_with(|| a.turn.cmp(&b.turn))
            .then_with(|| a.first_start_ns.cmp(&b.first_start_ns))
    });
    out
}

/// A turn's model calls (none when it has none).
pub(super) fn models_of<'a>(tc: &'a TurnCalls, turn: &str) -> &'a [ModelCall] {
    tc.models.get(turn).map_or(&[], Vec::as_slice)
}

/// The share of a chain's retries whose (first call's) arguments are those
/// of the round before; `None` unless every round's arguments are known.
fn same_args(attempts: &[Attempt<'_>], crs: &[Round]) -> Option<f64> {
    let args: Option<Vec<&str>> = crs.iter().map(|r| attempts[r.calls.start].args).collect();
    let args = args?;
    if args.len() < 2 {
        return None;
    }
    let same = args.windows(2).filter(|w| w[0] == w[1]).count();
    Some(same as f64 / (args.len() - 1) as f64)
}

/// Seconds (durations and the gaps before them) of retries that could not
/// help: every retry of a chain that gave up; in a chain that recovered,
/// only retries that repeated a deterministic error with the same arguments.
fn wasted_seconds(attempts: &[Attempt<'_>], crs: &[Round], outcome: Outcome) -> f64 {
    let mut ns = 0i64;
    for j in 1..crs.len() {
        let prev = &crs[j - 1];
        let deterministic = prev.class.and_then(ErrorClass::retryable) == Some(false);
        let same = super::chains::same_args(
            attempts[crs[j].calls.start].args,
            attempts[prev.calls.start].args,
        );
        // The success that ended a recovered chain is never waste.
        let closing = outcome == Outcome::Recovered && j + 1 == crs.len();
        if outcome == Outcome::GaveUp || (deterministic && same && !closing) {
            ns += (crs[j].start_ns - prev.end_ns).max(0) + (crs[j].end_ns - crs[j].start_ns);
        }
    }
    ns as f64 / 1e9
}
