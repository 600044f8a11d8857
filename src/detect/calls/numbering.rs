//! The steps of [`collect_table_keeping`](super::collect_table_keeping)
//! that number and bucket: which rows are calls (nested duplicates folded
//! into their outer call, control flow left out), the turns numbered
//! densely with their extents, the calls bucketed by turn, and each turn's
//! session.

use std::collections::HashMap;

#[cfg(doc)]
use super::may_nest_in;
use super::{nested_in, takes_inner_class, Class, Fast, SpanIndex, SpanTable};
use crate::detect::turns::{self, Anchor};

/// The table's rows as calls: each row's turn anchor, its nested
/// duplicate's outer row, and the row whose class it counts with.
pub(super) struct Rows<'t> {
    pub t: &'t SpanTable,
    pub anchors: Vec<Anchor>,
    nested: Option<Vec<Option<usize>>>,
    /// The row whose class each call counts with: its own, or its inner
    /// duplicate's failure.
    class_src: Vec<u32>,
}

impl<'t> Rows<'t> {
    /// `nest`: whether nested duplicates are looked for, which is where
    /// one call can be two spans (an MCP span, or two conventions, in the
    /// table a whole read of the day takes: [`may_nest_in`]), as the
    /// rollup does.
    pub fn of(t: &'t SpanTable, index: &SpanIndex<'_>, nest: bool) -> Rows<'t> {
        let anchors = turns::anchors(t, index);
        let nested = nest.then(|| nested_in(t, index));
        let mut class_src: Vec<u32> = (0..t.len() as u32).collect();
        for (i, p) in nested.iter().flatten().enumerate() {
            if let Some(p) = *p {
                if takes_inner_class(t.class_str(class_src[p] as usize), t.class_str(i)) {
                    class_src[p] = i as u32;
                }
            }
        }
        Rows {
            t,
            anchors,
            nested,
            class_src,
        }
    }

    pub fn class_of(&self, i: usize) -> Class {
        self.t.class[self.class_src[i] as usize]
    }

    /// A tool span that is no nested duplicate and was not stopped on
    /// purpose (`interrupted`, `cancelled`: detection.md §3 — no attempt of
    /// anything: neither a failure nor a success, in no chain, no repeat
    /// and no loop; it stays a span of its turn).
    pub fn is_call(&self, i: usize) -> bool {
        let nested = self.nested.as_ref().and_then(|v| v[i]);
        self.t.is_tool[i] && nested.is_none() && !self.class_of(i).control_flow()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct TurnStat {
    /// The turn's first row: its earliest span (by start, then trace and
    /// span id), whatever the order of the table's rows.
    pub row: usize,
    /// When the turn began: its anchor span's start (else its first span's).
    pub began_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub spans: usize,
}

/// The turns, numbered densely in order of first sight.
pub(super) struct Turns {
    pub stats: Vec<TurnStat>,
    /// Per row, its turn's number.
    pub turn_of: Vec<u32>,
}

impl Turns {
    /// Number the turns of `anchors`; a turn's extent and span count as we go.
    pub fn number(t: &SpanTable, anchors: &[Anchor]) -> Turns {
        let n = t.len();
        let mut by_row: Vec<u32> = vec![u32::MAX; n];
        let mut by_call: HashMap<u32, u32, Fast> = HashMap::default();
        let mut stats: Vec<TurnStat> = Vec::new();
        let mut turn_of: Vec<u32> = Vec::with_capacity(n);
        for (i, anchor) in anchors.iter().enumerate() {
            let (s, e) = (t.start[i], t.end[i]);
            let slot = match anchor {
                Anchor::Row(r) => &mut by_row[*r],
                Anchor::AgentCall(c) => by_call.entry(*c).or_insert(u32::MAX),
            };
            if *slot == u32::MAX {
                *slot = stats.len() as u32;
                let began = match anchor {
                    Anchor::Row(r) => t.start[*r],
                    Anchor::AgentCall(_) => s,
                };
                stats.push(TurnStat {
                    row: i,
                    began_ns: began,
                    start_ns: s,
                    end_ns: e,
                    spans: 0,
                });
            }
            let k = *slot;
            let st = &mut stats[k as usize];
            // The turn's first row is its earliest span, whatever the
            // order of the rows (a compaction re-sorts them).
            if (s, t.trace[i], t.span[i]) < (t.start[st.row], t.trace[st.row], t.span[st.row]) {
                st.row = i;
            }
            st.start_ns = st.start_ns.min(s);
            if matches!(anchor, Anchor::AgentCall(_)) {
                st.began_ns = st.began_ns.min(s);
            }
            st.end_ns = st.end_ns.max(e);
            st.spans += 1;
            turn_of.push(k);
        }
        Turns { stats, turn_of }
    }

    /// The UTC day turn `k` began.
    pub fn day(&self, k: u32) -> i32 {
        crate::model::day_of_ns(self.stats[k as usize].began_ns)
    }
}

/// The calls bucketed by turn (a counting sort), each bucket in row order.
pub(super) struct Buckets {
    offsets: Vec<u32>,
    rows: Vec<u32>,
}

impl Buckets {
    pub fn of(rows: &Rows<'_>, turns: &Turns) -> Buckets {
        let n = rows.t.len();
        let mut offsets = vec![0u32; turns.stats.len() + 1];
        for i in (0..n).filter(|&i| rows.is_call(i)) {
            offsets[turns.turn_of[i] as usize + 1] += 1;
        }
        for k in 1..offsets.len() {
            offsets[k] += offsets[k - 1];
        }
        let mut fill = offsets.clone();
        let mut bucket = vec![0u32; offsets[turns.stats.len()] as usize];
        for i in (0..n).filter(|&i| rows.is_call(i)) {
            let k = turns.turn_of[i] as usize;
            bucket[fill[k] as usize] = i as u32;
            fill[k] += 1;
        }
        Buckets {
            offsets,
            rows: bucket,
        }
    }

    /// Turn `k`'s calls.
    pub fn of_turn(&self, k: usize) -> &[u32] {
        &self.rows[self.offsets[k] as usize..self.offsets[k + 1] as usize]
    }
}

/// The session of each turn: its anchor's (the user's request: a
/// supervisor's, not a sub-agent's), else the earliest span's that has one.
pub(super) struct Sessions {
    /// Per turn, its anchor's session (0: none).
    pub anchor: Vec<u32>,
    /// Per turn, its anchor's, else the earliest span's that has one (0: none).
    pub turn: Vec<u32>,
}

impl Sessions {
    pub fn of(t: &SpanTable, anchors: &[Anchor], turns: &Turns) -> Sessions {
        let mut anchor: Vec<u32> = vec![0; turns.stats.len()];
        for (i, a) in anchors.iter().enumerate() {
            if let Anchor::Row(r) = a {
                if t.session[*r] != 0 {
                    anchor[turns.turn_of[i] as usize] = t.session[*r];
                }
            }
        }
        // Else the session of the earliest span that has one (by start,
        // then trace and span id), whatever the order of the rows.
        let mut turn = anchor.clone();
        let mut from: Vec<Option<usize>> = vec![None; turn.len()];
        for (i, &k) in turns.turn_of.iter().enumerate() {
            let k = k as usize;
            if anchor[k] != 0 || t.session[i] == 0 {
                continue;
            }
            let key = |r: usize| (t.start[r], t.trace[r], t.span[r]);
            if from[k].is_none_or(|r| key(i) < key(r)) {
                from[k] = Some(i);
                turn[k] = t.session[i];
            }
        }
        Sessions { anchor, turn }
    }
}
