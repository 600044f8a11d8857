//! Signals: findings grouped into named problems (alerting.md, Signals) —
//! the grouping key, a stable short id, a title built by rule, evidence
//! worst first — and their lifecycle, kept in `state.sqlite` with the
//! per-day results of the per-turn rules that later sweeps reuse; a retry
//! chain's driver in its evidence and remedy. Sends nothing.

mod by_hand;
pub mod days;
mod draft;
pub mod driver;
mod evidence;
mod finding;
pub mod group;
pub mod ids;
mod kind;
pub mod lifecycle;
pub mod remedy;
pub mod silent;
pub mod state;
mod title;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_lifecycle;
#[cfg(test)]
mod tests_remedy;
#[cfg(test)]
mod tests_retry_after;

pub use days::DayResult;
pub use draft::SignalDraft;
pub use evidence::Evidence;
pub use finding::Finding;
pub use group::group;
pub use kind::{Kind, Severity};
pub use remedy::{remedy, Remedy};
pub use state::{Lifecycle, Signal, StateDb, StateError, SweepOutcome};
