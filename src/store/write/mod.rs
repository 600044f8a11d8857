//! write

pub mod frozen;
pub mod memtable;
pub mod shared;
pub mod wal;
pub mod writer;
