//! Detection: pure functions from frames (and `now`, and parameters) to
//! findings. No IO, no async, no state: what was flagged before comes in as
//! an argument, so a sweep can be replayed.
//!
//! So far: the daily per-tool series read from the `tool_daily` rollup, and
//! the error-rate spike (detection.md §4.1). The storm, wasted-retry,
//! retry-after-success, stacked-layer and latency rules follow.

pub mod daily;
pub mod error_spike;
pub mod wilson;

#[cfg(test)]
mod tests;

pub use daily::{daily_rows, DailyRow};
pub use error_spike::{judge, Basis, DayVerdict, SpikeParams};
