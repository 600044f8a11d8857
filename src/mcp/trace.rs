//! `get_trace`: one trace (or one of its turns) as the dashboard's trace
//! view judges it — each tool's attempts numbered, with verdict, gap and
//! rhythm — summed up per loop first, then its spans, paged, attributes only
//! when asked for and capped.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Serialize;

use super::page::{page_with, BUDGET_CHARS};
use super::{Context, McpError};
use crate::model::day_from_str;
use crate::read::trace::SpanView;
use crate::store::Reader;
use crate::time::rfc3339;

/// Characters of a span's attributes shown when they are asked for.
const ATTRIBUTES_CHARS: usize = 600;

#[derive(Debug, Serialize, JsonSchema)]
pub struct LoopLine {
    pub turn: String,
    pub tool: String,
    /// Calls of the tool in the turn.
    pub attempts: usize,
    pub failures: usize,
    /// The rhythm of its longest retry loop: `no_backoff`, `fixed`,
    /// `exponential`, `irregular` (three attempts or more).
    pub rhythm: Option<String>,
    /// Attempts by verdict: `rescued`, `wasted`, `after_success`, `failed`, `tool`.
    pub verdicts: BTreeMap<String, usize>,
    /// The gaps between attempts, ms: smallest, median, largest.
    pub gap_ms: Option<[f64; 3]>,
    /// Who made its retries (docs/detection.md §4.2, "Driver"): `code`
    /// (no model call between attempts), `model` (one between every two),
    /// `mixed`; absent without retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanLine {
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub service: String,
    pub turn: String,
    pub start: String,
    pub duration_ms: f64,
    pub tool: Option<String>,
    pub error_class: String,
    /// `tool`, `failed`, `rescued`, `wasted`, `after_success`, or empty.
    pub verdict: String,
    pub attempt: Option<usize>,
    pub gap_ms: Option<f64>,
    pub rhythm: Option<String>,
    /// A retry after a failure that said how long to wait (Retry-After,
    /// docs/detection.md §4.9): that wait (ms) …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<i64>,
    /// … and whether this retry came before it was over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early: Option<bool>,
    /// For a retry: `model` (a model call between it and the attempt
    /// before) or `code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// A model round trip (a model span).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_model: bool,
    /// The span's attributes as JSON, cut to 600 characters (only with `attributes: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceAnswer {
    pub trace_id: String,
    pub start: String,
    pub end: String,
    pub turns: usize,
    /// Seconds spent on retries that could not help.
    pub wasted_seconds: f64,
    /// Per (turn, tool) called more than once: its attempts in brief.
    pub loops: Vec<LoopLine>,
    pub spans: Vec<SpanLine>,
    /// Spans in the trace (or the turn asked for), over every page.
    pub total_spans: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

pub struct TraceAsk<'a> {
    pub trace_id: &'a str,
    pub turn_id: Option<&'a str>,
    pub day: Option<&'a str>,
    pub attributes: bool,
    pub cursor: Option<&'a str>,
    pub limit: Option<usize>,
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} characters cut)", &s[..end], s.len() - end)
}

/// The request loops among `spans`: per (turn, tool), its attempts, what
/// they achieved, their gaps, rhythm and driver; the longest first.
fn loop_lines(spans: &[&SpanView]) -> Vec<LoopLine> {
    let mut loops: BTreeMap<(String, String), Vec<&SpanView>> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.attempt.is_some()) {
        if let Some(t) = &s.tool {
            loops
                .entry((s.turn.clone(), t.clone()))
                .or_default()
                .push(s);
        }
    }
    let mut loop_lines: Vec<LoopLine> = loops
        .into_iter()
        .map(|((turn, tool), attempts)| {
            let mut verdicts = BTreeMap::new();
            for a in &attempts {
                *verdicts.entry(a.verdict.clone()).or_insert(0) += 1;
            }
            let mut gaps: Vec<f64> = attempts.iter().filter_map(|a| a.gap_ms).collect();
            gaps.sort_by(f64::total_cmp);
            // The rhythm of the loop with the most attempts.
            let mut by_rhythm: BTreeMap<&str, usize> = BTreeMap::new();
            for a in &attempts {
                if let Some(r) = &a.rhythm {
                    *by_rhythm.entry(r.as_str()).or_insert(0) += 1;
                }
            }
            let driven: Vec<&str> = attempts
                .iter()
                .filter_map(|a| a.driver.as_deref())
                .collect();
            let driver = (!driven.is_empty()).then(|| {
                if driven.iter().all(|d| *d == "model") {
                    "model"
                } else if driven.iter().all(|d| *d == "code") {
                    "code"
                } else {
                    "mixed"
                }
                .to_string()
            });
            LoopLine {
                driver,
                attempts: attempts.len(),
                failures: attempts.iter().filter(|a| a.error_class != "ok").count(),
                rhythm: by_rhythm
                    .into_iter()
                    .max_by_key(|(_, n)| *n)
                    .map(|(r, _)| r.to_string()),
                verdicts,
                gap_ms: (!gaps.is_empty())
                    .then(|| [gaps[0], gaps[gaps.len() / 2], gaps[gaps.len() - 1]]),
                turn,
                tool,
            }
        })
        .collect();
    loop_lines.sort_by(|a, b| {
        b.attempts
            .cmp(&a.attempts)
            .then_with(|| a.turn.cmp(&b.turn))
    });
    loop_lines
}

pub fn get_trace(ctx: &Context, ask: &TraceAsk<'_>) -> Result<TraceAnswer, McpError> {
    let id = ask.trace_id.to_ascii_lowercase();
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(McpError::Argument(format!(
            "trace_id: expected a hex trace id, got {:?}",
            ask.trace_id
        )));
    }
    let day = ask
        .day
        .map(|d| {
            day_from_str(d).ok_or_else(|| {
                McpError::Argument(format!("day: expected a date like 2026-07-29, got {d:?}"))
            })
        })
        .transpose()?;
    let view = ctx.traces.view(&ctx.reader, &id, day)?;
    let spans: Vec<&SpanView> = view
        .spans
        .iter()
        .filter(|s| ask.turn_id.is_none_or(|t| s.turn == t))
        .collect();
    if spans.is_empty() {
        let turns: std::collections::BTreeSet<&str> =
            view.spans.iter().map(|s| s.turn.as_str()).collect();
        return Err(McpError::NotFound(format!(
            "trace {id} has no turn {:?}; its turns: {:?}",
            ask.turn_id.unwrap_or_default(),
            turns
        )));
    }
    let loop_lines = loop_lines(&spans);
    let span_line = |s: &&SpanView| SpanLine {
        span_id: s.span_id.clone(),
        parent_span_id: s.parent_span_id.clone(),
        name: s.name.clone(),
        service: s.service.clone(),
        turn: s.turn.clone(),
        start: rfc3339(s.start_ns),
        duration_ms: (s.end_ns - s.start_ns).max(0) as f64 / 1e6,
        tool: s.tool.clone(),
        error_class: s.error_class.clone(),
        verdict: s.verdict.clone(),
        attempt: s.attempt,
        gap_ms: s.gap_ms,
        rhythm: s.rhythm.clone(),
        retry_after_ms: s.retry_after_ms,
        early: s.early,
        driver: s.driver.clone(),
        is_model: s.is_model,
        attributes: ask.attributes.then(|| cut(&s.attributes, ATTRIBUTES_CHARS)),
    };
    // The loops come first and are never cut: they answer the question.
    let loops_chars = serde_json::to_string(&loop_lines).map_or(0, |s| s.len());
    let p = page_with(
        &spans,
        span_line,
        ask.cursor,
        ask.limit,
        200,
        BUDGET_CHARS.saturating_sub(loops_chars),
        "spans",
    )?;
    Ok(TraceAnswer {
        trace_id: id.clone(),
        start: rfc3339(view.start_ns),
        end: rfc3339(view.end_ns),
        turns: view.turns,
        wasted_seconds: view.wasted_seconds,
        loops: loop_lines,
        spans: p.items,
        total_spans: p.total,
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}

/// Traces judged lately, each with the parts it was read from: a page that
/// follows (the same trace, another cursor or turn) is cut from the kept
/// view, and a new part on those days reads the trace again.
#[derive(Default)]
pub struct TraceCache {
    inner: Mutex<VecDeque<Judged>>,
}

struct Judged {
    trace_id: String,
    day: Option<i32>,
    parts: Vec<PartStamp>,
    view: Arc<crate::read::trace::TraceView>,
}

/// A part's path, size and modification time.
type PartStamp = (PathBuf, u64, Option<SystemTime>);

/// Traces kept.
const KEEP: usize = 8;

fn parts(reader: &Reader, day: Option<i32>) -> Result<Vec<PartStamp>, McpError> {
    let layout = reader.layout();
    let days: Vec<i32> = match day {
        Some(d) => (d - 1..=d + 1).collect(),
        None => layout.days()?,
    };
    let mut out = Vec::new();
    for d in days {
        for p in layout.parts(d)? {
            let m = std::fs::metadata(&p).ok();
            out.push((
                p,
                m.as_ref().map_or(0, |m| m.len()),
                m.and_then(|m| m.modified().ok()),
            ));
        }
    }
    Ok(out)
}

impl TraceCache {
    /// The judged view of `trace_id` (read on `day` and its neighbours, or
    /// every day).
    pub fn view(
        &self,
        reader: &Reader,
        trace_id: &str,
        day: Option<i32>,
    ) -> Result<Arc<crate::read::trace::TraceView>, McpError> {
        let stamp = parts(reader, day)?;
        {
            let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(j) = kept
                .iter()
                .find(|j| j.trace_id == trace_id && j.day == day && j.parts == stamp)
            {
                return Ok(Arc::clone(&j.view));
            }
        }
        let (df, _) = crate::read::data::trace_spans(reader, trace_id, day)?;
        if df.height() == 0 {
            return Err(McpError::NotFound(format!(
                "no spans of trace {trace_id} are stored{}",
                if day.is_some() {
                    " on that day or its neighbours"
                } else {
                    ""
                }
            )));
        }
        let view =
            Arc::new(
                crate::read::trace::view(trace_id, &df).map_err(|source| McpError::Data {
                    context: format!("reading trace {trace_id}"),
                    source,
                })?,
            );
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|j| !(j.trace_id == trace_id && j.day == day));
        if kept.len() >= KEEP {
            kept.pop_back();
        }
        kept.push_front(Judged {
            trace_id: trace_id.to_string(),
            day,
            parts: stamp,
            view: Arc::clone(&view),
        });
        Ok(view)
    }
}
