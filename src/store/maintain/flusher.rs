//! The flusher thread: writes frozen memtables to Parquet parts and commits
//! them (which lets the WAL segments they cover go), then keeps the files in
//! shape: compaction of small parts ([`compact`]; tables handed off during a
//! merge are flushed between its parts), the rollup of changed days,
//! retention, and the deletion of retired files no reader holds any more
//! ([`retire::reclaim`], after every flush and its merges, and every half second). Its own
//! reads (compaction, seal, rollup) need no pin: nothing else deletes.
//! A seal compaction runs on a thread of its own while this one goes on
//! flushing (only flushing: merges, rollups and other jobs wait for it).
//! A failed flush keeps its WAL segments and is retried with backoff.
//! On a copy of the shared store (the detect role) it also pulls the shared
//! store's parts in, and, while this node holds the lease, publishes its
//! seals there and keeps the shared store trimmed (through its
//! [`Upstream`](crate::store::hooks::Upstream)).

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::hooks::Pulled;
use crate::store::maintain::flush::{flush_table, Flushed};
use crate::store::maintain::guard::{guarded, panic_text, Task};
use crate::store::maintain::retention::apply_retention;
use crate::store::maintain::seal::SealReport;
use crate::store::maintain::sealer::{self, Sealer};
use crate::store::write::frozen::Frozen;
use crate::store::{catalog::retire, maintain::compact, maintain::rollup, Shared, StoreError};

/// What the flusher is asked to do.
pub enum Job {
    /// Write a table, and tell who waits for it.
    Flush {
        frozen: Arc<Frozen>,
        waiters: Vec<crate::store::FlushReply>,
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

/// How long the loop waits for a job before it looks at its clock.
const TICK: Duration = Duration::from_millis(500);

/// What the loop keeps between jobs.
struct Upkeep {
    /// Days whose rollup rows are stale.
    dirty: BTreeSet<i32>,
    /// When to compact finished days.
    sealer: Sealer,
    /// The day the sealer found due, sealed after the periodic tasks.
    seal_due: Option<i32>,
}

/// A task the loop runs on its clock, after every job and every tick.
struct Periodic {
    /// How often it runs (`None`: not on this store).
    every: fn(&Shared) -> Option<Duration>,
    /// When it last ran (`None`: due at once).
    last: Option<Instant>,
    /// Run it; `false` when it had nothing to do (it stays due).
    run: fn(&Shared, &mut Upkeep) -> bool,
    /// Its clock restarts when it ends (else when it starts).
    from_end: bool,
}

impl Periodic {
    fn run_if_due(&mut self, shared: &Shared, upkeep: &mut Upkeep) {
        let Some(every) = (self.every)(shared) else {
            return;
        };
        if self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        let before = self.last.replace(Instant::now());
        if !(self.run)(shared, upkeep) {
            self.last = before;
        } else if self.from_end {
            self.last = Some(Instant::now());
        }
    }
}

/// Indices in [`periodic_tasks`] that jobs reset.
const ROLLUP: usize = 0;
const PULL: usize = 1;

/// The loop's periodic tasks, in the order they run.
fn periodic_tasks() -> [Periodic; 6] {
    let now = Some(Instant::now());
    let every_pass = |_: &Shared| Some(Duration::ZERO);
    [
        // The rollup of changed days.
        Periodic {
            every: |s| Some(s.opts.rollup_interval),
            last: now,
            run: |s, u| {
                if u.dirty.is_empty() {
                    return false;
                }
                refresh_rollups(s, &mut u.dirty);
                true
            },
            from_end: true,
        },
        // A copy of the shared store: pull what it has.
        Periodic {
            every: |s| s.opts.mirror.as_ref().map(|m| m.pull_every()),
            last: None,
            run: |s, u| {
                if let Err(e) = pull(s, &mut u.dirty, &mut u.sealer) {
                    let remote = s.opts.mirror.as_ref().map(|m| m.url()).unwrap_or_default();
                    tracing::warn!(error = %e, remote = %remote, "could not pull from the shared store; trying again at the next pass");
                }
                true
            },
            from_end: false,
        },
        // A copy of the shared store: its holder's upkeep.
        Periodic {
            every: |s| {
                s.opts.mirror.as_ref().map(|_| {
                    (s.opts.retired_grace / 2)
                        .clamp(Duration::from_secs(1), Duration::from_secs(300))
                })
            },
            last: now,
            run: |s, _| {
                let Some(m) = &s.opts.mirror else {
                    return true;
                };
                match m.upkeep(s.opts.retired_grace) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        objects = n,
                        "deleted objects from the shared store: parts seals replaced (past the grace), days past the retention"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "the shared store's upkeep failed; trying again later")
                    }
                }
                true
            },
            from_end: false,
        },
        // Day compaction of the days that are due.
        Periodic {
            every: every_pass,
            last: None,
            run: |s, u| {
                u.seal_due = u.sealer.due(s);
                true
            },
            from_end: false,
        },
        // Retired files no reader holds.
        Periodic {
            every: every_pass,
            last: None,
            run: |s, _| {
                reclaim(s);
                true
            },
            from_end: false,
        },
        // Retention, hourly.
        Periodic {
            every: |_| Some(Duration::from_secs(3600)),
            last: None,
            run: |s, u| {
                guarded(s, Task::Retention, || {
                    if let Err(e) = apply_retention(s, &mut u.dirty) {
                        tracing::error!(error = %e, "retention pass failed; will try again in an hour");
                    }
                });
                true
            },
            from_end: false,
        },
    ]
}

fn run_loop(shared: &Shared, jobs: Receiver<Job>) {
    let mut upkeep = Upkeep {
        dirty: rollup_dirty(shared),
        sealer: Sealer::new(&shared.opts),
        seal_due: None,
    };
    let mut tasks = periodic_tasks();
    loop {
        crate::faults::panic_point("flusher");
        match jobs.recv_timeout(TICK) {
            Ok(Job::Seal { day, reply }) => {
                let last_rollup = &mut tasks[ROLLUP].last;
                let _ = reply.send(seal_flushing(shared, &jobs, &mut upkeep, last_rollup, day));
            }
            Ok(Job::Pull { reply }) => {
                tasks[PULL].last = Some(Instant::now());
                let _ = reply.send(pull(shared, &mut upkeep.dirty, &mut upkeep.sealer));
            }
            Ok(Job::Flush { frozen, waiters }) => {
                let last_rollup = &mut tasks[ROLLUP].last;
                flush_and_merge(shared, &jobs, &mut upkeep, last_rollup, frozen, waiters);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                refresh_rollups(shared, &mut upkeep.dirty);
                reclaim(shared);
                return;
            }
        }
        for task in &mut tasks {
            task.run_if_due(shared, &mut upkeep);
        }
        if let Some(day) = upkeep.seal_due.take() {
            let last_rollup = &mut tasks[ROLLUP].last;
            let sealed = seal_flushing(shared, &jobs, &mut upkeep, last_rollup, day);
            upkeep.sealer.sealed(day, sealed.is_ok());
        }
    }
}

/// Flush a table and merge the days it wrote. Tables handed off while the
/// days are merged are flushed between the parts merged; their own merges
/// and answers come after, then the seal jobs that arrived meanwhile.
fn flush_and_merge(
    shared: &Shared,
    jobs: &Receiver<Job>,
    upkeep: &mut Upkeep,
    last_rollup: &mut Option<Instant>,
    frozen: Arc<Frozen>,
    waiters: Vec<crate::store::FlushReply>,
) {
    let todo = VecDeque::from([flush_table(shared, frozen, waiters)]);
    merge_flushed(shared, jobs, upkeep, last_rollup, todo, Vec::new());
}

/// The merges and answers of tables flushed (`todo`), flushing those handed
/// off meanwhile, then the jobs put off (`later`).
fn merge_flushed(
    shared: &Shared,
    jobs: &Receiver<Job>,
    upkeep: &mut Upkeep,
    last_rollup: &mut Option<Instant>,
    mut todo: VecDeque<Flushed>,
    mut later: Vec<Job>,
) {
    while let Some(done) = todo.pop_front() {
        if done.result.is_ok() {
            upkeep.dirty.extend(done.days.iter().copied());
            upkeep.sealer.wrote(&done.days);
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
                refresh_rollups(shared, &mut upkeep.dirty);
                *last_rollup = Some(Instant::now());
            }
            // What no reader holds goes after every merge: under
            // steady ingest this loop may not end for a long time.
            reclaim(shared);
        }
        for w in done.waiters {
            w.send(done.result.clone());
        }
    }
    for job in later {
        match job {
            Job::Seal { day, reply } => {
                let _ = reply.send(seal_flushing(shared, jobs, upkeep, last_rollup, day));
            }
            Job::Pull { reply } => {
                let _ = reply.send(pull(shared, &mut upkeep.dirty, &mut upkeep.sealer));
            }
            Job::Flush { frozen, waiters } => {
                flush_and_merge(shared, jobs, upkeep, last_rollup, frozen, waiters)
            }
        }
    }
}

/// How often the flusher looks whether a seal it runs has ended.
const SEAL_POLL: Duration = Duration::from_millis(20);

/// Seal-compact `day` on a thread of its own while this one flushes the
/// tables handed off meanwhile (so ingest never waits for a seal); their
/// merges, rollups and answers, and the other jobs that arrive, come after
/// the seal (a merge or a pull could replace the parts it reads).
fn seal_flushing(
    shared: &Shared,
    jobs: &Receiver<Job>,
    upkeep: &mut Upkeep,
    last_rollup: &mut Option<Instant>,
    day: i32,
) -> Result<Option<SealReport>, StoreError> {
    let (mut dirty, mut todo, mut later) = (BTreeSet::new(), VecDeque::new(), Vec::new());
    let result = std::thread::scope(|s| {
        let sealing = std::thread::Builder::new()
            .name("stormwatch-seal".into())
            .spawn_scoped(s, || sealer::seal_guarded(shared, day, &mut dirty))
            .map_err(|e| StoreError::io("starting the seal thread", e))?;
        while !sealing.is_finished() {
            match jobs.recv_timeout(SEAL_POLL) {
                Ok(Job::Flush { frozen, waiters }) => {
                    todo.push_back(flush_table(shared, frozen, waiters))
                }
                Ok(other) => later.push(other),
                Err(RecvTimeoutError::Timeout) => {}
                // Closing: the loop sees it once the seal has ended.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        sealing.join().unwrap_or_else(|_| {
            Err(StoreError::data(
                format!("seal-compacting {}", crate::model::day_to_string(day)),
                "the seal compaction panicked",
            ))
        })
    });
    upkeep.dirty.extend(dirty);
    merge_flushed(shared, jobs, upkeep, last_rollup, todo, later);
    result
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
    let (report, changed) = m.pull(&shared.catalog)?;
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

/// Delete the retired files no reader can hold; a failure is logged and the
/// files are tried again on the next pass.
fn reclaim(shared: &Shared) {
    if retire::pending(&shared.catalog) == 0 {
        return;
    }
    if let Err(e) = retire::reclaim(&shared.catalog, shared.opts.retired_grace) {
        tracing::warn!(error = %e, "could not delete replaced files; trying again shortly");
    }
}

/// Days whose rollup rows are stale, as recorded on disk (they survive a crash).
fn rollup_dirty(shared: &Shared) -> BTreeSet<i32> {
    crate::store::catalog::dirty::dirty(shared.layout()).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "could not read the dirty rollup days; refreshing every day");
        shared
            .layout()
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
        match rollup::refresh(&shared.catalog, &days) {
            Ok(()) => dirty.clear(),
            Err(e) => {
                tracing::error!(error = %e, days = days.len(), "rollup refresh failed; will retry")
            }
        }
    });
}
