//! Turn resolution (detection.md §2), at sweep time over stored spans: a
//! span's turn is its outermost `invoke_agent` / OpenInference AGENT
//! ancestor (itself included) — a sub-agent a supervisor handed work to is
//! part of the supervisor's turn, the user's request; failing that its
//! `gen_ai.agent.call.id`; failing that its trace's root (the topmost
//! ancestor that arrived). Never the session.
//!
//! Over a [`SpanTable`]: a parent is found by binary search among its
//! trace's rows sorted by span id, not through a map of string pairs.

use polars::prelude::*;

use crate::spans::{SpanIndex, SpanTable};

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

/// The turn anchor of every row of `table`, in time linear in the rows
/// (each row is walked once, its parent found by binary search) whatever
/// the parent graph: chains of any depth, self-parented spans and parent
/// cycles stored before ingest refused them (a cycle's rows are anchored
/// on its lowest span id, whichever row the walk entered by and however
/// the rows are stored).
pub fn anchors(table: &SpanTable, index: &SpanIndex<'_>) -> Vec<Anchor> {
    let n = table.len();
    let mut walk = Walk::new(n);
    (0..n)
        .map(|i| {
            let (agent, top) = walk.resolve(i, table, index);
            match agent {
                Some(a) => Anchor::Row(a as usize),
                None => match table.agent_call[i] {
                    c if c != 0 && table.dict.get(c).is_some_and(|s| !s.is_empty()) => {
                        Anchor::AgentCall(c)
                    }
                    // The topmost ancestor that is stored.
                    _ => Anchor::Row(top as usize),
                },
            }
        })
        .collect()
}

/// What the walk up the parents knows of each row: its outermost agent at
/// or above it, and its topmost stored ancestor.
struct Walk {
    /// `UNSEEN`, `ON_PATH` (on the walk being made: its position in
    /// `path`), or `DONE`.
    state: Vec<u32>,
    agent: Vec<u32>,
    top: Vec<u32>,
    path: Vec<u32>,
}

const UNSEEN: u32 = u32::MAX;
const DONE: u32 = u32::MAX - 1;
const NO_AGENT: u32 = u32::MAX;

impl Walk {
    fn new(n: usize) -> Walk {
        Walk {
            state: vec![UNSEEN; n],
            agent: vec![NO_AGENT; n],
            top: vec![0; n],
            path: Vec::new(),
        }
    }

    /// Row `i`'s outermost agent (at or above it) and topmost ancestor.
    fn resolve(
        &mut self,
        i: usize,
        table: &SpanTable,
        index: &SpanIndex<'_>,
    ) -> (Option<u32>, u32) {
        let mut cur = i;
        // The outermost agent above the path (from a row already done, or
        // the cycle the walk ran into), and the path's top.
        let (above, top) = loop {
            match self.state[cur] {
                DONE => break (self.agent[cur], self.top[cur]),
                UNSEEN => {}
                at => {
                    // Back at a row of this walk: a cycle. Its rows take the
                    // one with the lowest span id as their top and the
                    // agent with the lowest span id on it, if any, as their
                    // agent, and leave the path.
                    let cycle = self.path.split_off(at as usize);
                    let lowest = |rows: &mut dyn Iterator<Item = u32>| {
                        rows.min_by_key(|&r| (table.span[r as usize], r))
                    };
                    let first = lowest(&mut cycle.iter().copied()).expect("a cycle has a row");
                    let agent = lowest(
                        &mut cycle
                            .iter()
                            .copied()
                            .filter(|&r| table.is_agent[r as usize]),
                    )
                    .unwrap_or(NO_AGENT);
                    for &r in &cycle {
                        self.finish(r, agent, first);
                    }
                    break (agent, first);
                }
            }
            self.state[cur] = self.path.len() as u32;
            self.path.push(cur as u32);
            match index.parent_of(cur) {
                Some(p) => cur = p,
                None => break (NO_AGENT, cur as u32),
            }
        };
        // Down the path from its top: each row's outermost agent is the
        // first agent met on the way down, unless one sits above the path.
        let mut agent = above;
        while let Some(r) = self.path.pop() {
            if agent == NO_AGENT && table.is_agent[r as usize] {
                agent = r;
            }
            self.finish(r, agent, top);
        }
        let a = self.agent[i];
        ((a != NO_AGENT).then_some(a), self.top[i])
    }

    fn finish(&mut self, row: u32, agent: u32, top: u32) {
        let r = row as usize;
        self.state[r] = DONE;
        self.agent[r] = agent;
        self.top[r] = top;
    }
}
