//! Compaction of a day's flush outputs: once a day has `compact_parts`
//! of them they are merged into one part (`…-c.parquet`), streamed one
//! part at a time and deduplicated; a merged part is never merged again and
//! a sealed day's late parts wait for the re-seal. Between the parts merged
//! the flusher may flush the tables handed off meanwhile. A part whose keys
//! are all new (as the writer's dedup leaves them) goes in as its
//! compressed pages ([`pages`](crate::store::format::pages)): only its key
//! columns are decoded.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use polars::prelude::ParquetCompression;

use crate::model::day_to_string;
use crate::store::catalog::commit::{self, Intent};
use crate::store::catalog::layout::is_seal_output;
use crate::store::catalog::stage;
use crate::store::format::pages::RawGroups;
use crate::store::format::writer::SpanWriter;
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
    let mut rows = 0;
    let rename = stage::write_tmp_part_with(layout, day, &tag, |path| {
        rows = merge(path, &small, &mut seen, between, &context)?;
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

/// Write `parts` into one file at `path` (zstd, fsynced), each span once
/// (the first of a key, against `seen`), calling `between` before each part
/// after the first; returns the rows written. A part whose keys are all new
/// and whose columns are the span schema's has its row groups copied as
/// they are (compressed pages, not decoded); any other part is decoded,
/// deduplicated and encoded again.
fn merge(
    path: &Path,
    parts: &[PathBuf],
    seen: &mut KeySet,
    between: &mut dyn FnMut(),
    context: &dyn Fn() -> String,
) -> Result<usize, StoreError> {
    let io = |e: std::io::Error| StoreError::io(format!("writing {}", path.display()), e);
    let data = |e: polars::prelude::PolarsError| StoreError::data(context(), e);
    crate::faults::check("parquet_write").map_err(io)?;
    let file = File::create(path).map_err(io)?;
    let mut writer = SpanWriter::new(&file, &frame::schema(), ParquetCompression::Zstd(None))
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    let schema = writer.parquet_schema().clone();
    // The span schema's columns only, of a part decoded (a scan adds the
    // partition's `date`).
    let columns = frame::schema().iter_names().cloned().collect::<Vec<_>>();
    let mut rows = 0;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            between();
        }
        let part = std::slice::from_ref(part);
        if let Some(raw) = raw_if_new(part, &schema, seen).map_err(data)? {
            for (n, pages) in raw.groups() {
                writer
                    .write_row_group(n as u64, pages)
                    .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
            }
            rows += raw.rows();
            continue;
        }
        let df = parquet::scan_parts(part)
            .and_then(|lf| lf.collect())
            .and_then(|df| df.select(columns.iter().cloned()))
            .and_then(|df| frame::dedup(df, seen))
            .map_err(data)?;
        writer
            .write(&df)
            .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
        rows += df.height();
    }
    writer
        .finish()
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    file.sync_all().map_err(io)?;
    Ok(rows)
}

/// The part's row groups as they are, with its keys recorded in `seen`,
/// when every key is new and its columns are `schema`'s; else `None`
/// (and `seen` as it was).
fn raw_if_new(
    part: &[PathBuf],
    schema: &polars_parquet::parquet::metadata::SchemaDescriptor,
    seen: &mut KeySet,
) -> polars::prelude::PolarsResult<Option<RawGroups>> {
    let raw = RawGroups::read(&part[0])?;
    let keys = parquet::read_keys(part)?;
    // A row whose ids do not read as a key (none this version writes) is
    // for the decoding path, as is a part of another schema.
    if !raw.fits(schema) || keys.len() != raw.rows() {
        return Ok(None);
    }
    let mut added = Vec::with_capacity(keys.len());
    for k in keys {
        if !seen.insert(k) {
            for k in &added {
                seen.remove(k);
            }
            return Ok(None);
        }
        added.push(k);
    }
    Ok(Some(raw))
}
