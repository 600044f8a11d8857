//! Signals: findings grouped into named problems (alerting.md, Signals) —
//! the grouping key, a stable short id, a title built by rule, evidence
//! worst first — and their lifecycle, kept in `state.sqlite`. Sends nothing.

pub mod group;
pub mod state;

#[cfg(test)]
mod tests;

pub use group::{group, Evidence, Finding, Kind, SignalDraft};
pub use state::{Lifecycle, Signal, StateDb, StateError, SweepOutcome};
