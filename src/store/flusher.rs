//! The flusher thread: writes frozen memtables to Parquet parts and commits
//! them (which lets the WAL segments they cover go), then keeps the files in
//! shape: compaction of small parts ([`compact`]; tables handed off during a
//! merge are flushed between its parts), the rollup of changed days,
//! retention, and the deletion of retired files no reader holds any more
//! ([`retire::reclaim`], after every flush and its merges, and every half second). Its own
//! reads (compaction, seal, rollup) need no pin: nothing else deletes.
//! A failed flush keeps its WAL segments and is retried with backoff.
//! On a copy of the shared store (the detect role) it also pulls the shared
//! store's parts in, and, while this node holds the lease, publishes its
//! seals there and keeps the shared store trimmed (through its
//! [`Upstream`](super::hooks::Upstream)).

use std::collections::{BTreeSet, VecDeque};
use std::fs;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::commit::{self, Intent};
use super::frozen::Frozen;
use super::hooks::Pulled;
use super::seal::SealReport;
use super::sealer::{self, Sealer};
use super::{compact, parquet, retire, rollup, Shared, StoreError};
use crate::model::{day_to_string, NANOS_PER_DAY};

/// What the flusher is asked to do.
pub enum Job {
    /// Write a table, and tell who waits for it.
    Flush {
        frozen: Arc<Frozen>,
        waiters: Vec<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
    },
    /// Seal-compact a day now, and answer.
    Seal {
        day: i32,
        reply: std::sync::mpsc::Sender<Result<Option<SealReport>, StoreError>>,
    },
    /// Bring a copy of the shared store up to date now, and answer.
    Pull {
        reply: std::sync::mpsc::Sender<Result<Pulled, StoreError>>,
    },
}

const RETRY_BASE: Duration = Duration::from_millis(200);
const RETRY_CAP: Duration = Duration::from_secs(30);
/// How long a flush that waits for a caller keeps retrying before it reports failure.
const WAITED_RETRY_BUDGET: Duration = Duration::from_secs(20);
/// Attempts a closing store gives a failing flush.
const CLOSING_ATTEMPTS: u32 = 3;

/// Marks the flusher gone (and its table released) however it exits, so
/// the writer never waits for a flusher that is not there, and refuses
/// writes from then on.
struct Alive<'a>(&'a Shared);

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0
            .flusher_stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| "the flusher thread has exited".into());
        self.0.flusher_alive.store(false, Ordering::Release);
        *self.0.frozen.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.0.flusher_idle.notify_all();
    }
}

/// The text of a caught panic.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The flusher's maintenance tasks, each guarded on its own.
#[derive(Debug, Clone, Copy)]
pub(super) enum Task {
    Compact = 0,
    Rollup = 1,
    Retention = 2,
}

impl Task {
    fn name(self) -> &'static str {
        super::MAINTENANCE_TASKS[self as usize]
    }
}

/// Run a maintenance task; a panic in it is logged, counted, and survived
/// (the files stay as the last commit left them; the task runs again later).
pub(super) fn guarded(shared: &Shared, task: Task, f: impl FnOnce()) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        shared.stats.maintenance_panics[task as usize].fetch_add(1, Ordering::Relaxed);
        tracing::error!(task = task.name(), panic = %panic_text(p.as_ref()), "a store maintenance task panicked; skipped, the flusher carries on");
    }
}

pub fn run(shared: Arc<Shared>, jobs: Receiver<Job>) {
    let _alive = Alive(&shared);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_loop(&shared, jobs)));
    if let Err(p) = ran {
        tracing::error!(panic = %panic_text(p.as_ref()), "the flusher thread panicked and stopped; the store refuses writes until stormwatch is restarted (acknowledged spans are safe in the WAL)");
        // Said to clients too, so no panic text (it may name local paths).
        *shared
            .flusher_stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner()) =
            Some("the flusher thread panicked (see the server log)".into());
    }
}

fn run_loop(shared: &Shared, jobs: Receiver<Job>) {
    let mut dirty: BTreeSet<i32> = rollup_dirty(shared);
    let mut last_rollup = Instant::now();
    let mut last_retention: Option<Instant> = None;
    let mut sealer = Sealer::new(&shared.opts);
    let mut last_pull: Option<Instant> = None;
    let mut last_upkeep = Instant::now();
    loop {
        crate::faults::panic_point("flusher");
        let job = match jobs.recv_timeout(Duration::from_millis(500)) {
            Ok(job) => Some(job),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                refresh_rollups(shared, &mut dirty);
                reclaim(shared);
                return;
            }
        };
        if let Some(Job::Seal { day, reply }) = job {
            let _ = reply.send(sealer::seal_guarded(shared, day, &mut dirty));
        } else if let Some(Job::Pull { reply }) = job {
            last_pull = Some(Instant::now());
            let _ = reply.send(pull(shared, &mut dirty, &mut sealer));
        } else if let Some(Job::Flush { frozen, waiters }) = job {
            // Tables handed off while the days are merged are flushed between
            // the parts merged; their own merges and answers come after.
            let mut todo = VecDeque::from([flush_table(shared, frozen, waiters)]);
            let mut later = Vec::new();
            while let Some(done) = todo.pop_front() {
                if done.result.is_ok() {
                    dirty.extend(done.days.iter().copied());
                    sealer.wrote(&done.days);
                    compact::compact_days_yielding(shared, &done.days, &mut || {
                        while let Ok(job) = jobs.try_recv() {
                            match job {
                                Job::Flush { frozen, waiters } => {
                                    todo.push_back(flush_table(shared, frozen, waiters))
                                }
                                other => later.push(other),
                            }
                        }
                    });
                    // Waiters asked for everything to be readable: rollups
                    // included.
                    if !done.waiters.is_empty() {
                        refresh_rollups(shared, &mut dirty);
                        last_rollup = Instant::now();
                    }
                    // What no reader holds goes after every merge: under
                    // steady ingest this loop may not end for a long time.
                    reclaim(shared);
                }
                for w in done.waiters {
                    let _ = w.send(done.result.clone());
                }
            }
            for job in later {
                if let Job::Seal { day, reply } = job {
                    let _ = reply.send(sealer::seal_guarded(shared, day, &mut dirty));
                }
            }
        }
        if !dirty.is_empty() && last_rollup.elapsed() >= shared.opts.rollup_interval {
            refresh_rollups(shared, &mut dirty);
            last_rollup = Instant::now();
        }
        if let Some(m) = &shared.opts.mirror {
            if last_pull.is_none_or(|t| t.elapsed() >= m.pull_every()) {
                last_pull = Some(Instant::now());
                if let Err(e) = pull(shared, &mut dirty, &mut sealer) {
                    tracing::warn!(error = %e, remote = %m.url(), "could not pull from the shared store; trying again at the next pass");
                }
            }
            let every = (shared.opts.retired_grace / 2)
                .clamp(Duration::from_secs(1), Duration::from_secs(300));
            if last_upkeep.elapsed() >= every {
                last_upkeep = Instant::now();
                match m.upkeep(shared.opts.retired_grace) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        objects = n,
                        "deleted objects from the shared store: parts seals replaced (past the grace), days past the retention"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "the shared store's upkeep failed; trying again later")
                    }
                }
            }
        }
        sealer.tick(shared, &mut dirty);
        reclaim(shared);
        if last_retention.is_none_or(|t| t.elapsed() >= Duration::from_secs(3600)) {
            last_retention = Some(Instant::now());
            guarded(shared, Task::Retention, || {
                if let Err(e) = apply_retention(shared, &mut dirty) {
                    tracing::error!(error = %e, "retention pass failed; will try again in an hour");
                }
            });
        }
    }
}

/// Pull a copy of the shared store up to date; the days it changed are the
/// rollup's to redo, and the sealer's to leave for a quiet spell.
fn pull(
    shared: &Shared,
    dirty: &mut BTreeSet<i32>,
    sealer: &mut Sealer,
) -> Result<Pulled, StoreError> {
    let Some(m) = &shared.opts.mirror else {
        return Ok(Pulled::default());
    };
    let (report, changed) = m.pull(&shared.layout)?;
    dirty.extend(changed.iter().copied());
    sealer.wrote(&changed);
    if report.changed > 0 {
        tracing::debug!(
            days = report.changed,
            fetched = report.fetched,
            bytes = report.bytes,
            dropped = report.dropped,
            "pulled from the shared store"
        );
    }
    Ok(report)
}

/// A flushed table: its days, who waits and how it went.
struct Flushed {
    days: Vec<i32>,
    waiters: Vec<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
    result: Result<(), StoreError>,
}

/// Flush a frozen table until committed, then let it go.
fn flush_table(
    shared: &Shared,
    frozen: Arc<Frozen>,
    mut waiters: Vec<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
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

/// Delete the retired files no reader can hold; a failure is logged and the
/// files are tried again on the next pass.
fn reclaim(shared: &Shared) {
    if retire::pending(&shared.layout) == 0 {
        return;
    }
    if let Err(e) = retire::reclaim(&shared.layout, shared.opts.retired_grace) {
        tracing::warn!(error = %e, "could not delete replaced files; trying again shortly");
    }
}

/// Days whose rollup rows are stale, as recorded on disk (they survive a crash).
fn rollup_dirty(shared: &Shared) -> BTreeSet<i32> {
    rollup::dirty(&shared.layout).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "could not read the dirty rollup days; refreshing every day");
        shared
            .layout
            .days()
            .unwrap_or_default()
            .into_iter()
            .collect()
    })
}

fn refresh_rollups(shared: &Shared, dirty: &mut BTreeSet<i32>) {
    if dirty.is_empty() || shared.poisoned.load(Ordering::Acquire) {
        return;
    }
    let days: Vec<i32> = dirty.iter().copied().collect();
    guarded(shared, Task::Rollup, || {
        crate::faults::panic_point("rollup");
        match rollup::refresh(&shared.layout, &days) {
            Ok(()) => dirty.clear(),
            Err(e) => {
                tracing::error!(error = %e, days = days.len(), "rollup refresh failed; will retry")
            }
        }
    });
}

/// Flush until the table is committed. A flush that keeps failing keeps its
/// WAL segments and is retried with backoff for as long as the store runs
/// (waiters hear of the failure after a while, the retries go on); only a
/// closing store abandons it, and then no later commit may run.
fn flush_until_committed(
    shared: &Shared,
    frozen: &Frozen,
    waiters: &mut Vec<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
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
                let _ = w.send(Err(e.clone()));
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
    let layout = &shared.layout;
    // A retry after a commit that failed past its intent (an upload to the
    // shared store) finishes that commit rather than writing the table
    // again.
    if commit::finish_covering(layout, frozen.wal_upto)? {
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
                Some(n) => format!("{n}-{}", parquet::new_part_tag()),
                None => parquet::new_part_tag(),
            };
            let (tmp, fin) = parquet::write_tmp_part(layout, day, &tag, df)?;
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
    commit::commit(layout, &intent)
}

/// Delete the days older than the retention window.
fn apply_retention(shared: &Shared, dirty: &mut BTreeSet<i32>) -> Result<(), StoreError> {
    crate::faults::panic_point("retention");
    let Some(keep) = shared.opts.retention_days else {
        return Ok(());
    };
    if shared.poisoned.load(Ordering::Acquire) {
        return Ok(());
    }
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let today = now_ns.div_euclid(NANOS_PER_DAY) as i32;
    let oldest_kept = today - keep as i32;
    let layout = &shared.layout;
    // A day whose parts are all retired already waits only to be reclaimed.
    let mut old = Vec::new();
    for day in layout.days()?.into_iter().filter(|d| *d < oldest_kept) {
        if !layout.parts(day)?.is_empty() {
            old.push(day);
        }
    }
    let mut intent = Intent {
        rollup_days: old.clone(),
        ..Intent::default()
    };
    for &day in &old {
        intent
            .deletes
            .extend(layout.parts(day)?.iter().map(|p| layout.relative(p)));
    }
    if !old.is_empty() {
        commit::commit(layout, &intent)?;
        dirty.extend(old.iter().copied());
        if layout.ship().is_some() {
            // An ingest node keeps only its dedup window; the shared store
            // keeps what it shipped.
            tracing::info!(days = old.len(), oldest = %day_to_string(old[0]), "trimmed this node's local copy of shipped days (its dedup window); the shared store keeps them");
        } else {
            tracing::info!(days = old.len(), oldest = %day_to_string(old[0]), "retention removed old days");
        }
    }
    // Their summaries go too (also those a crash left behind their spans).
    for day in layout.sealed_days()? {
        if day < oldest_kept {
            let dir = layout.sealed_dir(day);
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(format!("removing {}", dir.display()), e)),
            }
        }
    }
    Ok(())
}
