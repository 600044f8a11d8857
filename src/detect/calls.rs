//! Tool calls grouped by turn, and what each turn looked like as a whole
//! (duration, span count), from a frame of stored spans.

use std::collections::BTreeMap;

use polars::prelude::*;

use super::turns;
use crate::model::ErrorClass;

/// One tool call, with the turn it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub turn: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub tool: String,
    pub service: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub class: ErrorClass,
    pub args_hash: Option<String>,
    pub session_id: Option<String>,
}

impl Call {
    pub fn failed(&self) -> bool {
        self.class.is_error()
    }
}

/// A turn as a whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub trace_id: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub spans: usize,
    /// The newest end of any span of the turn's trace, for settling.
    pub last_end_ns: i64,
}

impl Turn {
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }

    /// No span of the turn's trace ended within `settle_seconds` of `now_ns`.
    pub fn settled(&self, now_ns: i64, settle_seconds: i64) -> bool {
        now_ns.saturating_sub(self.last_end_ns) >= settle_seconds.saturating_mul(1_000_000_000)
    }
}

/// Calls grouped by (turn, tool), each group in start order.
pub fn by_turn_and_tool(calls: &[Call]) -> BTreeMap<(&str, &str), Vec<&Call>> {
    let mut groups: BTreeMap<(&str, &str), Vec<&Call>> = BTreeMap::new();
    for c in calls {
        groups
            .entry((c.turn.as_str(), c.tool.as_str()))
            .or_default()
            .push(c);
    }
    for g in groups.values_mut() {
        g.sort_by_key(|c| c.start_ns);
    }
    groups
}

/// The columns [`collect`] reads.
pub const COLUMNS: [&str; 14] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "is_agent",
    "agent_call_id",
    "start_ns",
    "end_ns",
    "is_tool_call",
    "tool_name",
    "service_name",
    "error_class",
    "tool_args_hash",
    "session_id",
    "tool_convention",
];

/// Tool calls and turns of `df`, which holds at least [`COLUMNS`] (without
/// `tool_convention`, MCP spans are taken as they are). An MCP `tools/call`
/// span that describes the same call as its GenAI parent or child counts as
/// a span of the turn, not as a second call.
pub fn collect(df: &DataFrame) -> PolarsResult<(Vec<Call>, BTreeMap<String, Turn>)> {
    let turn_ids = turns::resolve(df)?;
    let duplicate = if df.schema().contains("tool_convention") {
        Some(crate::store::rollup::mcp_duplicates(df)?)
    } else {
        None
    };
    let trace = df.column("trace_id")?.str()?;
    let span = df.column("span_id")?.str()?;
    let parent = df.column("parent_span_id")?.str()?;
    let start = df.column("start_ns")?.i64()?;
    let end = df.column("end_ns")?.i64()?;
    let is_tool = df.column("is_tool_call")?.bool()?;
    let tool = df.column("tool_name")?.str()?;
    let service = df.column("service_name")?.str()?;
    let class = df.column("error_class")?.str()?;
    let args = df.column("tool_args_hash")?.str()?;
    let session = df.column("session_id")?.str()?;
    let mut trace_end: BTreeMap<&str, i64> = BTreeMap::new();
    for i in 0..df.height() {
        let e = trace_end
            .entry(trace.get(i).unwrap_or(""))
            .or_insert(i64::MIN);
        *e = (*e).max(end.get(i).unwrap_or(0));
    }
    let mut turns: BTreeMap<String, Turn> = BTreeMap::new();
    let mut calls = Vec::new();
    for (i, turn_id) in turn_ids.into_iter().enumerate() {
        let (s, e) = (start.get(i).unwrap_or(0), end.get(i).unwrap_or(0));
        let t = trace.get(i).unwrap_or("");
        let turn = turns.entry(turn_id.clone()).or_insert_with(|| Turn {
            trace_id: t.to_string(),
            start_ns: s,
            end_ns: e,
            spans: 0,
            last_end_ns: trace_end.get(t).copied().unwrap_or(e),
        });
        turn.start_ns = turn.start_ns.min(s);
        turn.end_ns = turn.end_ns.max(e);
        turn.spans += 1;
        if is_tool.get(i) != Some(true)
            || duplicate.as_ref().is_some_and(|d| d.get(i) == Some(true))
        {
            continue;
        }
        calls.push(Call {
            turn: turn_id,
            trace_id: t.to_string(),
            span_id: span.get(i).unwrap_or("").to_string(),
            parent_span_id: parent.get(i).map(str::to_string),
            tool: tool.get(i).unwrap_or("").to_string(),
            service: service.get(i).unwrap_or("").to_string(),
            start_ns: s,
            end_ns: e,
            class: class
                .get(i)
                .and_then(ErrorClass::parse)
                .unwrap_or(ErrorClass::Unknown),
            args_hash: args.get(i).map(str::to_string),
            session_id: session.get(i).map(str::to_string),
        });
    }
    calls.sort_by(|a, b| (&a.turn, &a.tool, a.start_ns).cmp(&(&b.turn, &b.tool, b.start_ns)));
    Ok((calls, turns))
}
