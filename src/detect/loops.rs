//! Tool loops (detection.md §4.7): a turn that keeps calling a tool when
//! nothing fails — the same tool with the same arguments `loop_min_calls`
//! times or more, getting the same result each time where results are
//! recorded (back to back where they are not); or a cycle over (tool, arguments) of period 2 to
//! `cycle_max_period` (A B A B A B) run `cycle_min_repeats` times or more
//! back to back. Polling (the same request with growing gaps, or a result
//! that keeps changing) is the agent waiting and is exempt. Deterministic:
//! hashes and counts, no model.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::calls::{Call, TurnCalls};
use super::chains::{polling, Attempt};
use crate::model::day_of_ns;

/// `[detect.tool_loop]` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopParams {
    /// Successful calls of one tool with the same arguments in one turn.
    pub loop_min_calls: usize,
    /// A cycle must run at least this many times back to back …
    pub cycle_min_repeats: usize,
    /// … over at most this many distinct (tool, arguments) steps.
    pub cycle_max_period: usize,
}

impl Default for LoopParams {
    fn default() -> Self {
        LoopParams {
            loop_min_calls: 5,
            cycle_min_repeats: 3,
            cycle_max_period: 4,
        }
    }
}

/// One loop: a turn repeating itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLoop {
    /// The tool (for a cycle, its first step's).
    pub tool: String,
    /// The steps' tools, in order: one for a plain repeat, 2..=4 for a cycle.
    pub steps: Vec<String>,
    pub service: String,
    pub turn: String,
    pub trace_id: String,
    pub session_id: Option<String>,
    /// UTC day the turn began.
    pub day: i32,
    /// Calls in the loop, and how many times it ran (calls / steps).
    pub calls: usize,
    pub repeats: usize,
    /// Every call's result was recorded (and they repeat).
    pub results_known: bool,
    /// Durations of the repeats after the first run, and the gaps before them.
    pub wasted_seconds: f64,
    pub first_start_ns: i64,
    pub last_end_ns: i64,
    pub turn_duration_s: f64,
    pub turn_spans: usize,
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
}

/// Every loop among settled turns, most calls first.
pub fn tool_loops(
    tc: &TurnCalls,
    now_ns: i64,
    settle_seconds: i64,
    growth: f64,
    p: &LoopParams,
) -> Vec<ToolLoop> {
    let mut by_turn: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for c in &tc.calls {
        by_turn.entry(c.turn.as_str()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (turn_id, mut calls) in by_turn {
        let Some(turn) = tc.turns.get(turn_id) else {
            continue;
        };
        if !turn.settled(now_ns, settle_seconds) {
            continue;
        }
        calls.sort_by_key(|c| (c.seq, c.start_ns));
        let mut found: Vec<(Vec<&Call>, usize)> = Vec::new();
        let mut in_cycle: BTreeSet<&str> = BTreeSet::new();
        for (members, period) in cycles(&calls, p) {
            in_cycle.extend(members.iter().map(|c| c.tool.as_str()));
            found.push((members, period));
        }
        // Plain repeats: (tool, arguments) → successful calls.
        let mut requests: BTreeMap<(&str, &str), Vec<&Call>> = BTreeMap::new();
        for c in calls.iter().filter(|c| !c.failed()) {
            if let Some(args) = c.args_hash.as_deref() {
                requests.entry((c.tool.as_str(), args)).or_default().push(c);
            }
        }
        for ((tool, _), members) in requests {
            if members.len() < p.loop_min_calls || in_cycle.contains(tool) {
                continue;
            }
            let results: Vec<Option<&str>> =
                members.iter().map(|c| c.result_hash.as_deref()).collect();
            let recorded: Vec<&str> = results.iter().flatten().copied().collect();
            if recorded.windows(2).any(|w| w[0] != w[1]) {
                continue; // a different answer: the agent is not repeating itself
            }
            let attempts: Vec<Attempt<'_>> = members.iter().map(|c| c.attempt()).collect();
            if polling(&attempts, growth) {
                continue;
            }
            // Without results, only back-to-back repeats are a loop: the
            // same command run after each edit is a coding agent working.
            let members = if recorded.len() == members.len() {
                members
            } else {
                let mut best: &[&Call] = &[];
                for run in members.chunk_by(|a, b| b.seq == a.seq + 1) {
                    if run.len() > best.len() {
                        best = run;
                    }
                }
                best.to_vec()
            };
            if members.len() < p.loop_min_calls {
                continue;
            }
            found.push((members, 1));
        }
        let h = |tool: &str| tc.healthy.get(tool).copied().unwrap_or_default();
        for (members, period) in found {
            let first = members[0];
            let steps: Vec<String> = members[..period].iter().map(|c| c.tool.clone()).collect();
            let mut wasted_ns = 0i64;
            for k in period..members.len() {
                let prev_end = members[k - 1].end_ns;
                let c = members[k];
                wasted_ns += (c.start_ns - prev_end).max(0) + (c.end_ns - c.start_ns);
            }
            let healthy = h(&first.tool);
            out.push(ToolLoop {
                tool: first.tool.clone(),
                steps,
                service: first.service.clone(),
                turn: turn_id.to_string(),
                trace_id: first.trace_id.clone(),
                session_id: members
                    .iter()
                    .find_map(|c| c.session_id.clone())
                    .or_else(|| turn.session_id.clone()),
                day: day_of_ns(turn.began_ns),
                calls: members.len(),
                repeats: members.len() / period,
                results_known: members.iter().all(|c| c.result_hash.is_some()),
                wasted_seconds: wasted_ns as f64 / 1e9,
                first_start_ns: first.start_ns,
                last_end_ns: members
                    .iter()
                    .map(|c| c.end_ns)
                    .max()
                    .unwrap_or(first.end_ns),
                turn_duration_s: turn.duration_ns() as f64 / 1e9,
                turn_spans: turn.spans,
                healthy_turn_duration_s: healthy.duration_s,
                healthy_turn_spans: healthy.spans,
            });
        }
    }
    out.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| a.turn.cmp(&b.turn))
            .then_with(|| a.first_start_ns.cmp(&b.first_start_ns))
    });
    out
}

/// Cycles of period 2..=max among one turn's calls (in turn order, with
/// their places): runs of adjacent calls where each repeats the call one
/// period before it — same tool, same (known) arguments, same result where
/// both are recorded, nothing failing — long enough for `cycle_min_repeats`
/// whole cycles of distinct steps. The longest, lowest-period run wins; runs
/// do not overlap.
fn cycles<'a>(calls: &[&'a Call], p: &LoopParams) -> Vec<(Vec<&'a Call>, usize)> {
    let same = |a: &Call, b: &Call| {
        a.tool == b.tool
            && a.args_hash.is_some()
            && a.args_hash == b.args_hash
            && !a.failed()
            && !b.failed()
            && match (&a.result_hash, &b.result_hash) {
                (Some(x), Some(y)) => x == y,
                _ => true,
            }
    };
    let adjacent = |i: usize| calls[i + 1].seq == calls[i].seq + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < calls.len() {
        let mut best: Option<(usize, usize)> = None; // (period, run end)
        for period in 2..=p.cycle_max_period.max(2) {
            // The steps of one cycle: distinct, adjacent.
            if i + period > calls.len() || !(i..i + period - 1).all(adjacent) {
                continue;
            }
            let steps = &calls[i..i + period];
            // Distinct steps by (tool, arguments): a poll answering a, b, a, b
            // is one step, not a cycle.
            fn step(c: &Call) -> (&str, Option<&str>) {
                (c.tool.as_str(), c.args_hash.as_deref())
            }
            let distinct =
                (0..period).all(|a| (a + 1..period).all(|b| step(steps[a]) != step(steps[b])));
            if !distinct || steps.iter().any(|c| c.args_hash.is_none() || c.failed()) {
                continue;
            }
            let mut end = i + period;
            while end < calls.len() && adjacent(end - 1) && same(calls[end - period], calls[end]) {
                end += 1;
            }
            let whole = (end - i) / period;
            if whole >= p.cycle_min_repeats && best.is_none_or(|(_, e)| end > e) {
                best = Some((period, i + whole * period));
            }
        }
        match best {
            Some((period, end)) => {
                out.push((calls[i..end].to_vec(), period));
                i = end;
            }
            None => i += 1,
        }
    }
    out
}
