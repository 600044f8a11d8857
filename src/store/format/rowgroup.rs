//! Parquet footers and row groups: reading a part's footer, the min/max
//! statistics of a string column per row group, and reading only chosen row
//! groups of a part (so a reader pays for what the statistics let through,
//! and a rewrite holds one row group in memory at a time).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use polars::prelude::*;

use crate::store::{format::frame, StoreError};

/// The footer of a Parquet file.
pub fn footer(path: &Path) -> Result<FileMetadataRef, StoreError> {
    let context = || format!("reading the footer of {}", path.display());
    let file = File::open(path).map_err(|e| StoreError::io(context(), e))?;
    let mut reader = ParquetReader::new(file);
    reader
        .get_metadata()
        .cloned()
        .map_err(|e| StoreError::data(context(), e))
}

/// The (min, max) statistics of string column `column` in row group `group`,
/// as bytes; `None` when the writer recorded none (then the group may hold
/// anything).
pub fn str_range(md: &FileMetadataRef, group: usize, column: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let rg = md.row_groups.get(group)?;
    let chunk = rg.columns_under_root_iter(column)?.next()?;
    let stats = chunk.statistics(&md.footer_buf)?.ok()?.into_binary()?;
    Some((stats.min_value?, stats.max_value?))
}

/// Whether row group `group`'s statistics of `column` admit `value`.
pub fn may_contain(md: &FileMetadataRef, group: usize, column: &str, value: &str) -> bool {
    match str_range(md, group, column) {
        Some((min, max)) => {
            min.as_slice() <= value.as_bytes() && value.as_bytes() <= max.as_slice()
        }
        None => true,
    }
}

/// Read row groups `groups` (in file order) of the span part at `path`,
/// with the span schema of this version (columns the part lacks read as
/// null), or only `columns` when given.
pub fn read_groups(
    path: &Path,
    md: &FileMetadataRef,
    groups: &[usize],
    columns: Option<&[&str]>,
) -> PolarsResult<DataFrame> {
    let mut pruned = (**md).clone();
    pruned.row_groups = groups
        .iter()
        .filter_map(|&g| md.row_groups.get(g).cloned())
        .collect();
    pruned.num_rows = pruned.row_groups.iter().map(|rg| rg.num_rows()).sum();
    pruned.max_row_group_height = pruned
        .row_groups
        .iter()
        .map(|rg| rg.num_rows())
        .max()
        .unwrap_or(0);
    let file = File::open(path)?;
    let mut reader = ParquetReader::new(file);
    reader.set_metadata(Arc::new(pruned));
    let present: Vec<String> = reader
        .schema()?
        .iter_names()
        .map(|n| n.to_string())
        .collect();
    let wanted: Vec<String> = match columns {
        Some(cols) => cols.iter().map(|c| c.to_string()).collect(),
        None => frame::schema()
            .iter_names()
            .map(|n| n.to_string())
            .collect(),
    };
    let read: Vec<String> = wanted
        .iter()
        .filter(|c| present.contains(c))
        .cloned()
        .collect();
    let df = reader.with_columns(Some(read)).finish()?;
    conform(df, &wanted)
}

/// `df` with exactly `columns` of the span schema, in that order, typed as
/// the schema says; a column `df` lacks is all null.
pub fn conform(df: DataFrame, columns: &[String]) -> PolarsResult<DataFrame> {
    let schema = frame::schema();
    let exprs: Vec<Expr> = columns
        .iter()
        .map(|name| {
            let dtype = schema
                .get(name.as_str())
                .cloned()
                .unwrap_or(DataType::String);
            if df.schema().contains(name.as_str()) {
                col(name.as_str()).cast(dtype)
            } else {
                lit(NULL).cast(dtype).alias(name.as_str())
            }
        })
        .collect();
    df.lazy().select(exprs).collect()
}
