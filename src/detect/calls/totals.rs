//! The day's tables as running totals over records ([`Parts`]): what
//! [`finish`](super::finish) adds up, kept so that records added once (the
//! settled groups of `sweep::live`) need not be kept: only what the tables
//! are made from is. Records can be taken back out ([`Totals::remove`]):
//! every total keeps what it needs for that (each sample, each failing
//! turn, each last call), and is reduced to the tables' values only at the
//! end ([`Totals::into_calls`], of a copy at each sweep).

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

/// Take one `v` out of `values` (any order kept); whether it was there.
fn take_one<T: PartialEq>(values: Option<&mut Vec<T>>, v: &T) -> bool {
    let Some(values) = values else { return false };
    match values.iter().position(|x| x == v) {
        Some(i) => {
            values.swap_remove(i);
            true
        }
        None => false,
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
    /// `settled_by_ns` (or one by which the same turns had ended); whether
    /// every one of them was found (if not, the totals no longer mean
    /// anything: make them again).
    pub fn remove(&mut self, p: &Parts, settled_by_ns: i64) -> bool {
        let mut found = true;
        for tt in &p.tool_turns {
            if tt.turn_end_ns <= settled_by_ns {
                let days = self.last_call.get_mut(&*tt.tool);
                found &= take_one(days.and_then(|d| d.get_mut(&tt.day)), &tt.last_start_ns);
            }
            match &tt.failing {
                Some(f) => {
                    let w = Worst(f.clone());
                    let set = self
                        .failing
                        .get_mut(&*tt.tool)
                        .and_then(|d| d.get_mut(&tt.day));
                    match set {
                        Some(set) => match set.get_mut(&w) {
                            Some(n) if *n > 1 => *n -= 1,
                            Some(_) => {
                                set.remove(&w);
                            }
                            None => found = false,
                        },
                        None => found = false,
                    }
                }
                None => {
                    let h = self.healthy.get_mut(&*tt.tool);
                    let (d, s) = match h {
                        Some(h) => (Some(&mut h.0), Some(&mut h.1)),
                        None => (None, None),
                    };
                    found &= take_one(d, &tt.duration_s);
                    found &= take_one(s, &tt.spans);
                }
            }
        }
        for ts in &p.turn_services {
            let n = self
                .by_service
                .get_mut(&*ts.service)
                .and_then(|d| d.get_mut(&ts.day));
            match n {
                Some(n) if *n > 0 => *n -= 1,
                _ => found = false,
            }
        }
        if !p.turns.is_empty() {
            let before = self.calls.len();
            self.calls.retain(|c| !p.turns.contains_key(&c.turn));
            found &= before - self.calls.len() == p.calls.len();
        }
        for id in p.turns.keys() {
            found &= self.turns.remove(id).is_some();
        }
        for id in p.models.keys() {
            found &= self.models.remove(id).is_some();
        }
        found
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

#[cfg(test)]
mod tests {
    use super::super::{parts, Keep};
    use super::*;
    use crate::spans::SpanTable;
    use polars::prelude::*;

    /// Spans of `traces` traces, each a root agent span and tool calls,
    /// some failing, some repeated with the same arguments; ties in the
    /// failing turns' order on purpose (equal failures and calls).
    fn table(traces: std::ops::Range<u64>) -> SpanTable {
        let (mut trace, mut span, mut parent) = (vec![], vec![], vec![]);
        let (mut start, mut end, mut agent, mut tool_call) = (vec![], vec![], vec![], vec![]);
        let (mut tool, mut class, mut args) = (vec![], vec![], vec![]);
        for t in traces {
            let tid = format!("{t:032x}");
            let t0 = 1_000_000_000_000 + t as i64 * 10_000_000_000;
            trace.push(tid.clone());
            span.push(format!("{:016x}", t * 100));
            parent.push(None::<String>);
            start.push(t0);
            end.push(t0 + 9_000_000_000);
            agent.push(true);
            tool_call.push(false);
            tool.push(None::<String>);
            class.push(None::<String>);
            args.push(None::<String>);
            for k in 0..(2 + t % 3) {
                trace.push(tid.clone());
                span.push(format!("{:016x}", t * 100 + k + 1));
                parent.push(Some(format!("{:016x}", t * 100)));
                start.push(t0 + k as i64 * 1_000_000_000);
                end.push(t0 + k as i64 * 1_000_000_000 + 500_000_000);
                agent.push(false);
                tool_call.push(true);
                tool.push(Some(if t % 2 == 0 { "search" } else { "book" }.to_string()));
                let failed = t % 4 < 2 && k < 2;
                class.push(Some(if failed { "timeout" } else { "ok" }.to_string()));
                args.push(Some(format!("{:032x}", t % 5)));
            }
        }
        let df = df!(
            "trace_id" => trace, "span_id" => span, "parent_span_id" => parent,
            "start_ns" => start, "end_ns" => end, "is_agent" => agent,
            "is_tool_call" => tool_call, "tool_name" => tool, "error_class" => class,
            "tool_args_hash" => args,
        )
        .unwrap();
        SpanTable::from_frame(&df).unwrap()
    }

    #[test]
    fn records_taken_out_leave_the_totals_of_the_rest() {
        let a = parts(&table(0..40), Keep::Findable);
        let b = parts(&table(40..90), Keep::Findable);
        assert!(!a.calls.is_empty() && !b.calls.is_empty());
        let settled = i64::MAX;
        let mut both = Totals::default();
        both.add(&a, settled);
        both.add(&b, settled);
        let whole = super::super::finish([&a, &b], settled);
        assert_eq!(both.clone().into_calls(), whole);
        assert!(both.remove(&a, settled), "every record of a was in");
        assert_eq!(
            both.clone().into_calls(),
            super::super::finish([&b], settled)
        );
        // Taking out what is no longer there says so.
        assert!(!both.remove(&a, settled));
        let mut none = Totals::default();
        none.add(&b, settled);
        assert!(none.remove(&b, settled));
        assert_eq!(none.into_calls(), super::super::finish([], settled));
    }
}
