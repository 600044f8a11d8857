//! One detection pass, as `stormwatch sweep` runs it (and, later, the
//! server's scheduler): read the rollup and the spans of the window, run
//! every rule, group the findings into signals, update their lifecycle.

use std::collections::BTreeSet;

use polars::prelude::*;
use serde::Serialize;

use crate::config::DetectConfig;
use crate::detect::{self, calls};
use crate::model::{day_of_ns, day_to_string, NANOS_PER_DAY};
use crate::signal::{self, Finding, Lifecycle, Signal, StateDb, StateError};
use crate::store::{Reader, StoreError};

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
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the store at {0} holds no spans yet: send traces to `stormwatch serve` or run `stormwatch import` first")]
    Empty(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    State(#[from] StateError),
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
    pub spans_scanned: usize,
    /// Days the per-turn rules read, and days whose stored result was reused.
    pub days_scanned: usize,
    pub days_reused: usize,
    pub signals: Vec<Signal>,
    pub changes: Vec<Change>,
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
    let days = reader.days()?;
    if days.is_empty() {
        return Err(SweepError::Empty(
            reader.layout().root().display().to_string(),
        ));
    }
    let today = day_of_ns(opts.now_ns);
    let since = today - opts.since_days;
    let mut findings = Vec::new();

    // Daily rules over the rollup: the whole history feeds the baselines,
    // findings are kept for the window.
    if let Some(rollup) = reader.tool_daily()? {
        let rollup = rollup.collect().map_err(data("reading the daily rollup"))?;
        let rows = detect::daily_rows(&rollup).map_err(data("reading the daily rollup"))?;
        let verdicts = detect::judge(&rows, today, &BTreeSet::new(), &cfg.error_spike);
        for v in verdicts.iter().filter(|v| v.day >= since) {
            if v.flagged {
                findings.push(Finding::from_spike(v));
            } else if v.latency_flagged {
                findings.push(Finding::from_latency(v));
            }
        }
    }

    // Per-turn rules, one day at a time so memory holds a day of spans, not
    // the window: each day's turns are read whole — the day before for the
    // traces that began then, the days after for as long as the day's traces
    // go on — and their findings belong to the day the turn began. A day
    // whose parts have not changed since a sweep that saw it final is not
    // read again.
    let now = opts.now_ns;
    let settle_ns = settle_ns(cfg);
    let mut horizon_ns = 0;
    let (mut spans_scanned, mut days_scanned, mut days_reused) = (0, 0, 0);
    let mut outcomes = Vec::new();
    let mut traffic: std::collections::BTreeMap<String, i64> = Default::default();
    let mut worst: std::collections::HashMap<(String, i32), Vec<signal::Evidence>> =
        Default::default();
    if let Some(first) = days.first() {
        state.forget_days_before(first - 1)?;
    }
    let mut take =
        |result: signal::DayResult, day: i32, findings: &mut Vec<Finding>, horizon_ns: &mut i64| {
            *horizon_ns = (*horizon_ns).max(result.horizon_ns);
            findings.extend(result.findings);
            outcomes.extend(result.outcomes);
            for (tool, ns) in result.traffic {
                let t = traffic.entry(tool).or_insert(i64::MIN);
                *t = (*t).max(ns);
            }
            worst.extend(result.worst.into_iter().map(|(t, e)| ((t, day), e)));
        };
    for day in days.iter().copied().filter(|d| (since..=today).contains(d)) {
        if opts.reuse {
            if let Some(through) = state.day_read_through(day)? {
                let fingerprint = day_fingerprint(reader, day, through, cfg)?;
                if let Some(kept) = state.day_result(day, &fingerprint)? {
                    take(kept, day, &mut findings, &mut horizon_ns);
                    days_reused += 1;
                    continue;
                }
            }
        }
        let t0 = std::time::Instant::now();
        let (result, fingerprint) = turn_day(reader, day, today, now, cfg)?;
        tracing::debug!(
            day = %day_to_string(day),
            spans = result.spans,
            through = %day_to_string(result.read_through),
            ms = t0.elapsed().as_millis() as u64,
            "per-turn rules"
        );
        spans_scanned += result.spans;
        days_scanned += 1;
        // Final: the day is over and every trace the read saw has settled.
        if now >= i64::from(day + 1) * NANOS_PER_DAY + settle_ns
            && result.horizon_ns <= now - settle_ns
        {
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

    state.put_outcomes(since, today, &outcomes)?;
    let drafts = signal::group(&findings, opts.evidence_limit);
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
    };
    let outcome = state.apply_then(&drafts, now, &quiet, |c, out| {
        let Some(alerting) = &opts.alerting else {
            return Ok(());
        };
        let db = |source| StateError::Db {
            path: state_path.clone(),
            source,
        };
        let signals = crate::signal::state::signals_in(c, &state_path)?;
        let wall = crate::alert::Clock::System.now_ns();
        queued = alerting
            .enqueue(c, &signals, &out.changes, now, wall)
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
    Ok(SweepReport {
        now_ns: now,
        since_day: day_to_string(since),
        horizon_ns,
        spans_scanned,
        days_scanned,
        days_reused,
        signals,
        changes: outcome
            .changes
            .into_iter()
            .map(|(id, from, to)| Change { id, from, to })
            .collect(),
        queued,
    })
}

/// How long a trace must have been quiet to be judged, in ns.
fn settle_ns(cfg: &DetectConfig) -> i64 {
    cfg.retry_storm.settle_seconds.max(0) * 1_000_000_000
}

/// Bumped whenever a per-turn rule changes what it finds, so stored day
/// results from an older version are recomputed.
const RULES_VERSION: u32 = 4;

/// The rules' version and parameters: the start of every day's fingerprint.
fn rules_hasher(cfg: &DetectConfig) -> xxhash_rust::xxh3::Xxh3 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(
        format!(
            "v{RULES_VERSION} {:?} {:?} {:?}",
            cfg.retry_storm, cfg.tool_loop, cfg.retry_after_success
        )
        .as_bytes(),
    );
    h
}

/// Add the Parquet parts (name, size, modification time) of `day` to `h`.
fn hash_parts(
    h: &mut xxhash_rust::xxh3::Xxh3,
    reader: &Reader,
    day: i32,
) -> Result<(), SweepError> {
    h.update(&day.to_le_bytes());
    for part in reader.layout().parts(day)? {
        let meta = std::fs::metadata(&part).map_err(|e| {
            SweepError::Store(StoreError::io(format!("reading {}", part.display()), e))
        })?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        h.update(reader.layout().relative(&part).as_bytes());
        h.update(&meta.len().to_le_bytes());
        h.update(&mtime.to_le_bytes());
    }
    Ok(())
}

/// What a day's per-turn result depends on: the rules, their parameters,
/// and the parts of every day its read took spans from (`day - 1 ..= through`).
fn day_fingerprint(
    reader: &Reader,
    day: i32,
    through: i32,
    cfg: &DetectConfig,
) -> Result<String, SweepError> {
    let mut h = rules_hasher(cfg);
    for d in day - 1..=through.max(day) {
        hash_parts(&mut h, reader, d)?;
    }
    Ok(format!("{:032x}", h.digest128()))
}

/// Traces of `df` whose turns may reach outside it, as a literal list for
/// `is_in`: those with no root span in it (their turn may have begun
/// earlier — a parent still to be read) when `rootless`, and those with a
/// span still running at `open_at` (they may go on past it).
fn traces_reaching(df: &DataFrame, open_at: Option<i64>) -> Result<Option<Expr>, SweepError> {
    let context = "finding the traces a day's turns share with its neighbours";
    let trace = df
        .column("trace_id")
        .and_then(|c| c.str().cloned())
        .map_err(data(context))?;
    let parent = df
        .column("parent_span_id")
        .and_then(|c| c.str().cloned())
        .map_err(data(context))?;
    let end = df
        .column("end_ns")
        .and_then(|c| c.i64().cloned())
        .map_err(data(context))?;
    // trace → (has a root here, latest end)
    let mut seen: std::collections::HashMap<&str, (bool, i64), foldhash::fast::RandomState> =
        Default::default();
    for ((t, p), e) in trace.iter().zip(parent.iter()).zip(end.iter()) {
        let Some(t) = t else { continue };
        let entry = seen.entry(t).or_insert((false, i64::MIN));
        entry.0 |= p.is_none();
        entry.1 = entry.1.max(e.unwrap_or(0));
    }
    let ids: Vec<&str> = seen
        .iter()
        .filter(|(_, (root, last))| match open_at {
            None => !root,
            Some(at) => !root || *last >= at,
        })
        .map(|(t, _)| *t)
        .collect();
    if ids.is_empty() {
        return Ok(None);
    }
    let ids = Series::new("trace_id".into(), ids);
    Ok(Some(lit(ids).implode(false)))
}

/// Read one day's turns whole and run the per-turn rules: the spans that
/// started on `day`; the day before, the spans of the day's traces that have
/// no root on it (their turn may have begun then); and the days after, up to
/// `today`, the spans of the traces still running (or rootless) at each
/// midnight, for as long as there are any. Returns the result and its
/// fingerprint, each day's parts hashed before that day is read.
fn turn_day(
    reader: &Reader,
    day: i32,
    today: i32,
    now: i64,
    cfg: &DetectConfig,
) -> Result<(signal::DayResult, String), SweepError> {
    let columns = || calls::COLUMNS.iter().map(|c| col(*c)).collect::<Vec<_>>();
    let from = i64::from(day) * NANOS_PER_DAY;
    let mut h = rules_hasher(cfg);
    hash_parts(&mut h, reader, day - 1)?;
    hash_parts(&mut h, reader, day)?;
    let mut spans = reader.collect_spans(day..=day, |lf| {
        lf.filter(
            col("start_ns")
                .gt_eq(lit(from))
                .and(col("start_ns").lt(lit((from + NANOS_PER_DAY).min(now)))),
        )
        .select(columns())
    })?;
    let mut read_through = day;
    if let Some(traces) = traces_reaching(&spans, None)? {
        let before = reader.collect_spans(day - 1..=day - 1, |lf| {
            lf.filter(col("trace_id").is_in(traces.clone(), false))
                .select(columns())
        })?;
        spans
            .vstack_mut_owned(before)
            .map_err(data("reading a day's turns"))?;
    }
    // Turns are followed at most this many days past the day they began.
    const FOLLOW_DAYS: i32 = 2;
    let mut d = day + 1;
    while d <= today.min(day + FOLLOW_DAYS) {
        let Some(traces) = traces_reaching(&spans, Some(i64::from(d) * NANOS_PER_DAY))? else {
            break;
        };
        hash_parts(&mut h, reader, d)?;
        // What the fingerprint covers, whether or not this day holds any.
        read_through = d;
        let next = reader.collect_spans(d..=d, |lf| {
            lf.filter(
                col("trace_id")
                    .is_in(traces.clone(), false)
                    .and(col("start_ns").lt(lit(now))),
            )
            .select(columns())
        })?;
        if next.height() == 0 {
            break;
        }
        spans
            .vstack_mut_owned(next)
            .map_err(data("reading a day's turns"))?;
        d += 1;
    }
    let day_max = spans
        .column("end_ns")
        .and_then(|c| c.i64().map(|c| c.max().unwrap_or(0)))
        .map_err(data("reading span ends"))?;
    let (findings, outcomes, worst, traffic) = turn_findings(&spans, day, now, cfg)?;
    let result = signal::DayResult {
        findings,
        outcomes,
        worst,
        horizon_ns: day_max.min(now),
        spans: spans.height(),
        traffic,
        read_through,
    };
    Ok((result, format!("{:032x}", h.digest128())))
}

/// What the per-turn pass gives for one day: findings, retry outcomes, and
/// per tool the turns where it failed most.
type TurnDay = (
    Vec<Finding>,
    Vec<detect::outcomes::ToolDay>,
    Vec<(String, Vec<signal::Evidence>)>,
    Vec<(String, i64)>,
);

/// Findings of the per-turn rules over `spans`, kept for turns that began
/// on `day`, what that day's settled retries achieved, and its worst
/// failing turns per tool.
fn turn_findings(
    spans: &DataFrame,
    day: i32,
    now: i64,
    cfg: &DetectConfig,
) -> Result<TurnDay, SweepError> {
    let settled_by = now - settle_ns(cfg);
    let tc =
        calls::collect_settled(spans, settled_by).map_err(data("grouping tool calls by turn"))?;
    let (calls, turns) = (&tc.calls, &tc.turns);
    let began_today = |turn: &str| {
        turns
            .get(turn)
            .is_some_and(|t| day_of_ns(t.began_ns) == day)
    };
    let settled = |turn: &str| {
        turns
            .get(turn)
            .is_some_and(|t| t.settled(now, cfg.retry_storm.settle_seconds))
    };
    let growth = cfg.retry_storm.exponential_ratio;
    let mut out = Vec::new();
    for s in detect::retry_storms(&tc, now, &cfg.retry_storm) {
        if began_today(&s.turn) {
            out.push(Finding::from_storm(&s));
        }
    }
    let settle = cfg.retry_storm.settle_seconds;
    // A request repeated in a loop is reported once, as the loop.
    let mut looped: std::collections::HashSet<(String, String)> = Default::default();
    for l in detect::tool_loops(&tc, now, settle, growth, &cfg.tool_loop) {
        looped.extend(l.steps.iter().map(|t| (l.turn.clone(), t.clone())));
        if began_today(&l.turn) {
            out.push(Finding::from_loop(&l));
        }
    }
    let keep = |turn: &str| began_today(turn) && settled(turn);
    for w in detect::wasted_retries(calls)
        .iter()
        .filter(|w| keep(&w.turn))
    {
        out.push(Finding::from_wasted(w));
    }
    let read_only = |tool: &str| cfg.retry_after_success.read_only(tool);
    for r in detect::retries_after_success(calls, growth, read_only)
        .iter()
        .filter(|r| keep(&r.turn) && !looped.contains(&(r.turn.clone(), r.tool.clone())))
    {
        let read_only = cfg.retry_after_success.read_only(&r.tool);
        out.push(Finding::from_after_success(r, read_only));
    }
    for s in detect::stacked_retries(calls)
        .iter()
        .filter(|s| keep(&s.turn))
    {
        out.push(Finding::from_stacked(s));
    }
    // Every per-turn finding belongs to the day its turn began.
    for f in &mut out {
        f.day = day;
        if let Some(e) = f.evidence.as_mut() {
            e.day = day_to_string(day);
            if e.session_id.is_none() {
                e.session_id = e
                    .turn_id
                    .as_deref()
                    .and_then(|t| turns.get(t))
                    .and_then(|t| t.session_id.clone());
            }
        }
    }
    let outcomes = detect::outcomes::per_tool_day(calls, day, growth, keep);
    let worst = tc
        .failing
        .iter()
        .filter(|((_, d), _)| *d == day)
        .map(|((tool, _), turns)| {
            let ev = turns
                .iter()
                .map(|t| signal::Evidence {
                    session_id: t.session_id.clone(),
                    ..signal::Evidence::turn(&t.trace_id, &t.turn, day, t.calls, t.failures)
                })
                .collect();
            (tool.clone(), ev)
        })
        .collect();
    let traffic = tc
        .last_call
        .iter()
        .filter(|((_, d), _)| *d == day)
        .map(|((tool, _), ns)| (tool.clone(), *ns))
        .collect();
    Ok((out, outcomes, worst, traffic))
}

/// RFC 3339 (UTC) of a nanosecond timestamp.
pub fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp(
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    .unwrap_or_default()
}

/// The JSON contract of `sweep --format json` (documented in the README).
pub fn to_json(report: &SweepReport) -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "now": rfc3339(report.now_ns),
        "since": report.since_day,
        "horizon": rfc3339(report.horizon_ns),
        "spans_scanned": report.spans_scanned,
        "days_scanned": report.days_scanned,
        "days_reused": report.days_reused,
        "signals": report.signals.iter().map(signal_json).collect::<Vec<_>>(),
        "changes": report.changes,
        "alerts_queued": report.queued,
    })
}

pub fn signal_json(s: &Signal) -> serde_json::Value {
    let d = &s.draft;
    serde_json::json!({
        "id": d.id,
        "key": d.key,
        "kind": d.kind,
        "severity": d.severity().as_str(),
        "tool": d.tool,
        "error_class": d.error_class,
        "title": d.title,
        "state": s.state,
        "first_seen": rfc3339(d.first_seen_ns),
        "last_seen": rfc3339(d.last_seen_ns),
        "days": d.days,
        "findings": d.findings,
        "evidence": d.evidence,
        "evidence_more": d.evidence_more,
        "muted_until": s.muted_until_ns.map(rfc3339),
    })
}

/// The short human report.
pub fn to_text(report: &SweepReport) -> String {
    let mut out = format!(
        "stormwatch sweep at {} over {} .. now ({} day(s) read, {} unchanged): {} signal(s), {} change(s)\n",
        rfc3339(report.now_ns),
        report.since_day,
        report.days_scanned,
        report.days_reused,
        report.signals.len(),
        report.changes.len()
    );
    for s in &report.signals {
        let d = &s.draft;
        out.push_str(&format!(
            "\n{}  [{}]  {}\n",
            d.id,
            s.state.as_str(),
            d.title
        ));
        out.push_str(&format!(
            "    {} finding(s) on {}\n",
            d.findings,
            d.days.join(", ")
        ));
        for e in &d.evidence {
            let rhythm = e
                .rhythm
                .as_deref()
                .map(|r| format!(", {r}"))
                .unwrap_or_default();
            let vs = match (e.turn_duration_s, e.healthy_turn_duration_s) {
                (Some(t), Some(h)) if h > 0.0 => format!(", turn {t:.1} s vs {h:.1} s healthy"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "    trace {}  {} calls, {} failed{rhythm}, {:.1} s wasted{vs}\n",
                e.trace_id, e.calls, e.failures, e.wasted_seconds
            ));
        }
        if d.evidence_more > 0 {
            out.push_str(&format!("    +{} more trace(s)\n", d.evidence_more));
        }
    }
    out
}

/// Markdown, for a pull request or an issue.
pub fn to_markdown(report: &SweepReport) -> String {
    let esc = |s: &str| {
        s.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!(
        "## stormwatch sweep — {}\n\n| id | state | signal | findings | days |\n|---|---|---|---|---|\n",
        rfc3339(report.now_ns)
    );
    for s in &report.signals {
        let d = &s.draft;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            d.id,
            s.state.as_str(),
            esc(&d.title),
            d.findings,
            d.days.join(", ")
        ));
    }
    if report.signals.is_empty() {
        out.push_str("| — | — | no signals | — | — |\n");
    }
    out
}

/// Days of history a `--since` value covers (`30d`, `12h` rounds up to a day, `2w`).
pub fn parse_since(s: &str) -> Result<i32, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("expected a duration like 30d, 12h or 2w, got {s:?}"))?;
    let days = match unit {
        "d" | "" => n,
        "w" => n * 7,
        "h" => (n + 23) / 24,
        _ => {
            return Err(format!(
                "expected a duration like 30d, 12h or 2w, got {s:?}"
            ))
        }
    };
    i32::try_from(days.max(1)).map_err(|_| format!("{s:?} is too long"))
}

/// A `--now` value: RFC 3339, or a UTC date (its midnight).
pub fn parse_now(s: &str) -> Result<i64, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return t
            .timestamp_nanos_opt()
            .ok_or_else(|| format!("{s:?} is out of range"));
    }
    let day = crate::model::day_from_str(s).ok_or_else(|| {
        format!(
            "expected an RFC 3339 time (2026-08-06T09:00:00Z) or a date (2026-08-06), got {s:?}"
        )
    })?;
    i64::from(day)
        .checked_mul(NANOS_PER_DAY)
        .ok_or_else(|| format!("{s:?} is out of range"))
}
