//! The coverage report (docs/detection.md §7): what stormwatch cannot see
//! in the spans it was sent, and the switch that fixes it. Per service and
//! instrumentation scope over the newest days: the tool calls (each once,
//! however many layers it was traced in: §1), the share with arguments
//! recorded, with a result or failure recorded, the failures whose class
//! is known, the calls with a session and those inside an agent turn, and
//! the calls of unknown shape. Each share under [`GAP_BELOW`] is a gap,
//! with what it blinds and the fix the framework documents ([`fixes`]).
//!
//! Counted a day at a time ([`tally`]), each day's counts kept in a
//! [`Cache`] under the day's part-set version, so a report asked again
//! reads only the days that changed.

pub mod fixes;
mod tally;
mod text;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;

use crate::store::{Reader, StoreError};

pub use tally::of_frame;
pub use text::{markdown, text};

/// A share under this is a gap.
pub const GAP_BELOW: f64 = 0.9;

/// Days a report covers unless asked otherwise.
pub const DEFAULT_DAYS: u32 = 7;

/// The report over some days.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Coverage {
    /// The first and last day read (`YYYY-MM-DD`); absent with no data.
    pub from: Option<String>,
    pub to: Option<String>,
    /// Only the spans that started at or after this time (RFC 3339), when asked.
    pub since: Option<String>,
    /// One per service and scope that made tool calls, most calls first.
    pub scopes: Vec<ScopeCoverage>,
}

/// What one service's spans of one instrumentation scope let stormwatch see.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct ScopeCoverage {
    pub service: String,
    /// The instrumentation scope of the calls' outermost spans (absent: none sent).
    pub scope: Option<String>,
    pub scope_version: Option<String>,
    /// The conventions its tool spans were read by (docs/detection.md §1).
    pub conventions: Vec<String>,
    /// Tool calls, each once.
    pub calls: u64,
    /// Spans beyond the first of a call traced in several layers (MCP client/server).
    pub layers: u64,
    /// Calls whose arguments were recorded (empty ones too).
    pub with_arguments: u64,
    /// Calls that did not fail with a result recorded (a failed call's
    /// failure is on its span: it needs no result).
    pub with_results: u64,
    pub failed: u64,
    /// Failed calls whose class is not `unknown`.
    pub failed_with_class: u64,
    pub with_session: u64,
    pub in_agent_turn: u64,
    /// Calls read by no convention but the fallback.
    pub unknown_shape: u64,
    /// What this scope's spans leave stormwatch blind to, and the fix.
    pub gaps: Vec<Gap>,
}

/// One thing stormwatch cannot see for a scope.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Gap {
    /// `arguments`, `results`, `failures`, `failure_detail`, `session`,
    /// `agent_turn` or `unknown_shape`.
    pub what: String,
    /// The share of calls (of failed calls, for `failure_detail`) that have it.
    pub share: f64,
    /// What the gap blinds.
    pub blinds: String,
    /// The framework's own switch that fixes it.
    pub fix: String,
}

impl ScopeCoverage {
    /// The scope's name and version, `(none)` when the spans named no scope.
    pub fn scope_label(&self) -> String {
        match (&self.scope, &self.scope_version) {
            (Some(n), Some(v)) => format!("{n} {v}"),
            (Some(n), None) => n.clone(),
            (None, _) => "(none)".to_string(),
        }
    }
}

impl Gap {
    /// The share in words: of what, and which way it counts.
    pub fn how_much(&self) -> String {
        let pct = |r: f64| format!("{:.0}%", r * 100.0);
        match self.what.as_str() {
            "unknown_shape" => format!(
                "{} of the calls are of no known shape",
                pct(1.0 - self.share)
            ),
            "failure_detail" => format!("{} of the failed calls have it", pct(self.share)),
            "results" => format!("{} of the calls that did not fail have it", pct(self.share)),
            _ => format!("{} of the calls have it", pct(self.share)),
        }
    }
}

/// A scope's key: (service, scope, version).
type Key = (String, Option<String>, Option<String>);

/// One day's counts, under the part-set version they were counted from.
type DayCounts = (String, Arc<Vec<ScopeCoverage>>);

/// Each day's counts, kept under the day's part-set version
/// ([`crate::store::layout::Layout::day_version`]).
#[derive(Default)]
pub struct Cache {
    days: Mutex<HashMap<i32, DayCounts>>,
}

/// Which spans a report counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// The spans of this many days, ending on the newest day with data.
    Days(u32),
    /// The spans that started at or after this time (ns): to see a fix take
    /// effect without the days before it.
    Since(i64),
}

impl Span {
    /// The span a caller asked for: `days` (1 to 366) or `since` (a time,
    /// a date or a duration back from `now_ns`), not both; neither is the
    /// last [`DEFAULT_DAYS`] days. The error names the argument.
    pub fn ask(days: Option<u32>, since: Option<&str>, now_ns: i64) -> Result<Span, SpanError> {
        match (days, since) {
            (Some(_), Some(_)) => Err(SpanError::Both),
            (_, Some(t)) => crate::time::parse_point(t, now_ns)
                .map(Span::Since)
                .map_err(SpanError::Since),
            (days, None) => {
                let days = days.unwrap_or(DEFAULT_DAYS);
                if (1..=366).contains(&days) {
                    Ok(Span::Days(days))
                } else {
                    Err(SpanError::Days(days))
                }
            }
        }
    }
}

/// A span asked for that is none: the text starts with the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpanError {
    #[error("days and since: expected one of them, got both")]
    Both,
    #[error("since: {0}")]
    Since(#[source] crate::time::TimeError),
    #[error("days: expected 1 to 366, got {0}")]
    Days(u32),
}

/// The report over `span`, counting again only the days whose parts changed
/// since `cache` last saw them (a `Since` time's own day is counted anew).
pub fn report(reader: &Reader, span: Span, cache: &Cache) -> Result<Coverage, StoreError> {
    let stored = reader.days()?;
    let Some(&last) = stored.iter().max() else {
        return Ok(Coverage::default());
    };
    let (first, since) = match span {
        Span::Days(days) => (last - days.max(1) as i32 + 1, None),
        Span::Since(ns) => (crate::model::day_of_ns(ns), Some(ns)),
    };
    let mut merged: BTreeMap<Key, (ScopeCoverage, BTreeSet<String>)> = BTreeMap::new();
    for &day in stored.iter().filter(|d| (first..=last).contains(*d)) {
        let counts = match since {
            Some(ns) if day == first => Arc::new(counted(reader, day, Some(ns))?),
            _ => day_counts(reader, day, cache)?,
        };
        for sc in counts.iter() {
            let key = (
                sc.service.clone(),
                sc.scope.clone(),
                sc.scope_version.clone(),
            );
            let (m, conventions) = merged.entry(key).or_default();
            add(m, sc);
            conventions.extend(sc.conventions.iter().cloned());
        }
    }
    let mut scopes: Vec<ScopeCoverage> = merged
        .into_iter()
        .map(|((service, scope, version), (mut c, conventions))| {
            c.service = service;
            c.scope = scope;
            c.scope_version = version;
            c.conventions = conventions.into_iter().collect();
            c.gaps = gaps(&c);
            c
        })
        .collect();
    scopes.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.service.cmp(&b.service)));
    Ok(Coverage {
        from: Some(crate::model::day_to_string(first)),
        to: Some(crate::model::day_to_string(last)),
        since: since.map(crate::time::rfc3339),
        scopes,
    })
}

/// The counts of one day's tool calls (those that started at or after
/// `since`), each in its turn as the rules resolve it: the whole day is
/// read, and the day before's spans of the traces whose turn may have begun
/// there.
fn counted(
    reader: &Reader,
    day: i32,
    since: Option<i64>,
) -> Result<Vec<ScopeCoverage>, StoreError> {
    use polars::prelude::*;
    let data = |e| StoreError::data("counting coverage", e);
    let columns: Vec<Expr> = tally::columns().map(col).collect();
    let from_ns = (i64::from(day) * crate::model::NANOS_PER_DAY).max(since.unwrap_or(i64::MIN));
    let mut df = reader.collect_spans(day..=day, |lf| lf.select(columns.clone()))?;
    let cut = tally::cut_traces(&df, from_ns).map_err(data)?;
    if !cut.is_empty() {
        let before = reader.collect_spans(day - 1..=day - 1, |lf| lf.select(columns.clone()))?;
        let keep: BooleanChunked = before
            .column("trace_id")
            .and_then(|c| c.str().cloned())
            .map_err(data)?
            .iter()
            .map(|t| t.is_some_and(|t| cut.contains(t)))
            .collect();
        let before = before.filter(&keep).map_err(data)?;
        df.vstack_mut_owned(before).map_err(data)?;
    }
    of_frame(&df, from_ns).map_err(data)
}

/// One day's counts, from the cache while its parts are the same.
fn day_counts(
    reader: &Reader,
    day: i32,
    cache: &Cache,
) -> Result<Arc<Vec<ScopeCoverage>>, StoreError> {
    let version = reader.layout().day_version(day)?;
    if let Some((v, counts)) = cache
        .days
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&day)
    {
        if *v == version {
            return Ok(Arc::clone(counts));
        }
    }
    let counts = Arc::new(counted(reader, day, None)?);
    let mut kept = cache.days.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() > 400 {
        kept.clear();
    }
    kept.insert(day, (version, Arc::clone(&counts)));
    Ok(counts)
}

fn add(m: &mut ScopeCoverage, c: &ScopeCoverage) {
    m.calls += c.calls;
    m.layers += c.layers;
    m.with_arguments += c.with_arguments;
    m.with_results += c.with_results;
    m.failed += c.failed;
    m.failed_with_class += c.failed_with_class;
    m.with_session += c.with_session;
    m.in_agent_turn += c.in_agent_turn;
    m.unknown_shape += c.unknown_shape;
}

/// The gaps of one scope's figures.
pub fn gaps(c: &ScopeCoverage) -> Vec<Gap> {
    let share = |n: u64, of: u64| if of == 0 { 1.0 } else { n as f64 / of as f64 };
    let mut out = Vec::new();
    let mut add = |what: &str, share: f64| {
        if share < GAP_BELOW {
            out.push(Gap {
                what: what.to_string(),
                share: (share * 1000.0).round() / 1000.0,
                blinds: fixes::blinds(what),
                fix: fixes::fix(c.scope.as_deref(), what),
            });
        }
    };
    add("arguments", share(c.with_arguments, c.calls));
    add("results", share(c.with_results, c.calls - c.failed));
    // No call failed, and no result to find a failure in: a failure the
    // framework handled (and handed the model as output) leaves no mark.
    if c.failed == 0 {
        add("failures", share(c.with_results, c.calls));
    }
    add("failure_detail", share(c.failed_with_class, c.failed));
    add("session", share(c.with_session, c.calls));
    add("agent_turn", share(c.in_agent_turn, c.calls));
    add("unknown_shape", 1.0 - share(c.unknown_shape, c.calls));
    out
}
