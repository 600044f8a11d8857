//! The write path: the write-ahead log ([`wal`]), the memtable with its
//! dedup keys ([`memtable`]), frozen tables on their way to Parquet
//! ([`frozen`]), the writer thread's group commit ([`writer`]), and the
//! state it shares with the flusher and the handle ([`shared`]).

pub mod frozen;
pub mod memtable;
pub mod shared;
pub mod wal;
pub mod writer;
