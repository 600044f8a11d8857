//! What the pages read: the daily rollup (cached in memory until a refresh
//! makes a new one, so a page never scans raw spans), the signals from
//! `state.sqlite`, and one trace's spans when its page is opened.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use polars::prelude::*;
use serde::Serialize;

use crate::detect::{daily_rows, judge, DailyRow, DayVerdict, SpikeParams};
use crate::model::ErrorClass;
use crate::store::{ReadStats, Reader, RollupStamp, Rollups, Scan, StoreError};

/// The rollup, per tool, across services.
#[derive(Debug, Default)]
pub struct Rollup {
    /// Per tool, its days in order (services added up).
    pub tools: BTreeMap<String, Vec<DailyRow>>,
    /// The rows as the sweep reads them: one series per tool and service,
    /// sorted by tool, service and day.
    pub rows: Vec<DailyRow>,
    /// The days with data, in order (days since the epoch); where a view
    /// ends is [`Rollup::last_day`].
    pub days: Vec<i32>,
    /// Per tool: (day, class, raw name, failed calls) — the names each
    /// class was logged under.
    pub names: Names,
    /// The rollup as stored, for the overview's panels.
    pub frame: DataFrame,
}

impl Rollup {
    /// The newest day with data, where the views end their default window:
    /// never a day after [`crate::ingest::window::newest_viewable_day`]
    /// (tomorrow), so one span dated far ahead — written before the
    /// receivers refused such times — cannot hide every real day.
    pub fn last_day(&self) -> Option<i32> {
        let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        let cap = crate::ingest::window::newest_viewable_day(now_ns);
        self.days.iter().rev().find(|&&d| d <= cap).copied()
    }

    /// The stored rows of days `from..=to`.
    pub fn frame_between(&self, from: i32, to: i32) -> PolarsResult<DataFrame> {
        if self.frame.width() == 0 {
            return Ok(self.frame.clone());
        }
        let (a, b) = (
            crate::model::day_to_string(from),
            crate::model::day_to_string(to),
        );
        self.frame
            .clone()
            .lazy()
            .filter(col("day").gt_eq(lit(a)).and(col("day").lt_eq(lit(b))))
            .collect()
    }

    /// The error-rate spike rule's verdicts on `tool`'s series (one per
    /// service), every day before `today`: the sweep's own call of
    /// [`judge`] (whole history, nothing flagged before), on this tool's rows
    /// only, which gives the same verdicts, since each series is judged on
    /// its own.
    pub fn spike_verdicts(&self, tool: &str, today: i32, p: &SpikeParams) -> Vec<DayVerdict> {
        let from = self.rows.partition_point(|r| r.tool.as_str() < tool);
        let to = self.rows.partition_point(|r| r.tool.as_str() <= tool);
        judge(&self.rows[from..to], today, &Default::default(), p)
    }
}

/// Per tool: (day, class, raw name, failed calls).
pub type Names = BTreeMap<String, Vec<(i32, String, String, u64)>>;

/// A cache of the rollup keyed by its generation (see [`RollupStamp`]).
#[derive(Default)]
pub struct RollupCache {
    inner: Mutex<Option<(RollupStamp, Arc<Rollup>)>>,
}

impl RollupCache {
    /// The rollup as it now stands (read again only when a refresh made a
    /// new one).
    pub fn get(&self, reader: &Reader) -> Result<Arc<Rollup>, StoreError> {
        let stamp = reader.rollup_stamp()?;
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, r)) = guard.as_ref() {
            if *at == stamp {
                return Ok(Arc::clone(r));
            }
        }
        // Both files of one refresh, kept on disk while they are read.
        let rollups = reader.rollups()?;
        let stamp = rollups.stamp.clone();
        let rollup = Arc::new(load(rollups)?);
        *guard = Some((stamp, Arc::clone(&rollup)));
        Ok(rollup)
    }
}

fn load(rollups: Rollups) -> Result<Rollup, StoreError> {
    let Some(lf) = rollups.tool_daily else {
        return Ok(Rollup::default());
    };
    let df = lf
        .collect()
        .map_err(|e| StoreError::data("reading the daily rollup", e))?;
    let rows = daily_rows(&df).map_err(|e| StoreError::data("reading the daily rollup", e))?;
    let mut tools: BTreeMap<String, Vec<DailyRow>> = BTreeMap::new();
    let mut days = std::collections::BTreeSet::new();
    for r in rows.iter().cloned() {
        days.insert(r.day);
        let days = tools.entry(r.tool.clone()).or_default();
        match days.iter_mut().find(|d| d.day == r.day) {
            Some(d) => {
                // Services of one tool add up; percentiles keep the busiest service's.
                if r.calls > d.calls {
                    d.p50_ns = r.p50_ns;
                    d.p95_ns = r.p95_ns;
                }
                d.calls += r.calls;
                d.errors += r.errors;
                d.successes += r.successes;
                d.last_ok_ns = d.last_ok_ns.max(r.last_ok_ns);
                d.interrupted += r.interrupted;
                d.cancelled += r.cancelled;
                for (c, n) in &r.classes {
                    *d.classes.entry(*c).or_insert(0) += n;
                }
            }
            None => days.push(DailyRow {
                service: String::new(),
                ..r
            }),
        }
    }
    for days in tools.values_mut() {
        days.sort_by_key(|d| d.day);
    }
    Ok(Rollup {
        tools,
        rows,
        days: days.into_iter().collect(),
        names: load_names(rollups.tool_error_names)?,
        frame: df,
    })
}

fn load_names(scan: Option<Scan>) -> Result<Names, StoreError> {
    let mut out = Names::new();
    let Some(lf) = scan else {
        return Ok(out);
    };
    let context = |e| StoreError::data("reading the error names rollup", e);
    let df = lf.collect().map_err(context)?;
    let tool = df
        .column("tool_name")
        .and_then(|c| c.str().cloned())
        .map_err(context)?;
    let day = df
        .column("day")
        .and_then(|c| c.str().cloned())
        .map_err(context)?;
    let class = df
        .column("error_class")
        .and_then(|c| c.str().cloned())
        .map_err(context)?;
    let name = df
        .column("error_type")
        .and_then(|c| c.str().cloned())
        .map_err(context)?;
    let calls = df
        .column("calls")
        .and_then(|c| c.cast(&DataType::UInt64))
        .map_err(context)?;
    let calls = calls.u64().map_err(context)?;
    for i in 0..df.height() {
        let (Some(t), Some(d)) = (tool.get(i), day.get(i).and_then(crate::model::day_from_str))
        else {
            continue;
        };
        out.entry(t.to_string()).or_default().push((
            d,
            class.get(i).unwrap_or("unknown").to_string(),
            name.get(i).unwrap_or("(no name)").to_string(),
            calls.get(i).unwrap_or(0),
        ));
    }
    Ok(out)
}

/// One tool's line in the tools table.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSummary {
    pub tool: String,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    /// Error rate of the seven days before the range's last day.
    pub baseline: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    /// Calls per day over the range, oldest first.
    pub daily_calls: Vec<u64>,
    pub daily_errors: Vec<u64>,
    pub top_class: Option<String>,
    pub open_signals: usize,
    /// Calls stopped on purpose over the range (in `calls`, not in
    /// `errors`): by a human-in-the-loop interrupt or a hand-off, and by
    /// their user.
    pub interrupted: u64,
    pub cancelled: u64,
}

impl Rollup {
    /// Per day of `from..=to`, (calls, errors) summed over `tools` (all when empty).
    pub fn totals(&self, from: i32, to: i32, only: Option<&str>) -> Vec<(i32, u64, u64)> {
        let mut out: Vec<(i32, u64, u64)> = (from..=to).map(|d| (d, 0, 0)).collect();
        for (tool, days) in &self.tools {
            if only.is_some_and(|t| t != tool) {
                continue;
            }
            for d in days.iter().filter(|d| (from..=to).contains(&d.day)) {
                let slot = &mut out[(d.day - from) as usize];
                slot.1 += d.calls;
                slot.2 += d.errors;
            }
        }
        out
    }

    /// [`totals`](Self::totals) as a volume chart draws them (`dash::chart::Day`).
    pub fn chart_days(&self, from: i32, to: i32, only: Option<&str>) -> Vec<(i32, f64, f64)> {
        self.totals(from, to, only)
            .iter()
            .map(|(d, c, e)| (*d, *c as f64, *e as f64))
            .collect()
    }

    /// The tools table over `from..=to`, busiest first.
    pub fn summaries(
        &self,
        from: i32,
        to: i32,
        open: &BTreeMap<String, usize>,
    ) -> Vec<ToolSummary> {
        let mut out: Vec<ToolSummary> = self
            .tools
            .iter()
            .filter_map(|(tool, days)| {
                let in_range: Vec<&DailyRow> = days
                    .iter()
                    .filter(|d| (from..=to).contains(&d.day))
                    .collect();
                if in_range.is_empty() {
                    return None;
                }
                let calls: u64 = in_range.iter().map(|d| d.calls).sum();
                let errors: u64 = in_range.iter().map(|d| d.errors).sum();
                let base: Vec<&DailyRow> = days
                    .iter()
                    .filter(|d| d.day >= to - 7 && d.day < to)
                    .collect();
                let (bc, be) = base
                    .iter()
                    .fold((0u64, 0u64), |a, d| (a.0 + d.calls, a.1 + d.errors));
                let mut classes: BTreeMap<ErrorClass, u64> = BTreeMap::new();
                for d in &in_range {
                    for (c, n) in &d.classes {
                        *classes.entry(*c).or_insert(0) += n;
                    }
                }
                let weighted = |f: fn(&DailyRow) -> f64| {
                    in_range.iter().map(|d| f(d) * d.calls as f64).sum::<f64>()
                        / calls.max(1) as f64
                        / 1e6
                };
                let mut daily_calls = vec![0; (to - from + 1) as usize];
                let mut daily_errors = vec![0; (to - from + 1) as usize];
                for d in &in_range {
                    daily_calls[(d.day - from) as usize] = d.calls;
                    daily_errors[(d.day - from) as usize] = d.errors;
                }
                Some(ToolSummary {
                    tool: tool.clone(),
                    calls,
                    errors,
                    error_rate: errors as f64 / calls.max(1) as f64,
                    baseline: if bc == 0 { 0.0 } else { be as f64 / bc as f64 },
                    p50_ms: weighted(|d| d.p50_ns),
                    p95_ms: weighted(|d| d.p95_ns),
                    daily_calls,
                    daily_errors,
                    top_class: (!classes.is_empty()).then(|| {
                        crate::detect::dominant_class(classes.clone())
                            .as_str()
                            .to_string()
                    }),
                    open_signals: open.get(tool).copied().unwrap_or(0),
                    interrupted: in_range.iter().map(|d| d.interrupted).sum(),
                    cancelled: in_range.iter().map(|d| d.cancelled).sum(),
                })
            })
            .collect();
        out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
        out
    }
}

/// The spans of one trace (on `day` and its neighbours when known), by
/// start, and what reading them took: on a sealed day, one row group.
pub fn trace_spans(
    reader: &Reader,
    trace_id: &str,
    day: Option<i32>,
) -> Result<(DataFrame, ReadStats), StoreError> {
    match day {
        Some(d) => reader.trace_spans(d - 1..=d + 1, trace_id),
        None => reader.trace_spans(.., trace_id),
    }
}
