//! The embedded store: a write-ahead log with group commit (a span is
//! acknowledged only once it is fsynced), Parquet parts under
//! `spans/date=YYYY-MM-DD/` (the live ones named by the day's `_parts.json`)
//! written from the log by a background flusher, compaction of small parts,
//! seal compaction of finished days (a few large files sorted by trace, see
//! [`seal`]), retention, the per-tool daily rollup, and readers that hand
//! out polars `LazyFrame`s (and a trace lookup that decodes only the row
//! groups that can hold the trace). Files are never rewritten in place nor
//! renamed over; a file a change replaces is retired and deleted only once
//! no reader can hold it ([`retire`]). Knows nothing of detectors.
//!
//! Threads: one writer owns the WAL and the memtable; one flusher turns
//! frozen memtables into Parquet and runs compaction, rollups and retention.
//! Both are plain OS threads, so polars work never lands on async workers.

mod catalog;
mod compaction;
mod error;
mod format;
pub mod fsutil;
pub mod hooks;
mod maintain;
mod open;
pub mod read;
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

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use catalog::layout::{self, Layout};
pub use catalog::retire::{self, Pin};
pub use compaction::{ManifestUpdate, SealOptions, SealReport};
pub use error::StoreError;
pub use format::{frame, parquet};
pub use maintain::rollup;
pub use maintain::seal::{seal_compact_publishing, Publish};
pub use read::{ReadStats, Reader, RollupStamp, Rollups, Scan};
pub use stats::{Failing, Stats, WritePath, MAINTENANCE_TASKS, WAL_SYNC_BUCKETS};
pub use write::wal;

use crate::ingest::Prepared;
use maintain::flusher;
use open::replay;
use write::frozen::Frozen;
use write::writer;
// The old flat names, for the tests beside this file.
#[cfg(test)]
use {
    catalog::{commit, manifest, rollup_set, stage},
    format::rowgroup,
    maintain::seal,
    write::frozen,
    write::memtable,
};

/// Tuning of the write path; the defaults suit one machine and a few
/// hundred thousand spans a second.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Flush the memtable to Parquet at least this often when it holds rows.
    pub flush_interval: Duration,
    /// ... or once it holds this many rows,
    pub flush_rows: usize,
    /// ... or this many bytes.
    pub flush_bytes: usize,
    /// Requests waiting for the WAL beyond this many bytes are refused
    /// (HTTP 429 with Retry-After): the bound on queued memory.
    pub max_pending_bytes: usize,
    /// Memtable plus the table being flushed; past it the writer waits for
    /// the flusher, the queue fills and requests are refused.
    pub max_memory_bytes: usize,
    /// Merge a day's flush outputs into one part once it has this many.
    pub compact_parts: usize,
    /// Delete days older than this many days (`None`: keep everything).
    pub retention_days: Option<u32>,
    /// Days of stored span keys held for dedup.
    pub dedup_days: usize,
    /// Refresh the rollup of days changed by flushes this often.
    pub rollup_interval: Duration,
    /// Seal-compact a day once it ended this long ago (`None`: never).
    pub seal_after: Option<Duration>,
    /// How seal compaction sizes its sub-ranges and row groups.
    pub seal: SealOptions,
    /// A replaced file stays on disk at least this long after it was
    /// replaced, for reads from other processes (`sweep` from cron, `mcp
    /// --stdio`), which this one cannot see; reads in this process hold
    /// pins and need no grace.
    pub retired_grace: Duration,
    /// This node's id, in the names of the parts it ships to a shared
    /// store (`--node-id`; only used when the layout ships).
    pub node_id: Option<String>,
    /// The data directory is a copy of this shared store (the detect
    /// role): pulled, sealed and kept by the lease holder.
    pub mirror: Option<Arc<dyn hooks::Upstream>>,
    /// The span times the receivers and `import` accept, judged at receive
    /// time ([`Store::window_now`]): `ingest.max_future_secs` and the
    /// retention (over a shared store the cluster's, not an ingest node's
    /// dedup window). Replay and [`crate::ingest::prepare`] take any time.
    pub accept: crate::ingest::TimeBounds,
    /// The result shapes users declared for their own tools
    /// (`[[ingest.result_failures]]`): read at receive time and on replay
    /// alike, so a replayed span is classified as it was acknowledged.
    pub result_shapes: std::sync::Arc<crate::ingest::ResultShapes>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            flush_interval: Duration::from_secs(10),
            flush_rows: 100_000,
            flush_bytes: 192 << 20,
            max_pending_bytes: 256 << 20,
            max_memory_bytes: 256 << 20,
            compact_parts: 8,
            retention_days: None,
            dedup_days: 3,
            rollup_interval: Duration::from_secs(30),
            seal_after: Some(Duration::from_secs(3600)),
            seal: SealOptions::default(),
            retired_grace: Duration::from_secs(600),
            node_id: None,
            mirror: None,
            accept: crate::ingest::TimeBounds::default(),
            result_shapes: Default::default(),
        }
    }
}

/// How long `flush` waits for its commit.
const FLUSH_WAIT: Duration = Duration::from_secs(60);

/// What the store did with an acknowledged request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ack {
    /// Spans stored for the first time.
    pub stored: usize,
    /// Spans already stored (a redelivery), dropped.
    pub duplicates: usize,
}

/// What recovery found on open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    pub finished_commit: bool,
    pub segments: usize,
    pub records: usize,
    pub spans: usize,
    pub torn_tails: usize,
    /// Parts written during the replay, to keep the memtable within its limits.
    pub flushes: usize,
}

struct Shared {
    layout: Layout,
    opts: StoreOptions,
    stats: Stats,
    /// The table the flusher is writing; its rows stay visible to dedup.
    frozen: Mutex<Option<Arc<Frozen>>>,
    flusher_idle: Condvar,
    /// Set by `close`: the flusher stops retrying a failing flush.
    closing: AtomicBool,
    /// A frozen table was abandoned uncommitted: no commit may run any more.
    poisoned: AtomicBool,
    flusher_alive: AtomicBool,
    /// Why the flusher thread stopped, once it has.
    flusher_stopped: Mutex<Option<String>>,
}

impl Shared {
    /// Why writes are refused, if they are: with no flusher nothing would
    /// ever leave the memtable (and the WAL would only grow).
    fn refusal(&self) -> Option<StoreError> {
        let reason = if !self.flusher_alive.load(Ordering::Acquire) {
            self.flusher_stopped
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_else(|| "the flusher thread has stopped".into())
        } else if self.poisoned.load(Ordering::Acquire) {
            "a flush was abandoned at shutdown".into()
        } else {
            return None;
        };
        Some(StoreError::Unavailable { reason })
    }
}

enum Cmd {
    Submit(Submission),
    Flush(FlushReply),
    Shutdown,
}

/// Where a flush's result goes: an async caller's oneshot, or a blocking
/// caller's channel (which it can wait on with a deadline).
enum FlushReply {
    Async(tokio::sync::oneshot::Sender<Result<(), StoreError>>),
    Blocking(mpsc::SyncSender<Result<(), StoreError>>),
}

impl FlushReply {
    /// Hand the caller its result (a caller that stopped waiting is fine).
    fn send(self, result: Result<(), StoreError>) {
        match self {
            FlushReply::Async(tx) => {
                let _ = tx.send(result);
            }
            FlushReply::Blocking(tx) => {
                let _ = tx.try_send(result);
            }
        }
    }
}

struct Submission {
    payload: bytes::Bytes,
    batch: Box<crate::ingest::SpanBatch>,
    bytes: usize,
    reply: tokio::sync::oneshot::Sender<Result<Ack, StoreError>>,
}

/// A pending acknowledgement: await it, or `wait` from a plain thread.
pub struct PendingAck(tokio::sync::oneshot::Receiver<Result<Ack, StoreError>>);

impl PendingAck {
    pub async fn done(self) -> Result<Ack, StoreError> {
        self.0.await.unwrap_or(Err(StoreError::Closed))
    }

    pub fn wait(self) -> Result<Ack, StoreError> {
        self.0.blocking_recv().unwrap_or(Err(StoreError::Closed))
    }
}

/// The open, writable store. One process holds a data directory at a time.
pub struct Store {
    shared: Arc<Shared>,
    tx: Mutex<Option<mpsc::Sender<Cmd>>>,
    /// The flusher's own channel, for jobs that are not flushes.
    jobs: Mutex<Option<mpsc::Sender<flusher::Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: Recovery,
    lock: File,
}

impl Store {
    /// Open (creating if needed) the store in `dir`: take the lock, finish
    /// an interrupted commit, replay the WAL, start the writer and flusher.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        Store::open_layout(Layout::new(dir), opts)
    }

    /// `open` on a layout that may ship its flushes to a shared store
    /// ([`Layout::shipping`]).
    pub fn open_layout(layout: Layout, opts: StoreOptions) -> Result<Store, StoreError> {
        let dir = layout.root().to_path_buf();
        let dir = dir.as_path();
        layout.create()?;
        let lock_path = layout.lock();
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::io(format!("opening {}", lock_path.display()), e))?;
        if lock.try_lock().is_err() {
            return Err(StoreError::Locked {
                dir: dir.display().to_string(),
                lock: lock_path.display().to_string(),
            });
        }
        let shared = Arc::new(Shared {
            layout,
            opts,
            stats: Stats::default(),
            frozen: Mutex::new(None),
            flusher_idle: Condvar::new(),
            closing: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            flusher_alive: AtomicBool::new(true),
            flusher_stopped: Mutex::new(None),
        });
        let (state, recovery) = replay::recover(&shared)?;
        // What a crash (or a stop within the grace) left retired.
        let reclaimed = retire::reclaim(&shared.layout, shared.opts.retired_grace)?;
        if reclaimed > 0 {
            tracing::info!(
                files = reclaimed,
                "deleted files replaced before the last stop"
            );
        }
        let (tx, rx) = mpsc::channel();
        let (job_tx, job_rx) = mpsc::channel();
        let jobs = job_tx.clone();
        let to_flusher: writer::HandOff = Box::new(move |frozen, waiters| {
            job_tx
                .send(flusher::Job::Flush { frozen, waiters })
                .map_err(|e| match e.0 {
                    flusher::Job::Flush { waiters, .. } => waiters,
                    _ => Vec::new(),
                })
        });
        let w = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("stormwatch-wal".into())
            .spawn(move || writer::run(w, state, rx, to_flusher))
            .map_err(|e| StoreError::io("starting the WAL writer thread", e))?;
        let f = Arc::clone(&shared);
        let flusher = std::thread::Builder::new()
            .name("stormwatch-flush".into())
            .spawn(move || flusher::run(f, job_rx))
            .map_err(|e| StoreError::io("starting the flusher thread", e))?;
        if recovery != Recovery::default() {
            tracing::info!(
                finished_commit = recovery.finished_commit,
                segments = recovery.segments,
                records = recovery.records,
                spans = recovery.spans,
                torn_tails = recovery.torn_tails,
                flushes = recovery.flushes,
                "recovered the write-ahead log"
            );
        }
        Ok(Store {
            shared,
            tx: Mutex::new(Some(tx)),
            jobs: Mutex::new(Some(jobs)),
            threads: Mutex::new(vec![writer, flusher]),
            recovery,
            lock,
        })
    }

    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    pub fn layout(&self) -> &Layout {
        &self.shared.layout
    }

    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Whether the flusher thread runs (without it, writes are refused).
    pub fn flusher_alive(&self) -> bool {
        self.shared.flusher_alive.load(Ordering::Acquire)
    }

    /// Why the store refuses writes, `None` while it takes them.
    pub fn refusal(&self) -> Option<StoreError> {
        self.shared.refusal()
    }

    pub fn reader(&self) -> Reader {
        Reader::new(self.shared.layout.clone())
    }

    fn send(&self, cmd: Cmd) -> Result<(), StoreError> {
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(cmd)
            .map_err(|_| StoreError::Closed)
    }

    /// The span times accepted now: [`StoreOptions::accept`] at the clock.
    pub fn window_now(&self) -> crate::ingest::Window {
        let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        self.shared.opts.accept.at(now_ns)
    }

    /// The result shapes users declared ([`StoreOptions::result_shapes`]).
    pub fn result_shapes(&self) -> std::sync::Arc<crate::ingest::ResultShapes> {
        std::sync::Arc::clone(&self.shared.opts.result_shapes)
    }

    /// Queue a prepared request for the WAL. Refused at once with
    /// `Overloaded` when the queue is full; otherwise the returned ack
    /// resolves once the request is fsynced (or failed).
    pub fn submit(&self, prepared: Prepared) -> Result<PendingAck, StoreError> {
        if let Some(e) = self.shared.refusal() {
            return Err(e);
        }
        let bytes = prepared.wal_payload.len() + prepared.mem_bytes();
        let batch = Box::new(prepared.normalized.batch);
        let pending = &self.shared.stats.pending_bytes;
        let before = pending.fetch_add(bytes, Ordering::AcqRel);
        if before > 0 && before + bytes > self.shared.opts.max_pending_bytes {
            pending.fetch_sub(bytes, Ordering::AcqRel);
            self.shared
                .stats
                .requests_refused
                .fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Overloaded {
                pending_bytes: before,
                retry_after_secs: 1,
            });
        }
        let (reply, rx) = tokio::sync::oneshot::channel();
        let sent = self.send(Cmd::Submit(Submission {
            payload: prepared.wal_payload,
            batch,
            bytes,
            reply,
        }));
        if let Err(e) = sent {
            pending.fetch_sub(bytes, Ordering::AcqRel);
            return Err(e);
        }
        Ok(PendingAck(rx))
    }

    /// Write everything acknowledged so far to Parquet and refresh the
    /// rollups; returns once it is committed, or with the flush's error
    /// (the spans then stay in the WAL and the flusher keeps retrying).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.flush_within(FLUSH_WAIT)
    }

    /// `flush`, giving up waiting after `limit`. A copy of the shared store
    /// (the detect role) pulls what the shared store has first, so that
    /// "everything is readable" holds there too (but not when closing).
    pub fn flush_within(&self, limit: Duration) -> Result<(), StoreError> {
        // Not on close: a copy closing has nothing of its own to write.
        if self.shared.opts.mirror.is_some() && !self.shared.closing.load(Ordering::Acquire) {
            self.pull()?;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Cmd::Flush(FlushReply::Blocking(tx)))?;
        match rx.recv_timeout(limit) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(StoreError::Closed),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(StoreError::io(
                "flushing",
                format!("not committed within {} s", limit.as_secs()),
            )),
        }
    }

    /// `flush` for async callers: the wait runs on a blocking thread.
    pub async fn flush_async(self: &Arc<Self>) -> Result<(), StoreError> {
        if self.shared.opts.mirror.is_some() {
            let store = Arc::clone(self);
            tokio::task::spawn_blocking(move || store.pull())
                .await
                .map_err(|e| StoreError::io("pulling from the shared store", e))??;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Cmd::Flush(FlushReply::Async(tx)))?;
        rx.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Seal-compact `day` now (see [`seal`]), on the flusher thread, and
    /// wait for it: `None` when every part of the day already is a seal
    /// output. The automatic trigger is [`StoreOptions::seal_after`].
    pub fn seal_compact(&self, day: i32) -> Result<Option<SealReport>, StoreError> {
        self.on_flusher(|reply| flusher::Job::Seal { day, reply })
    }

    /// Bring a copy of the shared store up to date now, on the flusher
    /// thread, and wait (nothing to do for a store that is no copy).
    pub fn pull(&self) -> Result<hooks::Pulled, StoreError> {
        self.on_flusher(|reply| flusher::Job::Pull { reply })
    }

    /// Hand the flusher thread a job and wait for its answer.
    fn on_flusher<T>(
        &self,
        job: impl FnOnce(mpsc::Sender<Result<T, StoreError>>) -> flusher::Job,
    ) -> Result<T, StoreError> {
        let (reply, rx) = mpsc::channel();
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(job(reply))
            .map_err(|_| StoreError::Closed)?;
        rx.recv().unwrap_or(Err(StoreError::Closed))
    }

    /// What this store is a copy of, if it is one (the detect role's).
    pub fn mirror(&self) -> Option<&Arc<dyn hooks::Upstream>> {
        self.shared.opts.mirror.as_ref()
    }

    /// Tell the writer to stop (it hands its last table to the flusher) and
    /// wait for both threads; a second call finds nothing to do.
    fn stop_threads(&self) {
        // The flusher stops once the writer's channel and this one are gone.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(Cmd::Shutdown);
        }
        let threads: Vec<_> = self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }

    /// Flush, stop the threads, release the lock. What cannot be flushed
    /// stays in the WAL for the next open.
    pub fn close(&self) -> Result<(), StoreError> {
        self.shared.closing.store(true, Ordering::Release);
        let flushed = self.flush();
        self.stop_threads();
        // Another process may open the directory now.
        let _ = self.lock.unlock();
        match flushed {
            Err(StoreError::Closed) => Ok(()),
            other => other,
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::Release);
        self.stop_threads();
    }
}
