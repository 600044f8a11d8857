//! The store's counters, for `/metrics` and the logs. Plain atomics, read
//! by `/metrics` at scrape time, but for the WAL write latency: a
//! `prometheus-client` [`Histogram`], whose observations and cumulative
//! buckets that crate keeps (the store depends on its metric type, never on
//! `serve`, which registers it).

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// The write path's failures not yet followed by a success (`/readyz`).
    pub write_path: Mutex<WritePath>,
}

/// A part of the write path that failed and has not succeeded since.
#[derive(Debug, Clone, PartialEq)]
pub struct Failing {
    /// The first failure of this run of failures.
    pub since: Instant,
    /// The latest failure.
    pub at: Instant,
    /// The latest failure's error.
    pub error: String,
    /// The bytes the latest failed write carried.
    pub bytes: usize,
}

/// What of the write path is failing now: the WAL's group commits (every
/// acknowledgement waits on one) and the flushes to Parquet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritePath {
    pub wal: Option<Failing>,
    pub flush: Option<Failing>,
}

impl WritePath {
    /// Record a failure of `part` (`bytes` written, `error`), or its success.
    pub fn note(part: &mut Option<Failing>, outcome: Result<(), (&str, usize)>) {
        match outcome {
            Ok(()) => *part = None,
            Err((error, bytes)) => {
                let now = Instant::now();
                *part = Some(Failing {
                    since: part.as_ref().map_or(now, |f| f.since),
                    at: now,
                    error: error.to_string(),
                    bytes,
                });
            }
        }
    }
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
            write_path: Mutex::default(),
        }
    }
}

impl Stats {
    /// Record how a WAL group commit of `bytes` went.
    pub fn note_wal(&self, outcome: Result<(), &str>, bytes: usize) {
        let mut w = self.write_path.lock().unwrap_or_else(|e| e.into_inner());
        if outcome.is_ok() && w.wal.is_none() {
            return;
        }
        WritePath::note(&mut w.wal, outcome.map_err(|e| (e, bytes)));
    }

    /// Record how a flush to Parquet went.
    pub fn note_flush(&self, outcome: Result<(), &str>) {
        let mut w = self.write_path.lock().unwrap_or_else(|e| e.into_inner());
        WritePath::note(&mut w.flush, outcome.map_err(|e| (e, 0)));
    }

    /// The write path's failures now.
    pub fn write_path(&self) -> WritePath {
        self.write_path
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Count one WAL write (append and fdatasync) that took `took`.
    pub fn observe_wal_sync(&self, took: Duration) {
        self.wal_sync.observe(took.as_secs_f64());
    }
}
