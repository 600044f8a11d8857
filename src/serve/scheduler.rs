//! The sweeps `serve` runs by itself: one every `sweep.interval_secs`, and
//! one on `POST /api/sweep`. One sweep at a time; a scheduled tick that
//! finds one running is skipped, an API call gets 409. A sweep's failure is
//! logged on one line and counted, and the next tick tries again: the server
//! never stops for it. Sweeps run on a blocking thread (polars work stays off
//! the async workers), after a flush so what was acknowledged is swept.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::store::Store;
use crate::sweep::{SweepError, SweepReport};

/// How long finished alert messages stay in the outbox.
const OUTBOX_KEEP: Duration = Duration::from_secs(30 * 86_400);

/// What asked for a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Schedule,
    Api,
    /// The MCP server's `run_sweep`.
    Mcp,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Api => "api",
            Trigger::Mcp => "mcp",
        }
    }
}

/// A finished sweep, in brief.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub trigger: &'static str,
    pub started: String,
    pub duration_ms: u64,
    /// `ok`, or `empty` when the store holds no spans yet.
    pub outcome: &'static str,
    pub spans_scanned: usize,
    pub days_scanned: usize,
    pub days_reused: usize,
    /// Days read from their summaries, and days this sweep wrote a summary
    /// of (the API's name: `days_sealed`).
    pub days_from_summary: usize,
    pub days_sealed: usize,
    pub signals: usize,
    pub findings: u64,
    pub changes: usize,
    pub alerts_queued: usize,
}

impl Summary {
    /// `report` is `None` when the store held no spans yet.
    fn new(
        trigger: Trigger,
        started: String,
        took: Duration,
        report: Option<&SweepReport>,
    ) -> Summary {
        let count = |f: fn(&SweepReport) -> usize| report.map_or(0, f);
        Summary {
            trigger: trigger.as_str(),
            started,
            duration_ms: took.as_millis() as u64,
            outcome: if report.is_some() { "ok" } else { "empty" },
            spans_scanned: count(|r| r.spans_scanned),
            days_scanned: count(|r| r.days_scanned),
            days_reused: count(|r| r.days_reused),
            days_from_summary: count(|r| r.days_from_summary),
            days_sealed: count(|r| r.days_summarized),
            signals: count(|r| r.signals.len()),
            findings: count(|r| r.signals.iter().map(|s| s.draft.findings).sum()) as u64,
            changes: count(|r| r.changes.len()),
            alerts_queued: count(|r| r.queued.len()),
        }
    }
}

/// Why `sweep_now` did not sweep.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "a sweep is already running (started {started_secs_ago} s ago); try again when it ends"
    )]
    Busy { started_secs_ago: u64 },
    #[error("sweep failed: {0}")]
    Failed(#[source] SweepFailed),
    #[error(
        "this node is a standby of the detect role (the lease is held by {holder}); sweep there"
    )]
    Standby { holder: String },
}

/// Why a sweep the scheduler ran failed.
#[derive(Debug, thiserror::Error)]
pub enum SweepFailed {
    /// A fault injected at `sweep` (tests).
    #[error(transparent)]
    Fault(std::io::Error),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error("the sweep thread panicked: {0}")]
    Panicked(#[source] tokio::task::JoinError),
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct SweepStats {
    pub ok: AtomicU64,
    pub empty: AtomicU64,
    pub failed: AtomicU64,
    pub skipped_busy: AtomicU64,
    pub duration_nanos_sum: AtomicU64,
    pub last_duration_nanos: AtomicU64,
    pub last_findings: AtomicU64,
    /// Unix seconds of the last sweep that succeeded (0: none yet).
    pub last_success_unix: AtomicI64,
}

/// Runs sweeps for `serve`.
pub struct Sweeper {
    store: Arc<Store>,
    config: Config,
    alerting: Option<crate::alert::Alerting>,
    /// A fixed "now" (the demo's), instead of the clock.
    fixed_now_ns: Option<i64>,
    /// Held by the running sweep, to its end: the guard moves into the
    /// blocking task, so a caller that goes away does not release it early.
    running: Arc<tokio::sync::Mutex<()>>,
    started: std::sync::Mutex<Option<Instant>>,
    pub stats: SweepStats,
    /// Over a shared store: sweeps run only while this node acts as the
    /// detect role, and commit only under the generation they began with.
    leader: Option<Arc<crate::cluster::leader::Leader>>,
    /// The node's own ingest store when it is not the one swept (`--role
    /// all` over a shared store): flushed (and so shipped) before a sweep.
    ingest: Option<Arc<Store>>,
    /// Today as the last sweep left it: each sweep reads only what
    /// arrived since (`sweep::Live`). Sweeps run one at a time.
    live: std::sync::Mutex<crate::sweep::Live>,
}

impl Sweeper {
    pub fn new(
        store: Arc<Store>,
        config: Config,
        alerting: Option<crate::alert::Alerting>,
        fixed_now_ns: Option<i64>,
    ) -> Sweeper {
        Sweeper {
            store,
            config,
            alerting,
            fixed_now_ns,
            running: Arc::new(tokio::sync::Mutex::new(())),
            started: std::sync::Mutex::new(None),
            stats: SweepStats::default(),
            leader: None,
            ingest: None,
            live: std::sync::Mutex::new(crate::sweep::Live::default()),
        }
    }

    /// The detect role's lease keeper, over a shared store.
    pub fn leader(&self) -> Option<&Arc<crate::cluster::leader::Leader>> {
        self.leader.as_ref()
    }

    /// Sweep only as the detect role of a shared store.
    pub fn with_leader(mut self, leader: Arc<crate::cluster::leader::Leader>) -> Sweeper {
        self.leader = Some(leader);
        self
    }

    /// Flush `ingest` (this node's own spans, shipped by the flush) before
    /// each sweep of the copy.
    pub fn with_ingest(mut self, ingest: Arc<Store>) -> Sweeper {
        self.ingest = Some(ingest);
        self
    }

    /// The generation this node sweeps under (`Ok(None)`: no shared store).
    fn generation(&self) -> Result<Option<u64>, ScheduleError> {
        let Some(leader) = &self.leader else {
            return Ok(None);
        };
        leader
            .acting()
            .map(Some)
            .ok_or_else(|| ScheduleError::Standby {
                holder: leader.holder_seen(),
            })
    }

    /// Sweep now, unless one is running.
    pub async fn sweep_now(self: &Arc<Self>, trigger: Trigger) -> Result<Summary, ScheduleError> {
        self.sweep_report(trigger, false).await.map(|(s, _)| s)
    }

    /// Sweep now, unless one is running, and keep the report; a dry run
    /// sweeps a copy of the signal state ([`crate::sweep::dry_run`]) and
    /// changes nothing.
    pub async fn sweep_report(
        self: &Arc<Self>,
        trigger: Trigger,
        dry_run: bool,
    ) -> Result<(Summary, Option<SweepReport>), ScheduleError> {
        let generation = self.generation()?;
        let Ok(guard) = Arc::clone(&self.running).try_lock_owned() else {
            self.stats.skipped_busy.fetch_add(1, Ordering::Relaxed);
            let started_secs_ago = self
                .started
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map_or(0, |t| t.elapsed().as_secs());
            return Err(ScheduleError::Busy { started_secs_ago });
        };
        let begun = Instant::now();
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(begun);
        let started = crate::time::rfc3339(now_ns());
        // What was acknowledged before the sweep is swept: flush it first.
        // A flush that fails leaves the spans in the WAL; sweep what is on disk.
        if let Some(ingest) = &self.ingest {
            if let Err(e) = ingest.flush_async().await {
                tracing::warn!(error = %e, "flushing this node's spans to the shared store before the sweep failed; sweeping what is there");
            }
        }
        if let Err(e) = self.store.flush_async().await {
            tracing::warn!(error = %e, "flush before the sweep failed; sweeping what is already in Parquet");
        }
        let me = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || {
            let _running = guard;
            me.sweep_blocking(dry_run, generation)
        })
        .await
        .unwrap_or_else(|e| Err(SweepFailed::Panicked(e)));
        let took = begun.elapsed();
        let nanos = took.as_nanos().min(u64::MAX as u128) as u64;
        self.stats
            .duration_nanos_sum
            .fetch_add(nanos, Ordering::Relaxed);
        self.stats
            .last_duration_nanos
            .store(nanos, Ordering::Relaxed);
        match result {
            Ok(report) if dry_run => Ok((
                Summary::new(trigger, started, took, report.as_ref()),
                report,
            )),
            Ok(report) => {
                let summary = Summary::new(trigger, started, took, report.as_ref());
                let counter = if report.is_some() {
                    &self.stats.ok
                } else {
                    &self.stats.empty
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .last_findings
                    .store(summary.findings, Ordering::Relaxed);
                self.stats
                    .last_success_unix
                    .store(chrono::Utc::now().timestamp(), Ordering::Relaxed);
                tracing::info!(
                    trigger = summary.trigger,
                    outcome = summary.outcome,
                    duration_ms = summary.duration_ms,
                    days_scanned = summary.days_scanned,
                    days_reused = summary.days_reused,
                    days_from_summary = summary.days_from_summary,
                    days_sealed = summary.days_sealed,
                    signals = summary.signals,
                    changes = summary.changes,
                    alerts_queued = summary.alerts_queued,
                    "sweep done"
                );
                Ok((summary, report))
            }
            Err(message) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    trigger = trigger.as_str(),
                    duration_ms = took.as_millis() as u64,
                    error = %message,
                    "sweep failed; the next one tries again"
                );
                Err(ScheduleError::Failed(message))
            }
        }
    }

    /// One sweep; `None` when the store holds no spans yet.
    fn sweep_blocking(
        &self,
        dry_run: bool,
        generation: Option<u64>,
    ) -> Result<Option<SweepReport>, SweepFailed> {
        crate::faults::check("sweep").map_err(SweepFailed::Fault)?;
        let reader = self.store.reader();
        let mut state =
            crate::signal::StateDb::open(&reader.layout().state_db()).map_err(SweepError::from)?;
        let mut opts = crate::sweep::SweepOptions::from_config(
            &self.config,
            self.fixed_now_ns.unwrap_or_else(now_ns),
            self.alerting.clone(),
        );
        if let (Some(leader), Some(g)) = (&self.leader, generation) {
            opts.fence = Some(Arc::new(leader.fence(g)));
        }
        let swept = if dry_run {
            crate::sweep::dry_run(&reader, &self.config.detect, &opts)
        } else {
            // A sweep that panicked may have left today's state half made.
            let mut live = self.live.lock().unwrap_or_else(|p| {
                let mut live = p.into_inner();
                *live = crate::sweep::Live::default();
                live
            });
            crate::sweep::run_live(&reader, &mut state, &self.config.detect, &opts, &mut live)
        };
        let result = match swept {
            Ok(report) => Ok(Some(report)),
            Err(SweepError::Empty(_)) => Ok(None),
            Err(e) => Err(SweepFailed::from(e)),
        };
        if result.is_ok() && !dry_run {
            self.prune_outbox(&reader.layout().state_db());
        }
        result
    }

    /// Finished alert messages are kept 30 days (for `alerts list` and
    /// `alerts retry`), then deleted, so a year of running does not pile
    /// them up. Best effort: a failure is logged and tried next sweep.
    fn prune_outbox(&self, state_db: &std::path::Path) {
        let before = now_ns().saturating_sub(OUTBOX_KEEP.as_nanos() as i64);
        match crate::alert::commands::open(state_db)
            .and_then(|c| crate::alert::outbox::prune(&c, before))
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                rows = n,
                "pruned finished alert messages older than 30 days"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not prune the alert outbox; trying again next sweep")
            }
        }
    }

    /// Wait until no sweep is running.
    pub async fn wait_idle(&self) {
        let _ = self.running.lock().await;
    }

    /// Sweep every `interval` until `stop` is cancelled.
    pub async fn run_schedule(
        self: Arc<Self>,
        interval: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = stop.cancelled() => return,
            }
            match self.sweep_now(Trigger::Schedule).await {
                Err(ScheduleError::Busy { started_secs_ago }) => tracing::info!(
                    started_secs_ago,
                    "scheduled sweep skipped: the previous one is still running"
                ),
                Err(ScheduleError::Standby { holder }) => {
                    tracing::debug!(%holder, "scheduled sweep skipped: a standby")
                }
                _ => {}
            }
        }
    }
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}
