//! [`collect_table_keeping`], the kernel, as steps: the rows numbered and
//! bucketed (`numbering`), one pass over each turn's calls by tool (what is
//! repeated, healthy, failing, last called), and only then the strings of
//! the repeated calls; the records ([`Parts`]) made into the per-tool and
//! per-day tables by [`finish`].

use std::collections::HashMap;
use std::sync::Arc;

use super::numbering::{Buckets, Rows, Sessions, Turns};
use super::parts::{finish, Parts, ToolTurn, TurnService};
use super::{
    may_nest_in, stated_waits, Call, Class, FailingTurn, Fast, Hex, Keep, SpanIndex, SpanTable,
    StatedWait, Turn, TurnCalls,
};
use crate::detect::turns::{self, Anchor};
use crate::model::ErrorClass;

/// [`collect_table`](super::collect_table), building calls only for the
/// pairs `keep` names.
pub fn collect_table_keeping(t: &SpanTable, settled_by_ns: i64, keep: Keep) -> TurnCalls {
    finish([&parts(t, keep)], settled_by_ns)
}

/// The kernel's records of the turns of `t`, which must hold its turns
/// whole: [`finish`] of the parts of tables that split the spans by whole
/// turns is [`collect_table_keeping`] of them all.
pub fn parts(t: &SpanTable, keep: Keep) -> Parts {
    parts_nesting(t, keep, may_nest_in(t))
}

/// [`parts`] of some whole turns of a larger table (the day a whole read
/// takes), `nest` saying whether that table may hold one call as two
/// spans ([`may_nest_in`] of it): the records are then those the larger
/// table's would hold for these turns.
pub fn parts_nesting(t: &SpanTable, keep: Keep, nest: bool) -> Parts {
    let index = SpanIndex::new(t);
    let rows = Rows::of(t, &index, nest);
    let turns = Turns::number(t, &rows.anchors);
    let waits = stated_waits(t, &index, |i| rows.is_call(i));
    let buckets = Buckets::of(&rows, &turns);
    let sessions = Sessions::of(t, &rows.anchors, &turns);
    let scan = scan(&rows, &turns, &buckets, &sessions, keep);
    let mut out = Parts::default();
    let ids = calls(&rows, &index, &turns, &sessions, &scan, &waits, &mut out);
    out.models = crate::detect::models::of_turns(t, &index, &turns.turn_of, &ids);
    out.tool_turns = scan.tool_turns;
    out.turn_services = turn_services(&rows, &turns);
    out
}

/// Dictionary strings as shared names, each made once.
struct Names<'t> {
    t: &'t SpanTable,
    made: HashMap<u32, Arc<str>, Fast>,
}

impl Names<'_> {
    fn get(&mut self, id: u32) -> Arc<str> {
        let t = self.t;
        self.made
            .entry(id)
            .or_insert_with(|| Arc::from(t.dict.get(id).unwrap_or("")))
            .clone()
    }
}

/// What one pass over each turn's calls, by tool, found.
struct Scan {
    /// One record per turn and tool called.
    tool_turns: Vec<ToolTurn>,
    /// Per row, its place among its turn's calls by start (turns with a
    /// repeated pair only).
    seq_of: Vec<u32>,
    /// Rows of the kept (turn, tool) pairs called twice or more.
    repeated_rows: Vec<u32>,
}

/// Go over each turn's calls by tool.
fn scan(
    rows: &Rows<'_>,
    turns: &Turns,
    buckets: &Buckets,
    sessions: &Sessions,
    keep: Keep,
) -> Scan {
    let t = rows.t;
    let mut names = Names {
        t,
        made: HashMap::default(),
    };
    let mut out = Scan {
        tool_turns: Vec::new(),
        seq_of: vec![0; t.len()],
        repeated_rows: Vec::new(),
    };
    let mut by_tool: Vec<u32> = Vec::new();
    let mut turn_rows: Vec<u32> = Vec::new();
    for k in 0..turns.stats.len() {
        let calls = buckets.of_turn(k);
        if calls.is_empty() {
            continue;
        }
        by_tool.clear();
        by_tool.extend(calls.iter().copied().filter(|&i| t.tool[i as usize] != 0));
        by_tool.sort_by_key(|&i| (t.tool[i as usize], i));
        let st = turns.stats[k];
        let day = turns.day(k as u32);
        let mut repeats = false;
        let mut findable = keep == Keep::All;
        turn_rows.clear();
        for g in by_tool.chunk_by(|a, b| t.tool[*a as usize] == t.tool[*b as usize]) {
            let tool = t.tool[g[0] as usize];
            let n = g.len() as i64;
            let failures = g
                .iter()
                .filter(|&&i| rows.class_of(i as usize).failed())
                .count() as i64;
            let last = g.iter().map(|&i| t.start[i as usize]).max().unwrap_or(0);
            if n >= 2 {
                repeats = true;
                // (A call with no class counts as `unknown`, a failure, in the rules.)
                let failed =
                    |i: &u32| !matches!(rows.class_of(*i as usize), Class::Known(ErrorClass::Ok));
                findable |= g.iter().any(failed) || repeats_a_request(t, g);
                turn_rows.extend_from_slice(g);
            }
            let failing = (failures > 0).then(|| {
                Arc::new(FailingTurn {
                    turn: turns::turn_id(rows.anchors[st.row], t),
                    trace_id: t.trace_str(st.row),
                    calls: n.max(0) as usize,
                    failures: failures.max(0) as usize,
                    session_id: t.dict.get(sessions.turn[k]).map(str::to_string),
                })
            });
            out.tool_turns.push(ToolTurn {
                trace: t.trace[st.row],
                tool: names.get(tool),
                day,
                turn_end_ns: st.end_ns,
                last_start_ns: last,
                calls: n,
                failures,
                duration_s: (st.end_ns - st.start_ns) as f64 / 1e9,
                spans: st.spans as f64,
                failing,
            });
        }
        // A turn is kept whole: the rules read its other repeated calls too
        // (a read-only call between a success and its repeat).
        if findable {
            out.repeated_rows.extend_from_slice(&turn_rows);
        }
        if repeats {
            // The place of every call of the turn among its calls, by start.
            let mut order: Vec<u32> = calls.to_vec();
            order.sort_by_key(|&i| (t.start[i as usize], t.span[i as usize], i));
            for (place, &i) in order.iter().enumerate() {
                out.seq_of[i as usize] = place as u32;
            }
        }
    }
    out
}

/// Whether two of `rows` are the same request (`chains::same_args`: equal
/// arguments, or either's unknown).
fn repeats_a_request(t: &SpanTable, rows: &[u32]) -> bool {
    let mut args: Vec<Hex> = rows.iter().map(|&i| t.args.get(i as usize)).collect();
    if args.contains(&Hex::None) {
        return true;
    }
    args.sort_unstable();
    args.windows(2).any(|w| w[0] == w[1])
}

/// The repeated calls kept, and their turns, into `out`; the turn ids by
/// turn number.
fn calls(
    rows: &Rows<'_>,
    index: &SpanIndex<'_>,
    turns: &Turns,
    sessions: &Sessions,
    scan: &Scan,
    waits: &HashMap<u32, StatedWait, Fast>,
    out: &mut Parts,
) -> HashMap<u32, String, Fast> {
    let t = rows.t;
    let session = |id: u32| t.dict.get(id).map(str::to_string);
    let dict = |id: u32| t.dict.get(id).unwrap_or("").to_string();
    let mut ids: HashMap<u32, String, Fast> = HashMap::default();
    let mut repeated_rows = scan.repeated_rows.clone();
    repeated_rows.sort_unstable();
    for &i in &repeated_rows {
        let i = i as usize;
        let k = turns.turn_of[i];
        let turn_id = ids
            .entry(k)
            .or_insert_with(|| turns::turn_id(rows.anchors[i], t))
            .clone();
        if !out.turns.contains_key(&turn_id) {
            let st = turns.stats[k as usize];
            out.turn_traces.insert(turn_id.clone(), t.trace[st.row]);
            // The newest span end of the turn's trace, for settling.
            let last_end = index
                .trace_rows(st.row)
                .iter()
                .map(|&r| t.end[r as usize])
                .max()
                .unwrap_or(st.end_ns);
            out.turns.insert(
                turn_id.clone(),
                Turn {
                    trace_id: t.trace_str(st.row),
                    start_ns: st.start_ns,
                    began_ns: st.began_ns,
                    end_ns: st.end_ns,
                    spans: st.spans,
                    last_end_ns: last_end,
                    session_id: session(sessions.turn[k as usize]),
                },
            );
        }
        // The anchor's session, else the call's own, else any of the turn's.
        let own_session = match (sessions.anchor[k as usize], t.session[i]) {
            (0, 0) => sessions.turn[k as usize],
            (0, s) | (s, _) => s,
        };
        out.calls.push(Call {
            turn: turn_id,
            trace_id: t.trace_str(i),
            span_id: t.span_str(i),
            parent_span_id: t.parent_str(i),
            tool: dict(t.tool[i]),
            service: dict(t.service[i]),
            start_ns: t.start[i],
            end_ns: t.end[i],
            class: rows.class_of(i).class(),
            args_hash: t.hex_str(t.args.get(i)),
            result_hash: t.hex_str(t.result.get(i)),
            session_id: session(own_session),
            cost_usd: t.cost_of(i),
            seq: scan.seq_of[i],
            retry_after_ms: waits.get(&(i as u32)).map(|w| w.ms),
            wait_from_ns: waits.get(&(i as u32)).map(|w| w.from_ns),
        });
    }
    ids
}

/// Per turn, the service of its anchor and the day it began.
fn turn_services(rows: &Rows<'_>, turns: &Turns) -> Vec<TurnService> {
    let t = rows.t;
    let mut names = Names {
        t,
        made: HashMap::default(),
    };
    turns
        .stats
        .iter()
        .map(|st| {
            let anchor = match rows.anchors[st.row] {
                Anchor::Row(r) => r,
                Anchor::AgentCall(_) => st.row,
            };
            TurnService {
                trace: t.trace[st.row],
                service: names.get(t.service[anchor]),
                day: crate::model::day_of_ns(st.began_ns),
            }
        })
        .collect()
}
