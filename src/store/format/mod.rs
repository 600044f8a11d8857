//! format

pub mod frame;
pub mod parquet;
pub mod rowgroup;
