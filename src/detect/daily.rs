//! The daily per-tool series, read from the `tool_daily` rollup frame
//! (rollups an earlier version wrote, without the control-flow columns,
//! read as none).

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::model::{day_from_str, ErrorClass};

/// One tool's (per service) numbers for one UTC day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DailyRow {
    pub tool: String,
    pub service: String,
    /// Days since the epoch.
    pub day: i32,
    pub calls: u64,
    pub errors: u64,
    /// Calls that succeeded (`ok`), and the end of the day's last one
    /// (rollups written before these columns: `calls - errors`, and the
    /// day's last nanosecond when it had any).
    pub successes: u64,
    pub last_ok_ns: Option<i64>,
    pub p50_ns: f64,
    pub p95_ns: f64,
    /// Failed calls by class (`ok` and control flow never appear).
    pub classes: BTreeMap<ErrorClass, u64>,
    /// Calls a human-in-the-loop interrupt or a hand-off stopped: in
    /// `calls`, not in `errors`.
    pub interrupted: u64,
    /// Calls their user cancelled: in `calls`, not in `errors`.
    pub cancelled: u64,
}

impl DailyRow {
    pub fn rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.errors as f64 / self.calls as f64
        }
    }
}

fn ints(df: &DataFrame, name: &str) -> PolarsResult<Vec<u64>> {
    let c = df.column(name)?.cast(&DataType::Int64)?;
    Ok(c.i64()?
        .iter()
        .map(|v| v.unwrap_or(0).max(0) as u64)
        .collect())
}

/// [`ints`], all 0 when the column is missing (a rollup written before it).
fn ints_or_zero(df: &DataFrame, name: &str) -> PolarsResult<Vec<u64>> {
    if df.schema().contains(name) {
        ints(df, name)
    } else {
        Ok(vec![0; df.height()])
    }
}

fn floats(df: &DataFrame, name: &str) -> PolarsResult<Vec<f64>> {
    let c = df.column(name)?.cast(&DataType::Float64)?;
    Ok(c.f64()?.iter().map(|v| v.unwrap_or(0.0)).collect())
}

/// Rows of a `tool_daily` frame (as `queries/tool_daily.sql` makes it),
/// sorted by tool, service and day.
pub fn daily_rows(df: &DataFrame) -> PolarsResult<Vec<DailyRow>> {
    let tool = df.column("tool_name")?.str()?;
    let service = df.column("service_name")?.str()?;
    let day = df.column("day")?.str()?;
    let calls = ints(df, "calls")?;
    let errors = ints(df, "errors")?;
    let successes = match df.column("successes") {
        Ok(c) => c.cast(&DataType::Int64)?.i64()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let last_ok: Vec<Option<i64>> = match df.column("last_ok_ns") {
        Ok(c) => c.cast(&DataType::Int64)?.i64()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let p50 = floats(df, "p50_ns")?;
    let p95 = floats(df, "p95_ns")?;
    let failing: Vec<ErrorClass> = ErrorClass::failures().collect();
    let interrupted = ints_or_zero(df, ErrorClass::Interrupted.as_str())?;
    let cancelled = ints_or_zero(df, ErrorClass::Cancelled.as_str())?;
    let class_counts: Vec<Vec<u64>> = failing
        .iter()
        .map(|c| ints(df, c.as_str()))
        .collect::<PolarsResult<_>>()?;
    let mut rows = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let Some(d) = day.get(i).and_then(day_from_str) else {
            continue;
        };
        let classes = failing
            .iter()
            .zip(&class_counts)
            .filter(|(_, counts)| counts[i] > 0)
            .map(|(c, counts)| (*c, counts[i]))
            .collect();
        let ok = successes[i].map_or(calls[i].saturating_sub(errors[i]), |n| n.max(0) as u64);
        let last_ok_ns = last_ok[i].or_else(|| {
            (successes[i].is_none() && ok > 0)
                .then(|| (i64::from(d) + 1) * crate::model::NANOS_PER_DAY - 1)
        });
        rows.push(DailyRow {
            tool: tool.get(i).unwrap_or("").to_string(),
            service: service.get(i).unwrap_or("").to_string(),
            day: d,
            calls: calls[i],
            errors: errors[i],
            successes: ok,
            last_ok_ns,
            p50_ns: p50[i],
            p95_ns: p95[i],
            classes,
            interrupted: interrupted[i],
            cancelled: cancelled[i],
        });
    }
    rows.sort_by(|a, b| (&a.tool, &a.service, a.day).cmp(&(&b.tool, &b.service, b.day)));
    Ok(rows)
}
