//! Readers: the stored spans and the daily rollup as polars `LazyFrame`s.
//! A reader takes no lock and works beside a running `serve`; it sees what
//! has been flushed to Parquet (a `Store::flush` makes everything visible).

use std::ops::RangeBounds;

use polars::prelude::*;

use super::layout::Layout;
use super::{frame, parquet, StoreError};

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
