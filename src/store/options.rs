//! How the store is tuned: [`StoreOptions`], the write path's limits and
//! the maintenance schedule, with their defaults.

use std::time::Duration;

use std::sync::Arc;

use crate::store::hooks;
use crate::store::SealOptions;

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
    /// time ([`crate::store::Store::window_now`]): `ingest.max_future_secs` and the
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
