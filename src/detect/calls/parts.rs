//! The kernel's output before the day's tables are made: one record per
//! turn and tool called, the kept turns with their calls and model calls.
//! Records of different turns merge by concatenation, so the output over
//! a table is [`finish`] of the parts of any split of it into whole turns:
//! the sweep's incremental path (`sweep::live`) keeps the parts of each
//! group of traces and computes again only the groups that got new spans.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::totals::Totals;
use super::{Call, FailingTurn, Turn, TurnCalls};
use crate::detect::driver::ModelCall;

/// One turn's use of one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolTurn {
    /// The trace of the turn's first row (a turn of an agent call id may
    /// span traces): what [`Parts::split`] files it under.
    pub trace: u128,
    pub tool: Arc<str>,
    /// The UTC day the turn began.
    pub day: i32,
    /// The turn's last span end: its calls count as judged traffic once
    /// that is settled.
    pub turn_end_ns: i64,
    /// The latest start of a call of the tool in the turn.
    pub last_start_ns: i64,
    pub calls: i64,
    pub failures: i64,
    /// The turn's duration (s) and span count: a healthy sample when the
    /// tool did not fail in it.
    pub duration_s: f64,
    pub spans: f64,
    /// The turn as a failing turn's evidence, when the tool failed in it.
    pub failing: Option<Arc<FailingTurn>>,
}

/// A turn's anchor service and the day it began.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnService {
    pub trace: u128,
    pub service: Arc<str>,
    pub day: i32,
}

/// The kernel's records of some whole turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    pub tool_turns: Vec<ToolTurn>,
    pub turn_services: Vec<TurnService>,
    /// The calls of the kept turns (any order), the turns and their model calls.
    pub calls: Vec<Call>,
    pub turns: BTreeMap<String, Turn>,
    pub models: BTreeMap<String, Vec<ModelCall>>,
    /// The trace of each kept turn's first row.
    pub turn_traces: BTreeMap<String, u128>,
}

impl Parts {
    /// The records filed by `key` of the trace each turn's first row is
    /// in: whole turns per key, when `key` maps the traces a turn spans to
    /// one key.
    pub fn split<K: std::hash::Hash + Eq + Copy>(
        self,
        key: impl Fn(u128) -> K,
    ) -> std::collections::HashMap<K, Parts> {
        let mut out: std::collections::HashMap<K, Parts> = Default::default();
        for tt in self.tool_turns {
            out.entry(key(tt.trace)).or_default().tool_turns.push(tt);
        }
        for ts in self.turn_services {
            out.entry(key(ts.trace)).or_default().turn_services.push(ts);
        }
        let of_turn = |turn: &str| key(self.turn_traces.get(turn).copied().unwrap_or(0));
        for c in self.calls {
            out.entry(of_turn(&c.turn)).or_default().calls.push(c);
        }
        for (id, t) in self.turns {
            out.entry(of_turn(&id)).or_default().turns.insert(id, t);
        }
        for (id, m) in self.models {
            out.entry(of_turn(&id)).or_default().models.insert(id, m);
        }
        for (id, trace) in self.turn_traces {
            out.entry(key(trace))
                .or_default()
                .turn_traces
                .insert(id, trace);
        }
        out
    }
}

/// The day's tables from the parts of disjoint sets of whole turns: a
/// tool's traffic counted only from turns that ended by `settled_by_ns`.
pub fn finish<'a>(parts: impl IntoIterator<Item = &'a Parts>, settled_by_ns: i64) -> TurnCalls {
    let mut totals = Totals::default();
    for p in parts {
        totals.add(p, settled_by_ns);
    }
    totals.into_calls()
}
