//! Turn resolution (detection.md §2), at sweep time over stored spans: a
//! span's turn is its nearest `invoke_agent` / OpenInference AGENT ancestor
//! (itself included); failing that its `gen_ai.agent.call.id`; failing that
//! its trace's root (the topmost ancestor that arrived). Never the session.

use std::collections::HashMap;

use polars::prelude::*;

/// The columns turn resolution reads.
pub const COLUMNS: [&str; 5] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "is_agent",
    "agent_call_id",
];

/// Where a row's turn is anchored: the agent span or trace root (a row of
/// the frame), or a `gen_ai.agent.call.id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Anchor<'a> {
    Row(usize),
    AgentCall(&'a str),
}

/// One turn id per row of `df` (which holds at least [`COLUMNS`]):
/// `<trace>/<span>` of the agent span or root, or `agent:<call id>`.
pub fn resolve(df: &DataFrame) -> PolarsResult<Vec<String>> {
    let span = df.column("span_id")?.str()?;
    let trace = df.column("trace_id")?.str()?;
    Ok(anchors(df)?
        .into_iter()
        .map(|a| turn_id(a, trace, span))
        .collect())
}

/// The turn id of an anchor (see [`resolve`]).
pub fn turn_id(anchor: Anchor<'_>, trace: &StringChunked, span: &StringChunked) -> String {
    match anchor {
        Anchor::Row(r) => format!(
            "{}/{}",
            trace.get(r).unwrap_or(""),
            span.get(r).unwrap_or("")
        ),
        Anchor::AgentCall(c) => format!("agent:{c}"),
    }
}

/// The turn anchor of every row of `df`, without building strings.
pub fn anchors(df: &DataFrame) -> PolarsResult<Vec<Anchor<'_>>> {
    let strs = |name: &str| -> PolarsResult<Vec<Option<&str>>> {
        Ok(df.column(name)?.str()?.iter().collect())
    };
    let (trace, span, parent) = (strs("trace_id")?, strs("span_id")?, strs("parent_span_id")?);
    let call_id = df.column("agent_call_id")?.str()?;
    let is_agent: Vec<bool> = df
        .column("is_agent")?
        .bool()?
        .iter()
        .map(|b| b == Some(true))
        .collect();
    // (trace, span) → row
    let mut index: HashMap<(&str, &str), usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(df.height(), Default::default());
    for (i, (t, s)) in trace.iter().zip(&span).enumerate() {
        if let (Some(t), Some(s)) = (t, s) {
            index.insert((t, s), i);
        }
    }
    let parent_row =
        |i: usize| -> Option<usize> { index.get(&(trace[i].unwrap_or(""), parent[i]?)).copied() };
    // The nearest agent at or above each row, memoized along each walk.
    let mut agent_of: Vec<Option<Option<usize>>> = vec![None; df.height()];
    let mut path = Vec::new();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        path.clear();
        let mut cur = i;
        let mut top = i;
        let found = loop {
            if let Some(known) = agent_of[cur] {
                break known;
            }
            path.push(cur);
            if is_agent[cur] {
                break Some(cur);
            }
            top = cur;
            match parent_row(cur) {
                // A cycle in bad data must not loop forever.
                Some(p) if path.len() <= df.height() && !path.contains(&p) => cur = p,
                _ => break None,
            }
        };
        for &p in &path {
            agent_of[p] = Some(found);
        }
        out.push(match found {
            Some(a) => Anchor::Row(a),
            None => match call_id.get(i) {
                Some(c) if !c.is_empty() => Anchor::AgentCall(c),
                _ => {
                    // The topmost ancestor that is stored.
                    let mut r = top;
                    let mut steps = 0;
                    while let Some(p) = parent_row(r).filter(|_| steps <= df.height()) {
                        steps += 1;
                        r = p;
                    }
                    Anchor::Row(r)
                }
            },
        });
    }
    Ok(out)
}
