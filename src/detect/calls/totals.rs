//! The day's tables as running totals over records ([`Parts`]): what
//! [`finish`](super::finish) adds up, kept so that records added once (the
//! settled groups of `sweep::live`) need not be kept or walked again at
//! every sweep. Records can be taken back out ([`Totals::remove`]): every
//! total keeps what it needs for that (each sample, each failing turn,
//! each last call), and is reduced to the table's value only at the end.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::parts::Parts;
use super::{Call, FailingTurn, Healthy, Turn, TurnCalls, WORST_TURNS};
use crate::detect::driver::ModelCall;

/// Per tool (then per day) a value, looked up by `&str` and keyed by the
/// records' own `Arc<str>`.
type ByTool<V> = BTreeMap<Arc<str>, V>;

/// A failing turn in the order the table lists them: worst first (most
/// failures, then most calls); ties by turn id, so the order of rows in
/// the parts (a compaction re-sorts them) changes nothing.
#[derive(Debug, Clone)]
struct Worst(Arc<FailingTurn>);

impl Ord for Worst {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let (a, b) = (&self.0, &other.0);
        (b.failures, b.calls)
            .cmp(&(a.failures, a.calls))
            .then(a.turn.cmp(&b.turn))
            .then_with(|| a.cmp_rest(b))
    }
}

impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Worst {}

impl FailingTurn {
    /// The fields the table's order leaves out, compared (so two turns
    /// equal in that order are told apart, as a sort would keep both).
    fn cmp_rest(&self, o: &FailingTurn) -> std::cmp::Ordering {
        (&self.trace_id, &self.session_id).cmp(&(&o.trace_id, &o.session_id))
    }
}

/// The totals of some records of whole turns.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Per tool, the duration (s) and span count of each turn where it did
    /// not fail.
    healthy: ByTool<(Vec<f64>, Vec<f64>)>,
    /// Per tool and day, its failing turns (how many of each), worst first.
    failing: ByTool<BTreeMap<i32, BTreeMap<Worst, usize>>>,
    /// Per tool and day, the latest start of a call in each settled turn.
    last_call: ByTool<BTreeMap<i32, Vec<i64>>>,
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

/// Take one `v` out of `values` (any order kept), if it is there.
fn take_one<T: PartialEq>(values: &mut Vec<T>, v: &T) {
    if let Some(i) = values.iter().position(|x| x == v) {
        values.swap_remove(i);
    }
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

/// [`per_day`], leaving out the totals that came to nothing.
fn nonempty<V>(m: ByTool<BTreeMap<i32, Option<V>>>) -> BTreeMap<(String, i32), V> {
    per_day(m)
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

impl Totals {
    /// Add `p`'s records: a tool's traffic counted in `last_call` only
    /// from turns that ended by `settled_by_ns`.
    pub fn add(&mut self, p: &Parts, settled_by_ns: i64) {
        for tt in &p.tool_turns {
            if tt.turn_end_ns <= settled_by_ns {
                slot(&mut self.last_call, &tt.tool)
                    .entry(tt.day)
                    .or_default()
                    .push(tt.last_start_ns);
            }
            match &tt.failing {
                Some(f) => {
                    *slot(&mut self.failing, &tt.tool)
                        .entry(tt.day)
                        .or_default()
                        .entry(Worst(f.clone()))
                        .or_insert(0) += 1;
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

    /// Take out records added by [`Totals::add`] with the same
    /// `settled_by_ns` (or one by which the same turns had ended).
    pub fn remove(&mut self, p: &Parts, settled_by_ns: i64) {
        for tt in &p.tool_turns {
            if tt.turn_end_ns <= settled_by_ns {
                if let Some(v) = self
                    .last_call
                    .get_mut(&*tt.tool)
                    .and_then(|d| d.get_mut(&tt.day))
                {
                    take_one(v, &tt.last_start_ns);
                }
            }
            match &tt.failing {
                Some(f) => {
                    let set = self
                        .failing
                        .get_mut(&*tt.tool)
                        .and_then(|d| d.get_mut(&tt.day));
                    if let Some(set) = set {
                        let w = Worst(f.clone());
                        if let Some(n) = set.get_mut(&w) {
                            *n -= 1;
                            if *n == 0 {
                                set.remove(&w);
                            }
                        }
                    }
                }
                None => {
                    if let Some(h) = self.healthy.get_mut(&*tt.tool) {
                        take_one(&mut h.0, &tt.duration_s);
                        take_one(&mut h.1, &tt.spans);
                    }
                }
            }
        }
        for ts in &p.turn_services {
            if let Some(n) = self
                .by_service
                .get_mut(&*ts.service)
                .and_then(|d| d.get_mut(&ts.day))
            {
                *n -= 1;
            }
        }
        if !p.turns.is_empty() {
            self.calls.retain(|c| !p.turns.contains_key(&c.turn));
        }
        for id in p.turns.keys() {
            self.turns.remove(id);
        }
        for id in p.models.keys() {
            self.models.remove(id);
        }
    }

    /// The day's tables.
    pub fn into_calls(self) -> TurnCalls {
        let mut calls = self.calls;
        calls.sort_by(|a, b| {
            (&a.turn, &a.tool, a.start_ns, &a.span_id)
                .cmp(&(&b.turn, &b.tool, b.start_ns, &b.span_id))
        });
        let worst = self.failing.into_iter().map(|(tool, days)| {
            let days = days.into_iter().map(|(day, set)| {
                let kept: Vec<FailingTurn> = set
                    .into_iter()
                    .flat_map(|(w, n)| std::iter::repeat_n(w.0, n))
                    .take(WORST_TURNS)
                    .map(|f| (*f).clone())
                    .collect();
                (day, (!kept.is_empty()).then_some(kept))
            });
            (tool, days.collect())
        });
        let last = self.last_call.into_iter().map(|(tool, days)| {
            let days = days.into_iter().map(|(day, v)| (day, v.into_iter().max()));
            (tool, days.collect())
        });
        let services = self.by_service.into_iter().map(|(s, days)| {
            let days = days.into_iter().map(|(day, n)| (day, (n > 0).then_some(n)));
            (s, days.collect())
        });
        TurnCalls {
            calls,
            turns: self.turns,
            healthy: self
                .healthy
                .into_iter()
                .filter(|(_, (d, _))| !d.is_empty())
                .map(|(tool, (d, s))| {
                    let h = Healthy {
                        duration_s: crate::detect::median(d),
                        spans: crate::detect::median(s),
                    };
                    (tool.to_string(), h)
                })
                .collect(),
            failing: nonempty(worst.collect()),
            last_call: nonempty(last.collect()),
            turns_by_service: nonempty(services.collect()),
            models: self.models,
        }
    }
}
