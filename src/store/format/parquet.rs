//! Parquet parts: writing a frame under a temporary name, durably, and
//! scanning parts back as a `LazyFrame`.

use std::fs::File;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::model::SpanKey;
use crate::store::format::writer::SpanWriter;
use crate::store::StoreError;

/// Write a frame to `path` (zstd, statistics on) and fsync it.
pub fn write_file(path: &Path, df: &mut DataFrame) -> Result<(), StoreError> {
    write_file_with(path, df, ParquetCompression::Zstd(None))
}

/// Rows per row group of [`write_file`] (polars' own default).
const GROUP_ROWS: usize = 512 * 512;

/// [`write_file`] with the given compression.
pub fn write_file_with(
    path: &Path,
    df: &mut DataFrame,
    compression: ParquetCompression,
) -> Result<(), StoreError> {
    let mut out = Batches::create_for(path, df.schema(), compression)?;
    for at in (0..df.height()).step_by(GROUP_ROWS) {
        out.write(&df.slice(at as i64, GROUP_ROWS.min(df.height() - at)))?;
    }
    out.finish(true)?;
    Ok(())
}

/// A Parquet file written frame by frame: each frame becomes one row group
/// (it is rechunked first), so the caller sizes them.
pub struct Batches {
    path: PathBuf,
    file: File,
    writer: SpanWriter<File>,
    rows: usize,
}

impl Batches {
    /// Create `path` for frames with [`frame::schema`](crate::store::format::frame::schema).
    pub fn create(path: &Path, compression: ParquetCompression) -> Result<Batches, StoreError> {
        Self::create_for(path, &crate::store::format::frame::schema(), compression)
    }

    /// Create `path` for frames with `schema`'s columns.
    pub fn create_for(
        path: &Path,
        schema: &Schema,
        compression: ParquetCompression,
    ) -> Result<Batches, StoreError> {
        let context = || format!("writing {}", path.display());
        crate::faults::check("parquet_write").map_err(|e| StoreError::io(context(), e))?;
        let file = File::create(path).map_err(|e| StoreError::io(context(), e))?;
        let handle = file.try_clone().map_err(|e| StoreError::io(context(), e))?;
        let writer = SpanWriter::new(handle, schema, compression)
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
            .write(&df)
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
