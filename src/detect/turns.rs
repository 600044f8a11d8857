//! Turn resolution (detection.md §2), at sweep time over stored spans: a
//! span's turn is its nearest `invoke_agent` / OpenInference AGENT ancestor
//! (itself included); failing that its `gen_ai.agent.call.id`; failing that
//! its trace's root (the topmost ancestor that arrived). Never the session.
//!
//! Over a [`SpanTable`]: a parent is found by binary search among its
//! trace's rows sorted by span id, not through a map of string pairs.

use polars::prelude::*;

use crate::store::table::{SpanIndex, SpanTable};

/// Where a row's turn is anchored: the agent span or trace root (a row of
/// the table), or a `gen_ai.agent.call.id` (its dictionary number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Anchor {
    Row(usize),
    AgentCall(u32),
}

/// One turn id per row of `df`: `<trace>/<span>` of the agent span or
/// root, or `agent:<call id>`.
pub fn resolve(df: &DataFrame) -> PolarsResult<Vec<String>> {
    let table = SpanTable::from_frame(df)?;
    let index = SpanIndex::new(&table);
    Ok(anchors(&table, &index)
        .into_iter()
        .map(|a| turn_id(a, &table))
        .collect())
}

/// The turn id of an anchor (see [`resolve`]).
pub fn turn_id(anchor: Anchor, table: &SpanTable) -> String {
    match anchor {
        Anchor::Row(r) => format!("{}/{}", table.trace_str(r), table.span_str(r)),
        Anchor::AgentCall(c) => format!("agent:{}", table.dict.get(c).unwrap_or("")),
    }
}

/// The turn anchor of every row of `table`.
pub fn anchors(table: &SpanTable, index: &SpanIndex<'_>) -> Vec<Anchor> {
    let n = table.len();
    // The nearest agent at or above each row, memoized along each walk
    // (`UNSEEN`: not walked yet; `NONE`: no agent above).
    const UNSEEN: u32 = u32::MAX;
    const NONE: u32 = u32::MAX - 1;
    let mut agent_of: Vec<u32> = vec![UNSEEN; n];
    let mut path = Vec::new();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        path.clear();
        let mut cur = i;
        let mut top = i;
        let found = loop {
            match agent_of[cur] {
                UNSEEN => {}
                NONE => break None,
                known => break Some(known as usize),
            }
            path.push(cur);
            if table.is_agent[cur] {
                break Some(cur);
            }
            top = cur;
            match index.parent_of(cur) {
                // A cycle in bad data must not loop forever.
                Some(p) if path.len() <= n && !path.contains(&p) => cur = p,
                _ => break None,
            }
        };
        for &p in &path {
            agent_of[p] = found.map_or(NONE, |a| a as u32);
        }
        out.push(match found {
            Some(a) => Anchor::Row(a),
            None => match table.agent_call[i] {
                c if c != 0 && table.dict.get(c).is_some_and(|s| !s.is_empty()) => {
                    Anchor::AgentCall(c)
                }
                _ => {
                    // The topmost ancestor that is stored.
                    let mut r = top;
                    let mut steps = 0;
                    while let Some(p) = index.parent_of(r).filter(|_| steps <= n) {
                        steps += 1;
                        r = p;
                    }
                    Anchor::Row(r)
                }
            },
        });
    }
    out
}
