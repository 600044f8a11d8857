//! The embedded store: a write-ahead log with group commit (a span is
//! acknowledged only once it is fsynced), Parquet parts under
//! `spans/date=YYYY-MM-DD/` (the live ones named by the day's `_parts.json`)
//! written from the log by a background flusher, compaction of small parts,
//! seal compaction of finished days (a few large files sorted by trace, see
//! [`maintain::seal`]), retention, the per-tool daily rollup, and readers that hand
//! out polars `LazyFrame`s (and a trace lookup that decodes only the row
//! groups that can hold the trace). Files are never rewritten in place nor
//! renamed over; a file a change replaces is retired and deleted only once
//! no reader can hold it ([`retire`]). Knows nothing of detectors.
//!
//! Threads: one writer owns the WAL and the memtable; one flusher turns
//! frozen memtables into Parquet and runs compaction, rollups and retention.
//! Both are plain OS threads, so polars work never lands on async workers.

mod catalog;
mod error;
mod format;
pub mod fsutil;
pub mod hooks;
mod maintain;
mod open;
mod options;
pub mod read;
mod seal_types;
mod segments;
mod stats;
mod write;

#[cfg(test)]
pub(crate) mod seal_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_columnar;
#[cfg(test)]
mod tests_control;
#[cfg(test)]
mod tests_dependency;
#[cfg(test)]
mod tests_parts;
#[cfg(test)]
mod tests_retire;
#[cfg(test)]
mod tests_wal;

pub use catalog::handle::Catalog;
pub use catalog::layout::{self, Layout};
pub use catalog::retire::{self, Pin};
pub use catalog::summary::SummaryManifest;
pub use error::StoreError;
pub use format::{frame, parquet};
pub use maintain::rollup;
pub use maintain::seal::{seal_compact, seal_compact_publishing, Publish};
pub use read::{DayParts, ReadStats, Reader, RollupStamp, Rollups, Scan};
pub use seal_types::{ManifestUpdate, SealOptions, SealReport};
pub use stats::{Failing, Stats, WritePath, MAINTENANCE_TASKS, WAL_SYNC_BUCKETS};
pub use write::wal;

pub use open::{Recovery, Store};
pub use options::StoreOptions;
pub use write::shared::{Ack, PendingAck};
use write::shared::{Cmd, FlushReply, Shared, Submission};
// The old flat names, for the tests beside this file.
#[cfg(test)]
use {
    catalog::{commit, manifest, rollup_set, stage},
    format::rowgroup,
    maintain::seal,
    write::frozen,
    write::memtable,
    write::writer,
};
