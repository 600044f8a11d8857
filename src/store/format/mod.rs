//! The on-disk format of spans: the Arrow/polars frame of a batch
//! ([`frame`]), Parquet files written durably and scanned back
//! ([`parquet`]), and row-group statistics for trace lookups
//! ([`rowgroup`]). Knows no directory layout and no commit.

pub mod frame;
pub mod parquet;
pub mod rowgroup;
