//! Sealed days: once a day is final (every turn that began on it settled),
//! the per-turn kernel's output for it — its turn summary — is written once
//! as Parquet under `sealed/date=YYYY-MM-DD/`, and later sweeps run the
//! rules on it instead of decoding the day's spans again. A summary holds
//! what the rules read and nothing they decide: no `now`, no threshold.
//!
//! - `calls.parquet`: the calls of every (turn, tool) pair called twice or
//!   more in a turn begun that day (the input of chains, storms, loops and
//!   retry outcomes), one row per call;
//! - `turns.parquet`: those turns: trace, when each began, its extent,
//!   span count, the newest end of its trace, its session;
//! - `tools.parquet`: per tool, its median healthy turn (duration, spans)
//!   over the turns read, and the latest start of a call of it in a turn
//!   begun that day;
//! - `failing.parquet`: per tool, the turns begun that day where it failed
//!   most, worst first (a spike's evidence);
//! - `manifest.json`, written last: the summary's version, the day, the
//!   span parts it was built from (every part of each day its read took
//!   spans from), how many spans that read held and the newest end among
//!   them.
//!
//! A summary is valid while the parts it names are exactly the parts those
//! days hold: a late span (a new part), a re-import or a compaction makes
//! the next sweep read the day again and re-seal it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::SweepError;
use crate::detect::calls::{Call, FailingTurn, Healthy, Turn, TurnCalls};
use crate::model::{day_to_string, ErrorClass};
use crate::store::{Layout, StoreError};

/// Bumped when the files' meaning changes; older summaries are rebuilt.
pub const VERSION: u32 = 1;

/// What a sealed day holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub calls: TurnCalls,
    /// Spans the day's read held, and the newest end among them.
    pub spans: usize,
    pub horizon_ns: i64,
    /// The days the read took spans from (the day before only when some
    /// trace reached back into it).
    pub read_days: Vec<i32>,
}

impl Summary {
    /// The last day the read took spans from.
    pub fn read_through(&self) -> i32 {
        self.read_days.iter().copied().max().unwrap_or(i32::MIN)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    day: String,
    /// Span parts the summary was built from, relative to the data directory.
    parts: Vec<String>,
    read_days: Vec<String>,
    spans: usize,
    horizon_ns: i64,
    files: Vec<String>,
}

const FILES: [&str; 4] = [
    "calls.parquet",
    "turns.parquet",
    "tools.parquet",
    "failing.parquet",
];

/// The directory of `day`'s summary.
pub fn dir(layout: &Layout, day: i32) -> PathBuf {
    layout.sealed_dir(day)
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SweepError {
    let context = context.into();
    move |e| SweepError::Store(StoreError::io(context, e))
}

fn data(context: &str) -> impl Fn(PolarsError) -> SweepError + '_ {
    move |source| SweepError::Data {
        context: context.to_string(),
        source,
    }
}

/// The parts (relative paths) of each of `days`, in order.
pub fn parts_of(layout: &Layout, days: &[i32]) -> Result<Vec<String>, SweepError> {
    let mut out = Vec::new();
    for &d in days {
        out.extend(layout.parts(d)?.iter().map(|p| layout.relative(p)));
    }
    Ok(out)
}

/// `day`'s summary, if one is there and still names exactly the parts the
/// days it read hold. A summary this version cannot read counts as none.
pub fn load(layout: &Layout, day: i32) -> Result<Option<Summary>, SweepError> {
    let Some(m) = valid_manifest(layout, day)? else {
        return Ok(None);
    };
    let dir = dir(layout, day);
    let days: Vec<i32> = m
        .read_days
        .iter()
        .filter_map(|d| crate::model::day_from_str(d))
        .collect();
    // A summary that cannot be read (a torn file) is none: the day is read
    // from its spans and sealed again.
    match read_files(&dir, day, &m, days) {
        Ok(s) => Ok(s),
        Err(e) => {
            tracing::warn!(day = %day_to_string(day), error = %e, "a sealed summary could not be read; reading the day from its spans");
            Ok(None)
        }
    }
}

/// What `day`'s valid summary says of itself (read days, spans, newest
/// end), without reading its files: whether a sweep can use it.
pub fn peek(layout: &Layout, day: i32) -> Result<Option<(Vec<i32>, i64)>, SweepError> {
    Ok(valid_manifest(layout, day)?.map(|m| {
        let days = m
            .read_days
            .iter()
            .filter_map(|d| crate::model::day_from_str(d))
            .collect();
        (days, m.horizon_ns)
    }))
}

fn valid_manifest(layout: &Layout, day: i32) -> Result<Option<Manifest>, SweepError> {
    let dir = dir(layout, day);
    let manifest = match fs::read(dir.join("manifest.json")) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("reading {}", dir.display()))(e)),
    };
    let Ok(m) = serde_json::from_slice::<Manifest>(&manifest) else {
        return Ok(None);
    };
    let days: Option<Vec<i32>> = m
        .read_days
        .iter()
        .map(|d| crate::model::day_from_str(d))
        .collect();
    let Some(days) = days else { return Ok(None) };
    if m.version != VERSION || m.day != day_to_string(day) {
        return Ok(None);
    }
    // The days the read took spans from must hold the parts it names.
    let mut named: Vec<&str> = m.parts.iter().map(String::as_str).collect();
    named.sort_unstable();
    let mut now = parts_of(layout, &days)?;
    now.sort_unstable();
    if now != named {
        return Ok(None);
    }
    drop(named);
    Ok(Some(m))
}

fn read_files(
    dir: &Path,
    day: i32,
    m: &Manifest,
    days: Vec<i32>,
) -> Result<Option<Summary>, SweepError> {
    let read = |name: &str| -> Result<DataFrame, SweepError> {
        let path = dir.join(name);
        crate::store::parquet::scan(std::slice::from_ref(&path))
            .and_then(|lf| lf.collect())
            .map_err(|source| SweepError::Data {
                context: format!("reading {}", path.display()),
                source,
            })
    };
    let calls = calls_from(&read("calls.parquet")?).map_err(data("reading a day's summary"))?;
    let turns = turns_from(&read("turns.parquet")?).map_err(data("reading a day's summary"))?;
    let (healthy, last_call) =
        tools_from(&read("tools.parquet")?, day).map_err(data("reading a day's summary"))?;
    let failing =
        failing_from(&read("failing.parquet")?, day).map_err(data("reading a day's summary"))?;
    Ok(Some(Summary {
        calls: TurnCalls {
            calls,
            turns,
            healthy,
            failing,
            last_call,
        },
        spans: m.spans,
        horizon_ns: m.horizon_ns,
        read_days: days,
    }))
}

/// Write `day`'s summary, built from `parts`: the files under temporary
/// names, then each renamed in, the manifest last. A crash part-way leaves
/// no manifest (or the old one, naming parts no longer there), so the day
/// is read and sealed again.
pub fn write(
    layout: &Layout,
    day: i32,
    summary: &Summary,
    parts: &[String],
) -> Result<(), SweepError> {
    let dir = dir(layout, day);
    fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    // An older manifest goes first: from here until the new one is in, the
    // day has no summary.
    match fs::remove_file(dir.join("manifest.json")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("removing {}", dir.display()))(e)),
    }
    crate::store::wal::sync_dir(&dir)?;
    let tc = &summary.calls;
    let mut frames = [
        calls_frame(&tc.calls),
        turns_frame(&tc.turns),
        tools_frame(tc, day),
        failing_frame(tc, day),
    ];
    for (name, df) in FILES.iter().zip(frames.iter_mut()) {
        let df = df.as_mut().map_err(|e| SweepError::Data {
            context: "building a day's summary".into(),
            source: e.clone(),
        })?;
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        // Written once, read every sweep: the fastest zstd level.
        let fast = polars::polars_utils::compression::ZstdLevel::try_new(1).ok();
        crate::store::parquet::write_file_with(&tmp, df, ParquetCompression::Zstd(fast))?;
        fs::rename(&tmp, dir.join(name)).map_err(io(format!("writing {}", dir.display())))?;
        // For the crash test: killed with some files in, no manifest.
        crate::faults::kill_point("seal_summary");
    }
    let manifest = Manifest {
        version: VERSION,
        day: day_to_string(day),
        parts: parts.to_vec(),
        read_days: summary
            .read_days
            .iter()
            .map(|d| day_to_string(*d))
            .collect(),
        spans: summary.spans,
        horizon_ns: summary.horizon_ns,
        files: FILES.iter().map(|s| s.to_string()).collect(),
    };
    let body = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| SweepError::Store(StoreError::data("encoding a summary manifest", e)))?;
    write_durably(&dir.join("manifest.json"), &body)?;
    crate::store::wal::sync_dir(&dir)?;
    Ok(())
}

fn write_durably(path: &Path, body: &[u8]) -> Result<(), SweepError> {
    use std::io::Write;
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(body)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(io(format!("writing {}", path.display())))
}

fn calls_frame(calls: &[Call]) -> PolarsResult<DataFrame> {
    let s = |f: fn(&Call) -> Option<&str>| -> Vec<Option<&str>> { calls.iter().map(f).collect() };
    DataFrame::new_infer_height(vec![
        Column::new("turn".into(), s(|c| Some(&c.turn))),
        Column::new("trace_id".into(), s(|c| Some(&c.trace_id))),
        Column::new("span_id".into(), s(|c| Some(&c.span_id))),
        Column::new("parent_span_id".into(), s(|c| c.parent_span_id.as_deref())),
        Column::new("tool".into(), s(|c| Some(&c.tool))),
        Column::new("service".into(), s(|c| Some(&c.service))),
        Column::new(
            "start_ns".into(),
            calls.iter().map(|c| c.start_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "end_ns".into(),
            calls.iter().map(|c| c.end_ns).collect::<Vec<_>>(),
        ),
        Column::new("error_class".into(), s(|c| Some(c.class.as_str()))),
        Column::new("args_hash".into(), s(|c| c.args_hash.as_deref())),
        Column::new("result_hash".into(), s(|c| c.result_hash.as_deref())),
        Column::new("session_id".into(), s(|c| c.session_id.as_deref())),
        Column::new(
            "cost_usd".into(),
            calls.iter().map(|c| c.cost_usd).collect::<Vec<_>>(),
        ),
        Column::new(
            "seq".into(),
            calls.iter().map(|c| c.seq).collect::<Vec<_>>(),
        ),
    ])
}

fn strs<'a>(df: &'a DataFrame, name: &str) -> PolarsResult<Vec<Option<&'a str>>> {
    Ok(df.column(name)?.str()?.iter().collect())
}

fn ints(df: &DataFrame, name: &str) -> PolarsResult<Vec<i64>> {
    Ok(df
        .column(name)?
        .cast(&DataType::Int64)?
        .i64()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect())
}

fn floats(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<f64>>> {
    Ok(df.column(name)?.f64()?.iter().collect())
}

fn owned(v: Option<&str>) -> String {
    v.unwrap_or("").to_string()
}

fn calls_from(df: &DataFrame) -> PolarsResult<Vec<Call>> {
    let (turn, trace, span, parent) = (
        strs(df, "turn")?,
        strs(df, "trace_id")?,
        strs(df, "span_id")?,
        strs(df, "parent_span_id")?,
    );
    let (tool, service, class) = (
        strs(df, "tool")?,
        strs(df, "service")?,
        strs(df, "error_class")?,
    );
    let (args, result, session) = (
        strs(df, "args_hash")?,
        strs(df, "result_hash")?,
        strs(df, "session_id")?,
    );
    let (start, end, seq) = (ints(df, "start_ns")?, ints(df, "end_ns")?, ints(df, "seq")?);
    let cost = floats(df, "cost_usd")?;
    Ok((0..df.height())
        .map(|i| Call {
            turn: owned(turn[i]),
            trace_id: owned(trace[i]),
            span_id: owned(span[i]),
            parent_span_id: parent[i].map(str::to_string),
            tool: owned(tool[i]),
            service: owned(service[i]),
            start_ns: start[i],
            end_ns: end[i],
            class: class[i]
                .and_then(ErrorClass::parse)
                .unwrap_or(ErrorClass::Unknown),
            args_hash: args[i].map(str::to_string),
            result_hash: result[i].map(str::to_string),
            session_id: session[i].map(str::to_string),
            cost_usd: cost[i],
            seq: seq[i] as u32,
        })
        .collect())
}

fn turns_frame(turns: &BTreeMap<String, Turn>) -> PolarsResult<DataFrame> {
    let t: Vec<(&String, &Turn)> = turns.iter().collect();
    let i = |f: fn(&Turn) -> i64| -> Vec<i64> { t.iter().map(|(_, x)| f(x)).collect() };
    DataFrame::new_infer_height(vec![
        Column::new(
            "turn".into(),
            t.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "trace_id".into(),
            t.iter()
                .map(|(_, x)| x.trace_id.as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new("began_ns".into(), i(|x| x.began_ns)),
        Column::new("start_ns".into(), i(|x| x.start_ns)),
        Column::new("end_ns".into(), i(|x| x.end_ns)),
        Column::new("spans".into(), i(|x| x.spans as i64)),
        Column::new("last_end_ns".into(), i(|x| x.last_end_ns)),
        Column::new(
            "session_id".into(),
            t.iter()
                .map(|(_, x)| x.session_id.as_deref())
                .collect::<Vec<_>>(),
        ),
    ])
}

fn turns_from(df: &DataFrame) -> PolarsResult<BTreeMap<String, Turn>> {
    let (turn, trace, session) = (
        strs(df, "turn")?,
        strs(df, "trace_id")?,
        strs(df, "session_id")?,
    );
    let (began, start, end) = (
        ints(df, "began_ns")?,
        ints(df, "start_ns")?,
        ints(df, "end_ns")?,
    );
    let (spans, last_end) = (ints(df, "spans")?, ints(df, "last_end_ns")?);
    Ok((0..df.height())
        .map(|i| {
            (
                owned(turn[i]),
                Turn {
                    trace_id: owned(trace[i]),
                    began_ns: began[i],
                    start_ns: start[i],
                    end_ns: end[i],
                    spans: spans[i].max(0) as usize,
                    last_end_ns: last_end[i],
                    session_id: session[i].map(str::to_string),
                },
            )
        })
        .collect())
}

fn tools_frame(tc: &TurnCalls, day: i32) -> PolarsResult<DataFrame> {
    let mut tools: Vec<&str> = tc.healthy.keys().map(String::as_str).collect();
    tools.extend(
        tc.last_call
            .keys()
            .filter(|(_, d)| *d == day)
            .map(|(t, _)| t.as_str()),
    );
    tools.sort_unstable();
    tools.dedup();
    let h = |t: &str| tc.healthy.get(t);
    DataFrame::new_infer_height(vec![
        Column::new(
            "healthy_duration_s".into(),
            tools
                .iter()
                .map(|t| h(t).and_then(|h| h.duration_s))
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "healthy_spans".into(),
            tools
                .iter()
                .map(|t| h(t).and_then(|h| h.spans))
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "has_healthy".into(),
            tools.iter().map(|t| h(t).is_some()).collect::<Vec<_>>(),
        ),
        Column::new(
            "last_call_ns".into(),
            tools
                .iter()
                .map(|t| tc.last_call.get(&(t.to_string(), day)).copied())
                .collect::<Vec<_>>(),
        ),
        Column::new("tool".into(), tools),
    ])
}

type Tools = (BTreeMap<String, Healthy>, BTreeMap<(String, i32), i64>);

fn tools_from(df: &DataFrame, day: i32) -> PolarsResult<Tools> {
    let tool = strs(df, "tool")?;
    let (d, s) = (
        floats(df, "healthy_duration_s")?,
        floats(df, "healthy_spans")?,
    );
    let has: Vec<bool> = df
        .column("has_healthy")?
        .bool()?
        .iter()
        .map(|b| b == Some(true))
        .collect();
    let last: Vec<Option<i64>> = df.column("last_call_ns")?.i64()?.iter().collect();
    let mut healthy = BTreeMap::new();
    let mut last_call = BTreeMap::new();
    for i in 0..df.height() {
        let t = owned(tool[i]);
        if has[i] {
            healthy.insert(
                t.clone(),
                Healthy {
                    duration_s: d[i],
                    spans: s[i],
                },
            );
        }
        if let Some(ns) = last[i] {
            last_call.insert((t, day), ns);
        }
    }
    Ok((healthy, last_call))
}

fn failing_frame(tc: &TurnCalls, day: i32) -> PolarsResult<DataFrame> {
    let rows: Vec<(&str, usize, &FailingTurn)> = tc
        .failing
        .iter()
        .filter(|((_, d), _)| *d == day)
        .flat_map(|((t, _), v)| v.iter().enumerate().map(move |(k, f)| (t.as_str(), k, f)))
        .collect();
    DataFrame::new_infer_height(vec![
        Column::new("tool".into(), rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        Column::new(
            "rank".into(),
            rows.iter().map(|r| r.1 as i64).collect::<Vec<_>>(),
        ),
        Column::new(
            "turn".into(),
            rows.iter().map(|r| r.2.turn.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "trace_id".into(),
            rows.iter()
                .map(|r| r.2.trace_id.as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "calls".into(),
            rows.iter().map(|r| r.2.calls as i64).collect::<Vec<_>>(),
        ),
        Column::new(
            "failures".into(),
            rows.iter().map(|r| r.2.failures as i64).collect::<Vec<_>>(),
        ),
        Column::new(
            "session_id".into(),
            rows.iter()
                .map(|r| r.2.session_id.as_deref())
                .collect::<Vec<_>>(),
        ),
    ])
}

fn failing_from(
    df: &DataFrame,
    day: i32,
) -> PolarsResult<BTreeMap<(String, i32), Vec<FailingTurn>>> {
    let (tool, turn, trace, session) = (
        strs(df, "tool")?,
        strs(df, "turn")?,
        strs(df, "trace_id")?,
        strs(df, "session_id")?,
    );
    let (rank, calls, failures) = (ints(df, "rank")?, ints(df, "calls")?, ints(df, "failures")?);
    let mut rows: Vec<usize> = (0..df.height()).collect();
    rows.sort_by_key(|&i| (tool[i], rank[i]));
    let mut out: BTreeMap<(String, i32), Vec<FailingTurn>> = BTreeMap::new();
    for i in rows {
        out.entry((owned(tool[i]), day))
            .or_default()
            .push(FailingTurn {
                turn: owned(turn[i]),
                trace_id: owned(trace[i]),
                calls: calls[i].max(0) as usize,
                failures: failures[i].max(0) as usize,
                session_id: session[i].map(str::to_string),
            });
    }
    Ok(out)
}
