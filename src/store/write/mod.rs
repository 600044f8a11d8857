//! write

pub mod frozen;
pub mod memtable;
pub mod wal;
pub mod writer;
