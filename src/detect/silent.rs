//! Silent tools (docs/detection.md §4.8): failures that make no noise.
//! Over the `tool_daily` rollup and the agent's turns per service and day:
//!
//! - `tool_silent`: a tool whose calls on a day fall far below what its
//!   share of its service's turns on earlier days predicts — a test on
//!   counts (Poisson), with a volume floor, so a quiet tool does not page
//!   and a day the agent itself was quiet (a weekend) is not one;
//! - `no_success`: a tool still called, with no success for
//!   `no_success_days`, named with its last success.
//!
//! Pure: the rows, the turns and `now` come in, findings go out.

use std::collections::BTreeMap;

use super::daily::DailyRow;
use crate::model::{ErrorClass, NANOS_PER_DAY};

/// `[detect.silent]`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SilentParams {
    /// Unflagged days with turns the baseline takes …
    pub baseline_days: usize,
    /// … looking back at most this far …
    pub reach_back_days: i32,
    /// … and judging no day with fewer.
    pub min_baseline_days: usize,
    /// The day's expected calls must reach this (a quiet tool never pages).
    pub min_expected_calls: f64,
    /// Flag when the calls are at most this share of the expected …
    pub max_ratio: f64,
    /// … and that few is this unlikely (Poisson, lower tail).
    pub p_value: f64,
    /// `no_success`: no success for this many days …
    pub no_success_days: i64,
    /// … over at least this many calls.
    pub no_success_min_calls: u64,
}

impl Default for SilentParams {
    fn default() -> Self {
        SilentParams {
            baseline_days: 7,
            reach_back_days: 28,
            min_baseline_days: 3,
            min_expected_calls: 20.0,
            max_ratio: 0.2,
            p_value: 0.001,
            no_success_days: 3,
            no_success_min_calls: 10,
        }
    }
}

impl SilentParams {
    /// The first key out of range, and why (`[detect.silent]`).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let p = self;
        if !(1..=90).contains(&p.baseline_days) {
            return Err((
                "detect.silent.baseline_days",
                format!("must be from 1 to 90, got {}", p.baseline_days),
            ));
        }
        if p.reach_back_days < p.baseline_days as i32 || p.reach_back_days > 366 {
            return Err((
                "detect.silent.reach_back_days",
                format!(
                    "must be from baseline_days ({}) to 366, got {}",
                    p.baseline_days, p.reach_back_days
                ),
            ));
        }
        if p.min_baseline_days < 1 || p.min_baseline_days > p.baseline_days {
            return Err((
                "detect.silent.min_baseline_days",
                format!(
                    "must be from 1 to baseline_days ({}), got {}",
                    p.baseline_days, p.min_baseline_days
                ),
            ));
        }
        if p.min_expected_calls.is_nan() || p.min_expected_calls < 1.0 {
            return Err((
                "detect.silent.min_expected_calls",
                format!("must be at least 1, got {}", p.min_expected_calls),
            ));
        }
        if !(0.0..1.0).contains(&p.max_ratio) {
            return Err((
                "detect.silent.max_ratio",
                format!("must be a share from 0 to below 1, got {}", p.max_ratio),
            ));
        }
        if p.p_value.is_nan() || p.p_value <= 0.0 || p.p_value >= 0.5 {
            return Err((
                "detect.silent.p_value",
                format!("must be above 0 and below 0.5, got {}", p.p_value),
            ));
        }
        if !(1..=366).contains(&p.no_success_days) {
            return Err((
                "detect.silent.no_success_days",
                format!("must be from 1 to 366, got {}", p.no_success_days),
            ));
        }
        if p.no_success_min_calls < 1 {
            return Err((
                "detect.silent.no_success_min_calls",
                "must be at least 1, got 0".to_string(),
            ));
        }
        Ok(())
    }
}

/// Turns begun per (service, day): the agent's volume.
pub type Turns = BTreeMap<(String, i32), u64>;

/// One day a tool went (nearly) silent.
#[derive(Debug, Clone, PartialEq)]
pub struct Silent {
    pub tool: String,
    pub service: String,
    pub day: i32,
    /// Calls that day, and how many its share of the turns predicts.
    pub calls: u64,
    pub expected: f64,
    /// The service's turns that day, and per baseline day on average.
    pub turns: u64,
    pub baseline_turns: f64,
    /// The end of its last successful call before the day ended, if any.
    pub last_ok_ns: Option<i64>,
    /// P(X ≤ calls) for X ~ Poisson(expected).
    pub p: f64,
}

/// One day a tool was called and had not succeeded for too long.
#[derive(Debug, Clone, PartialEq)]
pub struct NoSuccess {
    pub tool: String,
    pub service: String,
    pub day: i32,
    /// The end of its last successful call; `None`: none stored, `since_ns`
    /// is then the start of its first day with calls.
    pub last_ok_ns: Option<i64>,
    pub since_ns: i64,
    /// Failed calls on the days after the last success's day, through
    /// this one, and the day's own calls.
    pub calls_since: u64,
    pub calls: u64,
    pub errors: u64,
    /// How long without a success, to the day's end (or `now`).
    pub days: f64,
    /// The day's most frequent failure class.
    pub class: ErrorClass,
}

/// What a `tool_silent` or `no_success` finding names.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Silence {
    pub service: String,
    /// The end of the tool's last successful call, if one is stored.
    pub last_ok_ns: Option<i64>,
    /// `no_success`: since when (the last success, else the start of the
    /// first day with calls), how long, and the calls since.
    #[serde(default)]
    pub since_ns: i64,
    #[serde(default)]
    pub days: f64,
    #[serde(default)]
    pub calls_since: u64,
    /// `tool_silent`: the calls the tool's share of the turns predicted,
    /// the service's turns that day and per baseline day.
    #[serde(default)]
    pub expected: f64,
    #[serde(default)]
    pub turns: u64,
    #[serde(default)]
    pub baseline_turns: f64,
}

/// One day of a silent tool's evidence.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DayCount {
    pub day: String,
    pub calls: u64,
    pub successes: u64,
    /// The service's turns begun that day; null where the sweep did not
    /// read the day's turns (before its window).
    pub turns: Option<u64>,
}

/// `P(X ≤ k)` for `X ~ Poisson(lambda)`, summed in log space.
pub fn poisson_cdf(k: u64, lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    let mut term = -lambda; // log P(X = 0)
    let mut sum = term.exp();
    for i in 1..=k {
        term += lambda.ln() - (i as f64).ln();
        sum += term.exp();
        if sum >= 1.0 {
            return 1.0;
        }
    }
    sum
}

/// Rows grouped by (tool, service), each in day order (`rows` as
/// [`super::daily_rows`] sorts them).
fn by_pair(rows: &[DailyRow]) -> Vec<&[DailyRow]> {
    rows.chunk_by(|a, b| a.tool == b.tool && a.service == b.service)
        .collect()
}

/// `tool_silent` findings on the complete days `since..today`.
pub fn silent_tools(
    rows: &[DailyRow],
    turns: &Turns,
    since: i32,
    today: i32,
    p: &SilentParams,
) -> Vec<Silent> {
    let mut out = Vec::new();
    for pair in by_pair(rows) {
        let (tool, service) = (&pair[0].tool, &pair[0].service);
        let calls: BTreeMap<i32, &DailyRow> = pair.iter().map(|r| (r.day, r)).collect();
        let first = pair[0].day;
        let turns_on = |d: i32| turns.get(&(service.clone(), d)).copied().unwrap_or(0);
        let mut flagged: Vec<i32> = Vec::new();
        // Complete days only: today's rollup may lag its turns, and the
        // finding is the morning-after message.
        for day in since.max(first + 1)..today {
            let turns_d = turns_on(day);
            if turns_d == 0 {
                continue;
            }
            let base: Vec<i32> = (1..=p.reach_back_days)
                .map(|back| day - back)
                .filter(|&b| b >= first && turns_on(b) > 0 && !flagged.contains(&b))
                .take(p.baseline_days)
                .collect();
            if base.len() < p.min_baseline_days.max(1) {
                continue;
            }
            let base_calls: u64 = base
                .iter()
                .map(|b| calls.get(b).map_or(0, |r| r.calls))
                .sum();
            let base_turns: u64 = base.iter().map(|&b| turns_on(b)).sum();
            if base_calls == 0 || base_turns == 0 {
                continue;
            }
            let expected = base_calls as f64 / base_turns as f64 * turns_d as f64;
            let observed = calls.get(&day).map_or(0, |r| r.calls);
            if expected < p.min_expected_calls || observed as f64 > p.max_ratio * expected {
                continue;
            }
            let prob = poisson_cdf(observed, expected);
            if prob >= p.p_value {
                continue;
            }
            flagged.push(day);
            out.push(Silent {
                tool: tool.clone(),
                service: service.clone(),
                day,
                calls: observed,
                expected,
                turns: turns_d,
                baseline_turns: base_turns as f64 / base.len() as f64,
                last_ok_ns: pair
                    .iter()
                    .filter(|r| r.day <= day)
                    .filter_map(|r| r.last_ok_ns)
                    .max(),
                p: prob,
            });
        }
    }
    out
}

/// `no_success` findings on the days `since..=today`, as of `now_ns`.
pub fn no_success(rows: &[DailyRow], since: i32, now_ns: i64, p: &SilentParams) -> Vec<NoSuccess> {
    let mut out = Vec::new();
    let today = crate::model::day_of_ns(now_ns);
    for pair in by_pair(rows) {
        let first = pair[0].day;
        for (i, r) in pair.iter().enumerate() {
            // A day of interrupts or cancellations only failed nothing.
            if r.day < since || r.day > today || r.errors == 0 || r.successes > 0 {
                continue;
            }
            let upto = &pair[..=i];
            let last_ok_ns = upto.iter().filter_map(|r| r.last_ok_ns).max();
            let since_ns = last_ok_ns.unwrap_or(i64::from(first) * NANOS_PER_DAY);
            let ok_day = last_ok_ns.map(crate::model::day_of_ns);
            let after: Vec<&DailyRow> = upto
                .iter()
                .filter(|r| ok_day.is_none_or(|d| r.day > d))
                .collect();
            // Failed calls, on at least two days: a tool called once a
            // week is not "days without a success".
            let calls_since: u64 = after.iter().map(|r| r.errors).sum();
            let failing_days = after.iter().filter(|r| r.errors > 0).count();
            let end = (i64::from(r.day) + 1)
                .saturating_mul(NANOS_PER_DAY)
                .min(now_ns);
            let days = (end - since_ns) as f64 / NANOS_PER_DAY as f64;
            if end - since_ns < p.no_success_days.saturating_mul(NANOS_PER_DAY)
                || calls_since < p.no_success_min_calls
                || failing_days < 2
            {
                continue;
            }
            out.push(NoSuccess {
                tool: r.tool.clone(),
                service: r.service.clone(),
                day: r.day,
                last_ok_ns,
                since_ns,
                calls_since,
                calls: r.calls,
                errors: r.errors,
                days,
                class: super::dominant_class(r.classes.iter().map(|(c, n)| (*c, *n))),
            });
        }
    }
    out
}
