//! Parquet parts: writing a frame under a temporary name, durably, and
//! scanning parts back as a `LazyFrame`.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::model::SpanKey;
use crate::store::catalog::layout::Layout;
use crate::store::StoreError;

/// A fresh name for a flush output (`part-{tag}.parquet`): the wall clock
/// in nanoseconds, strictly increasing within the process, then 32 random
/// bits. It depends on nothing that restarts (WAL numbering does when the
/// WAL directory is reset), so a new part never takes an existing name;
/// names still sort by when their part was written.
pub fn new_part_tag() -> String {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let prev = LAST.fetch_max(now, Ordering::AcqRel);
    let t = if now > prev {
        now
    } else {
        LAST.fetch_add(1, Ordering::AcqRel) + 1
    };
    let random = foldhash::fast::RandomState::default().hash_one((t, std::process::id()));
    format!("{t:020}-{:08x}", random as u32)
}

/// Write `df` as a new part of `day` under a temporary name; returns the
/// (temporary, final) paths relative to the data directory, for an intent.
pub fn write_tmp_part(
    layout: &Layout,
    day: i32,
    tag: &str,
    df: &mut DataFrame,
) -> Result<(String, String), StoreError> {
    write_tmp_part_with(layout, day, tag, |path| write_file(path, df))
}

/// `write_tmp_part` with the file written by `write` (which must fsync it).
pub fn write_tmp_part_with(
    layout: &Layout,
    day: i32,
    tag: &str,
    write: impl FnOnce(&Path) -> Result<(), StoreError>,
) -> Result<(String, String), StoreError> {
    let dir = layout.day_dir(day);
    let created = !dir.exists();
    fs::create_dir_all(&dir)
        .map_err(|e| StoreError::io(format!("creating {}", dir.display()), e))?;
    let final_path = dir.join(format!("part-{tag}.parquet"));
    if final_path.exists() {
        return Err(StoreError::data(
            format!("writing {}", final_path.display()),
            "a part of that name already exists; parts are never overwritten",
        ));
    }
    let tmp = dir.join(format!(".part-{tag}.parquet.tmp"));
    write(&tmp)?;
    // The intent that names this file must never outlive its directory entries.
    crate::store::write::wal::sync_dir(&dir)?;
    if created {
        crate::store::write::wal::sync_dir(&layout.spans_dir())?;
    }
    Ok((layout.relative(&tmp), layout.relative(&final_path)))
}

/// Write a frame to `path` (zstd, statistics on) and fsync it.
pub fn write_file(path: &Path, df: &mut DataFrame) -> Result<(), StoreError> {
    write_file_with(path, df, ParquetCompression::Zstd(None))
}

/// [`write_file`] with the given compression.
pub fn write_file_with(
    path: &Path,
    df: &mut DataFrame,
    compression: ParquetCompression,
) -> Result<(), StoreError> {
    let context = || format!("writing {}", path.display());
    crate::faults::check("parquet_write").map_err(|e| StoreError::io(context(), e))?;
    let file = File::create(path).map_err(|e| StoreError::io(context(), e))?;
    ParquetWriter::new(&file)
        .with_compression(compression)
        .finish(df)
        .map_err(|e| StoreError::io(context(), e))?;
    file.sync_all().map_err(|e| StoreError::io(context(), e))
}

/// Write frames one after another into one Parquet file (row groups per
/// frame), holding only the frame in hand; fsynced at the end.
pub fn write_batches(
    path: &Path,
    mut next: impl FnMut() -> Result<Option<DataFrame>, StoreError>,
) -> Result<usize, StoreError> {
    let context = || format!("writing {}", path.display());
    crate::faults::check("parquet_write").map_err(|e| StoreError::io(context(), e))?;
    let file = File::create(path).map_err(|e| StoreError::io(context(), e))?;
    let mut writer = None;
    let mut rows = 0;
    while let Some(df) = next()? {
        if writer.is_none() {
            writer = Some(
                ParquetWriter::new(&file)
                    .with_compression(ParquetCompression::Zstd(None))
                    .batched(df.schema())
                    .map_err(|e| StoreError::io(context(), e))?,
            );
        }
        if let Some(w) = writer.as_mut() {
            w.write_batch(&df)
                .map_err(|e| StoreError::io(context(), e))?;
        }
        rows += df.height();
    }
    match writer {
        Some(w) => {
            w.finish().map_err(|e| StoreError::io(context(), e))?;
        }
        None => {
            ParquetWriter::new(&file)
                .finish(&mut crate::store::format::frame::empty())
                .map_err(|e| StoreError::io(context(), e))?;
        }
    }
    file.sync_all().map_err(|e| StoreError::io(context(), e))?;
    Ok(rows)
}

/// A Parquet file with the span schema written frame by frame: each frame
/// becomes one row group (it is rechunked first), so the caller sizes them.
pub struct Batches {
    path: PathBuf,
    file: File,
    writer: polars::io::parquet::write::BatchedWriter<File>,
    rows: usize,
}

impl Batches {
    /// Create `path` for frames with [`frame::schema`](crate::store::format::frame::schema).
    pub fn create(path: &Path, compression: ParquetCompression) -> Result<Batches, StoreError> {
        let context = || format!("writing {}", path.display());
        crate::faults::check("parquet_write").map_err(|e| StoreError::io(context(), e))?;
        let file = File::create(path).map_err(|e| StoreError::io(context(), e))?;
        let handle = file.try_clone().map_err(|e| StoreError::io(context(), e))?;
        let writer = ParquetWriter::new(handle)
            .with_compression(compression)
            .with_statistics(StatisticsOptions::default())
            .batched(&crate::store::format::frame::schema())
            .map_err(|e| StoreError::io(context(), e))?;
        Ok(Batches {
            path: path.to_path_buf(),
            file,
            writer,
            rows: 0,
        })
    }

    /// Append `df` as one row group.
    pub fn write(&mut self, df: &DataFrame) -> Result<(), StoreError> {
        if df.height() == 0 {
            return Ok(());
        }
        let mut df = df.clone();
        df.rechunk_mut();
        self.writer
            .write_batch(&df)
            .map_err(|e| StoreError::io(format!("writing {}", self.path.display()), e))?;
        self.rows += df.height();
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Write the footer; fsync the file when `durable`. Returns the rows written.
    pub fn finish(self, durable: bool) -> Result<usize, StoreError> {
        let context = || format!("writing {}", self.path.display());
        self.writer
            .finish()
            .map_err(|e| StoreError::io(context(), e))?;
        if durable {
            self.file
                .sync_all()
                .map_err(|e| StoreError::io(context(), e))?;
        }
        Ok(self.rows)
    }
}

/// A lazy scan over parts (which must exist and share a schema).
pub fn scan(paths: &[PathBuf]) -> PolarsResult<LazyFrame> {
    scan_with(paths, None)
}

/// A lazy scan over span parts, with the span schema of this version:
/// columns added since a part was written (`tool_result_hash`) read as null.
pub fn scan_parts(paths: &[PathBuf]) -> PolarsResult<LazyFrame> {
    scan_with(paths, Some(crate::store::format::frame::schema()))
}

fn scan_with(paths: &[PathBuf], schema: Option<Schema>) -> PolarsResult<LazyFrame> {
    let paths: Vec<PlRefPath> = paths
        .iter()
        .map(|p| PlRefPath::try_from_path(p))
        .collect::<PolarsResult<_>>()?;
    let args = ScanArgsParquet {
        // Part names encode nothing a scan needs; never treat them as globs.
        glob: false,
        allow_missing_columns: schema.is_some(),
        schema: schema.map(std::sync::Arc::new),
        ..Default::default()
    };
    LazyFrame::scan_parquet_files(paths.into(), args)
}

/// The dedup keys stored in a set of parts.
pub fn read_keys(paths: &[PathBuf]) -> PolarsResult<Vec<SpanKey>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let df = scan_parts(paths)?
        .select([col("trace_id"), col("span_id")])
        .collect()?;
    Ok(crate::store::format::frame::keys(&df)?
        .into_iter()
        .flatten()
        .collect())
}
