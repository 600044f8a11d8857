//! One day's per-turn result: from its day summary when it has a valid
//! one, else from its spans through the kernel (writing its summary when
//! final);
//! and the fingerprint a stored result is kept under.

use super::summary::{self, Summary};
use super::window::{part_hash, Window, FOLLOW_DAYS};
use super::SweepError;
use crate::config::DetectConfig;
use crate::detect::{self, calls, calls::TurnCalls};
use crate::model::{day_of_ns, day_to_string, NANOS_PER_DAY};
use crate::signal::{self, Finding};
use crate::store::Reader;

/// How long a trace must have been quiet to be judged, in ns.
pub fn settle_ns(cfg: &DetectConfig) -> i64 {
    cfg.retry_storm.settle_seconds.max(0) * 1_000_000_000
}

/// Bumped whenever a per-turn rule changes what it finds, so stored day
/// results from an older version are recomputed.
const RULES_VERSION: u32 = 9;

/// The rules' version and parameters: the start of every day's fingerprint.
fn rules_hasher(cfg: &DetectConfig) -> xxhash_rust::xxh3::Xxh3 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(
        format!(
            "v{RULES_VERSION} {:?} {:?} {:?} {:?} {:?}",
            cfg.retry_storm, cfg.tool_loop, cfg.retry_after_success, cfg.retry_after, cfg.cost
        )
        .as_bytes(),
    );
    h
}

/// What a day's per-turn result depends on: the rules, their parameters,
/// and the parts of every day its read may take spans from (`day - 1 ..= through`).
pub fn day_fingerprint(
    reader: &Reader,
    day: i32,
    through: i32,
    cfg: &DetectConfig,
) -> Result<String, SweepError> {
    Ok(combine(cfg, &hashes(reader, day, through)?))
}

/// Each day's part hash from the day before `day` through `last`.
fn hashes(reader: &Reader, day: i32, last: i32) -> Result<Vec<u128>, SweepError> {
    (day - 1..=last.max(day))
        .map(|d| part_hash(reader, d))
        .collect()
}

/// Whether a read of `day` whose newest span ended at `horizon_ns` and that
/// took spans through `through` is final at `now`: the day is over, every
/// trace it saw has settled, and it read no day after `now`'s. A stored
/// result or a summary stands only for a `now` it is final at (a replay
/// with an earlier `now` must not see spans from after it).
pub fn final_at(cfg: &DetectConfig, day: i32, now: i64, horizon_ns: i64, through: i32) -> bool {
    let settle = settle_ns(cfg);
    now >= i64::from(day + 1) * NANOS_PER_DAY + settle
        && horizon_ns <= now - settle
        && through <= day_of_ns(now)
}

fn combine(cfg: &DetectConfig, hashes: &[u128]) -> String {
    let mut h = rules_hasher(cfg);
    for x in hashes {
        h.update(&x.to_le_bytes());
    }
    format!("{:032x}", h.digest128())
}

/// A day's result and the fingerprint to keep it under.
pub type Found = (signal::DayResult, String);

/// The results of those of `days` that have a valid summary, computed on
/// as many threads as the machine has cores (at most one a day), each with
/// its fingerprint.
pub fn from_summaries(
    reader: &Reader,
    cfg: &DetectConfig,
    now: i64,
    days: &[i32],
) -> Result<Vec<(i32, Found)>, SweepError> {
    let today = day_of_ns(now);
    let one = |day: i32| -> Result<Option<Found>, SweepError> {
        let hashes = day_hashes(reader, day, today)?;
        let Some(s) = summary::load(reader, day)?
            .filter(|s| final_at(cfg, day, now, s.horizon_ns, s.read_through()))
        else {
            return Ok(None);
        };
        let fingerprint = fingerprint_through(cfg, day, &hashes, s.read_through());
        Ok(Some((day_result(&s, day, now, cfg, None), fingerprint)))
    };
    let workers = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .clamp(1, days.len().max(1));
    let chunks: Vec<Vec<i32>> = (0..workers)
        .map(|w| days.iter().copied().skip(w).step_by(workers).collect())
        .collect();
    let parts: Vec<Result<Vec<(i32, Found)>, SweepError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let one = &one;
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for &day in chunk {
                        if let Some(r) = one(day)? {
                            out.push((day, r));
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out = Vec::new();
    for p in parts {
        out.extend(p?);
    }
    out.sort_by_key(|(d, _)| *d);
    Ok(out)
}

/// Whether `day` has a summary a sweep at `now` can use (its manifest
/// only; the files are read later).
pub fn has_usable_summary(
    reader: &Reader,
    cfg: &DetectConfig,
    now: i64,
    day: i32,
) -> Result<bool, SweepError> {
    Ok(summary::peek(reader, day)?.is_some_and(|(days, horizon)| {
        let through = days.iter().copied().max().unwrap_or(day);
        final_at(cfg, day, now, horizon, through)
    }))
}

/// Each day's part hash from the day before `day` to as far as its read
/// may follow, taken before anything of it is read.
fn day_hashes(reader: &Reader, day: i32, today: i32) -> Result<Vec<u128>, SweepError> {
    hashes(reader, day, today.min(day + FOLLOW_DAYS))
}

/// The fingerprint of a read of `day` through `day` (today's, whose
/// following days are still to come), the days read at `versions`.
pub(super) fn fingerprint_of_versions(
    reader: &Reader,
    cfg: &DetectConfig,
    day: i32,
    today: i32,
    versions: &[(i32, u128)],
) -> Result<String, SweepError> {
    let mut hashes = day_hashes(reader, day, today)?;
    with_versions(&mut hashes, day, versions);
    Ok(fingerprint_through(cfg, day, &hashes, day))
}

/// `hashes` ([`day_hashes`] of `day`) with the days read at `versions`
/// fingerprinted as they were read.
fn with_versions(hashes: &mut [u128], day: i32, versions: &[(i32, u128)]) {
    for (d, v) in versions {
        if let Some(h) = usize::try_from(d - (day - 1))
            .ok()
            .and_then(|k| hashes.get_mut(k))
        {
            *h = *v;
        }
    }
}

/// The fingerprint of a read of `day` through `through`, from [`day_hashes`].
fn fingerprint_through(cfg: &DetectConfig, day: i32, hashes: &[u128], through: i32) -> String {
    let n = (through.max(day) - (day - 1) + 1) as usize;
    combine(cfg, &hashes[..n.min(hashes.len())])
}

/// Computes days' per-turn results from their spans, in ascending order
/// of days (summarized days are read by [`from_summaries`]).
pub struct Days<'a> {
    reader: &'a Reader,
    cfg: &'a DetectConfig,
    now: i64,
    today: i32,
    window: Window<'a>,
}

impl<'a> Days<'a> {
    pub fn new(reader: &'a Reader, cfg: &'a DetectConfig, now: i64) -> Days<'a> {
        Days {
            reader,
            cfg,
            now,
            today: day_of_ns(now),
            window: Window::new(reader, now),
        }
    }

    pub fn today(&self) -> i32 {
        self.today
    }

    pub fn reader(&self) -> &'a Reader {
        self.reader
    }

    pub fn cfg(&self) -> &'a DetectConfig {
        self.cfg
    }

    pub fn now(&self) -> i64 {
        self.now
    }

    /// The days [`result`](Self::result) will be asked for, in order (so
    /// the window can decode the next one's spans ahead).
    pub fn plan(&mut self, days: &[i32]) {
        self.window.plan(days);
    }

    /// `day`'s result from its spans, the fingerprint to keep it under, and
    /// whether its summary was written.
    pub fn result(&mut self, day: i32) -> Result<(signal::DayResult, String, bool), SweepError> {
        let (cfg, now) = (self.cfg, self.now);
        let settle = settle_ns(cfg);
        // Each day's parts hashed before anything of it is read.
        let mut hashes = day_hashes(self.reader, day, self.today)?;
        let t0 = std::time::Instant::now();
        let turns = self.window.turns(day, self.today)?;
        // The days read are fingerprinted as they were when decoded (a day
        // may have been decoded before this one's hashes were taken).
        with_versions(&mut hashes, day, &turns.versions);
        let t1 = std::time::Instant::now();
        let table = &turns.table;
        let tc =
            calls::collect_table_keeping(table, now - settle, calls::Keep::Findable).began_on(day);
        let t2 = std::time::Instant::now();
        let horizon = table.end.iter().copied().max().unwrap_or(0);
        // Final: the day is over, every trace the read saw has settled, and
        // no trace was left to follow into days still to come.
        let day_over = i64::from(day + 1) * NANOS_PER_DAY + settle;
        // (And nothing it read was left out for starting after `now`: a
        // replay's summary must not stand for the whole day.)
        let through = turns.read_days.iter().copied().max().unwrap_or(day);
        let is_final = final_at(cfg, day, now, horizon, through)
            && !turns.capped
            && turns.held_back_ns.is_none();
        let summary = Summary {
            calls: tc,
            spans: table.len(),
            horizon_ns: horizon,
            read_days: turns.read_days.clone(),
        };
        // Until when the result holds: the first unsettled span's settling,
        // the first span left out for starting after `now`, the next day
        // for a capped read, the day's end for a day still going.
        let provisional = (!is_final).then(|| {
            let mut until = table
                .end
                .iter()
                .filter(|&&e| e > now - settle)
                .map(|&e| e.saturating_add(settle))
                .min()
                .unwrap_or(i64::MAX);
            if let Some(b) = turns.held_back_ns {
                until = until.min(b);
            }
            if turns.capped {
                until = until.min(i64::from(self.today + 1) * NANOS_PER_DAY);
            }
            if now < day_over {
                until = until.min(day_over);
            }
            (now, until.max(now + 1))
        });
        let summary_written = is_final
            && {
                let parts = turns.parts.clone();
                match summary::write(self.reader, day, &summary, &parts) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(day = %day_to_string(day), error = %e, "could not seal the day; it is read from its spans next time");
                        false
                    }
                }
            };
        let t3 = std::time::Instant::now();
        self.window.done(turns);
        let result = day_result(&summary, day, now, cfg, provisional);
        tracing::debug!(
            day = %day_to_string(day),
            read_ms = (t1 - t0).as_millis() as u64,
            kernel_ms = (t2 - t1).as_millis() as u64,
            summary_ms = (t3 - t2).as_millis() as u64,
            rules_ms = t3.elapsed().as_millis() as u64,
            calls = summary.calls.calls.len(),
            rss_mib = rss_mib(),
            "a day from its spans"
        );
        let through = summary.read_through();
        let fingerprint = fingerprint_through(cfg, day, &hashes, through);
        Ok((result, fingerprint, summary_written))
    }
}

/// The process's resident memory (MiB), for the debug log.
fn rss_mib() -> u64 {
    crate::telemetry::own_resident_bytes() >> 20
}

pub(super) fn day_result(
    s: &Summary,
    day: i32,
    now: i64,
    cfg: &DetectConfig,
    provisional: Option<(i64, i64)>,
) -> signal::DayResult {
    let (findings, outcomes, worst, traffic) = turn_findings(&s.calls, day, now, cfg);
    signal::DayResult {
        findings,
        outcomes,
        worst,
        horizon_ns: s.horizon_ns,
        spans: s.spans,
        traffic,
        turns: s
            .calls
            .turns_by_service
            .iter()
            .filter(|((_, d), _)| *d == day)
            .map(|((service, _), n)| (service.clone(), *n))
            .collect(),
        read_through: s.read_through(),
        provisional,
    }
}

/// What the per-turn pass gives for one day: findings, retry outcomes, and
/// per tool the turns where it failed most.
type TurnDay = (
    Vec<Finding>,
    Vec<detect::outcomes::ToolDay>,
    Vec<(String, Vec<signal::Evidence>)>,
    Vec<(String, i64)>,
);

/// Findings of the per-turn rules over `tc`, kept for turns that began
/// on `day`, what that day's settled retries achieved, and its worst
/// failing turns per tool.
fn turn_findings(tc: &TurnCalls, day: i32, now: i64, cfg: &DetectConfig) -> TurnDay {
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
    let tolerance = cfg.retry_after.tolerance_ms;
    for s in detect::retry_storms_with(tc, now, &cfg.retry_storm, tolerance, &cfg.cost) {
        if began_today(&s.turn) {
            out.push(Finding::from_storm(&s));
        }
    }
    let settle = cfg.retry_storm.settle_seconds;
    for r in detect::ignored_retry_after(tc, now, settle, &cfg.retry_after) {
        if began_today(&r.turn) {
            out.push(Finding::from_ignored(&r));
        }
    }
    // A request repeated in a loop is reported once, as the loop.
    let mut looped: std::collections::HashSet<(String, String)> = Default::default();
    for l in detect::tool_loops(tc, now, settle, growth, &cfg.tool_loop) {
        looped.extend(l.steps.iter().map(|t| (l.turn.clone(), t.clone())));
        if began_today(&l.turn) {
            out.push(Finding::from_loop(&l));
        }
    }
    let keep = |turn: &str| began_today(turn) && settled(turn);
    for w in detect::wasted_retries_driven(calls, &tc.models, &cfg.cost)
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
    (out, outcomes, worst, traffic)
}
