//! The store's counters, for `/metrics` and the logs. Plain atomics, read
//! by `/metrics` at scrape time, but for the WAL write latency: a
//! `prometheus-client` [`Histogram`], whose observations and cumulative
//! buckets that crate keeps (the store depends on its metric type, never on
//! `serve`, which registers it).

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;

/// Counters for `/metrics` and the logs.
#[derive(Debug)]
pub struct Stats {
    pub spans_stored: AtomicU64,
    pub spans_duplicate: AtomicU64,
    pub requests_refused: AtomicU64,
    pub wal_bytes: AtomicU64,
    /// WAL writes (append and fdatasync) by latency, in seconds, over
    /// [`WAL_SYNC_BUCKETS`] (and `+Inf`). A handle: clones share it.
    pub wal_sync: Histogram,
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

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            spans_stored: AtomicU64::default(),
            spans_duplicate: AtomicU64::default(),
            requests_refused: AtomicU64::default(),
            wal_bytes: AtomicU64::default(),
            wal_sync: Histogram::new(WAL_SYNC_BUCKETS),
            wal_failures: AtomicU64::default(),
            flushes: AtomicU64::default(),
            flush_failures: AtomicU64::default(),
            compactions: AtomicU64::default(),
            seal_compactions: AtomicU64::default(),
            seal_failures: AtomicU64::default(),
            maintenance_panics: Default::default(),
            memtable_rows: AtomicUsize::default(),
            memtable_rows_peak: AtomicUsize::default(),
            pending_bytes: AtomicUsize::default(),
        }
    }
}

impl Stats {
    /// Count one WAL write (append and fdatasync) that took `took`.
    pub fn observe_wal_sync(&self, took: Duration) {
        self.wal_sync.observe(took.as_secs_f64());
    }
}
