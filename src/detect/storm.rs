//! Retry storms (detection.md §4.2): a turn that calls the same tool over
//! and over. Overlapping calls are one round (parallel fan-out, not a
//! retry); the gaps between rounds give the rhythm; the outcome and the
//! seconds spent on attempts that could not help are the evidence.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::calls::{by_turn_and_tool, Call, TurnCalls};
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
    /// UTC day of the first call.
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
    pub first_start_ns: i64,
    pub last_end_ns: i64,
    pub turn_duration_s: f64,
    pub turn_spans: usize,
    /// The tool's median healthy turn (no failed call of the tool), for comparison.
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
}

/// Calls whose time ranges overlap, taken as one attempt.
#[derive(Debug, Clone)]
struct Round<'a> {
    start: i64,
    end: i64,
    calls: Vec<&'a Call>,
}

impl Round<'_> {
    fn failed(&self) -> bool {
        self.calls.iter().any(|c| c.failed())
    }

    /// The class that decided the round (its first failed call's).
    fn class(&self) -> Option<ErrorClass> {
        self.calls.iter().find(|c| c.failed()).map(|c| c.class)
    }
}

fn rounds<'a>(calls: &[&'a Call]) -> Vec<Round<'a>> {
    let mut out: Vec<Round<'a>> = Vec::new();
    for c in calls {
        match out.last_mut() {
            Some(r) if c.start_ns < r.end => {
                r.end = r.end.max(c.end_ns);
                r.calls.push(c);
            }
            _ => out.push(Round {
                start: c.start_ns,
                end: c.end_ns,
                calls: vec![c],
            }),
        }
    }
    out
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

/// Every storm among settled turns, worst (most wasted seconds) first.
pub fn retry_storms(tc: &TurnCalls, now_ns: i64, p: &StormParams) -> Vec<Storm> {
    let (turns, healthy) = (&tc.turns, &tc.healthy);
    let groups = by_turn_and_tool(&tc.calls);
    let mut out = Vec::new();
    for ((turn_id, tool), group) in groups {
        let Some(turn) = turns.get(turn_id) else {
            continue;
        };
        if !turn.settled(now_ns, p.settle_seconds) {
            continue;
        }
        let rs = rounds(&group);
        let failures = group.iter().filter(|c| c.failed()).count();
        if rs.len() < p.storm_min_calls || failures < p.min_failures {
            continue;
        }
        let gaps_ms: Vec<f64> = rs
            .windows(2)
            .map(|w| (w[1].start - w[0].end).max(0) as f64 / 1e6)
            .collect();
        let rhythm = rhythm(&gaps_ms, p);
        let outcome = if rs.last().is_some_and(|r| !r.failed()) {
            Outcome::Recovered
        } else {
            Outcome::GaveUp
        };
        // Backoff that grows and ends ok is polling or a healthy retry
        // policy (§4.2); retries of nothing but deterministic errors are
        // §4.3's wasted retries, not a storm.
        let deterministic_only = group
            .iter()
            .filter(|c| c.failed())
            .all(|c| c.class.retryable() == Some(false));
        if (rhythm == Rhythm::Exponential && outcome == Outcome::Recovered) || deterministic_only {
            continue;
        }
        let mut classes = BTreeMap::new();
        for c in group.iter().filter(|c| c.failed()) {
            *classes.entry(c.class).or_insert(0) += 1;
        }
        let h = healthy.get(tool).copied().unwrap_or_default();
        out.push(Storm {
            tool: tool.to_string(),
            service: group[0].service.clone(),
            turn: turn_id.to_string(),
            trace_id: group[0].trace_id.clone(),
            session_id: group.iter().find_map(|c| c.session_id.clone()),
            day: day_of_ns(group[0].start_ns),
            calls: group.len(),
            rounds: rs.len(),
            failures,
            rhythm,
            outcome,
            median_gap_ms: median(gaps_ms.clone()).unwrap_or(0.0),
            wasted_seconds: wasted_seconds(&rs, outcome),
            gaps_ms,
            classes,
            first_start_ns: rs[0].start,
            last_end_ns: rs.last().map_or(rs[0].end, |r| r.end),
            turn_duration_s: turn.duration_ns() as f64 / 1e9,
            turn_spans: turn.spans,
            healthy_turn_duration_s: h.duration_s,
            healthy_turn_spans: h.spans,
        });
    }
    out.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then_with(|| a.turn.cmp(&b.turn))
    });
    out
}

/// Seconds (durations and the gaps before them) of attempts that could not
/// help: after the first failure, every attempt when the loop gave up; when
/// it recovered, only retries of a deterministic error.
fn wasted_seconds(rs: &[Round<'_>], outcome: Outcome) -> f64 {
    let Some(first) = rs.iter().position(Round::failed) else {
        return 0.0;
    };
    let mut ns = 0i64;
    for j in first + 1..rs.len() {
        let prev_deterministic = rs[j - 1]
            .class()
            .is_some_and(|c| c.retryable() == Some(false));
        if outcome == Outcome::GaveUp || prev_deterministic {
            ns += (rs[j].start - rs[j - 1].end).max(0) + (rs[j].end - rs[j].start);
        }
    }
    ns as f64 / 1e9
}
