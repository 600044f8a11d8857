//! Readers: the stored spans and the daily rollup as polars `LazyFrame`s,
//! and one trace's spans, which on a sealed day decodes only the row groups
//! whose trace_id statistics can hold the trace (counted in [`ReadStats`]).
//! A reader takes no lock and works beside a running `serve`; it sees what
//! has been flushed to Parquet (a `Store::flush` makes everything visible).

use std::ops::RangeBounds;

use polars::prelude::*;

use super::layout::{is_seal_output, Layout};
use super::{frame, parquet, rowgroup, StoreError};

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
    layout: Layout,
}

impl Reader {
    pub fn new(layout: Layout) -> Reader {
        Reader { layout }
    }

    /// A reader of the data directory `dir`, which must exist.
    pub fn open(dir: &std::path::Path) -> Result<Reader, StoreError> {
        if !dir.is_dir() {
            return Err(StoreError::io(
                format!("opening data directory {}", dir.display()),
                "no such directory (expected a stormwatch --data-dir)",
            ));
        }
        Ok(Reader::new(Layout::new(dir)))
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// UTC days that hold spans (days since the epoch), in order.
    pub fn days(&self) -> Result<Vec<i32>, StoreError> {
        self.layout.days()
    }

    /// Spans whose start falls on a day in `days`; an empty frame with the
    /// span schema when there are none.
    pub fn spans(&self, days: impl RangeBounds<i32>) -> Result<LazyFrame, StoreError> {
        let mut paths = Vec::new();
        for day in self.layout.days()?.into_iter().filter(|d| days.contains(d)) {
            paths.extend(self.layout.parts(day)?);
        }
        if paths.is_empty() {
            return Ok(frame::empty().lazy());
        }
        parquet::scan_parts(&paths).map_err(|e| StoreError::data("scanning span parts", e))
    }

    /// Every stored span.
    pub fn all_spans(&self) -> Result<LazyFrame, StoreError> {
        self.spans(..)
    }

    /// Collect `build(spans of days)`. A compaction or retention pass may
    /// replace a part between listing and reading; the parts are then listed
    /// again, up to three times.
    pub fn collect_spans(
        &self,
        days: impl RangeBounds<i32> + Clone,
        build: impl Fn(LazyFrame) -> LazyFrame,
    ) -> Result<DataFrame, StoreError> {
        let mut last = None;
        for _ in 0..3 {
            match self.spans(days.clone()).and_then(|lf| {
                build(lf)
                    .collect()
                    .map_err(|e| StoreError::data("reading spans", e))
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
    /// parts with a chosen group are scanned with the filter. Listed again
    /// up to three times if a compaction replaces a part meanwhile.
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
        let data = |e| StoreError::data(format!("reading trace {trace_id}"), e);
        let is_trace = || col("trace_id").eq(lit(trace_id.to_string()));
        let mut stats = ReadStats::default();
        let mut found = frame::empty();
        let mut scan = Vec::new();
        for day in self.layout.days()?.into_iter().filter(|d| days.contains(d)) {
            for part in self.layout.parts(day)? {
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

    /// The per-tool daily rollup (`None` before the first flush).
    pub fn tool_daily(&self) -> Result<Option<LazyFrame>, StoreError> {
        let path = self.layout.tool_daily();
        if !path.exists() {
            return Ok(None);
        }
        parquet::scan(std::slice::from_ref(&path))
            .map(Some)
            .map_err(|e| StoreError::data(format!("scanning {}", path.display()), e))
    }

    /// Raw error names per tool, day and class (`None` before the first flush).
    pub fn tool_error_names(&self) -> Result<Option<LazyFrame>, StoreError> {
        let path = self.layout.tool_error_names();
        if !path.exists() {
            return Ok(None);
        }
        parquet::scan(std::slice::from_ref(&path))
            .map(Some)
            .map_err(|e| StoreError::data(format!("scanning {}", path.display()), e))
    }
}
