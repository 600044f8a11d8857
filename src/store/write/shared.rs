//! What the writer thread shares with the flusher thread and the store's
//! handle: the [`Shared`] state, the commands the handle sends the writer,
//! and the acknowledgements it hands back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use crate::store::write::frozen::Frozen;
use crate::store::{Catalog, Layout, Stats, StoreError, StoreOptions};

/// What the store did with an acknowledged request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ack {
    /// Spans stored for the first time.
    pub stored: usize,
    /// Spans already stored (a redelivery), dropped.
    pub duplicates: usize,
}

pub(in crate::store) struct Shared {
    /// The data directory, shared with every reader the handle gives out.
    pub(in crate::store) catalog: Arc<Catalog>,
    pub(in crate::store) opts: StoreOptions,
    pub(in crate::store) stats: Stats,
    /// The table the flusher is writing; its rows stay visible to dedup.
    pub(in crate::store) frozen: Mutex<Option<Arc<Frozen>>>,
    pub(in crate::store) flusher_idle: Condvar,
    /// Set by `close`: the flusher stops retrying a failing flush.
    pub(in crate::store) closing: AtomicBool,
    /// A frozen table was abandoned uncommitted: no commit may run any more.
    pub(in crate::store) poisoned: AtomicBool,
    pub(in crate::store) flusher_alive: AtomicBool,
    /// Why the flusher thread stopped, once it has.
    pub(in crate::store) flusher_stopped: Mutex<Option<String>>,
}

impl Shared {
    pub(in crate::store) fn layout(&self) -> &Layout {
        self.catalog.layout()
    }

    /// Why writes are refused, if they are: with no flusher nothing would
    /// ever leave the memtable (and the WAL would only grow).
    pub(in crate::store) fn refusal(&self) -> Option<StoreError> {
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

pub(in crate::store) enum Cmd {
    Submit(Submission),
    Flush(FlushReply),
    Shutdown,
}

/// Where a flush's result goes: an async caller's oneshot, or a blocking
/// caller's channel (which it can wait on with a deadline).
pub(in crate::store) enum FlushReply {
    Async(tokio::sync::oneshot::Sender<Result<(), StoreError>>),
    Blocking(mpsc::SyncSender<Result<(), StoreError>>),
}

impl FlushReply {
    /// Hand the caller its result (a caller that stopped waiting is fine).
    pub(in crate::store) fn send(self, result: Result<(), StoreError>) {
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

pub(in crate::store) struct Submission {
    pub(in crate::store) payload: bytes::Bytes,
    pub(in crate::store) batch: Box<crate::ingest::SpanBatch>,
    pub(in crate::store) bytes: usize,
    pub(in crate::store) reply: tokio::sync::oneshot::Sender<Result<Ack, StoreError>>,
}

/// A pending acknowledgement: await it, or `wait` from a plain thread.
pub struct PendingAck(pub(in crate::store) tokio::sync::oneshot::Receiver<Result<Ack, StoreError>>);

impl PendingAck {
    pub async fn done(self) -> Result<Ack, StoreError> {
        self.0.await.unwrap_or(Err(StoreError::Closed))
    }

    pub fn wait(self) -> Result<Ack, StoreError> {
        self.0.blocking_recv().unwrap_or(Err(StoreError::Closed))
    }
}
