//! The kernel's output before the day's tables are made: one record per
//! turn and tool called, the kept turns with their calls and model calls.
//! Records of different turns merge by concatenation, so the output over
//! a table is [`finish`] of the parts of any split of it into whole turns:
//! the sweep's incremental path (`sweep::live`) keeps the parts of each
//! group of traces and computes again only the groups that got new spans.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Call, FailingTurn, Healthy, Turn, TurnCalls, WORST_TURNS};
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
    pub failing: Option<Box<FailingTurn>>,
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
    let mut out = TurnCalls::default();
    let mut healthy: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut failing: BTreeMap<(&str, i32), Vec<&FailingTurn>> = BTreeMap::new();
    let mut last_call: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    let mut by_service: BTreeMap<(&str, i32), u64> = BTreeMap::new();
    for p in parts {
        for tt in &p.tool_turns {
            if tt.turn_end_ns <= settled_by_ns {
                let l = last_call.entry((&tt.tool, tt.day)).or_insert(i64::MIN);
                *l = (*l).max(tt.last_start_ns);
            }
            match &tt.failing {
                Some(f) => failing.entry((&tt.tool, tt.day)).or_default().push(&**f),
                None => {
                    let h = healthy.entry(&tt.tool).or_default();
                    h.0.push(tt.duration_s);
                    h.1.push(tt.spans);
                }
            }
        }
        for ts in &p.turn_services {
            *by_service.entry((&ts.service, ts.day)).or_insert(0) += 1;
        }
        out.calls.extend(p.calls.iter().cloned());
        out.turns
            .extend(p.turns.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.models
            .extend(p.models.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    out.calls.sort_by(|a, b| {
        (&a.turn, &a.tool, a.start_ns, &a.span_id).cmp(&(&b.turn, &b.tool, b.start_ns, &b.span_id))
    });
    out.healthy = healthy
        .into_iter()
        .map(|(tool, (d, s))| {
            let h = Healthy {
                duration_s: crate::detect::median(d),
                spans: crate::detect::median(s),
            };
            (tool.to_string(), h)
        })
        .collect();
    out.failing = failing
        .into_iter()
        .map(|((tool, day), mut turns)| {
            // Worst first; ties by turn id, so the order of rows in the parts
            // (a compaction re-sorts them) changes nothing.
            turns.sort_by(|a, b| {
                (b.failures, b.calls)
                    .cmp(&(a.failures, a.calls))
                    .then(a.turn.cmp(&b.turn))
            });
            let kept = turns.into_iter().take(WORST_TURNS).cloned().collect();
            ((tool.to_string(), day), kept)
        })
        .collect();
    out.last_call = last_call
        .into_iter()
        .map(|((tool, day), ns)| ((tool.to_string(), day), ns))
        .collect();
    out.turns_by_service = by_service
        .into_iter()
        .map(|((service, day), n)| ((service.to_string(), day), n))
        .collect();
    out
}
