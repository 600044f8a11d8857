//! A turn summary's Parquet files, to and from the kernel's `TurnCalls`.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::detect::calls::{Call, FailingTurn, Healthy, Turn, TurnCalls};
use crate::detect::ModelCall;
use crate::model::ErrorClass;

pub(super) fn calls_frame(calls: &[Call]) -> PolarsResult<DataFrame> {
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
        Column::new(
            "retry_after_ms".into(),
            calls.iter().map(|c| c.retry_after_ms).collect::<Vec<_>>(),
        ),
        Column::new(
            "wait_from_ns".into(),
            calls.iter().map(|c| c.wait_from_ns).collect::<Vec<_>>(),
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

pub(super) fn calls_from(df: &DataFrame) -> PolarsResult<Vec<Call>> {
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
    let waits: Vec<Option<i64>> = match df.column("retry_after_ms") {
        Ok(c) => c.cast(&DataType::Int64)?.i64()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let from: Vec<Option<i64>> = match df.column("wait_from_ns") {
        Ok(c) => c.cast(&DataType::Int64)?.i64()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
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
            retry_after_ms: waits[i],
            wait_from_ns: from[i],
        })
        .collect())
}

pub(super) fn turns_frame(turns: &BTreeMap<String, Turn>) -> PolarsResult<DataFrame> {
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

pub(super) fn turns_from(df: &DataFrame) -> PolarsResult<BTreeMap<String, Turn>> {
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

pub(super) fn tools_frame(tc: &TurnCalls, day: i32) -> PolarsResult<DataFrame> {
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

pub(super) fn tools_from(df: &DataFrame, day: i32) -> PolarsResult<Tools> {
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

pub(super) fn failing_frame(tc: &TurnCalls, day: i32) -> PolarsResult<DataFrame> {
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

pub(super) fn failing_from(
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

/// `models.parquet`: each kept turn's model calls, one row per call.
pub(super) fn models_frame(tc: &TurnCalls) -> PolarsResult<DataFrame> {
    let rows: Vec<(&str, &ModelCall)> = tc
        .models
        .iter()
        .flat_map(|(turn, ms)| ms.iter().map(move |m| (turn.as_str(), m)))
        .collect();
    let col = |name: &str, f: &dyn Fn(&ModelCall) -> Option<i64>| {
        Column::new(
            name.into(),
            rows.iter().map(|(_, m)| f(m)).collect::<Vec<_>>(),
        )
    };
    DataFrame::new_infer_height(vec![
        Column::new(
            "turn".into(),
            rows.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        ),
        col("start_ns", &|m| Some(m.start_ns)),
        col("end_ns", &|m| Some(m.end_ns)),
        Column::new(
            "model".into(),
            rows.iter()
                .map(|(_, m)| m.model.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "scope".into(),
            rows.iter()
                .map(|(_, m)| m.scope.as_deref())
                .collect::<Vec<_>>(),
        ),
        col("input_tokens", &|m| m.input_tokens),
        col("output_tokens", &|m| m.output_tokens),
        Column::new(
            "cost_usd".into(),
            rows.iter().map(|(_, m)| m.cost_usd).collect::<Vec<_>>(),
        ),
    ])
}

pub(super) fn models_from(df: &DataFrame) -> PolarsResult<BTreeMap<String, Vec<ModelCall>>> {
    let opt_ints = |name: &str| -> PolarsResult<Vec<Option<i64>>> {
        Ok(df
            .column(name)?
            .cast(&DataType::Int64)?
            .i64()?
            .iter()
            .collect())
    };
    let (turn, model, scope) = (strs(df, "turn")?, strs(df, "model")?, strs(df, "scope")?);
    let (start, end) = (ints(df, "start_ns")?, ints(df, "end_ns")?);
    let (input, output) = (opt_ints("input_tokens")?, opt_ints("output_tokens")?);
    let cost = df
        .column("cost_usd")?
        .cast(&DataType::Float64)?
        .f64()?
        .iter()
        .collect::<Vec<_>>();
    let mut out: BTreeMap<String, Vec<ModelCall>> = BTreeMap::new();
    for i in 0..df.height() {
        out.entry(owned(turn[i])).or_default().push(ModelCall {
            start_ns: start[i],
            end_ns: end[i],
            model: model[i].map(str::to_string),
            scope: scope[i].map(str::to_string),
            input_tokens: input[i],
            output_tokens: output[i],
            cost_usd: cost[i],
        });
    }
    Ok(out)
}
