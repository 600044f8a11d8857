//! The on-disk format of spans: the Arrow/polars frame of a batch
//! ([`frame`]), Parquet files written durably and scanned back
//! ([`parquet`]), row groups copied between files as compressed pages
//! ([`pages`]), row-group statistics for trace lookups ([`rowgroup`]),
//! and the Parquet writer of every file the store writes ([`writer`]).
//! Knows no directory layout and no commit.

pub mod frame;
pub mod pages;
pub mod parquet;
pub mod rowgroup;
pub mod writer;
