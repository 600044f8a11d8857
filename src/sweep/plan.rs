//! A sweep's plan: the window's days, each to be taken from its stored
//! result (unchanged since a sweep that saw it), from its day summary,
//! or read from its spans.

use std::collections::BTreeMap;

use super::day::{self, day_fingerprint};
use super::{SweepError, SweepOptions};
use crate::config::DetectConfig;
use crate::signal::{DayResult, StateDb};
use crate::store::Reader;

/// Which days a sweep looks at, and where each one's result comes from.
pub(super) struct Plan {
    /// Days whose stored result still holds, with it.
    pub reused: BTreeMap<i32, DayResult>,
    /// Days with a usable day summary.
    pub summarized: Vec<i32>,
    /// Days to read from their spans, in order.
    pub from_spans: Vec<i32>,
}

/// Plan a sweep as of `opts.now_ns` over the store's `days` (oldest first)
/// within the window `since..=today`.
pub(super) fn plan(
    reader: &Reader,
    state: &StateDb,
    cfg: &DetectConfig,
    opts: &SweepOptions,
    days: &[i32],
    (since, today): (i32, i32),
) -> Result<Plan, SweepError> {
    let now = opts.now_ns;
    let mut reused = BTreeMap::new();
    let mut pending = Vec::new();
    for day in days.iter().copied().filter(|d| (since..=today).contains(d)) {
        if opts.reuse {
            if let Some(through) = state.day_read_through(day)? {
                let fingerprint = day_fingerprint(reader, day, through, cfg)?;
                let kept = state.day_result(day, &fingerprint, now)?;
                // A final result stands only for a `now` it is final at.
                let holds = |r: &DayResult| {
                    r.provisional.is_some()
                        || day::final_at(cfg, day, now, r.horizon_ns, r.read_through)
                };
                if let Some(kept) = kept.filter(holds) {
                    reused.insert(day, kept);
                    continue;
                }
            }
        }
        pending.push(day);
    }
    let mut summarized = Vec::new();
    let mut from_spans = Vec::new();
    for day in pending {
        if opts.reuse && day::has_usable_summary(reader, cfg, now, day)? {
            summarized.push(day);
        } else {
            from_spans.push(day);
        }
    }
    Ok(Plan {
        reused,
        summarized,
        from_spans,
    })
}
