//! What each retry achieved, per attempt and per tool and day: the trace
//! view's colours and the tool page's recovery rate (a retry policy that
//! got too cautious shows as a falling share of blips rescued).
//!
//! Within one turn's calls of one tool, in start order, an attempt repeats
//! the one before when their arguments are the same (or unknown); a call
//! with other arguments is a new request. A repeat after a failure is
//! `rescued` when the loop ends well and the failure was retryable, else
//! `wasted` (a deterministic error, or a feed that never answered); a
//! repeat after a success is `after_success` (§4.4).

use serde::{Deserialize, Serialize};

use super::calls::{by_turn_and_tool, Call};
use crate::model::{day_of_ns, ErrorClass};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A first attempt (or a new request) that succeeded.
    Ok,
    /// A first attempt (or a new request) that failed.
    Failed,
    Rescued,
    Wasted,
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

/// Verdicts of one turn's attempts of one tool, in start order:
/// (class, arguments hash) of each.
pub fn judge(attempts: &[(ErrorClass, Option<&str>)]) -> Vec<Verdict> {
    let same = |a: Option<&str>, b: Option<&str>| match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let mut out = Vec::with_capacity(attempts.len());
    for (k, &(class, args)) in attempts.iter().enumerate() {
        let fresh = if class.is_error() {
            Verdict::Failed
        } else {
            Verdict::Ok
        };
        let Some(&(prev, prev_args)) = k.checked_sub(1).map(|p| &attempts[p]) else {
            out.push(fresh);
            continue;
        };
        if !same(args, prev_args) {
            out.push(fresh);
            continue;
        }
        out.push(if !prev.is_error() {
            Verdict::AfterSuccess
        } else {
            // The rest of this request's attempts: does one succeed?
            let ends_well = attempts[k..]
                .iter()
                .take_while(|(_, a)| same(*a, args))
                .any(|(c, _)| !c.is_error());
            if prev.retryable() == Some(false) || !ends_well {
                Verdict::Wasted
            } else {
                Verdict::Rescued
            }
        });
    }
    out
}

/// One tool's retries on one UTC day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDay {
    pub tool: String,
    pub day: i32,
    pub retries: u64,
    pub rescued: u64,
    pub wasted: u64,
    pub after_success: u64,
    /// Durations of wasted retries and the gaps before them.
    pub wasted_seconds: f64,
    /// Their cost, where the spans carry one.
    pub wasted_cost_usd: f64,
}

/// Retry outcomes per tool and day (the day of each loop's first call) of
/// `calls` (as `calls::collect` gives them: only repeated pairs), counting
/// only the turns `keep` accepts.
pub fn per_tool_day(calls: &[Call], keep: impl Fn(&str) -> bool) -> Vec<ToolDay> {
    let mut out: std::collections::BTreeMap<(String, i32), ToolDay> = Default::default();
    for ((turn, tool), group) in by_turn_and_tool(calls) {
        if !keep(turn) {
            continue;
        }
        let attempts: Vec<(ErrorClass, Option<&str>)> = group
            .iter()
            .map(|c| (c.class, c.args_hash.as_deref()))
            .collect();
        let day = day_of_ns(group[0].start_ns);
        let t = out
            .entry((tool.to_string(), day))
            .or_insert_with(|| ToolDay {
                tool: tool.to_string(),
                day,
                ..ToolDay::default()
            });
        for (k, v) in judge(&attempts).into_iter().enumerate() {
            if !v.is_retry() {
                continue;
            }
            t.retries += 1;
            match v {
                Verdict::Rescued => t.rescued += 1,
                Verdict::AfterSuccess => t.after_success += 1,
                _ => {
                    t.wasted += 1;
                    let (prev, c) = (group[k - 1], group[k]);
                    t.wasted_seconds +=
                        ((c.start_ns - prev.end_ns).max(0) + (c.end_ns - c.start_ns)) as f64 / 1e9;
                    t.wasted_cost_usd += c.cost_usd.unwrap_or(0.0);
                }
            }
        }
    }
    out.into_values().filter(|t| t.retries > 0).collect()
}
