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

mod commit;
mod day;
mod decode;
mod dry;
mod execute;
mod live;
mod plan;
mod remedies;
mod report;
mod silent;
pub mod summary;
mod window;

pub use day::{day_fingerprint, settle_ns};
pub use dry::dry_run;
pub use live::{Census, Live};
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
    /// The sweep may no longer commit (it lost the detect lease).
    #[error(transparent)]
    Fenced(#[from] crate::store::hooks::FenceLost),
    /// The incidents could not be read.
    #[error(transparent)]
    Incident(#[from] crate::incident::IncidentError),
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
    /// Days whose summary was read instead of their spans, and days this
    /// sweep wrote a summary of (`days_sealed` in the JSON).
    pub days_from_summary: usize,
    #[serde(rename = "days_sealed")]
    pub days_summarized: usize,
    pub signals: Vec<Signal>,
    pub changes: Vec<Change>,
    /// The incidents of these signals (open), and those this sweep changed.
    pub incidents: Vec<crate::incident::Incident>,
    pub incident_changes: Vec<crate::incident::IncidentChange>,
    /// Messages this sweep queued for delivery.
    pub queued: Vec<crate::alert::Queued>,
}

/// Run one sweep over `reader`'s store, updating `state`: the daily rules
/// over the rollup, then the per-turn rules day by day as [`plan`]ned and
/// [`execute`]d, the silent tools, and the signals grouped and
/// [`commit`]ted in one state transaction.
pub fn run(
    reader: &Reader,
    state: &mut StateDb,
    cfg: &DetectConfig,
    opts: &SweepOptions,
) -> Result<SweepReport, SweepError> {
    sweep(reader, state, cfg, opts, None)
}

/// [`run`] as a process that sweeps again and again runs it (`serve`'s
/// scheduler): today is read from what `live` kept of it at the last
/// sweep and the spans that arrived since ([`Live`]); the findings are
/// those of [`run`].
pub fn run_live(
    reader: &Reader,
    state: &mut StateDb,
    cfg: &DetectConfig,
    opts: &SweepOptions,
    live: &mut Live,
) -> Result<SweepReport, SweepError> {
    sweep(reader, state, cfg, opts, Some(live))
}

fn sweep(
    reader: &Reader,
    state: &mut StateDb,
    cfg: &DetectConfig,
    opts: &SweepOptions,
    live: Option<&mut Live>,
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
    let now = opts.now_ns;
    let today = day_of_ns(now);
    let since = today - opts.since_days;
    let Daily {
        rows: daily,
        mut facts,
        mut findings,
    } = daily_rules(reader, cfg, today, since)?;

    // Per-turn rules, one day at a time so memory holds a day of spans, not
    // the window: each day's turns are read whole — the day before for the
    // traces that began then, the days after for as long as the day's traces
    // go on — and their findings belong to the day the turn began. A day
    // whose parts have not changed since a sweep that saw it final (or
    // whose provisional result still holds) is not read again; a day with
    // a summary is read from it.
    if let Some(first) = days.first() {
        state.forget_days_before(first - 1)?;
    }
    let plan = plan::plan(reader, state, cfg, opts, &days, (since, today))?;
    // A day kept that is no longer today goes before the days are read
    // (not held beside yesterday's read from its spans at midnight).
    let mut live = live;
    if let Some(l) = live.as_deref_mut() {
        l.forget_unless(today);
    }
    let done = execute::execute(reader, cfg, now, plan, live)?;
    let mut tally = execute::Tally::default();
    for (day, (result, fingerprint)) in done.results {
        if let Some(fingerprint) = fingerprint {
            state.put_day_result(day, &fingerprint, &result)?;
        }
        tally.take(result, day, now, &mut findings);
    }
    tally.attach_worst(&mut findings);

    // Silent tools: the rollup against the turns the per-turn pass counted.
    findings.extend(silent::findings(
        reader,
        &daily,
        &tally.turns,
        (since, today, now),
        &cfg.silent,
    )?);
    add_outcomes(&mut facts, &tally.outcomes, &findings);
    state.put_outcomes(since, today, &tally.outcomes)?;
    let mut drafts = signal::group(&findings, opts.evidence_limit);
    remedies::attach(reader, since, &mut drafts)?;
    let settle_ns = settle_ns(cfg);
    let horizon_ns = tally.horizon_ns;
    let quiet = commit::quiet(opts, horizon_ns, tally.traffic, settle_ns, &daily);
    let committed = commit::commit(reader, state, opts, &drafts, &quiet, &facts)?;
    // The incidents of the signals reported, and those this sweep changed.
    let (signals, incidents) = commit::reported(state, &drafts, &committed.incident_changes)?;
    Ok(SweepReport {
        now_ns: now,
        incidents,
        incident_changes: committed.incident_changes,
        since_day: day_to_string(since),
        horizon_ns,
        settling_until_ns: Some(horizon_ns.saturating_add(settle_ns)).filter(|t| *t > now),
        spans_scanned: done.spans_scanned,
        days_scanned: done.days_scanned,
        days_reused: done.days_reused,
        days_from_summary: done.days_from_summary,
        days_summarized: done.days_summarized,
        signals,
        changes: committed.changes,
        queued: committed.queued,
    })
}

/// The daily rules' part of a sweep.
struct Daily {
    /// The rollup's rows, the whole history.
    rows: Vec<detect::DailyRow>,
    facts: crate::incident::Facts,
    /// The findings within the window.
    findings: Vec<Finding>,
}

/// Daily rules over the rollup: the whole history feeds the baselines,
/// findings are kept for the window from `since`.
fn daily_rules(
    reader: &Reader,
    cfg: &DetectConfig,
    today: i32,
    since: i32,
) -> Result<Daily, SweepError> {
    let mut out = Daily {
        rows: Vec::new(),
        facts: crate::incident::Facts::default(),
        findings: Vec::new(),
    };
    if let Some(rollup) = reader.tool_daily()? {
        let rollup = rollup.collect().map_err(data("reading the daily rollup"))?;
        let rows = detect::daily_rows(&rollup).map_err(data("reading the daily rollup"))?;
        out.facts = incident_facts(&rows, crate::store::rollup::tool_dependencies(&rollup));
        let verdicts = detect::judge(&rows, today, &BTreeSet::new(), &cfg.error_spike);
        for v in verdicts.iter().filter(|v| v.day >= since) {
            if v.flagged {
                out.findings.push(Finding::from_spike(v));
            } else if v.latency_flagged {
                out.findings.push(Finding::from_latency(v));
            }
        }
        out.rows = rows;
    }
    Ok(out)
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
