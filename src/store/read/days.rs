//! A reader's view of whole days: a day's live parts as one listing saw
//! them ([`DayParts`]), and the day summaries the store keeps for the sweep
//! (read, and written by a sweep, through [`summary`]).

use std::ops::RangeBounds;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use super::{read_error, Reader};
use crate::store::catalog::summary::{self, SummaryManifest};
use crate::store::format::parquet;
use crate::store::StoreError;

/// A day's live parts as one listing saw them.
#[derive(Debug, Clone)]
pub struct DayParts {
    names: Vec<String>,
    paths: Vec<PathBuf>,
}

impl DayParts {
    /// Their names, relative to the data directory (as manifests name them).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// All of them as one frame.
    pub fn scan_all(&self) -> PolarsResult<LazyFrame> {
        parquet::scan_parts(&self.paths)
    }

    /// Those whose names `keep` takes, as one frame (`None`: no part is).
    pub fn scan_some(&self, keep: impl Fn(&str) -> bool) -> PolarsResult<Option<LazyFrame>> {
        let paths: Vec<PathBuf> = self
            .names
            .iter()
            .zip(&self.paths)
            .filter(|(n, _)| keep(n))
            .map(|(_, p)| p.clone())
            .collect();
        if paths.is_empty() {
            return Ok(None);
        }
        parquet::scan_parts(&paths).map(Some)
    }

    /// Part `i`'s path (for messages) and a frame of it alone.
    pub fn part(&self, i: usize) -> Option<(&Path, PolarsResult<LazyFrame>)> {
        let p = self.paths.get(i)?;
        Some((p.as_path(), parquet::scan_parts(std::slice::from_ref(p))))
    }

    /// Each part's path (for messages) and a frame of it alone.
    pub fn each(&self) -> impl Iterator<Item = (&Path, PolarsResult<LazyFrame>)> + '_ {
        self.paths
            .iter()
            .map(|p| (p.as_path(), parquet::scan_parts(std::slice::from_ref(p))))
    }
}

impl Reader {
    /// `day`'s live parts, listed now: hold a [`Reader::pin`] from before
    /// this until what was read of them is collected.
    pub fn day_parts(&self, day: i32) -> Result<DayParts, StoreError> {
        let paths = self.layout().parts(day)?;
        let names = paths.iter().map(|p| self.layout().relative(p)).collect();
        Ok(DayParts { names, paths })
    }

    /// The names (relative to the data directory) of the live parts of
    /// each of `days`, in order.
    pub fn part_names(&self, days: &[i32]) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for &d in days {
            out.extend(self.day_parts(d)?.names);
        }
        Ok(out)
    }

    /// A fingerprint of `day`'s live part set ([`crate::store::Layout::day_version`]).
    pub fn day_version(&self, day: i32) -> Result<String, StoreError> {
        self.layout().day_version(day)
    }

    /// `day`'s summary manifest (see [`summary::read`]): `None` when the
    /// day has none, `Some(Err)` when it does not parse.
    pub fn summary(
        &self,
        day: i32,
    ) -> Result<Option<serde_json::Result<SummaryManifest>>, StoreError> {
        summary::read(self.layout(), day)
    }

    /// One file of `day`'s summary, read whole.
    pub fn summary_file(&self, day: i32, name: &str) -> Result<DataFrame, StoreError> {
        let path = self.layout().summary_dir(day).join(name);
        let pin = self.pin();
        let df = parquet::scan(std::slice::from_ref(&path)).and_then(|lf| lf.collect());
        df.map_err(|e| read_error(&format!("reading {}", path.display()), e, &pin))
    }

    /// The `name` file of every summary in use on `days` that has one, by path
    /// (the `date=` directories give a scan of them its `date` column).
    pub fn summary_paths(
        &self,
        days: impl RangeBounds<i32>,
        name: &str,
    ) -> Result<Vec<PathBuf>, StoreError> {
        Ok(self
            .layout()
            .summary_days()?
            .into_iter()
            .filter(|d| days.contains(d))
            .map(|d| self.layout().summary_dir(d))
            // A summary retention took out of use (its manifest gone) is
            // none, though its files wait for their reclaim.
            .filter(|dir| dir.join(summary::MANIFEST).exists())
            .map(|dir| dir.join(name))
            .filter(|p| p.exists())
            .collect())
    }

    /// Write `day`'s summary (see [`summary::write`]). A summary is derived
    /// from the spans, so any process that reads them may write it, without
    /// the store's lock (a sweep from cron beside a serving store).
    pub fn write_summary(
        &self,
        day: i32,
        files: &mut [(&str, DataFrame)],
        compression: ParquetCompression,
        manifest: SummaryManifest,
    ) -> Result<(), StoreError> {
        summary::write(self.layout(), day, files, compression, manifest)
    }
}
