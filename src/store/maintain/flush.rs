//! Writing a frozen table: its parts staged and committed (which lets the
//! WAL segments it covers go), retried with backoff while it fails.

use std::fs;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::catalog::commit::{self, Intent};
use crate::store::catalog::stage;
use crate::store::write::frozen::Frozen;
use crate::store::{Shared, StoreError};

const RETRY_BASE: Duration = Duration::from_millis(200);
const RETRY_CAP: Duration = Duration::from_secs(30);
/// How long a flush that waits for a caller keeps retrying before it reports failure.
const WAITED_RETRY_BUDGET: Duration = Duration::from_secs(20);
/// Attempts a closing store gives a failing flush.
const CLOSING_ATTEMPTS: u32 = 3;

/// A table flushed (or given up on), and who waits for it.
pub(super) struct Flushed {
    pub(super) days: Vec<i32>,
    pub(super) waiters: Vec<crate::store::FlushReply>,
    pub(super) result: Result<(), StoreError>,
}

/// Flush a frozen table until committed, then let it go.
pub(super) fn flush_table(
    shared: &Shared,
    frozen: Arc<Frozen>,
    mut waiters: Vec<crate::store::FlushReply>,
) -> Flushed {
    let days = frozen.days();
    let result = flush_until_committed(shared, &frozen, &mut waiters);
    // Dedup may forget the frozen rows now: they are in parts, or
    // (abandoned at shutdown) still in the WAL, which nothing deletes.
    // Released before compaction, so their memory goes and the writer
    // can hand off its next table while the parts are merged.
    *shared.frozen.lock().unwrap_or_else(|e| e.into_inner()) = None;
    drop(frozen);
    shared.flusher_idle.notify_all();
    Flushed {
        days,
        waiters,
        result,
    }
}

/// Flush until the table is committed. A flush that keeps failing keeps its
/// WAL segments and is retried with backoff for as long as the store runs
/// (waiters hear of the failure after a while, the retries go on); only a
/// closing store abandons it, and then no later commit may run.
fn flush_until_committed(
    shared: &Shared,
    frozen: &Frozen,
    waiters: &mut Vec<crate::store::FlushReply>,
) -> Result<(), StoreError> {
    let started = Instant::now();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let result = if shared.poisoned.load(Ordering::Acquire) {
            Err(StoreError::Closed)
        } else {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| flush(shared, frozen)))
                .unwrap_or_else(|_| Err(StoreError::data("flushing", "the flush panicked")))
        };
        let e = match result {
            Ok(()) => {
                shared.stats.flushes.fetch_add(1, Ordering::Relaxed);
                shared.stats.note_flush(Ok(()));
                if attempt > 1 {
                    tracing::info!(
                        attempts = attempt,
                        waited_ms = started.elapsed().as_millis() as u64,
                        "flush succeeded after retrying"
                    );
                }
                return Ok(());
            }
            Err(e) => e,
        };
        shared.stats.flush_failures.fetch_add(1, Ordering::Relaxed);
        shared.stats.note_flush(Err(&e.to_string()));
        let waited = started.elapsed();
        if shared.closing.load(Ordering::Acquire)
            && (attempt >= CLOSING_ATTEMPTS || waited >= WAITED_RETRY_BUDGET)
        {
            shared.poisoned.store(true, Ordering::Release);
            tracing::error!(error = %e, attempts = attempt, waited_ms = waited.as_millis() as u64, "giving up on this flush at shutdown; its spans stay in the WAL and are flushed after the next start");
            return Err(e);
        }
        if !waiters.is_empty() && waited >= WAITED_RETRY_BUDGET {
            tracing::error!(error = %e, attempts = attempt, waited_ms = waited.as_millis() as u64, "flush still failing; telling the callers, and retrying in the background");
            for w in waiters.drain(..) {
                w.send(Err(e.clone()));
            }
        }
        let delay = crate::retry::full_jitter(RETRY_BASE, RETRY_CAP, attempt);
        tracing::warn!(error = %e, attempt, retry_in_ms = delay.as_millis() as u64, "flush to Parquet failed; the WAL keeps the spans, retrying");
        let until = Instant::now() + delay;
        while Instant::now() < until && !shared.closing.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20).min(delay));
        }
    }
}

/// Write one part per day, then commit them with the WAL segments they cover.
pub fn flush(shared: &Shared, frozen: &Frozen) -> Result<(), StoreError> {
    let layout = shared.layout();
    // A retry after a commit that failed past its intent (an upload to the
    // shared store) finishes that commit rather than writing the table
    // again.
    if commit::finish_covering(&shared.catalog, frozen.wal_upto)? {
        return Ok(());
    }
    let mut intent = Intent {
        wal_upto: Some(frozen.wal_upto),
        rollup_days: frozen.days(),
        ..Intent::default()
    };
    // An ingest node's parts carry its id, and go to the shared store
    // before the WAL segments do.
    let node = layout.ship().and(shared.opts.node_id.as_deref());
    intent.ship_to = layout.ship().map(|r| r.url().to_string());
    let shipper = layout.ship().filter(|_| node.is_some());
    let written = (|| {
        let mut frames = frozen
            .frames()
            .map_err(|e| StoreError::data("building a part", e))?;
        for (day, df) in frames.iter_mut() {
            let tag = match node {
                Some(n) => format!("{n}-{}", stage::new_part_tag()),
                None => stage::new_part_tag(),
            };
            let (tmp, fin) = stage::write_tmp_part(layout, day, &tag, df)?;
            if let Some(shipper) = shipper {
                intent.uploads.push((fin.clone(), shipper.name(day, &fin)));
            }
            intent.renames.push((tmp, fin));
        }
        Ok(())
    })();
    if let Err(e) = written {
        for (tmp, _) in &intent.renames {
            let _ = fs::remove_file(layout.absolute(tmp));
        }
        return Err(e);
    }
    commit::commit(&shared.catalog, &intent)
}
