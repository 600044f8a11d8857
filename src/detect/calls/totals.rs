//! The day's tables as running totals over records ([`Parts`]): what
//! [`finish`](super::finish) adds up, kept so that records added once (the
//! settled groups of `sweep::live`) are not walked again at every sweep.
//! Only additions: records taken back mean totals made again.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::parts::Parts;
use super::{Call, FailingTurn, Healthy, Turn, TurnCalls, WORST_TURNS};
use crate::detect::driver::ModelCall;

/// Per tool (then per day) a value, looked up by `&str` and keyed by the
/// records' own `Arc<str>`.
type ByTool<V> = BTreeMap<Arc<str>, V>;

/// The totals of some records of whole turns.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Per tool, the duration (s) and span count of each turn where it did
    /// not fail.
    healthy: ByTool<(Vec<f64>, Vec<f64>)>,
    /// Per tool and day, the worst failing turns so far, worst first.
    failing: ByTool<BTreeMap<i32, Vec<FailingTurn>>>,
    /// Per tool and day, the latest start of a call in a settled turn.
    last_call: ByTool<BTreeMap<i32, i64>>,
    /// Per service and day, turns begun.
    by_service: ByTool<BTreeMap<i32, u64>>,
    calls: Vec<Call>,
    turns: BTreeMap<String, Turn>,
    models: BTreeMap<String, Vec<ModelCall>>,
}

/// `map[key]`, made (with the key's `Arc` cloned) when missing.
fn slot<'m, V: Default>(map: &'m mut ByTool<V>, key: &Arc<str>) -> &'m mut V {
    if !map.contains_key(&**key) {
        map.insert(key.clone(), V::default());
    }
    map.get_mut(&**key).expect("inserted above")
}

/// Per (tool, day), from per tool then per day.
fn per_day<V>(m: ByTool<BTreeMap<i32, V>>) -> BTreeMap<(String, i32), V> {
    m.into_iter()
        .flat_map(|(tool, days)| {
            days.into_iter()
                .map(move |(day, v)| ((tool.to_string(), day), v))
        })
        .collect()
}

/// The order of a tool's failing turns: worst first (most failures, then
/// most calls); ties by turn id, so the order of rows in the parts (a
/// compaction re-sorts them) changes nothing.
fn worse(a: &FailingTurn, b: &FailingTurn) -> std::cmp::Ordering {
    (b.failures, b.calls)
        .cmp(&(a.failures, a.calls))
        .then(a.turn.cmp(&b.turn))
}

impl Totals {
    /// Add `p`'s records: a tool's traffic counted in `last_call` only
    /// from turns that ended by `settled_by_ns`.
    pub fn add(&mut self, p: &Parts, settled_by_ns: i64) {
        for tt in &p.tool_turns {
            if tt.turn_end_ns <= settled_by_ns {
                let l = slot(&mut self.last_call, &tt.tool)
                    .entry(tt.day)
                    .or_insert(i64::MIN);
                *l = (*l).max(tt.last_start_ns);
            }
            match &tt.failing {
                Some(f) => {
                    let worst = slot(&mut self.failing, &tt.tool)
                        .entry(tt.day)
                        .or_default();
                    let at = worst.partition_point(|w| worse(w, f).is_lt());
                    if at < WORST_TURNS {
                        worst.insert(at, (**f).clone());
                        worst.truncate(WORST_TURNS);
                    }
                }
                None => {
                    let h = slot(&mut self.healthy, &tt.tool);
                    h.0.push(tt.duration_s);
                    h.1.push(tt.spans);
                }
            }
        }
        for ts in &p.turn_services {
            *slot(&mut self.by_service, &ts.service)
                .entry(ts.day)
                .or_insert(0) += 1;
        }
        self.calls.extend(p.calls.iter().cloned());
        self.turns
            .extend(p.turns.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.models
            .extend(p.models.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// The day's tables.
    pub fn into_calls(self) -> TurnCalls {
        let mut calls = self.calls;
        calls.sort_by(|a, b| {
            (&a.turn, &a.tool, a.start_ns, &a.span_id)
                .cmp(&(&b.turn, &b.tool, b.start_ns, &b.span_id))
        });
        TurnCalls {
            calls,
            turns: self.turns,
            healthy: self
                .healthy
                .into_iter()
                .map(|(tool, (d, s))| {
                    let h = Healthy {
                        duration_s: crate::detect::median(d),
                        spans: crate::detect::median(s),
                    };
                    (tool.to_string(), h)
                })
                .collect(),
            failing: per_day(self.failing),
            last_call: per_day(self.last_call),
            turns_by_service: per_day(self.by_service),
            models: self.models,
        }
    }
}
