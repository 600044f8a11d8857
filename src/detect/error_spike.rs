//! Error-rate spike (detection.md §4.1): a tool's error rate on a complete
//! UTC day against its own trailing week, leaving out days already flagged,
//! judged on the lower bound of a one-sided Wilson interval so a handful of
//! calls cannot page anyone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::daily::DailyRow;
use super::median;
use super::wilson;
use crate::model::ErrorClass;

/// `[detect.error_spike]` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpikeParams {
    /// Flag when the lower bound is strictly above this × the baseline.
    pub multiplier: f64,
    /// The baseline is never below this rate.
    pub baseline_floor: f64,
    /// Baseline of a tool with fewer than `min_baseline_days` days of history.
    pub warmup_floor: f64,
    /// One-sided confidence of the Wilson lower bound.
    pub confidence: f64,
    pub min_calls: u64,
    pub min_errors: u64,
    /// The trailing window, in days.
    pub baseline_days: i32,
    /// How far back to look for unflagged days when the window has too few.
    pub reach_back_days: i32,
    /// Days with calls a baseline needs.
    pub min_baseline_days: usize,
    /// Latency spike (§4.6): the day's p95 above this × the baseline days' p95.
    pub latency_multiplier: f64,
}

impl Default for SpikeParams {
    fn default() -> Self {
        SpikeParams {
            multiplier: 3.0,
            baseline_floor: 0.01,
            warmup_floor: 0.05,
            confidence: 0.95,
            min_calls: 10,
            min_errors: 3,
            baseline_days: 7,
            reach_back_days: 28,
            min_baseline_days: 3,
            latency_multiplier: 3.0,
        }
    }
}

/// Which days a baseline was pooled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Unflagged days of the trailing window.
    Trailing,
    /// Too few of those: the most recent unflagged days within `reach_back_days`.
    ReachBack,
    /// Still too few: every recent day, flagged ones too (a tool whose
    /// normal rate is high must not be flagged forever).
    AllRecent,
    /// Fewer than `min_baseline_days` days of history at all.
    Warmup,
}

/// The judgement of one tool on one day, with its context.
#[derive(Debug, Clone, PartialEq)]
pub struct DayVerdict {
    pub tool: String,
    pub service: String,
    pub day: i32,
    pub calls: u64,
    pub errors: u64,
    pub rate: f64,
    /// The pooled trailing rate, floored.
    pub baseline: f64,
    pub basis: Basis,
    /// Days pooled into the baseline.
    pub baseline_days: Vec<i32>,
    pub lower_bound: f64,
    /// `multiplier × baseline`: what the lower bound had to beat.
    pub threshold: f64,
    pub flagged: bool,
    /// Calls against the median daily calls of the baseline days.
    pub volume_ratio: Option<f64>,
    /// p50 / p95 against the medians of the baseline days.
    pub p50_ratio: Option<f64>,
    pub p95_ratio: Option<f64>,
    pub p95_ns: f64,
    /// Median p95 of the baseline days.
    pub baseline_p95_ns: Option<f64>,
    /// A latency spike (§4.6): p95 above `latency_multiplier` × the
    /// baseline days', with `min_calls`, on a day whose errors were not flagged.
    pub latency_flagged: bool,
    /// The day's failed calls by class.
    pub classes: BTreeMap<ErrorClass, u64>,
}

/// The baseline of `day` from the earlier days of one series.
pub fn baseline(
    history: &[&DailyRow],
    day: i32,
    flagged: &BTreeSet<i32>,
    p: &SpikeParams,
) -> (f64, Basis, Vec<i32>) {
    let earlier: Vec<&DailyRow> = history
        .iter()
        .copied()
        .filter(|r| r.day < day && r.calls > 0)
        .collect();
    if earlier.len() < p.min_baseline_days {
        return (p.warmup_floor, Basis::Warmup, Vec::new());
    }
    let window: Vec<&DailyRow> = earlier
        .iter()
        .copied()
        .filter(|r| r.day >= day - p.baseline_days)
        .collect();
    let unflagged: Vec<&DailyRow> = window
        .iter()
        .copied()
        .filter(|r| !flagged.contains(&r.day))
        .collect();
    let (pool, basis) = if unflagged.len() >= p.min_baseline_days {
        (unflagged, Basis::Trailing)
    } else {
        let reach: Vec<&DailyRow> = earlier
            .iter()
            .rev()
            .copied()
            .filter(|r| r.day >= day - p.reach_back_days && !flagged.contains(&r.day))
            .take(p.baseline_days.max(1) as usize)
            .collect();
        if reach.len() >= p.min_baseline_days {
            (reach, Basis::ReachBack)
        } else if !window.is_empty() {
            (window, Basis::AllRecent)
        } else {
            let recent = earlier
                .iter()
                .rev()
                .copied()
                .take(p.baseline_days.max(1) as usize)
                .collect();
            (recent, Basis::AllRecent)
        }
    };
    let calls: u64 = pool.iter().map(|r| r.calls).sum();
    let errors: u64 = pool.iter().map(|r| r.errors).sum();
    let rate = if calls == 0 {
        0.0
    } else {
        errors as f64 / calls as f64
    };
    let mut days: Vec<i32> = pool.iter().map(|r| r.day).collect();
    days.sort_unstable();
    (rate.max(p.baseline_floor), basis, days)
}

/// Whether a day with these numbers is a spike against `baseline`.
pub fn is_spike(errors: u64, calls: u64, baseline: f64, p: &SpikeParams) -> (bool, f64) {
    let lower = wilson::lower_bound(errors, calls, wilson::z_one_sided(p.confidence));
    let flagged = calls >= p.min_calls && errors >= p.min_errors && lower > p.multiplier * baseline;
    (flagged, lower)
}

fn ratio(value: f64, base: Option<f64>) -> Option<f64> {
    base.filter(|b| *b > 0.0).map(|b| value / b)
}

/// Judge every complete day (before `today`) of every tool in `rows`, in
/// day order per tool, so a day flagged early is left out of later
/// baselines. `flagged_before` holds (tool, service, day) verdicts already
/// kept from earlier sweeps for days not in `rows`.
pub fn judge(
    rows: &[DailyRow],
    today: i32,
    flagged_before: &BTreeSet<(String, String, i32)>,
    p: &SpikeParams,
) -> Vec<DayVerdict> {
    let mut series: BTreeMap<(&str, &str), Vec<&DailyRow>> = BTreeMap::new();
    for r in rows {
        series
            .entry((r.tool.as_str(), r.service.as_str()))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((tool, service), mut days) in series {
        days.sort_by_key(|r| r.day);
        let mut flagged: BTreeSet<i32> = flagged_before
            .iter()
            .filter(|(t, s, _)| t == tool && s == service)
            .map(|(_, _, d)| *d)
            .collect();
        for r in days.iter().filter(|r| r.day < today && r.calls > 0) {
            let (base, basis, pool_days) = baseline(&days, r.day, &flagged, p);
            let (is_flagged, lower) = is_spike(r.errors, r.calls, base, p);
            if is_flagged {
                flagged.insert(r.day);
            }
            let pool: Vec<&DailyRow> = days
                .iter()
                .copied()
                .filter(|d| pool_days.contains(&d.day))
                .collect();
            let med = |f: fn(&DailyRow) -> f64| median(pool.iter().map(|d| f(d)).collect());
            let baseline_p95 = med(|d| d.p95_ns);
            let latency_flagged = !is_flagged
                && basis != Basis::Warmup
                && r.calls >= p.min_calls
                && baseline_p95.is_some_and(|b| b > 0.0 && r.p95_ns > p.latency_multiplier * b);
            out.push(DayVerdict {
                tool: tool.to_string(),
                service: service.to_string(),
                day: r.day,
                calls: r.calls,
                errors: r.errors,
                rate: r.rate(),
                baseline: base,
                basis,
                baseline_days: pool_days,
                lower_bound: lower,
                threshold: p.multiplier * base,
                flagged: is_flagged,
                volume_ratio: ratio(r.calls as f64, med(|d| d.calls as f64)),
                p50_ratio: ratio(r.p50_ns, med(|d| d.p50_ns)),
                p95_ratio: ratio(r.p95_ns, baseline_p95),
                p95_ns: r.p95_ns,
                baseline_p95_ns: baseline_p95,
                latency_flagged,
                classes: r.classes.clone(),
            });
        }
    }
    out
}
