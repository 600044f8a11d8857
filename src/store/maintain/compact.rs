//! Compaction of a day's flush outputs: once a day has `compact_parts`
//! of them they are merged into one part (`…-c.parquet`), streamed one
//! part at a time and deduplicated; a merged part is never merged again and
//! a sealed day's late parts wait for the re-seal. Between the parts merged
//! the flusher may flush the tables handed off meanwhile.

use std::sync::atomic::Ordering;

use crate::model::day_to_string;
use crate::store::catalog::commit::{self, Intent};
use crate::store::catalog::layout::is_seal_output;
use crate::store::catalog::stage;
use crate::store::maintain::guard::{guarded, Task};
use crate::store::write::memtable::KeySet;
use crate::store::{format::frame, format::parquet, Shared, StoreError};

/// Merge each day's flush outputs once there are `compact_parts` of them.
pub fn compact_days(shared: &Shared, days: &[i32]) {
    compact_days_yielding(shared, days, &mut || {});
}

/// [`compact_days`], calling `between` before each part after the first
/// is merged (the flusher flushes the tables handed off meanwhile).
pub(in crate::store) fn compact_days_yielding(
    shared: &Shared,
    days: &[i32],
    between: &mut dyn FnMut(),
) {
    for &day in days {
        guarded(shared, Task::Compact, || {
            match compact_day(shared, day, between) {
                Ok(true) => {
                    shared.stats.compactions.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(day = %day_to_string(day), error = %e, "compaction failed; the parts stay as they are")
                }
            }
        });
    }
}

fn compact_day(shared: &Shared, day: i32, between: &mut dyn FnMut()) -> Result<bool, StoreError> {
    if shared.poisoned.load(Ordering::Acquire) {
        return Ok(false);
    }
    let layout = shared.layout();
    let parts = layout.parts(day)?;
    // A sealed day's late parts wait for the re-seal, which merges them all.
    if parts.iter().any(|p| is_seal_output(p)) {
        return Ok(false);
    }
    // Flush outputs only (each at most `flush_rows` rows, so one in memory is
    // bounded); a merged part is never merged again, so a busy day is not
    // rewritten over and over.
    let small: Vec<_> = parts
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with("-c.parquet"))
        .collect();
    if small.len() < shared.opts.compact_parts.max(2) {
        return Ok(false);
    }
    crate::faults::panic_point("compact");
    let context = || format!("compacting {}", day_to_string(day));
    let last = small
        .last()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tag = format!("{}-c", last.trim_start_matches("part-"));
    // One part in memory at a time: the merge streams into row groups.
    let mut seen = KeySet::default();
    let mut remaining = small.iter();
    let mut rows = 0;
    let rename = stage::write_tmp_part_with(layout, day, &tag, |path| {
        let mut first = true;
        rows = parquet::write_batches(path, || {
            let Some(part) = remaining.next() else {
                return Ok(None);
            };
            if !std::mem::take(&mut first) {
                between();
            }
            let df = parquet::scan_parts(std::slice::from_ref(part))
                .and_then(|lf| lf.collect())
                .and_then(|df| frame::dedup(df, &mut seen))
                .map_err(|e| StoreError::data(context(), e))?;
            Ok(Some(df))
        })?;
        Ok(())
    })?;
    let intent = Intent {
        deletes: small.iter().map(|p| layout.relative(p)).collect(),
        renames: vec![rename],
        ..Intent::default()
    };
    commit::commit(&shared.catalog, &intent)?;
    tracing::debug!(day = %day_to_string(day), parts = small.len(), rows, "compacted");
    Ok(true)
}
