//! One trace as the trace page shows it: its spans by turn, and each
//! tool-call attempt judged by what its retry did — `rescued` (a retry after
//! a retryable blip that ended well), `wasted` (a retry of a deterministic
//! error, or of a feed that never answered), `after_success` (the request
//! sent again after it succeeded) — with the gaps between attempts, the
//! rhythm of the loop, and who made each retry (a model call between it
//! and the attempt before: the model; none: code).

use std::collections::BTreeMap;

use polars::prelude::*;
use serde::Serialize;

use crate::detect::calls::StatedWait;
use crate::detect::chains::{chains, judge, rounds, Attempt, Verdict};
use crate::detect::retry_after::waits as waits_of;
use crate::detect::storm::{rhythm, StormParams};
use crate::detect::turns;
use crate::model::ErrorClass;

#[derive(Debug, Clone, Serialize)]
pub struct SpanView {
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub service: String,
    pub turn: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub tool: Option<String>,
    pub error_class: String,
    /// `tool`, `failed`, `rescued`, `wasted`, `after_success`, or empty for other spans.
    pub verdict: String,
    /// For a retry: the gap since the previous attempt of the same request loop.
    pub gap_ms: Option<f64>,
    /// For a loop of three attempts or more: its rhythm.
    pub rhythm: Option<String>,
    pub attempt: Option<usize>,
    /// For a retry after a failure that said how long to wait (its
    /// Retry-After, docs/detection.md §4.9): that wait (ms), and whether
    /// the retry came before it was over.
    pub retry_after_ms: Option<i64>,
    pub early: Option<bool>,
    /// For a retry: `model` when a model call of its turn lies between the
    /// attempt before and it (the model asked again), else `code`
    /// (detection.md §4.2, "Driver").
    pub driver: Option<String>,
    /// A model round trip (a model span, detection.md §1).
    pub is_model: bool,
    pub attributes: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceView {
    pub trace_id: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// In turn order, each turn's spans by start.
    pub spans: Vec<SpanView>,
    pub turns: usize,
    pub wasted_seconds: f64,
}

fn strs<'a>(df: &'a DataFrame, name: &str) -> PolarsResult<Vec<Option<&'a str>>> {
    Ok(df.column(name)?.str()?.iter().collect())
}

/// The columns the judging reads besides the view's own.
struct Cols<'a> {
    args: Vec<Option<&'a str>>,
    results: Vec<Option<&'a str>>,
    is_tool: Vec<bool>,
}

/// Every span of `df` as the view shows it, not judged yet.
fn spans_of<'a>(df: &'a DataFrame, turn_ids: &[String]) -> PolarsResult<(Vec<SpanView>, Cols<'a>)> {
    let span = strs(df, "span_id")?;
    let parent = strs(df, "parent_span_id")?;
    let name = strs(df, "name")?;
    let service = strs(df, "service_name")?;
    let tool = strs(df, "tool_name")?;
    let class = strs(df, "error_class")?;
    let attrs = strs(df, "attributes")?;
    let args = strs(df, "tool_args_hash")?;
    // Parts written before results were hashed have none.
    let results = match df.column("tool_result_hash") {
        Ok(c) => c.str()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let start: Vec<i64> = df
        .column("start_ns")?
        .i64()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect();
    let end: Vec<i64> = df
        .column("end_ns")?
        .i64()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect();
    let is_tool: Vec<bool> = df
        .column("is_tool_call")?
        .bool()?
        .iter()
        .map(|v| v == Some(true))
        .collect();
    // Parts written before model spans were marked have none.
    let is_model: Vec<bool> = match df.column("is_model") {
        Ok(c) => c.bool()?.iter().map(|v| v == Some(true)).collect(),
        Err(_) => vec![false; df.height()],
    };
    let spans = (0..df.height())
        .map(|i| SpanView {
            span_id: span[i].unwrap_or("").to_string(),
            parent_span_id: parent[i].map(str::to_string),
            name: name[i].unwrap_or("").to_string(),
            service: service[i].unwrap_or("").to_string(),
            turn: turn_ids[i].clone(),
            start_ns: start[i],
            end_ns: end[i],
            tool: tool[i].filter(|_| is_tool[i]).map(str::to_string),
            error_class: class[i].unwrap_or("ok").to_string(),
            verdict: String::new(),
            gap_ms: None,
            rhythm: None,
            attempt: None,
            retry_after_ms: None,
            early: None,
            driver: None,
            is_model: is_model[i],
            attributes: attrs[i].unwrap_or("{}").to_string(),
        })
        .collect();
    Ok((
        spans,
        Cols {
            args,
            results,
            is_tool,
        },
    ))
}

/// Attempts per (turn, tool), in no order yet. A call stopped on purpose
/// (an interrupt, a cancellation) is no attempt: its verdict is its class.
fn attempt_groups(
    spans: &mut [SpanView],
    nested: &[Option<usize>],
) -> BTreeMap<(String, String), Vec<usize>> {
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, s) in spans.iter_mut().enumerate() {
        let control = ErrorClass::parse(&s.error_class).is_some_and(ErrorClass::is_control_flow);
        if control && s.tool.is_some() && nested[i].is_none() {
            s.verdict = s.error_class.clone();
            continue;
        }
        if let Some(t) = &s.tool {
            if nested[i].is_none() {
                groups
                    .entry((s.turn.clone(), t.clone()))
                    .or_default()
                    .push(i);
            }
        }
    }
    groups
}

/// What judging one group of attempts reads.
struct Judging<'a> {
    cols: &'a Cols<'a>,
    /// Each span's stated wait (its own, or its HTTP child's), as the rules read it.
    waits: Vec<Option<StatedWait>>,
    /// Each turn's model calls (start, end), for who made each retry.
    models: BTreeMap<String, Vec<(i64, i64)>>,
    params: StormParams,
    tolerance: f64,
}

/// Judge one (turn, tool)'s attempts `idx` (sorted here by start): each
/// attempt's verdict, number, gap, rhythm, driver and stated wait. The
/// nanoseconds wasted on them, as the retry outcomes count them.
fn judge_group(spans: &mut [SpanView], idx: &mut [usize], j: &Judging<'_>) -> i64 {
    idx.sort_by_key(|&i| spans[i].start_ns);
    let attempts: Vec<Attempt<'_>> = idx
        .iter()
        .map(|&i| Attempt {
            class: ErrorClass::parse(&spans[i].error_class).unwrap_or(ErrorClass::Unknown),
            args: j.cols.args[i],
            result: j.cols.results[i],
            start_ns: spans[i].start_ns,
            end_ns: spans[i].end_ns,
            retry_after_ms: j.waits[i].map(|w| w.ms),
            wait_from_ns: j.waits[i].map(|w| w.from_ns),
        })
        .collect();
    let verdicts = judge(&attempts, j.params.exponential_ratio);
    // The retries after a failure that stated a wait: early or not.
    let rs = rounds(&attempts);
    for chain in chains(&rs) {
        for w in waits_of(&attempts, &rs, chain.rounds.clone(), j.tolerance) {
            for k in rs[chain.rounds.start + w.retry].calls.clone() {
                spans[idx[k]].retry_after_ms = Some(w.stated_ms);
                spans[idx[k]].early = Some(w.early);
            }
        }
    }
    // Each attempt's round, and whether a model call of the turn
    // started in the gap before each round after the first.
    let mut round_of = vec![0usize; idx.len()];
    for (r, round) in rs.iter().enumerate() {
        for k in round.calls.clone() {
            round_of[k] = r;
        }
    }
    let starts: Vec<i64> = spans
        .get(idx[0])
        .and_then(|s| j.models.get(&s.turn))
        .map(|ms| ms.iter().map(|&(s, _)| s).collect())
        .unwrap_or_default();
    let asked = crate::detect::driver::rounds_asked(&rs, &starts);
    let gaps: Vec<f64> = idx
        .windows(2)
        .map(|w| (spans[w[1]].start_ns - spans[w[0]].end_ns).max(0) as f64 / 1e6)
        .collect();
    // The rhythm of each request's own loop (a new request starts a new
    // loop): from the gaps between its attempts, once it has three.
    let mut loop_of = vec![0usize; idx.len()];
    for k in 1..idx.len() {
        loop_of[k] = if verdicts[k].is_retry() {
            loop_of[k - 1]
        } else {
            k
        };
    }
    let loop_rhythm = |start: usize| -> Option<String> {
        let members: Vec<usize> = (start..idx.len())
            .take_while(|&k| loop_of[k] == start)
            .collect();
        (members.len() >= 3).then(|| {
            let g: Vec<f64> = members[1..].iter().map(|&k| gaps[k - 1]).collect();
            rhythm(&g, &j.params).as_str().to_string()
        })
    };
    let mut wasted_ns = 0i64;
    for (k, &i) in idx.iter().enumerate() {
        let v = verdicts[k];
        spans[i].verdict = v.as_str().into();
        if v.is_retry() {
            spans[i].attempt = Some(k + 1);
            spans[i].gap_ms = Some(gaps[k - 1]);
            spans[i].rhythm = loop_rhythm(loop_of[k]);
            // Per round, as the driver rule counts it: a model call
            // in the gap before this attempt's round.
            let r = round_of[k];
            let asked = r > 0 && asked[r - 1];
            spans[i].driver = Some(if asked { "model" } else { "code" }.to_string());
            if v == Verdict::Wasted {
                // As the retry outcomes count it: the gap (never negative) and the attempt.
                let prev_end = spans[idx[k - 1]].end_ns;
                wasted_ns +=
                    (spans[i].start_ns - prev_end).max(0) + (spans[i].end_ns - spans[i].start_ns);
            }
        } else if idx.len() > 1 {
            spans[i].attempt = Some(k + 1);
        }
    }
    wasted_ns
}

/// Build the view of a trace's spans (a frame with the span schema).
pub fn view(trace_id: &str, df: &DataFrame) -> PolarsResult<TraceView> {
    let turn_ids = turns::resolve(df)?;
    let nested = crate::spans::nested_duplicates(df)?;
    let (mut spans, cols) = spans_of(df, &turn_ids)?;
    let mut groups = attempt_groups(&mut spans, &nested);
    // Each turn's model calls, for who made each retry.
    let mut models: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.is_model) {
        models
            .entry(s.turn.clone())
            .or_default()
            .push((s.start_ns, s.end_ns));
    }
    // Each call's stated wait (its own span's, or its HTTP child's), as the
    // rules read it.
    let table = crate::spans::SpanTable::from_frame(df)?;
    let index = crate::spans::SpanIndex::new(&table);
    let waits = crate::detect::calls::stated_waits(&table, &index, |i| {
        cols.is_tool[i] && nested[i].is_none()
    });
    let judging = Judging {
        cols: &cols,
        waits: (0..spans.len())
            .map(|i| waits.get(&(i as u32)).copied())
            .collect(),
        models,
        params: StormParams::default(),
        tolerance: crate::detect::RetryAfterParams::default().tolerance_ms,
    };
    let mut wasted_ns = 0i64;
    for idx in groups.values_mut() {
        wasted_ns += judge_group(&mut spans, idx, &judging);
    }
    // Turns in order of their first span; spans by start within a turn.
    let mut turn_start: BTreeMap<String, i64> = BTreeMap::new();
    for s in &spans {
        let e = turn_start.entry(s.turn.clone()).or_insert(s.start_ns);
        *e = (*e).min(s.start_ns);
    }
    spans.sort_by(|a, b| {
        (turn_start[&a.turn], &a.turn, a.start_ns, &a.span_id).cmp(&(
            turn_start[&b.turn],
            &b.turn,
            b.start_ns,
            &b.span_id,
        ))
    });
    Ok(TraceView {
        trace_id: trace_id.to_string(),
        start_ns: spans.iter().map(|s| s.start_ns).min().unwrap_or(0),
        end_ns: spans.iter().map(|s| s.end_ns).max().unwrap_or(0),
        turns: turn_start.len(),
        wasted_seconds: wasted_ns.max(0) as f64 / 1e9,
        spans,
    })
}
