//! One detection pass, as `stormwatch sweep` runs it (and, later, the
//! server's scheduler): read the rollup and the spans of the window, run
//! every rule, group the findings into signals, update their lifecycle.

use std::collections::BTreeSet;

use polars::prelude::*;
use serde::Serialize;

use crate::config::DetectConfig;
use crate::detect;
use crate::model::{day_of_ns, day_to_string};
use crate::signal::{self, Finding, Lifecycle, Signal, StateDb, StateError};
use crate::store::{Reader, StoreError};

mod day;
mod dry;
mod remedies;
mod report;
mod silent;
pub mod summary;
mod window;

pub use day::{day_fingerprint, settle_ns};
pub use dry::dry_run;
pub use report::{signal_json, to_json, to_markdown, to_text};

/// What a sweep looks at.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The sweep's "now" (ns): replaying history sets it in the past.
    pub now_ns: i64,
    /// How far back findings are collected.
    pub since_days: i32,
    pub evidence_limit: usize,
    /// A daily signal resolves after this many complete days without a finding …
    pub resolve_after_days: i64,
    /// … a per-turn one after this many hours of its tool's traffic without one.
    pub resolve_after_hours: i64,
    /// Reuse the stored per-day results of days whose data is unchanged
    /// (`sweep --rescan` turns it off).
    pub reuse: bool,
    /// Queue notifications of this sweep's changes (when targets are set).
    pub alerting: Option<crate::alert::Alerting>,
    /// Checked inside the state transaction, before it commits: an error
    /// drops the sweep's changes (the detect role that lost its lease).
    pub fence: Option<std::sync::Arc<dyn crate::store::hooks::Fence>>,
}

impl SweepOptions {
    /// A sweep's options as of `now_ns` from the configuration: the window
    /// of `[sweep]`, the limits of `[signals]`, stored day results reused.
    pub fn from_config(
        config: &crate::config::Config,
        now_ns: i64,
        alerting: Option<crate::alert::Alerting>,
    ) -> SweepOptions {
        SweepOptions {
            now_ns,
            since_days: config.sweep.since_days as i32,
            evidence_limit: config.signals.evidence_limit,
            resolve_after_days: config.signals.resolve_after_days,
            resolve_after_hours: config.signals.resolve_after_hours,
            reuse: true,
            alerting,
            fence: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the store at {0} holds no spans yet: send traces to `stormwatch serve` or run `stormwatch import` first")]
    Empty(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("a dry run's scratch directory {path}: {source}")]
    Scratch {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{context}: {source}")]
    Data {
        context: String,
        source: PolarsError,
    },
}

fn data(context: &str) -> impl Fn(PolarsError) -> SweepError + '_ {
    move |source| SweepError::Data {
        context: context.to_string(),
        source,
    }
}

/// A state change, for reports and alerts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub id: String,
    pub from: Option<Lifecycle>,
    pub to: Lifecycle,
}

/// The sweep's result.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub now_ns: i64,
    pub since_day: String,
    /// The newest span end the sweep saw.
    pub horizon_ns: i64,
    /// When a span ended within `settle_seconds` of now: the time its trace
    /// will have settled, and its turns be judged (until then they are not).
    pub settling_until_ns: Option<i64>,
    pub spans_scanned: usize,
    /// Days the per-turn rules read, and days whose stored result was reused.
    pub days_scanned: usize,
    pub days_reused: usize,
    /// Days whose sealed summary was read instead of their spans, and days
    /// this sweep sealed.
    pub days_from_summary: usize,
    pub days_sealed: usize,
    pub signals: Vec<Signal>,
    pub changes: Vec<Change>,
    /// The incidents of these signals (open), and those this sweep changed.
    pub incidents: Vec<crate::incident::Incident>,
    pub incident_changes: Vec<crate::incident::IncidentChange>,
    /// Messages this sweep queued for delivery.
    pub queued: Vec<crate::alert::Queued>,
}

/// Run one sweep over `reader`'s store, updating `state`.
pub fn run(
    reader: &Reader,
    state: &mut StateDb,
    cfg: &DetectConfig,
    opts: &SweepOptions,
) -> Result<SweepReport, SweepError> {
    // Every part and rollup file this sweep lists stays on disk until it
    // ends, whatever the store compacts or refreshes meanwhile.
    let _pin = reader.pin();
    let days = reader.days()?;
    if days.is_empty() {
        return Err(SweepError::Empty(
            reader.layout().root().display().to_string(),
        ));
    }
    let today = day_of_ns(opts.now_ns);
    let since = today - opts.since_days;
    let mut findings = Vec::new();
    let mut facts = crate::incident::Facts::default();
    let mut daily = Vec::new();

    // Daily rules over the rollup: the whole history feeds the baselines,
    // findings are kept for the window.
    if let Some(rollup) = reader.tool_daily()? {
        let rollup = rollup.collect().map_err(data("reading the daily rollup"))?;
        let rows = detect::daily_rows(&rollup).map_err(data("reading the daily rollup"))?;
        facts = incident_facts(&rows, crate::store::rollup::tool_dependencies(&rollup));
        let verdicts = detect::judge(&rows, today, &BTreeSet::new(), &cfg.error_spike);
        for v in verdicts.iter().filter(|v| v.day >= since) {
            if v.flagged {
                findings.push(Finding::from_spike(v));
            } else if v.latency_flagged {
                findings.push(Finding::from_latency(v));
            }
        }
        daily = rows;
    }

    // Per-turn rules, one day at a time so memory holds a day of spans, not
    // the window: each day's turns are read whole — the day before for the
    // traces that began then, the days after for as long as the day's traces
    // go on — and their findings belong to the day the turn began. A day
    // whose parts have not changed since a sweep that saw it final (or
    // whose provisional result still holds) is not read again; a sealed day
    // is read from its summary.
    let now = opts.now_ns;
    let settle_ns = settle_ns(cfg);
    let mut horizon_ns = 0;
    let (mut spans_scanned, mut days_scanned, mut days_reused) = (0, 0, 0);
    let (mut days_from_summary, mut days_sealed) = (0, 0);
    let mut per_day = day::Days::new(reader, cfg, now);
    let mut outcomes = Vec::new();
    let mut traffic: std::collections::BTreeMap<String, i64> = Default::default();
    let mut turns = detect::silent::Turns::default();
    let mut worst: std::collections::HashMap<(String, i32), Vec<signal::Evidence>> =
        Default::default();
    if let Some(first) = days.first() {
        state.forget_days_before(first - 1)?;
    }
    let mut take =
        |result: signal::DayResult, day: i32, findings: &mut Vec<Finding>, horizon_ns: &mut i64| {
            *horizon_ns = (*horizon_ns).max(result.horizon_ns.min(now));
            findings.extend(result.findings);
            outcomes.extend(result.outcomes);
            for (tool, ns) in result.traffic {
                let t = traffic.entry(tool).or_insert(i64::MIN);
                *t = (*t).max(ns);
            }
            for (service, n) in result.turns {
                *turns.entry((service, day)).or_insert(0) += n;
            }
            worst.extend(result.worst.into_iter().map(|(t, e)| ((t, day), e)));
        };
    // Stored results first; then the sealed days, from their summaries, on
    // both cores (they need no neighbour); then, in order, the days read
    // from their spans (each shares partitions with its neighbours).
    let mut results: std::collections::BTreeMap<i32, (signal::DayResult, Option<String>)> =
        Default::default();
    let mut pending = Vec::new();
    for day in days.iter().copied().filter(|d| (since..=today).contains(d)) {
        if opts.reuse {
            if let Some(through) = state.day_read_through(day)? {
                let fingerprint = day_fingerprint(reader, day, through, cfg)?;
                let kept = state.day_result(day, &fingerprint, now)?;
                // A final result stands only for a `now` it is final at.
                let holds = |r: &signal::DayResult| {
                    r.provisional.is_some()
                        || day::final_at(cfg, day, now, r.horizon_ns, r.read_through)
                };
                if let Some(kept) = kept.filter(holds) {
                    results.insert(day, (kept, None));
                    days_reused += 1;
                    continue;
                }
            }
        }
        pending.push(day);
    }
    // Sealed days on a thread of their own, beside the days read from spans.
    let mut sealed = Vec::new();
    let mut from_spans = Vec::new();
    for day in pending {
        if opts.reuse && day::has_usable_summary(reader, cfg, now, day)? {
            sealed.push(day);
        } else {
            from_spans.push(day);
        }
    }
    type Read = (i32, signal::DayResult, String, bool);
    let read_days = |days: &[i32], per_day: &mut day::Days<'_>| -> Result<Vec<Read>, SweepError> {
        let mut out = Vec::new();
        for &day in days {
            let t0 = std::time::Instant::now();
            let (result, fingerprint, sealed) = per_day.result(day)?;
            tracing::debug!(
                day = %day_to_string(day),
                spans = result.spans,
                through = %day_to_string(result.read_through),
                sealed,
                ms = t0.elapsed().as_millis() as u64,
                "per-turn rules"
            );
            out.push((day, result, fingerprint, sealed));
        }
        Ok(out)
    };
    let (summaries, spans_read) = std::thread::scope(|scope| {
        let summaries = scope.spawn(|| day::from_summaries(reader, cfg, now, &sealed));
        let spans_read = read_days(&from_spans, &mut per_day);
        let summaries = summaries
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (summaries, spans_read)
    });
    let mut read = spans_read?;
    for (day, (result, fingerprint)) in summaries? {
        days_from_summary += 1;
        results.insert(day, (result, Some(fingerprint)));
    }
    // A summary that went stale in between: its day from its spans.
    let stale: Vec<i32> = sealed
        .into_iter()
        .filter(|d| !results.contains_key(d))
        .collect();
    read.extend(read_days(&stale, &mut day::Days::new(reader, cfg, now))?);
    for (day, result, fingerprint, sealed) in read {
        spans_scanned += result.spans;
        days_scanned += 1;
        days_sealed += usize::from(sealed);
        results.insert(day, (result, Some(fingerprint)));
    }
    for (day, (result, fingerprint)) in results {
        if let Some(fingerprint) = fingerprint {
            state.put_day_result(day, &fingerprint, &result)?;
        }
        take(result, day, &mut findings, &mut horizon_ns);
    }
    // A spike's evidence: the turn where the tool failed most that day.
    for f in findings
        .iter_mut()
        .filter(|f| f.kind == signal::Kind::ErrorRateSpike)
    {
        if let Some(e) = worst.get(&(f.tool.clone(), f.day)).and_then(|v| v.first()) {
            f.evidence = Some(e.clone());
        }
    }

    // Silent tools: the rollup against the turns the per-turn pass counted.
    findings.extend(silent::findings(
        reader,
        &daily,
        &turns,
        (since, today, now),
        &cfg.silent,
    )?);
    add_outcomes(&mut facts, &outcomes, &findings);
    state.put_outcomes(since, today, &outcomes)?;
    let mut drafts = signal::group(&findings, opts.evidence_limit);
    remedies::attach(reader, since, &mut drafts)?;
    let mut queued = Vec::new();
    let state_path = reader.layout().state_db();
    let quiet = signal::state::Quiet {
        horizon_ns,
        after_days: opts.resolve_after_days,
        after_hours: opts.resolve_after_hours,
        // Only traffic whose turns had time to settle counts as quiet.
        traffic: traffic
            .into_iter()
            .map(|(t, ns)| (t, ns.min(now - settle_ns)))
            .collect(),
        last_ok: daily.iter().fold(Default::default(), |mut m, r| {
            if let Some(ns) = r.last_ok_ns {
                let e = m.entry(r.tool.clone()).or_insert(ns);
                *e = (*e).max(ns);
            }
            m
        }),
    };
    let mut incident_changes = Vec::new();
    let outcome = state.apply_then(&drafts, now, &quiet, |c, out| {
        crate::faults::kill_point("sweep_before_commit");
        if let Some(fence) = &opts.fence {
            fence
                .check()
                .map_err(|e| StateError::Fenced(e.to_string()))?;
        }
        let db = |source| StateError::Db {
            path: state_path.clone(),
            source,
        };
        let signals = crate::signal::state::signals_in(c, &state_path)?;
        incident_changes =
            crate::incident::store::apply(c, &signals, &facts, now, opts.evidence_limit)
                .map_err(db)?;
        let Some(alerting) = &opts.alerting else {
            return Ok(());
        };
        let wall = crate::alert::Clock::System.now_ns();
        queued = alerting
            .enqueue(c, &signals, &out.changes, &incident_changes, now, wall)
            .map_err(db)?;
        Ok(())
    })?;
    let keys: BTreeSet<&str> = drafts.iter().map(|d| d.key.as_str()).collect();
    let mut signals: Vec<Signal> = state
        .list()?
        .into_iter()
        .filter(|s| keys.contains(s.draft.key.as_str()))
        .collect();
    signals.sort_by(|a, b| {
        b.draft
            .last_seen_ns
            .cmp(&a.draft.last_seen_ns)
            .then_with(|| a.draft.id.cmp(&b.draft.id))
    });
    // The incidents of the signals reported, and those this sweep changed.
    let ids: BTreeSet<&str> = signals.iter().map(|s| s.draft.id.as_str()).collect();
    let changed: BTreeSet<&str> = incident_changes.iter().map(|c| c.id.as_str()).collect();
    let incidents: Vec<crate::incident::Incident> = crate::incident::store::list(state.conn())
        .map_err(|e| StateError::Incident(e.to_string()))?
        .into_iter()
        .filter(|i| {
            changed.contains(i.id.as_str())
                || (i.is_open() && i.members.iter().any(|m| ids.contains(m.signal_id.as_str())))
        })
        .collect();
    Ok(SweepReport {
        now_ns: now,
        incidents,
        incident_changes,
        since_day: day_to_string(since),
        horizon_ns,
        settling_until_ns: Some(horizon_ns.saturating_add(settle_ns)).filter(|t| *t > now),
        spans_scanned,
        days_scanned,
        days_reused,
        days_from_summary,
        days_sealed,
        signals,
        changes: outcome
            .changes
            .into_iter()
            .map(|(id, from, to)| Change { id, from, to })
            .collect(),
        queued,
    })
}

/// What incidents need of the daily rollup: each tool's figures and
/// dependency per day.
fn incident_facts(
    rows: &[detect::DailyRow],
    dependencies: std::collections::BTreeMap<(String, i32), String>,
) -> crate::incident::Facts {
    let mut facts = crate::incident::Facts::default();
    let mut busiest: std::collections::BTreeMap<(String, i32), u64> = Default::default();
    for r in rows {
        let key = (r.tool.clone(), r.day);
        // A tool served by several services: the busiest names it.
        let top = busiest.entry(key.clone()).or_default();
        let f = facts.daily.entry(key).or_default();
        if r.calls >= *top {
            *top = r.calls;
            f.service = r.service.clone();
        }
        f.calls += r.calls;
        f.errors += r.errors;
    }
    for (key, dependency) in dependencies {
        facts.daily.entry(key).or_default().dependency = Some(dependency);
    }
    facts
}

/// The retry outcomes per tool and day, and the turns and sessions of each
/// signal key's findings.
fn add_outcomes(
    facts: &mut crate::incident::Facts,
    outcomes: &[detect::outcomes::ToolDay],
    findings: &[Finding],
) {
    for o in outcomes {
        let f = facts.daily.entry((o.tool.clone(), o.day)).or_default();
        f.wasted += o.wasted;
        f.wasted_seconds += o.wasted_seconds;
    }
    for f in findings {
        let Some(e) = &f.evidence else { continue };
        let reach = facts
            .reach
            .entry(signal::group::key(f.kind, &f.tool, f.class))
            .or_default();
        reach.turns.extend(e.turn_id.clone());
        reach.sessions.extend(e.session_id.clone());
    }
}
