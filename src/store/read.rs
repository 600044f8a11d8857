//! Readers: the stored spans and the daily rollup as polars `LazyFrame`s
//! (each in a [`Scan`], with the [`Pin`] that keeps its files on disk until
//! it is collected), and one trace's spans, which on a sealed day decodes
//! only the row groups whose trace_id statistics can hold the trace
//! (counted in [`ReadStats`]). A reader takes no lock and works beside a
//! running `serve`; it sees what has been flushed to Parquet (a
//! `Store::flush` makes everything visible). Code that lists parts itself
//! ([`Reader::day_parts`]) holds a [`Reader::pin`] from before the listing
//! until it is done. Day summaries are read (and, by a sweep, written)
//! here too ([`days`], over `catalog::summary`).

use std::ops::RangeBounds;
use std::path::PathBuf;
use std::sync::Arc;

use polars::prelude::*;

use super::catalog::handle::Catalog;
use super::catalog::layout::{is_seal_output, Layout};
use super::catalog::retire::{self, Pin};
use super::catalog::rollup_set;
use super::format::{frame, parquet, rowgroup};
use super::StoreError;

mod days;
pub use days::DayParts;

/// A lazy read and the pin that keeps the files it scans: polars opens them
/// by path when the frame is collected, so the pin must live until then.
pub struct Scan {
    frame: LazyFrame,
    pin: Pin,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan").field("pin", &self.pin).finish()
    }
}

impl Scan {
    fn new(frame: LazyFrame, pin: Pin) -> Scan {
        Scan { frame, pin }
    }

    /// Collect the frame, then let the files go.
    pub fn collect(self) -> PolarsResult<DataFrame> {
        let Scan { frame, pin } = self;
        let df = frame.collect();
        drop(pin);
        df
    }

    /// The frame's schema (reads the first file's footer).
    pub fn collect_schema(&mut self) -> PolarsResult<SchemaRef> {
        self.frame.collect_schema()
    }

    /// The query built on the frame, under the same pin.
    pub fn map(self, f: impl FnOnce(LazyFrame) -> LazyFrame) -> Scan {
        Scan {
            frame: f(self.frame),
            pin: self.pin,
        }
    }

    /// The frame and its pin, for a caller that hands the frame on (a SQL
    /// context): hold the pin until every frame built on it is collected.
    pub fn into_parts(self) -> (LazyFrame, Pin) {
        (self.frame, self.pin)
    }
}

/// Both rollups as one refresh left them.
#[derive(Debug)]
pub struct Rollups {
    /// Which refresh (0: a store this version never refreshed).
    pub stamp: RollupStamp,
    pub tool_daily: Option<Scan>,
    pub tool_error_names: Option<Scan>,
}

/// What identifies the rollup as it stands: its generation, or, in a store
/// no refresh of this version wrote, the plain files' modification times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollupStamp {
    Generation(u64),
    Plain(Vec<Option<std::time::SystemTime>>),
}

/// What a trace lookup read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    /// Parts whose footer was read.
    pub files: usize,
    /// Row groups decoded (or, of parts that are not seal outputs, scanned).
    pub row_groups_read: usize,
    /// Row groups passed over: their trace_id statistics exclude the trace.
    pub row_groups_skipped: usize,
}

/// Read access to a data directory.
#[derive(Debug, Clone)]
pub struct Reader {
    catalog: Arc<Catalog>,
}

impl Reader {
    /// A reader of `catalog`'s directory: its pins are the catalog's, so a
    /// store sharing it never deletes a file under its reads.
    pub fn new(catalog: Arc<Catalog>) -> Reader {
        Reader { catalog }
    }

    /// A reader of the data directory `dir`, which must exist, with a
    /// catalog of its own: in a process that has the directory open as a
    /// `Store`, take `Store::reader` instead, whose pins the store sees.
    pub fn open(dir: &std::path::Path) -> Result<Reader, StoreError> {
        if !dir.is_dir() {
            // Said once: not an I/O error with a source (which the CLI
            // prints again after it), and nothing to retry.
            return Err(StoreError::data(
                format!("opening data directory {}", dir.display()),
                "no such directory (expected a stormwatch --data-dir)",
            ));
        }
        Ok(Reader::new(Catalog::new(Layout::new(dir))))
    }

    pub fn layout(&self) -> &Layout {
        self.catalog.layout()
    }

    /// The catalog this reader pins in.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// UTC days that hold spans (days since the epoch), in order.
    pub fn days(&self) -> Result<Vec<i32>, StoreError> {
        self.layout().days()
    }

    /// The newest day with live parts, not after `until`: a day directory
    /// whose parts are all retired (waiting to be reclaimed) holds no span.
    pub fn newest_day(&self, until: i32) -> Result<Option<i32>, StoreError> {
        for day in self
            .layout()
            .days()?
            .into_iter()
            .rev()
            .filter(|d| *d <= until)
        {
            if !self.layout().parts(day)?.is_empty() {
                return Ok(Some(day));
            }
        }
        Ok(None)
    }

    /// Keep every file listed from now on until the pin is dropped (see
    /// [`retire`]): a sweep holds one for its whole run.
    pub fn pin(&self) -> Pin {
        retire::pin(&self.catalog)
    }

    /// Spans whose start falls on a day in `days`; an empty frame with the
    /// span schema when there are none.
    pub fn spans(&self, days: impl RangeBounds<i32>) -> Result<Scan, StoreError> {
        let pin = self.pin();
        let mut paths = Vec::new();
        for day in self
            .layout()
            .days()?
            .into_iter()
            .filter(|d| days.contains(d))
        {
            paths.extend(self.layout().parts(day)?);
        }
        if paths.is_empty() {
            return Ok(Scan::new(frame::empty().lazy(), pin));
        }
        parquet::scan_parts(&paths)
            .map(|lf| Scan::new(lf, pin))
            .map_err(|e| StoreError::data("scanning span parts", e))
    }

    /// Every stored span.
    pub fn all_spans(&self) -> Result<Scan, StoreError> {
        self.spans(..)
    }

    /// Collect `build(spans of days)`. The parts are pinned, so a
    /// compaction in this process never deletes one under the read; a read
    /// from another process that finds a part gone lists them again, up to
    /// three times.
    pub fn collect_spans(
        &self,
        days: impl RangeBounds<i32> + Clone,
        build: impl Fn(LazyFrame) -> LazyFrame,
    ) -> Result<DataFrame, StoreError> {
        let mut last = None;
        for _ in 0..3 {
            match self.spans(days.clone()).and_then(|scan| {
                let pin = scan.pin.clone();
                scan.map(&build)
                    .collect()
                    .map_err(|e| read_error("reading spans", e, &pin))
            }) {
                Ok(df) => return Ok(df),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(StoreError::Closed))
    }

    /// The spans of trace `trace_id` on `days`, by start, and what reading
    /// them took. Each part's row groups are chosen by their trace_id
    /// statistics; a seal output's chosen groups are decoded directly (one
    /// per sealed file at most, but for a trace on a group boundary), other
    /// parts with a chosen group are scanned with the filter. The parts are
    /// pinned; listed again up to three times if one is gone (a read from
    /// another process).
    pub fn trace_spans(
        &self,
        days: impl RangeBounds<i32> + Clone,
        trace_id: &str,
    ) -> Result<(DataFrame, ReadStats), StoreError> {
        let mut last = None;
        for _ in 0..3 {
            match self.trace_once(days.clone(), trace_id) {
                Ok(found) => return Ok(found),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(StoreError::Closed))
    }

    fn trace_once(
        &self,
        days: impl RangeBounds<i32>,
        trace_id: &str,
    ) -> Result<(DataFrame, ReadStats), StoreError> {
        let pin = self.pin();
        let data = |e| read_error(&format!("reading trace {trace_id}"), e, &pin);
        let is_trace = || col("trace_id").eq(lit(trace_id.to_string()));
        let mut stats = ReadStats::default();
        let mut found = frame::empty();
        let mut scan = Vec::new();
        for day in self
            .layout()
            .days()?
            .into_iter()
            .filter(|d| days.contains(d))
        {
            for part in self.layout().parts(day)? {
                let md = rowgroup::footer(&part)?;
                stats.files += 1;
                let groups: Vec<usize> = (0..md.row_groups.len())
                    .filter(|&g| rowgroup::may_contain(&md, g, "trace_id", trace_id))
                    .collect();
                stats.row_groups_skipped += md.row_groups.len() - groups.len();
                stats.row_groups_read += groups.len();
                if groups.is_empty() {
                    continue;
                }
                if !is_seal_output(&part) {
                    scan.push(part);
                    continue;
                }
                let df = rowgroup::read_groups(&part, &md, &groups, None)
                    .and_then(|df| df.lazy().filter(is_trace()).collect())
                    .map_err(data)?;
                found.vstack_mut_owned(df).map_err(data)?;
            }
        }
        if !scan.is_empty() {
            // The span columns only (a scan may add the partition's `date`).
            let columns: Vec<Expr> = frame::schema()
                .iter_names()
                .map(|n| col(n.clone()))
                .collect();
            let df = parquet::scan_parts(&scan)
                .and_then(|lf| lf.filter(is_trace()).select(columns).collect())
                .map_err(data)?;
            found.vstack_mut_owned(df).map_err(data)?;
        }
        let sorted = found
            .sort(
                ["start_ns"],
                SortMultipleOptions::default().with_maintain_order(true),
            )
            .map_err(data)?;
        Ok((sorted, stats))
    }

    /// Both rollups of one refresh, pinned: the files the rollup manifest
    /// names (in a store no refresh of this version wrote, the plain-named
    /// files an earlier version left).
    pub fn rollups(&self) -> Result<Rollups, StoreError> {
        let pin = self.pin();
        let dir = self.layout().rollups_dir();
        let (stamp, paths): (RollupStamp, [Option<PathBuf>; 2]) =
            match rollup_set::read(self.layout())? {
                Some(c) => (
                    RollupStamp::Generation(c.generation),
                    [
                        c.tool_daily.map(|n| dir.join(n)),
                        c.tool_error_names.map(|n| dir.join(n)),
                    ],
                ),
                None => {
                    let plain = [self.layout().tool_daily(), self.layout().tool_error_names()];
                    let mtime = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
                    (
                        RollupStamp::Plain(plain.iter().map(mtime).collect()),
                        plain.map(|p| p.exists().then_some(p)),
                    )
                }
            };
        let [daily, names] = paths.map(|p| {
            p.map(|path| {
                parquet::scan(std::slice::from_ref(&path))
                    .map(|lf| Scan::new(lf, pin.clone()))
                    .map_err(|e| StoreError::data(format!("scanning {}", path.display()), e))
            })
            .transpose()
        });
        Ok(Rollups {
            stamp,
            tool_daily: daily?,
            tool_error_names: names?,
        })
    }

    /// Which rollup is current, without reading it (see [`RollupStamp`]).
    pub fn rollup_stamp(&self) -> Result<RollupStamp, StoreError> {
        Ok(match rollup_set::read(self.layout())? {
            Some(c) => RollupStamp::Generation(c.generation),
            None => RollupStamp::Plain(
                [self.layout().tool_daily(), self.layout().tool_error_names()]
                    .iter()
                    .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
                    .collect(),
            ),
        })
    }

    /// The per-tool daily rollup (`None` before the first flush).
    pub fn tool_daily(&self) -> Result<Option<Scan>, StoreError> {
        Ok(self.rollups()?.tool_daily)
    }

    /// Raw error names per tool, day and class (`None` before the first flush).
    pub fn tool_error_names(&self) -> Result<Option<Scan>, StoreError> {
        Ok(self.rollups()?.tool_error_names)
    }
}

/// A read's polars error, with a hint when a file it listed was gone.
pub fn read_error(context: &str, e: PolarsError, pin: &Pin) -> StoreError {
    match retire::gone_hint(&e, Some(pin)) {
        Some(hint) => StoreError::data(context.to_string(), format!("{e} ({hint})")),
        None => StoreError::data(context.to_string(), e),
    }
}
