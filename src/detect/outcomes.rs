//! What each retry achieved, per tool and day: the tool page's recovery
//! rate (a retry policy that got too cautious shows as a falling share of
//! blips rescued). The verdicts are [`super::chains::judge`]'s: a retry in a
//! chain that recovered is `rescued`; one in a chain that gave up, or that
//! repeated a deterministic failure with the same arguments, is `wasted`;
//! the same request again after it succeeded (not polling) is
//! `after_success` (§4.4).

use serde::{Deserialize, Serialize};

use super::calls::{by_turn_and_tool, Call};
pub use super::chains::{judge, Verdict};

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

/// Retry outcomes of the turns `keep` accepts, all counted on `day` (the
/// day those turns began), over `calls` (as `calls::collect` gives them:
/// only repeated pairs); `growth` is the gap ratio that makes a repeat polling.
pub fn per_tool_day(
    calls: &[Call],
    day: i32,
    growth: f64,
    keep: impl Fn(&str) -> bool,
) -> Vec<ToolDay> {
    let mut out: std::collections::BTreeMap<String, ToolDay> = Default::default();
    for ((turn, tool), group) in by_turn_and_tool(calls) {
        if !keep(turn) {
            continue;
        }
        let attempts: Vec<super::chains::Attempt<'_>> = group.iter().map(|c| c.attempt()).collect();
        let t = out.entry(tool.to_string()).or_insert_with(|| ToolDay {
            tool: tool.to_string(),
            day,
            ..ToolDay::default()
        });
        for (k, v) in judge(&attempts, growth).into_iter().enumerate() {
            if !v.is_retry() {
                continue;
            }
            t.retries += 1;
            match v {
                Verdict::Rescued => t.rescued += 1,
                Verdict::AfterSuccess => t.after_success += 1,
                _ => {
                    t.wasted += 1;
                    let c = group[k];
                    let prev_end = k.checked_sub(1).map_or(c.start_ns, |p| group[p].end_ns);
                    t.wasted_seconds +=
                        ((c.start_ns - prev_end).max(0) + (c.end_ns - c.start_ns)) as f64 / 1e9;
                    t.wasted_cost_usd += c.cost_usd.unwrap_or(0.0);
                }
            }
        }
    }
    out.into_values().filter(|t| t.retries > 0).collect()
}
