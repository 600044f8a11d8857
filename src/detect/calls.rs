//! Tool calls grouped by turn, and what each turn looked like as a whole
//! (duration, span count), from a frame of stored spans. Counting calls per
//! (turn, tool) is `queries/turn_tool_calls.sql`; only the pairs it finds
//! repeated become [`Call`]s, so a day of a million calls costs a group-by,
//! not a million small allocations.

use std::collections::{BTreeMap, HashMap, HashSet};

use polars::prelude::*;
use polars::sql::SQLContext;

use super::turns::{self, Anchor};
use crate::model::ErrorClass;

/// The query, as shipped in `queries/`.
pub const TURN_TOOL_CALLS_SQL: &str = include_str!("../../queries/turn_tool_calls.sql");

type Fast = foldhash::fast::RandomState;

/// One tool call, with the turn it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub turn: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub tool: String,
    pub service: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub class: ErrorClass,
    pub args_hash: Option<String>,
    pub result_hash: Option<String>,
    /// The call's session, else its turn's (an agent span often carries
    /// `session.id` where the tool spans do not).
    pub session_id: Option<String>,
    /// What the call cost, when its span says.
    pub cost_usd: Option<f64>,
    /// Its place among all the turn's tool calls (any tool), in start order:
    /// two calls are adjacent in the turn when their places are.
    pub seq: u32,
}

impl Call {
    pub fn failed(&self) -> bool {
        self.class.is_error()
    }

    /// The call as the chain rules see it.
    pub fn attempt(&self) -> super::chains::Attempt<'_> {
        super::chains::Attempt {
            class: self.class,
            args: self.args_hash.as_deref(),
            result: self.result_hash.as_deref(),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
        }
    }
}

/// A turn as a whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub trace_id: String,
    /// When the turn began: its anchor span's start (the agent span or the
    /// root; for an agent call id, its first span). Its UTC day is the day
    /// the turn's findings belong to.
    pub began_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub spans: usize,
    /// The newest end of any span of the turn's trace, for settling.
    pub last_end_ns: i64,
    /// The session of the turn's agent span (or root), else of any of its spans.
    pub session_id: Option<String>,
}

impl Turn {
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }

    /// No span of the turn's trace ended within `settle_seconds` of `now_ns`.
    pub fn settled(&self, now_ns: i64, settle_seconds: i64) -> bool {
        now_ns.saturating_sub(self.last_end_ns) >= settle_seconds.saturating_mul(1_000_000_000)
    }
}

/// Calls grouped by (turn, tool), groups in (turn, tool) order, each in
/// start order. `calls` as [`collect`] leaves them needs no sorting.
pub fn by_turn_and_tool(calls: &[Call]) -> Vec<((&str, &str), Vec<&Call>)> {
    fn key<'a>(c: &&'a Call) -> (&'a str, &'a str, i64) {
        (c.turn.as_str(), c.tool.as_str(), c.start_ns)
    }
    let mut refs: Vec<&Call> = calls.iter().collect();
    if !refs.is_sorted_by(|a, b| key(a) <= key(b)) {
        refs.sort_by(|a, b| key(a).cmp(&key(b)));
    }
    refs.chunk_by(|a, b| a.turn == b.turn && a.tool == b.tool)
        .map(|g| ((g[0].turn.as_str(), g[0].tool.as_str()), g.to_vec()))
        .collect()
}

/// The columns [`collect`] reads (`cost_usd` and `tool_result_hash` only
/// when present).
pub const COLUMNS: [&str; 16] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "is_agent",
    "agent_call_id",
    "start_ns",
    "end_ns",
    "is_tool_call",
    "tool_name",
    "service_name",
    "error_class",
    "tool_args_hash",
    "tool_result_hash",
    "session_id",
    "tool_convention",
    "cost_usd",
];

/// A tool's median healthy turn: turns that called it and saw no failure of it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Healthy {
    pub duration_s: Option<f64>,
    pub spans: Option<f64>,
}

/// What the per-turn rules read: the repeated calls, their turns, and each
/// tool's healthy yardstick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnCalls {
    /// Calls of (turn, tool) pairs with two calls or more, in (turn, tool,
    /// start) order. A tool called once in a turn cannot be retried there.
    pub calls: Vec<Call>,
    /// The turns of those calls, by turn id.
    pub turns: BTreeMap<String, Turn>,
    /// Per tool, over every turn that called it.
    pub healthy: BTreeMap<String, Healthy>,
    /// Per (tool, UTC day the turn began), the turns where the tool failed
    /// most (at most [`WORST_TURNS`]), worst first: a spike's evidence.
    pub failing: BTreeMap<(String, i32), Vec<FailingTurn>>,
    /// Per (tool, UTC day the turn began), the latest start of a call of it
    /// in a settled turn: how far the tool's judged traffic reached, for
    /// resolving per-turn signals.
    pub last_call: BTreeMap<(String, i32), i64>,
}

/// How many failing turns per tool and day are kept.
pub const WORST_TURNS: usize = 5;

/// A turn in which a tool failed.
#[derive(Debug, Clone, PartialEq)]
pub struct FailingTurn {
    pub turn: String,
    pub trace_id: String,
    pub calls: usize,
    pub failures: usize,
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct TurnStat {
    row: usize,
    /// When the turn began: its anchor span's start (else its first span's).
    began_ns: i64,
    start_ns: i64,
    end_ns: i64,
    spans: usize,
}

/// Tool calls and turns of `df`, which holds at least [`COLUMNS`]. A tool
/// span nested in a tool span of the same tool that it overlaps (an MCP
/// client/server pair, a framework's wrapper) counts as a span of the turn,
/// not as a second call; a failure seen only on the inner span fails the
/// outer one.
pub fn collect(df: &DataFrame) -> PolarsResult<TurnCalls> {
    collect_settled(df, i64::MAX)
}

/// [`collect`], counting in `last_call` only the turns whose spans all
/// ended by `settled_by_ns` (a turn still running is not yet quiet traffic).
pub fn collect_settled(df: &DataFrame, settled_by_ns: i64) -> PolarsResult<TurnCalls> {
    let anchors = turns::anchors(df)?;
    // Nested duplicates need the ids of every tool row: looked for only
    // where one call can be two spans (an MCP span, or two conventions), as
    // the rollup does, so both count alike.
    let nested = if crate::store::rollup::may_nest(df)? {
        crate::store::rollup::nested_duplicates(df)?
    } else {
        vec![None; df.height()]
    };
    let class_col = df.column("error_class")?.str()?;
    // The class each call counts with: its own, or its inner duplicate's failure.
    let mut class_of: Vec<Option<&str>> = class_col.iter().collect();
    for (i, p) in nested.iter().enumerate() {
        if let Some(p) = *p {
            if crate::store::rollup::takes_inner_class(class_of[p], class_col.get(i)) {
                class_of[p] = class_col.get(i);
            }
        }
    }
    let trace = df.column("trace_id")?.str()?;
    let span = df.column("span_id")?.str()?;
    let start = df.column("start_ns")?.i64()?;
    let end = df.column("end_ns")?.i64()?;
    let is_tool = df.column("is_tool_call")?.bool()?;

    // Number the turns densely; a turn's extent and span count as we go.
    // Most anchors are rows, numbered through a table, not a hash.
    let mut by_row: Vec<u32> = vec![u32::MAX; df.height()];
    let mut by_call: HashMap<&str, u32, Fast> = HashMap::default();
    let mut stats: Vec<TurnStat> = Vec::new();
    let mut turn_of: Vec<u32> = Vec::with_capacity(df.height());
    for (i, (anchor, (s, e))) in anchors.iter().zip(start.iter().zip(end.iter())).enumerate() {
        let (s, e) = (s.unwrap_or(0), e.unwrap_or(0));
        let slot = match anchor {
            Anchor::Row(r) => &mut by_row[*r],
            Anchor::AgentCall(c) => by_call.entry(c).or_insert(u32::MAX),
        };
        if *slot == u32::MAX {
            *slot = stats.len() as u32;
            let began = match anchor {
                Anchor::Row(r) => start.get(*r).unwrap_or(s),
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
        let n = *slot;
        let st = &mut stats[n as usize];
        st.start_ns = st.start_ns.min(s);
        if matches!(anchor, Anchor::AgentCall(_)) {
            st.began_ns = st.began_ns.min(s);
        }
        st.end_ns = st.end_ns.max(e);
        st.spans += 1;
        turn_of.push(n);
    }
    let is_call: BooleanChunked = (0..df.height())
        .map(|i| is_tool.get(i) == Some(true) && nested[i].is_none())
        .collect();

    // Calls and failures per (turn, tool), by the shipped query.
    let turn_col = Column::new("turn".into(), &turn_of);
    let merged_class = Column::new("error_class".into(), &class_of);
    let rows = df
        .select(["tool_name", "start_ns"])?
        .hstack(&[merged_class, turn_col])?
        .filter(&is_call)?;
    let mut ctx = SQLContext::new();
    ctx.register("calls", rows.lazy());
    let pairs = ctx.execute(TURN_TOOL_CALLS_SQL)?.collect()?;
    let p_turn = pairs.column("turn")?.u32()?;
    let p_tool = pairs.column("tool_name")?.str()?;
    let p_calls = pairs.column("calls")?.cast(&DataType::Int64)?;
    let p_calls = p_calls.i64()?;
    let p_fail = pairs.column("failures")?.cast(&DataType::Int64)?;
    let p_fail = p_fail.i64()?;
    let p_last = pairs.column("last_start_ns")?.cast(&DataType::Int64)?;
    let p_last = p_last.i64()?;
    let mut last_call: HashMap<(&str, i32), i64, Fast> = HashMap::default();
    let mut repeated: HashSet<(u32, &str), Fast> = HashSet::default();
    let mut has_repeat = vec![false; stats.len()];
    // (tool, day) → (failures, calls, turn number) of the turns it failed in.
    type Worst<'a> = HashMap<(&'a str, i32), Vec<(i64, i64, u32)>, Fast>;
    let mut worst = Worst::default();
    let mut healthy: HashMap<&str, (Vec<f64>, Vec<f64>), Fast> = HashMap::default();
    for j in 0..pairs.height() {
        let (Some(n), Some(tool)) = (p_turn.get(j), p_tool.get(j)) else {
            continue;
        };
        if p_calls.get(j).unwrap_or(0) >= 2 {
            repeated.insert((n, tool));
            has_repeat[n as usize] = true;
        }
        let failures = p_fail.get(j).unwrap_or(0);
        let st = &stats[n as usize];
        if st.end_ns <= settled_by_ns {
            let last = last_call
                .entry((tool, crate::model::day_of_ns(st.began_ns)))
                .or_insert(i64::MIN);
            *last = (*last).max(p_last.get(j).unwrap_or(0));
        }
        if failures > 0 {
            let st = &stats[n as usize];
            let day = crate::model::day_of_ns(st.began_ns);
            worst
                .entry((tool, day))
                .or_default()
                .push((failures, p_calls.get(j).unwrap_or(0), n));
        }
        if failures == 0 {
            let st = &stats[n as usize];
            let h = healthy.entry(tool).or_default();
            h.0.push((st.end_ns - st.start_ns) as f64 / 1e9);
            h.1.push(st.spans as f64);
        }
    }

    // Only repeated pairs become calls.
    let parent = df.column("parent_span_id")?.str()?;
    let tool = df.column("tool_name")?.str()?;
    let service = df.column("service_name")?.str()?;
    let args = df.column("tool_args_hash")?.str()?;
    // Optional: parts written before results were hashed have none.
    let results = match df.column("tool_result_hash") {
        Ok(c) => Some(c.str()?),
        Err(_) => None,
    };
    let session = df.column("session_id")?.str()?;
    // The session of each turn: its anchor's, else the first any span has.
    let mut turn_session: Vec<Option<&str>> = vec![None; stats.len()];
    for (i, a) in anchors.iter().enumerate() {
        if let Anchor::Row(r) = a {
            if let Some(sess) = session.get(*r) {
                turn_session[turn_of[i] as usize] = Some(sess);
            }
        }
    }
    for (i, &n) in turn_of.iter().enumerate() {
        if turn_session[n as usize].is_none() {
            turn_session[n as usize] = session.get(i);
        }
    }
    // Optional: frames without a cost column have no costs.
    let cost = match df.column("cost_usd") {
        Ok(c) => Some(c.cast(&DataType::Float64)?),
        Err(_) => None,
    };
    let cost = cost.as_ref().map(|c| c.f64()).transpose()?;
    let mut ids: HashMap<u32, String, Fast> = HashMap::default();
    let mut out = TurnCalls::default();
    // The newest span end of each trace that has a repeated pair, for settling.
    let mut trace_end: HashMap<&str, i64, Fast> = HashMap::default();
    for st in stats
        .iter()
        .zip(&has_repeat)
        .filter(|(_, r)| **r)
        .map(|(st, _)| st)
    {
        trace_end.insert(trace.get(st.row).unwrap_or(""), i64::MIN);
    }
    for (t, e) in trace.iter().zip(end.iter()) {
        if let Some(te) = t.and_then(|t| trace_end.get_mut(t)) {
            *te = (*te).max(e.unwrap_or(0));
        }
    }
    // The place of every call of a turn with a repeat, among its calls.
    let mut order: Vec<(u32, i64, u32)> = turn_of
        .iter()
        .enumerate()
        .filter(|(i, n)| has_repeat[**n as usize] && is_call.get(*i) == Some(true))
        .map(|(i, &n)| (n, start.get(i).unwrap_or(0), i as u32))
        .collect();
    order.sort_unstable();
    let mut seq_of: Vec<u32> = vec![0; df.height()];
    for w in order.chunk_by(|a, b| a.0 == b.0) {
        for (k, &(_, _, i)) in w.iter().enumerate() {
            seq_of[i as usize] = k as u32;
        }
    }
    for (i, &n) in turn_of.iter().enumerate() {
        if !has_repeat[n as usize] || is_call.get(i) != Some(true) {
            continue;
        }
        let name = tool.get(i).unwrap_or("");
        if !repeated.contains(&(n, name)) {
            continue;
        }
        let turn_id = ids
            .entry(n)
            .or_insert_with(|| turns::turn_id(anchors[i], trace, span))
            .clone();
        let t = trace.get(i).unwrap_or("");
        if !out.turns.contains_key(&turn_id) {
            let st = stats[n as usize];
            let anchor_trace = trace.get(st.row).unwrap_or(t);
            out.turns.insert(
                turn_id.clone(),
                Turn {
                    trace_id: anchor_trace.to_string(),
                    start_ns: st.start_ns,
                    began_ns: st.began_ns,
                    end_ns: st.end_ns,
                    spans: st.spans,
                    last_end_ns: trace_end.get(anchor_trace).copied().unwrap_or(st.end_ns),
                    session_id: turn_session[n as usize].map(str::to_string),
                },
            );
        }
        out.calls.push(Call {
            turn: turn_id,
            trace_id: t.to_string(),
            span_id: span.get(i).unwrap_or("").to_string(),
            parent_span_id: parent.get(i).map(str::to_string),
            tool: name.to_string(),
            service: service.get(i).unwrap_or("").to_string(),
            start_ns: start.get(i).unwrap_or(0),
            end_ns: end.get(i).unwrap_or(0),
            class: class_of[i]
                .and_then(ErrorClass::parse)
                .unwrap_or(ErrorClass::Unknown),
            args_hash: args.get(i).map(str::to_string),
            result_hash: results.and_then(|r| r.get(i)).map(str::to_string),
            session_id: session
                .get(i)
                .or(turn_session[n as usize])
                .map(str::to_string),
            cost_usd: cost.and_then(|c| c.get(i)),
            seq: seq_of[i],
        });
    }
    for ((tool, day), mut turns_) in worst {
        turns_.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let kept = turns_
            .into_iter()
            .take(WORST_TURNS)
            .map(|(failures, calls, n)| {
                let row = stats[n as usize].row;
                FailingTurn {
                    turn: turns::turn_id(anchors[row], trace, span),
                    trace_id: trace.get(row).unwrap_or("").to_string(),
                    calls: calls.max(0) as usize,
                    failures: failures.max(0) as usize,
                    session_id: turn_session[n as usize].map(str::to_string),
                }
            })
            .collect();
        out.failing.insert((tool.to_string(), day), kept);
    }
    out.last_call = last_call
        .into_iter()
        .map(|((tool, day), ns)| ((tool.to_string(), day), ns))
        .collect();
    out.calls
        .sort_by(|a, b| (&a.turn, &a.tool, a.start_ns).cmp(&(&b.turn, &b.tool, b.start_ns)));
    out.healthy = healthy
        .into_iter()
        .map(|(tool, (d, s))| {
            (
                tool.to_string(),
                Healthy {
                    duration_s: super::median(d),
                    spans: super::median(s),
                },
            )
        })
        .collect();
    Ok(out)
}
