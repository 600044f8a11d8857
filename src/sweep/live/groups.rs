//! Today's traces, and the kernel's records kept per group of them. A
//! group is the traces one turn can span: a trace alone, or traces whose
//! spans share an agent call id (a turn anchored on it). New spans make
//! their traces' groups stale; a stale group's traces (with the day
//! before's spans of those that have no root today, as a full read takes
//! them) go through the kernel again, together, and its records replace
//! the group's. Settled groups are let go (`sleep.rs`).

use std::collections::{HashMap, HashSet};

use super::before::Before;
use super::TraceIds;
use crate::detect::calls::{self, Keep, Parts, Totals};
use crate::model::NANOS_PER_DAY;
use crate::spans::SpanTable;

mod sleep;

type Fast = foldhash::fast::RandomState;

/// One trace of today.
#[derive(Debug, Default)]
struct Trace {
    /// Its rows in today's table.
    own: Vec<u32>,
    /// Whether one of them is a root (no parent).
    rooted: bool,
    /// Its rows let go of (settled, their records added up; 0: none):
    /// read again if the trace's group gets spans, and then checked
    /// against this sum of their [`row_sum`]s.
    let_go: u32,
    let_go_sum: u64,
}

/// Today's traces and their groups' records.
#[derive(Default)]
pub(super) struct Groups {
    traces: HashMap<u128, Trace, Fast>,
    /// Agent call id → the traces with a span of it today, and those
    /// whose spans pulled from the day before have it.
    by_call: HashMap<String, Vec<u128>>,
    by_call_before: HashMap<String, Vec<u128>>,
    /// Trace → its group's key (the group's lowest trace) and each
    /// group's traces, for groups of more than one trace (a trace alone
    /// is its own group, under its own key); each group's records.
    group_of: HashMap<u128, u128, Fast>,
    members: HashMap<u128, Vec<u128>, Fast>,
    parts: HashMap<u128, Parts, Fast>,
    /// Spans let go of, and the latest end among them (the shape counts
    /// them as a whole read would).
    let_go: usize,
    let_go_horizon: i64,
    /// The traces whose rows are held (not let go).
    awake: HashSet<u128, Fast>,
    /// The records of the groups let go, added up (their `Parts` are not
    /// kept); a group that wakes has its records taken back out.
    folded: Totals,
}

/// What the day's result says of the read as a whole.
pub(super) struct Shape {
    /// Spans the read held: today's, and the day before's of the traces
    /// with no root today.
    pub spans: usize,
    pub horizon_ns: i64,
    /// Some trace has no root today (the read took the day before).
    pub rootless: bool,
    /// Some trace may go on past midnight (no root at all, or a span
    /// ending after it).
    pub reaching: bool,
    /// The earliest end of a span not yet settled.
    pub settles_at: Option<i64>,
}

impl Groups {
    /// Take today's rows from `first_new` on; the traces whose records
    /// are stale: those that got rows, and, when the day before changed,
    /// every trace with no root today.
    pub fn take_rows(
        &mut self,
        table: &SpanTable,
        first_new: usize,
        before_changed: bool,
    ) -> HashSet<u128> {
        let mut dirty = HashSet::new();
        for r in first_new..table.len() {
            let t = table.trace[r];
            let trace = self.traces.entry(t).or_default();
            trace.own.push(r as u32);
            self.awake.insert(t);
            trace.rooted |= !table.has_parent[r];
            dirty.insert(t);
            if let Some(call) = agent_call(table, r) {
                add(&mut self.by_call, call, t);
            }
        }
        if before_changed {
            self.by_call_before.clear();
            dirty.extend(
                self.traces
                    .iter()
                    .filter(|(_, tr)| !tr.rooted)
                    .map(|(t, _)| *t),
            );
        }
        dirty
    }

    /// Those of `traces` with no root today, by their ids as stored.
    pub fn rootless(&self, table: &SpanTable, traces: &HashSet<u128>) -> TraceIds {
        let mut out: TraceIds = traces
            .iter()
            .filter_map(|t| {
                let tr = self.traces.get(t)?;
                (!tr.rooted).then(|| (*t, table.trace_str(tr.own[0] as usize)))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Make the records of the groups of `dirty` again; how many groups.
    pub fn recompute(
        &mut self,
        table: &mut SpanTable,
        before: Option<&Before>,
        dirty: &HashSet<u128>,
        nest: bool,
    ) -> usize {
        if dirty.is_empty() {
            return 0;
        }
        let closure = self.closure(table, before, dirty);
        // Their old groups go; the traces are grouped again.
        for t in &closure {
            let g = self.group_of.remove(t).unwrap_or(*t);
            self.parts.remove(&g);
            self.members.remove(&g);
        }
        let key_of = self.components(table, before, &closure);
        let key = |t| key_of.get(&t).copied().unwrap_or(t);
        let pulled_of = |order: &mut dyn Iterator<Item = &u128>| -> Vec<usize> {
            let Some(b) = before else { return Vec::new() };
            order
                .filter(|t| !self.traces[*t].rooted)
                .flat_map(|t| b.rows(*t).iter().copied())
                .collect()
        };
        let made = if closure.len() == self.awake.len() {
            // Every trace: the kernel over the table itself, the day
            // before's spans appended for the while (no copy of the day).
            let own = table.len();
            let pulled = pulled_of(&mut super::sorted(&closure).iter());
            if let Some(b) = before {
                table.extend_from(&b.pulled, &pulled);
            }
            let made = calls::parts_nesting(table, Keep::Findable, nest).split(key);
            table.truncate(own);
            made
        } else {
            let order = super::sorted(&closure);
            let rows: Vec<usize> = order
                .iter()
                .flat_map(|t| self.traces[t].own.iter().map(|&r| r as usize))
                .collect();
            let mut sub = SpanTable::default();
            sub.extend_from(table, &rows);
            if let Some(b) = before {
                sub.extend_from(&b.pulled, &pulled_of(&mut order.iter()));
            }
            calls::parts_nesting(&sub, Keep::Findable, nest).split(key)
        };
        let mut groups = 0;
        // A trace alone is its own group: only groups of several are noted.
        let mut size: HashMap<u128, usize, Fast> = HashMap::default();
        for g in key_of.values() {
            *size.entry(*g).or_default() += 1;
        }
        for (t, g) in &key_of {
            if size[g] > 1 {
                self.group_of.insert(*t, *g);
                self.members.entry(*g).or_default().push(*t);
            }
        }
        for (g, mut p) in made {
            // Kept all day: no room left over from growing.
            p.tool_turns.shrink_to_fit();
            p.turn_services.shrink_to_fit();
            p.calls.shrink_to_fit();
            self.parts.insert(g, p);
            groups += 1;
        }
        groups
    }

    /// `dirty` with every trace that shares a group with one of them, now
    /// or before.
    fn closure(
        &self,
        table: &SpanTable,
        before: Option<&Before>,
        dirty: &HashSet<u128>,
    ) -> HashSet<u128> {
        let mut seen: HashSet<u128> = dirty.clone();
        let mut queue: Vec<u128> = dirty.iter().copied().collect();
        while let Some(t) = queue.pop() {
            let mut next: Vec<u128> = Vec::new();
            if let Some(g) = self.group_of.get(&t) {
                next.extend(self.members.get(g).into_iter().flatten().copied());
            }
            for call in self.calls_of(table, before, t) {
                next.extend(self.sharing(&call));
            }
            for n in next {
                if seen.insert(n) {
                    queue.push(n);
                }
            }
        }
        seen
    }

    /// The agent call ids of trace `t`'s spans as its turn read takes them.
    fn calls_of(&self, table: &SpanTable, before: Option<&Before>, t: u128) -> Vec<String> {
        let Some(tr) = self.traces.get(&t) else {
            return Vec::new();
        };
        let mut out: Vec<String> = tr
            .own
            .iter()
            .filter_map(|&r| agent_call(table, r as usize).map(str::to_string))
            .collect();
        if let (false, Some(b)) = (tr.rooted, before) {
            out.extend(
                b.rows(t)
                    .iter()
                    .filter_map(|&r| agent_call(&b.pulled, r).map(str::to_string)),
            );
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The traces of `closure` by group: joined by a shared agent call id;
    /// a group's key its lowest trace.
    fn components(
        &self,
        table: &SpanTable,
        before: Option<&Before>,
        closure: &HashSet<u128>,
    ) -> HashMap<u128, u128, Fast> {
        let mut key: HashMap<u128, u128, Fast> = closure.iter().map(|&t| (t, t)).collect();
        let find = |key: &HashMap<u128, u128, Fast>, mut t: u128| {
            while key[&t] != t {
                t = key[&t];
            }
            t
        };
        for &t in closure {
            for call in self.calls_of(table, before, t) {
                for o in self.sharing(&call) {
                    if !closure.contains(&o) {
                        continue;
                    }
                    let (a, b) = (find(&key, t), find(&key, o));
                    if a != b {
                        let (lo, hi) = (a.min(b), a.max(b));
                        key.insert(hi, lo);
                    }
                }
            }
        }
        let roots: Vec<(u128, u128)> = closure.iter().map(|&t| (t, find(&key, t))).collect();
        roots.into_iter().collect()
    }

    /// Index the agent call ids of the spans pulled from the day before
    /// for `traces` (after [`Before::pull`]).
    pub fn index_pulled(&mut self, before: Option<&Before>, traces: &TraceIds) {
        let Some(b) = before else { return };
        for (t, _) in traces {
            for &r in b.rows(*t) {
                if let Some(call) = agent_call(&b.pulled, r) {
                    add(&mut self.by_call_before, call, *t);
                }
            }
        }
    }

    /// The traces with a span of agent call `call`, today's or pulled.
    fn sharing<'s>(&'s self, call: &str) -> impl Iterator<Item = u128> + 's {
        let today = self.by_call.get(call).into_iter().flatten();
        let before = self.by_call_before.get(call).into_iter().flatten();
        today.chain(before).copied()
    }

    /// The read as a whole, for the day's result.
    pub fn shape(
        &self,
        table: &SpanTable,
        before: Option<&Before>,
        day: i32,
        settled_by: i64,
    ) -> Shape {
        let day_end = i64::from(day + 1) * NANOS_PER_DAY;
        let mut shape = Shape {
            spans: table.len() + self.let_go,
            horizon_ns: table
                .end
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
                .max(self.let_go_horizon),
            rootless: false,
            reaching: false,
            settles_at: None,
        };
        let settles = |e: i64, at: &mut Option<i64>| {
            if e > settled_by {
                *at = Some(at.map_or(e, |a: i64| a.min(e)));
            }
        };
        for &e in &table.end {
            settles(e, &mut shape.settles_at);
        }
        // (A trace let go is rooted and settled: it changes none of this.)
        for t in &self.awake {
            let tr = &self.traces[t];
            let mut rooted = tr.rooted;
            let mut last = tr
                .own
                .iter()
                .map(|&r| table.end[r as usize])
                .max()
                .unwrap_or(i64::MIN);
            if !tr.rooted {
                shape.rootless = true;
                if let Some(b) = before {
                    for &r in b.rows(*t) {
                        shape.spans += 1;
                        let e = b.pulled.end[r];
                        shape.horizon_ns = shape.horizon_ns.max(e);
                        settles(e, &mut shape.settles_at);
                        last = last.max(e);
                        rooted |= !b.pulled.has_parent[r];
                    }
                }
            }
            shape.reaching |= !rooted || last >= day_end;
        }
        shape
    }
}

/// Note that `trace` has a span of agent call `call`.
fn add(index: &mut HashMap<String, Vec<u128>>, call: &str, trace: u128) {
    let traces = index.entry(call.to_string()).or_default();
    if traces.last() != Some(&trace) && !traces.contains(&trace) {
        traces.push(trace);
    }
}

/// Row `r`'s agent call id, when it has one.
fn agent_call(table: &SpanTable, r: usize) -> Option<&str> {
    match table.agent_call[r] {
        0 => None,
        c => table.dict.get(c).filter(|s| !s.is_empty()),
    }
}
