//! Detection: pure functions from frames (and `now`, and parameters) to
//! findings. No IO, no async, no state: what was flagged before comes in as
//! an argument, so a sweep can be replayed.
//!
//! Daily, over the `tool_daily` rollup: the error-rate spike (§4.1) and the
//! latency spike (§4.6). Per turn (§2), over stored spans: retry chains and
//! the storms among them (§4.2), wasted retries on deterministic errors
//! (§4.3), retries after success (§4.4), stacked retry layers (§4.5) and
//! tool loops (§4.7), retries sooner than the failure said to wait (§4.9).
//! Daily again, over the rollup and the turns per service: silent tools and
//! tools with no success (§4.8). Every retry chain's driver — code, the
//! model, or both — from the turn's model spans.

pub mod calls;
pub mod chains;
pub mod daily;
pub mod driver;
pub mod error_spike;
pub mod loops;
pub mod models;
pub mod outcomes;
pub mod retries;
pub mod retry_after;
pub mod silent;
pub mod storm;
pub mod turns;
pub mod wilson;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_control;
#[cfg(test)]
mod tests_driver;
#[cfg(test)]
mod tests_graph;
#[cfg(test)]
pub(crate) mod tests_models;
#[cfg(test)]
mod tests_retry_after;
#[cfg(test)]
mod tests_silent;
#[cfg(test)]
mod tests_turns;

/// The most frequent class among (class, count) pairs (counts of one class
/// add up; a tie goes to the class listed first in `ErrorClass`); `unknown`
/// when there are none.
pub fn dominant_class(
    pairs: impl IntoIterator<Item = (crate::model::ErrorClass, u64)>,
) -> crate::model::ErrorClass {
    let mut counts: std::collections::BTreeMap<crate::model::ErrorClass, u64> = Default::default();
    for (c, n) in pairs {
        *counts.entry(c).or_insert(0) += n;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map_or(crate::model::ErrorClass::Unknown, |(c, _)| c)
}

/// The median (mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub use calls::{Call, Turn};
pub use daily::{daily_rows, DailyRow};
pub use driver::{CostParams, Drive, Driver, ModelCall, ModelPrice};
pub use error_spike::{judge, Basis, DayVerdict, SpikeParams};
pub use loops::{tool_loops, LoopParams, ToolLoop};
pub use retries::{
    retries_after_success, stacked_retries, wasted_retries, wasted_retries_driven,
    RetryAfterSuccess, StackedRetries, WastedRetry,
};
pub use retry_after::{ignored_retry_after, IgnoredRetryAfter, RetryAfterParams, RetryWait};
pub use silent::{no_success, silent_tools, NoSuccess, Silent, SilentParams};
pub use storm::{retry_storms, retry_storms_with, Outcome, Rhythm, Storm, StormParams};
