//! Detection: pure functions from frames (and `now`, and parameters) to
//! findings. No IO, no async, no state: what was flagged before comes in as
//! an argument, so a sweep can be replayed.
//!
//! So far: the daily per-tool series read from the `tool_daily` rollup and
//! the error-rate spike (§4.1); turn resolution (§2) and, per turn, retry
//! storms (§4.2), wasted retries on deterministic errors (§4.3) and retries
//! after success (§4.4). Stacked retry layers (§4.5) and the latency spike
//! (§4.6) follow.

pub mod calls;
pub mod daily;
pub mod error_spike;
pub mod retries;
pub mod storm;
pub mod turns;
pub mod wilson;

#[cfg(test)]
mod tests;

pub use calls::{Call, Turn};
pub use daily::{daily_rows, DailyRow};
pub use error_spike::{judge, Basis, DayVerdict, SpikeParams};
pub use retries::{retries_after_success, wasted_retries, RetryAfterSuccess, WastedRetry};
pub use storm::{retry_storms, Outcome, Rhythm, Storm, StormParams};
