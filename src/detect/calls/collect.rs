//! [`collect_table_keeping`], the kernel, as steps: the rows numbered and
//! bucketed (`numbering`), one pass over each turn's calls by tool (what is
//! repeated, healthy, failing, last called), and only then the strings of
//! the repeated calls and the per-tool and per-day tables.

use std::collections::HashMap;

use super::numbering::{Buckets, Rows, Sessions, Turns};
use super::{
    stated_waits, Call, Class, FailingTurn, Fast, Healthy, Hex, Keep, SpanIndex, SpanTable,
    StatedWait, Turn, TurnCalls, WORST_TURNS,
};
use crate::detect::turns::{self, Anchor};
use crate::model::ErrorClass;

/// [`collect_table`](super::collect_table), building calls only for the
/// pairs `keep` names.
pub fn collect_table_keeping(t: &SpanTable, settled_by_ns: i64, keep: Keep) -> TurnCalls {
    let index = SpanIndex::new(t);
    let rows = Rows::of(t, &index);
    let turns = Turns::number(t, &rows.anchors);
    let waits = stated_waits(t, &index, |i| rows.is_call(i));
    let buckets = Buckets::of(&rows, &turns);
    let scan = scan(&rows, &turns, &buckets, keep, settled_by_ns);
    let sessions = Sessions::of(t, &rows.anchors, &turns);
    let mut out = TurnCalls::default();
    let ids = calls(&rows, &index, &turns, &sessions, &scan, &waits, &mut out);
    out.models = crate::detect::models::of_turns(t, &index, &turns.turn_of, &ids);
    let dict = |id: u32| t.dict.get(id).unwrap_or("").to_string();
    out.failing = failing(&rows, &turns, &sessions, scan.worst);
    out.last_call = scan
        .last_call
        .into_iter()
        .map(|((tool, day), ns)| ((dict(tool), day), ns))
        .collect();
    out.turns_by_service = turns_by_service(&rows, &turns);
    out.calls.sort_by(|a, b| {
        (&a.turn, &a.tool, a.start_ns, &a.span_id).cmp(&(&b.turn, &b.tool, b.start_ns, &b.span_id))
    });
    out.healthy = scan
        .healthy
        .into_iter()
        .map(|(tool, (d, s))| {
            (
                dict(tool),
                Healthy {
                    duration_s: crate::detect::median(d),
                    spans: crate::detect::median(s),
                },
            )
        })
        .collect();
    out
}

/// (tool, day) → (failures, calls, turn number) of the turns it failed in.
type Worst = HashMap<(u32, i32), Vec<(i64, i64, u32)>, Fast>;

/// What one pass over each turn's calls, by tool, found.
struct Scan {
    /// (tool, day) → the latest start of a call of it in a settled turn.
    last_call: HashMap<(u32, i32), i64, Fast>,
    worst: Worst,
    /// Per tool, the durations (s) and span counts of the turns that called
    /// it and saw no failure of it.
    healthy: HashMap<u32, (Vec<f64>, Vec<f64>), Fast>,
    /// Per row, its place among its turn's calls by start (turns with a
    /// repeated pair only).
    seq_of: Vec<u32>,
    /// Rows of the kept (turn, tool) pairs called twice or more.
    repeated_rows: Vec<u32>,
}

/// Go over each turn's calls by tool.
fn scan(rows: &Rows<'_>, turns: &Turns, buckets: &Buckets, keep: Keep, settled_by_ns: i64) -> Scan {
    let t = rows.t;
    let mut out = Scan {
        last_call: HashMap::default(),
        worst: Worst::default(),
        healthy: HashMap::default(),
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
            if st.end_ns <= settled_by_ns {
                let l = out.last_call.entry((tool, day)).or_insert(i64::MIN);
                *l = (*l).max(last);
            }
            if failures > 0 {
                out.worst
                    .entry((tool, day))
                    .or_default()
                    .push((failures, n, k as u32));
            } else {
                let h = out.healthy.entry(tool).or_default();
                h.0.push((st.end_ns - st.start_ns) as f64 / 1e9);
                h.1.push(st.spans as f64);
            }
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
    out: &mut TurnCalls,
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

/// Per (tool, day), the turns it failed most in, worst first.
fn failing(
    rows: &Rows<'_>,
    turns: &Turns,
    sessions: &Sessions,
    worst: Worst,
) -> std::collections::BTreeMap<(String, i32), Vec<FailingTurn>> {
    let t = rows.t;
    let mut out = std::collections::BTreeMap::new();
    for ((tool, day), turns_) in worst {
        // Worst first; ties by turn id, so the order of rows in the parts
        // (a compaction re-sorts them) changes nothing.
        let mut turns_: Vec<(i64, i64, u32, String)> = turns_
            .into_iter()
            .map(|(f, c, k)| {
                let anchor = rows.anchors[turns.stats[k as usize].row];
                (f, c, k, turns::turn_id(anchor, t))
            })
            .collect();
        turns_.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.3.cmp(&b.3)));
        let kept = turns_
            .into_iter()
            .take(WORST_TURNS)
            .map(|(failures, calls, k, turn)| {
                let row = turns.stats[k as usize].row;
                FailingTurn {
                    turn,
                    trace_id: t.trace_str(row),
                    calls: calls.max(0) as usize,
                    failures: failures.max(0) as usize,
                    session_id: t.dict.get(sessions.turn[k as usize]).map(str::to_string),
                }
            })
            .collect();
        out.insert((t.dict.get(tool).unwrap_or("").to_string(), day), kept);
    }
    out
}

/// Per (service of the turn's anchor, day it began), the turns.
fn turns_by_service(
    rows: &Rows<'_>,
    turns: &Turns,
) -> std::collections::BTreeMap<(String, i32), u64> {
    let t = rows.t;
    let mut by_service: HashMap<(u32, i32), u64, Fast> = HashMap::default();
    for st in &turns.stats {
        let anchor = match rows.anchors[st.row] {
            Anchor::Row(r) => r,
            Anchor::AgentCall(_) => st.row,
        };
        let day = crate::model::day_of_ns(st.began_ns);
        *by_service.entry((t.service[anchor], day)).or_insert(0) += 1;
    }
    by_service
        .into_iter()
        .map(|((service, day), n)| ((t.dict.get(service).unwrap_or("").to_string(), day), n))
        .collect()
}
