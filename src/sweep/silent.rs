//! The silent-tool rules in a sweep (docs/detection.md §4.8): run over the
//! rollup and the turns per service the per-turn pass counted, each
//! finding given its evidence — the last successful call's trace (read
//! from that one day's spans) and the daily counts with the agent's turns
//! beside them.

use std::collections::BTreeMap;

use polars::prelude::*;

use super::{data, SweepError};
use crate::detect::{self, silent::Turns, DailyRow};
use crate::model::day_to_string;
use crate::signal::silent::{from_no_success, from_silent, DayCount};
use crate::signal::{Evidence, Finding};
use crate::store::Reader;

/// Days of counts an evidence shows, the finding's day last.
const SHOWN_DAYS: i32 = 8;

/// The `tool_silent` and `no_success` findings of `since..=today`.
pub fn findings(
    reader: &Reader,
    rows: &[DailyRow],
    turns: &Turns,
    (since, today, now_ns): (i32, i32, i64),
    params: &detect::SilentParams,
) -> Result<Vec<Finding>, SweepError> {
    let mut out = Vec::new();
    let mut traces = LastOk::default();
    for s in detect::silent_tools(rows, turns, since, today, params) {
        let mut f = from_silent(&s);
        f.evidence = evidence(
            reader,
            &mut traces,
            rows,
            turns,
            (&s.tool, &s.service),
            s.day,
            s.last_ok_ns,
        )?;
        out.push(f);
    }
    for n in detect::no_success(rows, since, now_ns, params) {
        let mut f = from_no_success(&n);
        f.evidence = evidence(
            reader,
            &mut traces,
            rows,
            turns,
            (&n.tool, &n.service),
            n.day,
            n.last_ok_ns,
        )?;
        out.push(f);
    }
    Ok(out)
}

/// The trace of a (tool, service)'s call that ended at a time, per key.
type LastOk = BTreeMap<(String, String, i64), Option<String>>;

fn evidence(
    reader: &Reader,
    traces: &mut LastOk,
    rows: &[DailyRow],
    turns: &Turns,
    (tool, service): (&str, &str),
    day: i32,
    last_ok_ns: Option<i64>,
) -> Result<Option<Evidence>, SweepError> {
    let daily: Vec<DayCount> = (day - SHOWN_DAYS + 1..=day)
        .map(|d| {
            let row = rows
                .iter()
                .find(|r| r.tool == tool && r.service == service && r.day == d);
            DayCount {
                day: day_to_string(d),
                calls: row.map_or(0, |r| r.calls),
                successes: row.map_or(0, |r| r.successes),
                turns: turns.get(&(service.to_string(), d)).copied(),
            }
        })
        .collect();
    let trace = match last_ok_ns {
        Some(ns) => {
            let key = (tool.to_string(), service.to_string(), ns);
            match traces.get(&key) {
                Some(t) => t.clone(),
                None => {
                    let t = last_ok_trace(reader, tool, service, ns)?;
                    traces.insert(key, t.clone());
                    t
                }
            }
        }
        None => None,
    };
    // The evidence is the last success (a trace to open beside today's
    // failures); none stored, no trace to show.
    let (Some(trace), Some(ns)) = (trace, last_ok_ns) else {
        return Ok(None);
    };
    let mut e = Evidence::turn(&trace, "", crate::model::day_of_ns(ns), 1, 0);
    e.turn_id = None;
    e.outcome = Some("last_success".into());
    e.daily = daily;
    Ok(Some(e))
}

/// The trace of the successful call of `tool` (in `service`) that ended at
/// `end_ns`: one read of that day's spans, its predicate on the columns
/// before the ids.
fn last_ok_trace(
    reader: &Reader,
    tool: &str,
    service: &str,
    end_ns: i64,
) -> Result<Option<String>, SweepError> {
    let day = crate::model::day_of_ns(end_ns);
    // A call ends on its day or the day after it began.
    let scan = reader.spans(day - 1..=day)?;
    let df = scan
        .map(|lf| {
            lf.filter(
                col("is_tool_call")
                    .and(col("tool_name").eq(lit(tool)))
                    .and(col("service_name").eq(lit(service)))
                    .and(col("end_ns").eq(lit(end_ns)))
                    .and(col("error_class").eq(lit("ok"))),
            )
            .select([col("trace_id")])
            .limit(1)
        })
        .collect()
        .map_err(data("finding a silent tool's last success"))?;
    let trace = df
        .column("trace_id")
        .ok()
        .and_then(|c| c.str().ok().and_then(|s| s.get(0).map(str::to_string)));
    Ok(trace)
}
