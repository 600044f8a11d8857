//! Today read incrementally: what `serve`'s scheduled sweep keeps between
//! sweeps so that each one costs what arrived since the last, not the
//! whole day. Today's spans stay decoded ([`rows`]: only new parts read)
//! until their traces' groups settle: a settled group's rows are let go
//! (its records and its spans' keys stay) and read again only if it gets
//! spans after all, so the rows held follow the traffic not yet settled;
//! the day before is read only for the traces that need it ([`before`]),
//! and the kernel's records ([`crate::detect::calls::Parts`]) are kept per
//! group of traces (traces joined by a turn: an agent call id shared
//! between them) and made again only for the groups that got spans. The
//! day's result is then made from all the records, exactly as a full read
//! of the day would make it ([`groups`]).
//!
//! The state lives in the process: a restart (or a change it cannot
//! follow, such as spans taken out of the day) rebuilds it with one read
//! of the day, logged.

use std::collections::HashSet;

use super::day::{self, settle_ns};
use super::SweepError;
use crate::config::DetectConfig;
use crate::model::{day_of_ns, day_to_string, NANOS_PER_DAY};
use crate::signal;
use crate::store::Reader;

mod before;
mod groups;
mod nest;
mod rows;

use before::Before;
use groups::Groups;
use nest::NestGate;
use rows::DayRows;

/// What a process keeps of today between its sweeps (one per data
/// directory; `serve`'s scheduler holds it).
#[derive(Default)]
pub struct Live {
    today: Option<Today>,
    /// How many times the state was built (for tests).
    rebuilt: usize,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field(
                "day",
                &self.today.as_ref().map(|t| day_to_string(t.rows.day)),
            )
            .field("rebuilt", &self.rebuilt)
            .finish()
    }
}

/// One day's kept state.
struct Today {
    rows: DayRows,
    before: Option<Before>,
    groups: Groups,
    /// The rules' parameters it was made under.
    rules: String,
    /// The `now` of the last sweep that brought it up to date.
    last_now: i64,
    /// Whether the day's read may hold one call as two spans.
    gate: NestGate,
    /// Traces read again after their rows were let go, and how many
    /// times settled rows were let go (for the tests).
    woken: usize,
    let_go: usize,
}

impl Live {
    /// How many times the state was built from a whole read of the day.
    pub fn rebuilds(&self) -> usize {
        self.rebuilt
    }

    /// Let the state go unless it is of `day`.
    pub(super) fn forget_unless(&mut self, day: i32) {
        if self.today.as_ref().is_some_and(|t| t.rows.day != day) {
            self.today = None;
        }
    }

    /// What the state holds now (O(groups) to count: for benchmarks and
    /// logs, not every sweep).
    pub fn census(&self) -> Census {
        let Some(t) = &self.today else {
            return Census::default();
        };
        let mut c = t.groups.census();
        c.rows = t.rows.table.len();
        c.keys = t.rows.keys();
        c.pulled_before = t.before.as_ref().map_or(0, |b| b.pulled.len());
        c
    }

    /// How many times settled rows were let go, and how many traces let
    /// go were read again, since the state was built.
    pub fn let_go_and_woken(&self) -> (usize, usize) {
        self.today.as_ref().map_or((0, 0), |t| (t.let_go, t.woken))
    }

    /// `day`'s (today's) result as of `now` and its fingerprint (today is
    /// not over: no summary is written of it).
    pub(super) fn result(
        &mut self,
        reader: &Reader,
        cfg: &DetectConfig,
        now: i64,
        day: i32,
    ) -> Result<(signal::DayResult, String), SweepError> {
        let out = self.update(reader, cfg, now, day);
        if out.is_err() {
            // Rows may have been taken and records not: start over next time.
            self.today = None;
        }
        out
    }

    fn update(
        &mut self,
        reader: &Reader,
        cfg: &DetectConfig,
        now: i64,
        day: i32,
    ) -> Result<(signal::DayResult, String), SweepError> {
        let rules = format!("{cfg:?}");
        // What is kept is followed unless one of these holds. (A `now`
        // before the last sweep's: spans read since may start after it.)
        let why = match &self.today {
            None if self.rebuilt == 0 => Some("the process started: nothing kept yet"),
            None => Some("the last sweep failed: what was kept was dropped"),
            Some(t) if t.rows.day != day => Some("a new day began"),
            Some(t) if t.rules != rules => Some("the detection rules changed"),
            Some(t) if t.last_now > now => {
                Some("the clock was set back: now is before the last sweep's")
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            self.rebuild(day, rules.clone(), why);
        }
        // Something kept cannot be followed: build it again, once.
        let today = self.today.as_mut().expect("built above");
        match today.advance(reader, cfg, now)? {
            Ok(out) => Ok(out),
            Err(rows::Stale(why)) => {
                self.rebuild(day, rules, &why);
                let today = self.today.as_mut().expect("built above");
                today
                    .advance(reader, cfg, now)?
                    .map_err(|rows::Stale(why)| {
                        SweepError::Store(crate::store::StoreError::data(
                            "reading today's spans",
                            why,
                        ))
                    })
            }
        }
    }

    fn rebuild(&mut self, day: i32, rules: String, why: &str) {
        tracing::info!(day = %day_to_string(day), reason = why, "today's kept state built from one read of the day's spans");
        self.rebuilt += 1;
        self.today = Some(Today {
            rows: DayRows::new(day),
            before: None,
            groups: Groups::default(),
            rules,
            last_now: i64::MIN,
            gate: NestGate::default(),
            woken: 0,
            let_go: 0,
        });
    }
}

impl Today {
    /// Bring the state up to `now` and make the day's result; stale when
    /// what is kept cannot be brought up to date (the caller rebuilds).
    fn advance(
        &mut self,
        reader: &Reader,
        cfg: &DetectConfig,
        now: i64,
    ) -> Result<Result<(signal::DayResult, String), rows::Stale>, SweepError> {
        let settled_by = now - settle_ns(cfg);
        let t0 = std::time::Instant::now();
        let first_new = match self.rows.refresh(reader, now)? {
            Ok(first) => first,
            Err(stale) => return Ok(Err(stale)),
        };
        let new_rows = self.rows.table.len() - first_new;
        let t1 = std::time::Instant::now();
        let nested = self.gate.may;
        self.gate
            .see(&self.rows.table, first_new..self.rows.table.len());
        let before_changed = self.refresh_before(reader, now)?;
        let pulled_at = self.before.as_ref().map_or(0, |b| b.pulled.len());
        let mut dirty = self
            .groups
            .take_rows(&self.rows.table, first_new, before_changed);
        let rootless = self.groups.rootless(&self.rows.table, &dirty);
        if let Some(b) = self.before.as_mut() {
            b.pull(reader, now, &rootless)?;
        }
        self.groups.index_pulled(self.before.as_ref(), &rootless);
        if let Some(b) = &self.before {
            self.gate.see(&b.pulled, pulled_at..b.pulled.len());
        }
        if self.gate.may && !nested && self.last_now != i64::MIN {
            return Ok(Err(rows::Stale(
                "a call may now be two spans (an MCP span or a second convention today)".into(),
            )));
        }
        // Settled traces let go of whose groups got spans: read again, and
        // their records taken out of the totals.
        let asleep = self
            .groups
            .asleep(&self.rows.table, self.before.as_ref(), &dirty);
        if !asleep.is_empty() {
            let first = self.rows.pull(reader, now, &asleep)?;
            if let Err(stale) =
                self.groups
                    .wake(&self.rows.table, first, &asleep, settled_by, self.gate.may)
            {
                return Ok(Err(stale));
            }
            dirty.extend(self.groups.take_rows(&self.rows.table, first, false));
            self.woken += asleep.len();
        }
        let t2 = std::time::Instant::now();
        let recomputed = self.groups.recompute(
            &mut self.rows.table,
            self.before.as_ref(),
            &dirty,
            self.gate.may,
        );
        let t3 = std::time::Instant::now();
        let out = self.result(reader, cfg, now)?;
        self.last_now = now;
        if let Some(kept) = self.groups.let_go(&self.rows.table, settled_by) {
            self.rows.keep(&kept);
            self.let_go += 1;
        }
        tracing::debug!(
            day = %day_to_string(self.rows.day),
            new_rows,
            traces = dirty.len(),
            groups = recomputed,
            read_ms = (t1 - t0).as_millis() as u64,
            before_ms = (t2 - t1).as_millis() as u64,
            kernel_ms = (t3 - t2).as_millis() as u64,
            rules_ms = t3.elapsed().as_millis() as u64,
            woken = asleep.len(),
            kept_rows = self.rows.table.len(),
            "today from its new spans"
        );
        Ok(Ok(out))
    }

    /// The day before brought up to date: read again when its parts
    /// changed (late spans for it, its seal); whether it was.
    fn refresh_before(&mut self, reader: &Reader, now: i64) -> Result<bool, SweepError> {
        let day = self.rows.day - 1;
        let version = super::window::part_hash(reader, day)?;
        if self.before.as_ref().is_some_and(|b| b.version == version) {
            return Ok(false);
        }
        self.before = Some(Before::load(reader, day, now)?);
        Ok(true)
    }

    /// The day's result from every group's records, as [`day::Days`]
    /// makes it from a whole read.
    fn result(
        &self,
        reader: &Reader,
        cfg: &DetectConfig,
        now: i64,
    ) -> Result<(signal::DayResult, String), SweepError> {
        let day = self.rows.day;
        let settle = settle_ns(cfg);
        let tc = self.groups.totals(now - settle).began_on(day);
        let shape = self
            .groups
            .shape(&self.rows.table, self.before.as_ref(), day, now - settle);
        let mut read_days = Vec::new();
        let mut versions = vec![(day, self.rows.version)];
        if shape.rootless {
            read_days.push(day - 1);
            if let Some(b) = &self.before {
                versions.insert(0, (day - 1, b.version));
            }
        }
        read_days.push(day);
        let summary = super::summary::Summary {
            calls: tc,
            spans: shape.spans,
            horizon_ns: shape.horizon_ns,
            read_days,
        };
        // Today is never final: it holds until its first unsettled span
        // settles, its first held-back span is due, or the day is over.
        let day_over = i64::from(day + 1) * NANOS_PER_DAY + settle;
        let mut until = shape
            .settles_at
            .map_or(i64::MAX, |e| e.saturating_add(settle));
        if let Some(b) = self.rows.held_back_ns() {
            until = until.min(b);
        }
        if shape.reaching {
            until = until.min(i64::from(day + 1) * NANOS_PER_DAY);
        }
        if now < day_over {
            until = until.min(day_over);
        }
        let provisional = Some((now, until.max(now + 1)));
        let result = day::day_result(&summary, day, now, cfg, provisional);
        let fingerprint =
            day::fingerprint_of_versions(reader, cfg, day, day_of_ns(now), &versions)?;
        Ok((result, fingerprint))
    }
}

/// What [`Live`] holds: rows kept decoded, span keys known, traces and
/// groups, and the records kept.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Census {
    pub rows: usize,
    pub keys: usize,
    pub pulled_before: usize,
    pub traces: usize,
    pub traces_let_go: usize,
    pub groups: usize,
    pub tool_turns: usize,
    pub kept_calls: usize,
    pub kept_turns: usize,
}

/// The spans of the traces `ids` (as stored) that `day`'s parts hold (of
/// those `only` names, when given) and that started on it before `now`,
/// as a table.
fn spans_of<'i>(
    reader: &Reader,
    (day, now): (i32, i64),
    ids: impl Iterator<Item = &'i str>,
    only: Option<&HashSet<&str>>,
    context: &str,
) -> Result<crate::spans::SpanTable, SweepError> {
    use polars::prelude::*;
    let data = |e| SweepError::Data {
        context: context.into(),
        source: e,
    };
    let from = i64::from(day) * NANOS_PER_DAY;
    let until = (from + NANOS_PER_DAY).min(now);
    let ids = Series::new("ids".into(), ids.collect::<Vec<_>>());
    let listed = reader.day_parts(day)?;
    let scan = match only {
        None => listed.scan_all().map(Some),
        Some(names) => listed.scan_some(|n| names.contains(n)),
    };
    let Some(scan) = scan.map_err(data)? else {
        return Ok(crate::spans::SpanTable::default());
    };
    let df = scan
        .filter(
            col("start_ns")
                .gt_eq(lit(from))
                .and(col("start_ns").lt(lit(until)))
                .and(col("trace_id").is_in(lit(ids).implode(false), false)),
        )
        .select(crate::spans::COLUMNS.map(col))
        .collect()
        .map_err(data)?;
    crate::spans::SpanTable::from_frame(&df).map_err(data)
}

/// Traces by their ids as stored, for reading the day before.
pub(super) type TraceIds = Vec<(u128, String)>;

/// The traces of a set, in a stable order.
fn sorted(set: &HashSet<u128>) -> Vec<u128> {
    let mut v: Vec<u128> = set.iter().copied().collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests;
