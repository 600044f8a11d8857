//! The store's counters, for `/metrics` and the logs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Counters for `/metrics` and the logs.
#[derive(Debug, Default)]
pub struct Stats {
    pub spans_stored: AtomicU64,
    pub spans_duplicate: AtomicU64,
    pub requests_refused: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub wal_sync_nanos: AtomicU64,
    /// WAL writes (write + fdatasync) per latency bucket of [`WAL_SYNC_BUCKETS`].
    pub wal_sync_buckets: [AtomicU64; WAL_SYNC_BUCKETS.len()],
    pub wal_failures: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_failures: AtomicU64,
    pub compactions: AtomicU64,
    pub seal_compactions: AtomicU64,
    pub seal_failures: AtomicU64,
    /// Panics caught in the flusher's maintenance tasks, by [`MAINTENANCE_TASKS`].
    pub maintenance_panics: [AtomicU64; MAINTENANCE_TASKS.len()],
    pub memtable_rows: AtomicUsize,
    /// The most rows the memtable has held (WAL replay included).
    pub memtable_rows_peak: AtomicUsize,
    pub pending_bytes: AtomicUsize,
}

/// The flusher's maintenance tasks, as `maintenance_panics` counts them.
pub const MAINTENANCE_TASKS: [&str; 3] = ["compact", "rollup", "retention"];

/// Upper bounds (seconds) of the WAL write latency histogram.
pub const WAL_SYNC_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

impl Stats {
    /// Count one WAL write (append and fdatasync) that took `took`.
    pub fn observe_wal_sync(&self, took: Duration) {
        self.wal_sync_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        self.wal_syncs.fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        if let Some(i) = WAL_SYNC_BUCKETS.iter().position(|b| secs <= *b) {
            self.wal_sync_buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}
