//! The writer thread: takes queued requests, makes sure the stored keys of
//! every day they touch are loaded (dedup), appends them to the WAL with one
//! fsync per group, acknowledges them, and appends their new spans to the
//! memtable's day columns until it hands a frozen table to the flusher. Refuses every
//! request once the flusher is gone.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ingest::SpanBatch;
use crate::model::day_to_string;
use crate::store::write::frozen::Frozen;
use crate::store::write::memtable::{memory_keys, KeySet, Memtable, Seen};
use crate::store::write::wal::Wal;
use crate::store::{format::parquet, Ack, Cmd, Shared, StoreError, Submission};

/// Largest group of requests written with one fsync.
const MAX_GROUP_BYTES: usize = 32 << 20;

/// What the writer owns.
pub struct WriterState {
    pub wal: Wal,
    pub mem: Memtable,
    pub seen: Seen,
}

/// Make sure the stored keys of every day `batch` touches are loaded. A day
/// whose keys cannot be read is an error: storing without them could store
/// a redelivered span twice.
pub fn load_days(
    shared: &Shared,
    seen: &mut Seen,
    mem: &Memtable,
    frozen: Option<&Arc<Frozen>>,
    batch: &SpanBatch,
) -> Result<(), StoreError> {
    let days = batch.days();
    for &day in &days {
        if !seen.is_loaded(day) {
            let keys = load_day_keys(shared, day, mem, frozen)?;
            seen.load(day, keys, &days);
        }
    }
    Ok(())
}

/// Keep the spans not stored before (their days' keys must be loaded);
/// returns (stored, duplicates).
pub fn insert_batch(mem: &mut Memtable, seen: &mut Seen, batch: &SpanBatch) -> (usize, usize) {
    let n = batch.len();
    let Some(first) = batch
        .start_ns
        .first()
        .map(|&ns| crate::model::day_of_ns(ns))
    else {
        return (0, 0);
    };
    // Spans by day, each day's in the batch's order (almost always one day).
    let by_day: Vec<(i32, Vec<u32>)> = if (1..n).all(|i| batch.day(i) == first) {
        vec![(first, (0..n as u32).collect())]
    } else {
        let mut days = std::collections::BTreeMap::<i32, Vec<u32>>::new();
        for i in 0..n {
            days.entry(batch.day(i)).or_default().push(i as u32);
        }
        days.into_iter().collect()
    };
    let mut stored = 0;
    for (day, mut rows) in by_day {
        let keys = seen.day_mut(day);
        rows.retain(|&r| keys.insert(batch.key(r as usize)));
        stored += rows.len();
        mem.append(day, batch, &rows);
    }
    (stored, n - stored)
}

/// Keys of a day: the table being flushed (read first, so a commit racing
/// this read is seen either there or in the parts), the parts, the memtable.
fn load_day_keys(
    shared: &Shared,
    day: i32,
    mem: &Memtable,
    frozen: Option<&Arc<Frozen>>,
) -> Result<KeySet, StoreError> {
    let frozen = frozen.cloned().or_else(|| {
        shared
            .frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    });
    let mut keys = memory_keys(day, mem, frozen.as_ref());
    let mut last_err = None;
    // A part a compaction replaces meanwhile stays until the read is done.
    let _pin = crate::store::catalog::retire::pin(&shared.catalog);
    for _ in 0..3 {
        match shared.layout().parts(day).and_then(|parts| {
            parquet::read_keys(&parts).map_err(|e| {
                StoreError::data(
                    format!("reading the stored keys of {}", day_to_string(day)),
                    e,
                )
            })
        }) {
            Ok(k) => {
                keys.extend(k);
                return Ok(keys);
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or(StoreError::Closed))
}

/// How the writer gives a frozen table (and who waits for it) to the
/// flusher; `Err` hands the waiters back when the flusher is gone.
pub type HandOff = Box<
    dyn Fn(Arc<Frozen>, Vec<crate::store::FlushReply>) -> Result<(), Vec<crate::store::FlushReply>>
        + Send,
>;

pub fn run(shared: Arc<Shared>, mut state: WriterState, rx: Receiver<Cmd>, jobs: HandOff) {
    let opts = shared.opts.clone();
    let tick = (opts.flush_interval / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut last_flush = Instant::now();
    loop {
        let mut group: Vec<Submission> = Vec::new();
        let mut waiters = Vec::new();
        let mut shutdown = false;
        let mut take = |cmd: Cmd, group: &mut Vec<Submission>, shutdown: &mut bool| match cmd {
            Cmd::Submit(s) => group.push(s),
            Cmd::Flush(w) => waiters.push(w),
            Cmd::Shutdown => *shutdown = true,
        };
        match rx.recv_timeout(tick) {
            Ok(cmd) => take(cmd, &mut group, &mut shutdown),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => shutdown = true,
        }
        let mut group_bytes: usize = group.iter().map(|s| s.payload.len()).sum();
        while group_bytes < MAX_GROUP_BYTES {
            match rx.try_recv() {
                Ok(cmd) => {
                    take(cmd, &mut group, &mut shutdown);
                    group_bytes = group.iter().map(|s| s.payload.len()).sum();
                }
                Err(_) => break,
            }
        }
        if !group.is_empty() {
            write_group(&shared, &mut state, group);
        }
        let mem = &state.mem;
        let due = !mem.is_empty()
            && (mem.rows >= opts.flush_rows
                || mem.bytes >= opts.flush_bytes
                || last_flush.elapsed() >= opts.flush_interval);
        if due || !waiters.is_empty() || shutdown {
            let must = !waiters.is_empty() || shutdown || over_memory(&shared, &state.mem);
            if hand_off(&shared, &mut state, &jobs, waiters, must) {
                last_flush = Instant::now();
            }
        } else if over_memory(&shared, &state.mem) {
            hand_off(&shared, &mut state, &jobs, Vec::new(), true);
        }
        if shutdown {
            wait_flusher_idle(&shared);
            return;
        }
    }
}

fn over_memory(shared: &Shared, mem: &Memtable) -> bool {
    let frozen_bytes = shared
        .frozen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, |f| f.bytes);
    mem.bytes + frozen_bytes > shared.opts.max_memory_bytes
}

fn refuse(shared: &Shared, group: Vec<Submission>, e: &StoreError) {
    for s in group {
        shared
            .stats
            .pending_bytes
            .fetch_sub(s.bytes, Ordering::AcqRel);
        let _ = s.reply.send(Err(e.clone()));
    }
}

fn write_group(shared: &Shared, state: &mut WriterState, group: Vec<Submission>) {
    let stats = &shared.stats;
    // No flusher: acknowledging would only grow the memtable without bound.
    if let Some(e) = shared.refusal() {
        tracing::error!(error = %e, requests = group.len(), "refusing requests");
        refuse(shared, group, &e);
        return;
    }
    let frozen = shared
        .frozen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let days: BTreeSet<i32> = group.iter().flat_map(|s| s.batch.days()).collect();
    for &day in &days {
        if !state.seen.is_loaded(day) {
            match load_day_keys(shared, day, &state.mem, frozen.as_ref()) {
                Ok(keys) => state.seen.load(day, keys, &days),
                Err(e) => {
                    tracing::error!(day = %day_to_string(day), error = %e, requests = group.len(), "cannot read the stored keys of a day; refusing the requests rather than risk storing spans twice");
                    refuse(shared, group, &e);
                    return;
                }
            }
        }
    }
    let records: Vec<&[u8]> = group.iter().map(|s| s.payload.as_ref()).collect();
    let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
    let started = Instant::now();
    let result = state.wal.append_sync(&records);
    stats.observe_wal_sync(started.elapsed());
    let error = result.as_ref().err().map(ToString::to_string);
    stats.note_wal(error.as_deref().map_or(Ok(()), Err), bytes as usize);
    match result {
        Ok(()) => {
            stats.wal_bytes.fetch_add(bytes, Ordering::Relaxed);
            for s in group {
                let (stored, duplicates) = insert_batch(&mut state.mem, &mut state.seen, &s.batch);
                stats
                    .spans_stored
                    .fetch_add(stored as u64, Ordering::Relaxed);
                stats
                    .spans_duplicate
                    .fetch_add(duplicates as u64, Ordering::Relaxed);
                stats.pending_bytes.fetch_sub(s.bytes, Ordering::AcqRel);
                let _ = s.reply.send(Ok(Ack { stored, duplicates }));
            }
        }
        Err(e) => {
            stats.wal_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, requests = group.len(), "WAL write failed; the group is refused and nothing of it is kept");
            refuse(shared, group, &e);
        }
    }
    stats.memtable_rows.store(state.mem.rows, Ordering::Relaxed);
    stats
        .memtable_rows_peak
        .fetch_max(state.mem.rows, Ordering::Relaxed);
}

/// Wait until the flusher has no table, or can take none any more.
fn wait_flusher_idle(shared: &Shared) {
    let mut frozen = shared.frozen.lock().unwrap_or_else(|e| e.into_inner());
    while frozen.is_some() && shared.flusher_alive.load(Ordering::Acquire) {
        frozen = shared
            .flusher_idle
            .wait_timeout(frozen, Duration::from_millis(200))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Freeze the memtable and give it to the flusher. When the flusher is busy,
/// wait for it only if `must`; returns whether a table was handed off.
fn hand_off(
    shared: &Shared,
    state: &mut WriterState,
    jobs: &HandOff,
    waiters: Vec<crate::store::FlushReply>,
    must: bool,
) -> bool {
    let busy = shared
        .frozen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some();
    if busy {
        if !must {
            return false;
        }
        wait_flusher_idle(shared);
    }
    // After a table was abandoned uncommitted (shutdown with a broken disk),
    // no later commit may run: it would delete that table's WAL segments.
    if shared.poisoned.load(Ordering::Acquire) {
        for w in waiters {
            w.send(Err(StoreError::Closed));
        }
        return false;
    }
    if let Some(e) = shared.refusal() {
        for w in waiters {
            w.send(Err(e.clone()));
        }
        return false;
    }
    let upto = match state.wal.rotate() {
        Ok(upto) => upto,
        Err(e) => {
            tracing::error!(error = %e, "could not start a new WAL segment; flush postponed");
            for w in waiters {
                w.send(Err(e.clone()));
            }
            return false;
        }
    };
    let reserve = shared.opts.flush_bytes.min(shared.opts.max_memory_bytes) / 2;
    let frozen = Arc::new(Frozen::new(state.mem.take(reserve), upto));
    *shared.frozen.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&frozen));
    shared.stats.memtable_rows.store(0, Ordering::Relaxed);
    if let Err(waiters) = jobs(frozen, waiters) {
        // The flusher is gone: the rows stay safe in the WAL.
        *shared.frozen.lock().unwrap_or_else(|e| e.into_inner()) = None;
        for w in waiters {
            w.send(Err(StoreError::Closed));
        }
        return false;
    }
    true
}
