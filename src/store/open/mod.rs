//! The open, writable [`Store`]: taking the directory's lock, recovery
//! ([`replay`]), starting the writer and flusher threads, and the handle's
//! calls (submit, flush, seal compaction, pull, close).

pub mod replay;

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ingest::Prepared;
use crate::store::catalog::retire;
use crate::store::hooks;
use crate::store::maintain::flusher;
use crate::store::write::shared::{Cmd, FlushReply, Shared, Submission};
use crate::store::write::writer;
use crate::store::{
    Catalog, Layout, PendingAck, Reader, SealReport, Stats, StoreError, StoreOptions,
};

/// How long `flush` waits for its commit.
const FLUSH_WAIT: Duration = Duration::from_secs(60);

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

/// The open, writable store. One process holds a data directory at a time.
pub struct Store {
    pub(in crate::store) shared: Arc<Shared>,
    pub(in crate::store) tx: Mutex<Option<mpsc::Sender<Cmd>>>,
    /// The flusher's own channel, for jobs that are not flushes.
    pub(in crate::store) jobs: Mutex<Option<mpsc::Sender<flusher::Job>>>,
    pub(in crate::store) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(in crate::store) recovery: Recovery,
    pub(in crate::store) lock: File,
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
        let lock = crate::store::fsutil::open_lock_file(&lock_path)?;
        if lock.try_lock().is_err() {
            return Err(StoreError::Locked {
                dir: dir.display().to_string(),
                lock: lock_path.display().to_string(),
            });
        }
        let shared = Arc::new(Shared {
            catalog: Catalog::new(layout),
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
        let reclaimed = retire::reclaim(&shared.catalog, shared.opts.retired_grace)?;
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
        self.shared.layout()
    }

    /// The data directory's catalog, which every reader of this store shares.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.shared.catalog
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
        Reader::new(Arc::clone(&self.shared.catalog))
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

    /// Seal-compact `day` now (see [`crate::store::maintain::seal`]), on the flusher thread, and
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
