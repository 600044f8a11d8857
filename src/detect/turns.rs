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

/// One turn id per row of `df` (which holds at least [`COLUMNS`]):
/// `<trace>/<span>` of the agent span or root, or `agent:<call id>`.
pub fn resolve(df: &DataFrame) -> PolarsResult<Vec<String>> {
    let trace = df.column("trace_id")?.str()?;
    let span = df.column("span_id")?.str()?;
    let parent = df.column("parent_span_id")?.str()?;
    let is_agent = df.column("is_agent")?.bool()?;
    let call_id = df.column("agent_call_id")?.str()?;
    // (trace, span) → row
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(df.height());
    for i in 0..df.height() {
        if let (Some(t), Some(s)) = (trace.get(i), span.get(i)) {
            index.insert((t, s), i);
        }
    }
    let mut agent_of: Vec<Option<Option<usize>>> = vec![None; df.height()];
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let t = trace.get(i).unwrap_or("");
        // Walk up to the nearest agent span, remembering the path to memoize it.
        let mut path = Vec::new();
        let mut cur = i;
        let mut top = i;
        let found = loop {
            if let Some(known) = agent_of[cur] {
                break known;
            }
            path.push(cur);
            if is_agent.get(cur) == Some(true) {
                break Some(cur);
            }
            top = cur;
            match parent.get(cur).and_then(|p| index.get(&(t, p))) {
                // A cycle in bad data must not loop forever.
                Some(&p) if path.len() <= df.height() && !path.contains(&p) => cur = p,
                _ => break None,
            }
        };
        for p in path {
            agent_of[p] = Some(found);
        }
        let turn = match found {
            Some(a) => format!("{t}/{}", span.get(a).unwrap_or("")),
            None => match call_id.get(i) {
                Some(c) if !c.is_empty() => format!("agent:{c}"),
                _ => format!(
                    "{t}/{}",
                    span.get(root(top, t, &index, parent)).unwrap_or("")
                ),
            },
        };
        out.push(turn);
    }
    Ok(out)
}

/// The topmost ancestor of row `i` that is stored.
fn root(
    mut i: usize,
    trace: &str,
    index: &HashMap<(&str, &str), usize>,
    parent: &StringChunked,
) -> usize {
    let mut steps = 0;
    while let Some(&p) = parent.get(i).and_then(|p| index.get(&(trace, p))) {
        steps += 1;
        if steps > index.len() {
            break;
        }
        i = p;
    }
    i
}
