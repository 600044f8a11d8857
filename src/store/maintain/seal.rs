//! Seal compaction: once a day is over, its spans are rewritten as at most
//! [`MAX_OUTPUTS`] large parts (`part-<stamp>-<n>-s.parquet`) sorted by
//! (trace_id, start_ns), in row groups of half to one `row_group_rows` rows
//! with min/max statistics, so that a trace's spans sit together and a trace
//! lookup decodes one row group.
//!
//! Memory stays bounded at any volume: the day is range-partitioned by trace
//! id into sub-ranges of about `range_rows` rows (boundaries from a sample of
//! the ids), spilled to temporary files in one pass over the sources (one
//! source row group in memory at a time), then each sub-range in turn is
//! deduplicated by (trace_id, span_id), first wins, sorted, and appended to
//! its output; outputs take consecutive sub-ranges, so they are ordered by
//! trace id among themselves. Sources and outputs change in one commit;
//! after it, a summary manifest (`sealed/date=…/manifest.json`) that was
//! built from exactly the sources is pointed at the outputs.
//!
//! The caller must be the only one to replace the day's parts: the flusher,
//! which only adds parts (its flushes) while a seal runs on a thread of its own.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::model::day_to_string;
use crate::store::catalog::commit::{self, Intent};
use crate::store::catalog::handle::Catalog;
use crate::store::catalog::layout::{is_seal_output, Layout};
use crate::store::catalog::{stage, summary};
use crate::store::format::parquet::Batches;
use crate::store::{format::frame, format::rowgroup, write::memtable::KeySet, StoreError};

/// A sealed day has at most this many parts.
pub const MAX_OUTPUTS: usize = 4;
/// Trace ids sampled to place the sub-range boundaries.
const SAMPLE_ROWS: usize = 100_000;

pub use crate::store::seal_types::{ManifestUpdate, SealOptions, SealReport};

/// Whether `day` has a part that is not a seal output.
pub fn needs_seal(layout: &Layout, day: i32) -> Result<bool, StoreError> {
    Ok(layout.parts(day)?.iter().any(|p| !is_seal_output(p)))
}

/// Temporary files, removed however the compaction ends.
#[derive(Default)]
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// The sources of one compaction with their footers, read one row group
/// at a time.
struct Sources {
    paths: Vec<PathBuf>,
    footers: Vec<FileMetadataRef>,
}

impl Sources {
    fn units(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.footers
            .iter()
            .enumerate()
            .flat_map(|(i, md)| (0..md.row_groups.len()).map(move |g| (i, g)))
    }

    fn read(&self, (i, g): (usize, usize), columns: Option<&[&str]>) -> PolarsResult<DataFrame> {
        rowgroup::read_groups(&self.paths[i], &self.footers[i], &[g], columns)
    }
}

/// Rewrite `day`'s parts as at most [`MAX_OUTPUTS`] sorted parts (see the
/// module doc). `None` when every part already is a seal output.
pub fn seal_compact(
    catalog: &Catalog,
    day: i32,
    opts: &SealOptions,
) -> Result<Option<SealReport>, StoreError> {
    seal_compact_publishing(catalog, day, opts, &mut |_, _| Ok(()))
}

/// What a seal hands its publisher before it commits: the outputs as
/// (temporary, final) paths and the sources, relative to the data directory.
pub type Publish<'a> = dyn FnMut(&[(String, String)], &[String]) -> Result<(), StoreError> + 'a;

/// `seal_compact`, handing the written outputs to `publish` before the
/// commit (the detect role ships them to the shared store there); an error
/// from it leaves the day as it was.
pub fn seal_compact_publishing(
    catalog: &Catalog,
    day: i32,
    opts: &SealOptions,
    publish: &mut Publish<'_>,
) -> Result<Option<SealReport>, StoreError> {
    let layout = catalog.layout();
    let parts = layout.parts(day)?;
    if parts.iter().all(|p| is_seal_output(p)) {
        return Ok(None);
    }
    let context = || format!("seal-compacting {}", day_to_string(day));
    let data = |e: PolarsError| StoreError::data(context(), e);
    // Sealed rows first: on a re-seal a redelivered span keeps its sealed copy.
    let (mut paths, rest): (Vec<_>, Vec<_>) = parts.into_iter().partition(|p| is_seal_output(p));
    paths.extend(rest);
    let footers = paths
        .iter()
        .map(|p| rowgroup::footer(p))
        .collect::<Result<Vec<_>, _>>()?;
    let src = Sources { paths, footers };
    let total: usize = src.footers.iter().map(|md| md.num_rows).sum();
    let wanted = total.div_ceil(opts.range_rows.max(1)).max(1);
    let bounds = if wanted > 1 {
        boundaries(&src, total, wanted).map_err(data)?
    } else {
        Vec::new()
    };
    let ranges = bounds.len() + 1;
    let stamp = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
    let mut scratch = Scratch::default();
    let spills = if ranges > 1 {
        let dir = layout.day_dir(day);
        let paths: Vec<PathBuf> = (0..ranges)
            .map(|r| dir.join(format!(".seal-{stamp:019}-{r:04}.parquet.tmp")))
            .collect();
        scratch.0.extend(paths.iter().cloned());
        spill(&src, &bounds, &paths)?;
        paths
    } else {
        Vec::new()
    };
    let mut duplicates = 0;
    let mut load = |r: usize| load_range(&src, &spills, r, &mut duplicates, &context);
    let outputs = ranges.min(MAX_OUTPUTS);
    let (mut renames, mut rows) = (Vec::new(), 0);
    for o in 0..outputs {
        let members: Vec<usize> = (0..ranges).filter(|r| r * outputs / ranges == o).collect();
        let mut written = 0;
        let (tmp, fin) =
            stage::write_tmp_part_with(layout, day, &format!("{stamp:019}-{o}-s"), |path| {
                scratch.0.push(path.to_path_buf());
                written = write_output(path, &members, &mut load, opts.row_group_rows.max(2))?;
                Ok(())
            })?;
        rows += written;
        if written > 0 {
            renames.push((tmp, fin));
        }
    }
    if rows + duplicates != total {
        return Err(StoreError::data(
            context(),
            format!("read {total} rows from the footers but wrote {rows} and dropped {duplicates}"),
        ));
    }
    let sources: Vec<String> = src.paths.iter().map(|p| layout.relative(p)).collect();
    let intent = Intent {
        renames: renames.clone(),
        deletes: sources.clone(),
        // Dropped rows change what the rollup counted.
        rollup_days: if duplicates > 0 {
            vec![day]
        } else {
            Vec::new()
        },
        ..Intent::default()
    };
    publish(&renames, &sources)?;
    crate::faults::kill_point("seal_compact_before_commit");
    // Once the intent may be on disk, recovery needs the outputs' temporary files.
    let outs: BTreeSet<PathBuf> = renames.iter().map(|(t, _)| layout.absolute(t)).collect();
    scratch.0.retain(|p| !outs.contains(p));
    commit::commit(catalog, &intent)?;
    crate::faults::kill_point("seal_compact_after_commit");
    let outputs: Vec<String> = renames.into_iter().map(|(_, f)| f).collect();
    let manifest = carry_manifest(layout, day, &sources, &outputs, duplicates).unwrap_or_else(|e| {
        tracing::warn!(day = %day_to_string(day), error = %e, "could not point the summary manifest at the sealed parts; the summary is stale");
        ManifestUpdate::Stale
    });
    drop(scratch);
    Ok(Some(SealReport {
        sources,
        outputs,
        rows,
        duplicates,
        sub_ranges: ranges,
        manifest,
    }))
}

/// Sub-range `r` in memory (the whole day when nothing was spilled):
/// deduplicated (its keys are its own: a key's trace id places it), then
/// sorted; the rows dropped are added to `duplicates`.
fn load_range(
    src: &Sources,
    spills: &[PathBuf],
    r: usize,
    duplicates: &mut usize,
    context: &dyn Fn() -> String,
) -> Result<DataFrame, StoreError> {
    let data = |e: PolarsError| StoreError::data(context(), e);
    let df = if spills.is_empty() {
        let mut all = frame::empty();
        for unit in src.units().collect::<Vec<_>>() {
            all.vstack_mut_owned(src.read(unit, None).map_err(data)?)
                .map_err(data)?;
        }
        all
    } else {
        let md = rowgroup::footer(&spills[r])?;
        let groups: Vec<usize> = (0..md.row_groups.len()).collect();
        let df = rowgroup::read_groups(&spills[r], &md, &groups, None).map_err(data)?;
        let _ = fs::remove_file(&spills[r]);
        df
    };
    let before = df.height();
    let df = frame::dedup(df, &mut KeySet::default()).map_err(data)?;
    *duplicates += before - df.height();
    df.sort(
        ["trace_id", "start_ns"],
        SortMultipleOptions::default().with_maintain_order(true),
    )
    .map_err(data)
}

/// `ranges - 1` trace ids splitting the day into sub-ranges of about equal
/// rows, from every `total / SAMPLE_ROWS`-th id (fewer when ids repeat).
fn boundaries(src: &Sources, total: usize, ranges: usize) -> PolarsResult<Vec<String>> {
    let stride = (total / SAMPLE_ROWS).max(1);
    let (mut sample, mut at) = (Vec::new(), 0usize);
    for unit in src.units() {
        let df = src.read(unit, Some(&["trace_id"]))?;
        for id in df.column("trace_id")?.str()?.iter() {
            if at % stride == 0 {
                if let Some(id) = id {
                    sample.push(id.to_string());
                }
            }
            at += 1;
        }
    }
    if sample.is_empty() {
        return Ok(Vec::new());
    }
    sample.sort_unstable();
    let mut bounds: Vec<String> = (1..ranges)
        .map(|j| sample[j * sample.len() / ranges].clone())
        .collect();
    bounds.dedup();
    Ok(bounds)
}

/// The sub-range of each row: ids below `bounds[0]` in 0, and so on.
fn range_of(bounds: &[String], id: Option<&str>) -> u32 {
    let id = id.unwrap_or("");
    bounds.partition_point(|b| b.as_str() <= id) as u32
}

/// One pass over the sources: each row to its sub-range's spill file.
fn spill(src: &Sources, bounds: &[String], paths: &[PathBuf]) -> Result<(), StoreError> {
    let data = |e: PolarsError| StoreError::data("spilling a day for seal compaction", e);
    let mut writers: Vec<Option<Batches>> = paths.iter().map(|_| None).collect();
    for unit in src.units() {
        let df = src.read(unit, None).map_err(data)?;
        let ranges: UInt32Chunked = df
            .column("trace_id")
            .and_then(|c| c.str().cloned())
            .map_err(data)?
            .iter()
            .map(|id| Some(range_of(bounds, id)))
            .collect();
        let present: BTreeSet<u32> = ranges.into_no_null_iter().collect();
        for r in present {
            let rows = df.filter(&ranges.equal(r)).map_err(data)?;
            let w = match &mut writers[r as usize] {
                Some(w) => w,
                slot => slot.insert(Batches::create(
                    &paths[r as usize],
                    ParquetCompression::Lz4Raw,
                )?),
            };
            w.write(&rows)?;
        }
    }
    for (w, path) in writers.into_iter().zip(paths) {
        match w {
            // Scratch: lost in a crash and then removed, so never fsynced.
            Some(w) => {
                w.finish(false)?;
            }
            None => Batches::create(path, ParquetCompression::Lz4Raw)?
                .finish(false)
                .map(|_| ())?,
        }
    }
    Ok(())
}

/// Append the sorted sub-ranges `members` to a new part at `path` in row
/// groups of `group / 2..=group` rows (a carry joins the next sub-range:
/// they are in trace order); fsynced. Returns the rows written.
fn write_output(
    path: &Path,
    members: &[usize],
    load: &mut impl FnMut(usize) -> Result<DataFrame, StoreError>,
    group: usize,
) -> Result<usize, StoreError> {
    let data = |e: PolarsError| StoreError::data(format!("writing {}", path.display()), e);
    let mut out = Batches::create(path, ParquetCompression::Zstd(None))?;
    let mut carry: Option<DataFrame> = None;
    for &r in members {
        let sorted = load(r)?;
        let mut buf = match carry.take() {
            Some(mut c) => {
                c.vstack_mut_owned(sorted).map_err(data)?;
                c
            }
            None => sorted,
        };
        while buf.height() >= 2 * group {
            out.write(&buf.slice(0, group))?;
            buf = buf.slice(group as i64, buf.height() - group);
        }
        carry = Some(buf);
    }
    if let Some(buf) = carry {
        if buf.height() > group {
            let half = buf.height().div_ceil(2);
            out.write(&buf.slice(0, half))?;
            out.write(&buf.slice(half as i64, buf.height() - half))?;
        } else {
            out.write(&buf)?;
        }
    }
    out.finish(true)
}

/// Point the summary manifests that read this day's parts at `outputs`:
/// a summary names the parts of every day its read took spans from (the
/// day before, the day itself, up to two days after), so the summaries of
/// `day - 2 ..= day + 1` may name `day`'s. One whose names under this day
/// are exactly `sources` (and no row was dropped) is carried over, other
/// keys kept ([`summary::SummaryManifest`]); one that names other parts of this day is left stale. Returns
/// what became of `day`'s own summary.
fn carry_manifest(
    layout: &Layout,
    day: i32,
    sources: &[String],
    outputs: &[String],
    duplicates: usize,
) -> Result<ManifestUpdate, StoreError> {
    let mut own = ManifestUpdate::Absent;
    for d in day - 2..=day + 1 {
        let update = carry_one(layout, d, day, sources, outputs, duplicates)?;
        if d == day {
            own = update;
        }
    }
    Ok(own)
}

fn carry_one(
    layout: &Layout,
    summary_day: i32,
    day: i32,
    sources: &[String],
    outputs: &[String],
    duplicates: usize,
) -> Result<ManifestUpdate, StoreError> {
    let held = summary::exclusive(layout)?;
    let mut manifest = match summary::read_exclusive(&held, layout, summary_day)? {
        None => return Ok(ManifestUpdate::Absent),
        Some(Err(_)) => return Ok(ManifestUpdate::Stale),
        Some(Ok(m)) => m,
    };
    let prefix = format!("spans/date={}/", day_to_string(day));
    let (here, elsewhere): (Vec<String>, Vec<String>) = std::mem::take(&mut manifest.parts)
        .into_iter()
        .partition(|p| p.starts_with(&prefix));
    if here.is_empty() && summary_day != day {
        // That summary did not read this day.
        return Ok(ManifestUpdate::Absent);
    }
    let here: BTreeSet<&str> = here.iter().map(String::as_str).collect();
    let ours: BTreeSet<&str> = sources.iter().map(String::as_str).collect();
    if duplicates > 0 || here != ours {
        return Ok(ManifestUpdate::Stale);
    }
    manifest.parts = elsewhere;
    manifest.parts.extend(outputs.iter().cloned());
    summary::write_manifest(&held, layout, summary_day, &manifest)?;
    Ok(ManifestUpdate::Carried)
}
