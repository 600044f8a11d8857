//! Retention: the days older than the window deleted through a commit,
//! their summaries retired ([`summary::retire_day`]).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use crate::model::{day_to_string, NANOS_PER_DAY};
use crate::store::catalog::commit::{self, Intent};
use crate::store::catalog::summary;
use crate::store::{Shared, StoreError};

/// Delete the days older than the retention window.
pub(super) fn apply_retention(
    shared: &Shared,
    dirty: &mut BTreeSet<i32>,
) -> Result<(), StoreError> {
    crate::faults::panic_point("retention");
    let Some(keep) = shared.opts.retention_days else {
        return Ok(());
    };
    if shared.poisoned.load(Ordering::Acquire) {
        return Ok(());
    }
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let today = now_ns.div_euclid(NANOS_PER_DAY) as i32;
    let oldest_kept = today - keep as i32;
    let layout = shared.layout();
    // A day whose parts are all retired already waits only to be reclaimed.
    let mut old = Vec::new();
    for day in layout.days()?.into_iter().filter(|d| *d < oldest_kept) {
        if !layout.parts(day)?.is_empty() {
            old.push(day);
        }
    }
    let mut intent = Intent {
        rollup_days: old.clone(),
        ..Intent::default()
    };
    for &day in &old {
        intent
            .deletes
            .extend(layout.parts(day)?.iter().map(|p| layout.relative(p)));
    }
    if !old.is_empty() {
        commit::commit(&shared.catalog, &intent)?;
        dirty.extend(old.iter().copied());
        if layout.ship().is_some() {
            // An ingest node keeps only its dedup window; the shared store
            // keeps what it shipped.
            tracing::info!(days = old.len(), oldest = %day_to_string(old[0]), "trimmed this node's local copy of shipped days (its dedup window); the shared store keeps them");
        } else {
            tracing::info!(days = old.len(), oldest = %day_to_string(old[0]), "retention removed old days");
        }
    }
    // Their summaries go too (also those a crash left behind their spans):
    // out of use at once, their files retired like parts.
    for day in layout.summary_days()? {
        if day < oldest_kept {
            summary::retire_day(&shared.catalog, day)?;
        }
    }
    Ok(())
}
