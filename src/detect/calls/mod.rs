//! Tool calls grouped by turn, and what each turn looked like as a whole
//! (duration, span count), from a [`SpanTable`]: the sweep's kernel. Turns
//! are numbered densely, the calls bucketed by turn and sorted by tool in
//! one pass, so counting calls per (turn, tool) costs integer compares;
//! only the pairs called twice or more become [`Call`]s with their strings,
//! so a day of a million calls costs a few sorts, not a million small
//! allocations. Calls stopped on purpose (control flow: an interrupt, a
//! cancellation) are no calls here, only spans of their turn.

// The span table and the nesting rule: every import of them in `calls/`
// is here (the submodules take them through `super`).
/// The columns [`collect`] reads (all but the ids, times and `tool_name`
/// may be missing).
pub use crate::spans::COLUMNS;
use crate::spans::{may_nest_in, nested_in, takes_inner_class};
use crate::spans::{Class, Hex, SpanIndex, SpanTable};

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::model::ErrorClass;

mod collect;
mod numbering;
mod parts;
mod totals;
mod waits;

pub use collect::{collect_table_keeping, parts, parts_nesting};
pub use parts::{finish, Parts, ToolTurn, TurnService};
pub use totals::Totals;
pub use waits::{stated_waits, waitable, StatedWait};

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
    /// The session of the call's turn anchor (the user's request), else
    /// the call's own, else any of its turn's (an agent span often carries
    /// `session.id` where the tool spans do not).
    pub session_id: Option<String>,
    /// What the call cost, when its span says.
    pub cost_usd: Option<f64>,
    /// Its place among all the turn's tool calls (any tool), in start order:
    /// two calls are adjacent in the turn when their places are.
    pub seq: u32,
    /// How long the call was told to wait before a retry (ms): its own
    /// span's, else that of the latest-ending failed span below it that ran
    /// inside it — the HTTP client span of the tool's request
    /// (docs/detection.md §4.9).
    pub retry_after_ms: Option<i64>,
    /// When that wait began: the end of the span that stated it (ns); the
    /// wait is over at this plus `retry_after_ms`.
    pub wait_from_ns: Option<i64>,
}

impl Call {
    pub fn failed(&self) -> bool {
        self.class.is_failure()
    }

    /// The call as the chain rules see it.
    pub fn attempt(&self) -> super::chains::Attempt<'_> {
        super::chains::Attempt {
            class: self.class,
            args: self.args_hash.as_deref(),
            result: self.result_hash.as_deref(),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            retry_after_ms: self.retry_after_ms,
            wait_from_ns: self.wait_from_ns,
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
    /// Per (service, UTC day), the turns begun that day whose anchor span
    /// (docs/detection.md §2) is of that service, whether or not they
    /// called a tool: the agent's turn volume the silent-tool rule
    /// compares a tool's calls with (§4.8).
    pub turns_by_service: BTreeMap<(String, i32), u64>,
    /// Per turn id (of `turns`), its model round trips in start order: what
    /// tells a retry the model made from one code made (§4.2, "Driver").
    pub models: BTreeMap<String, Vec<super::driver::ModelCall>>,
}

impl TurnCalls {
    /// Only what belongs to turns begun on `day`: their calls and turns,
    /// and the day's failing turns and last calls (the healthy yardsticks
    /// stay: they are over every turn read).
    pub fn began_on(mut self, day: i32) -> TurnCalls {
        self.turns
            .retain(|_, t| crate::model::day_of_ns(t.began_ns) == day);
        let turns = &self.turns;
        self.calls.retain(|c| turns.contains_key(&c.turn));
        self.models.retain(|k, _| turns.contains_key(k));
        self.failing.retain(|(_, d), _| *d == day);
        self.last_call.retain(|(_, d), _| *d == day);
        self.turns_by_service.retain(|(_, d), _| *d == day);
        self
    }
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

/// Tool calls and turns of `df`, which holds at least the ids, times and
/// `tool_name` of [`COLUMNS`]. A tool span nested in a tool span of the
/// same tool that it overlaps (an MCP client/server pair, a framework's
/// wrapper) counts as a span of the turn, not as a second call; a failure
/// seen only on the inner span fails the outer one.
pub fn collect(df: &DataFrame) -> PolarsResult<TurnCalls> {
    collect_settled(df, i64::MAX)
}

/// [`collect`], counting in `last_call` only the turns whose spans all
/// ended by `settled_by_ns` (a turn still running is not yet quiet traffic).
pub fn collect_settled(df: &DataFrame, settled_by_ns: i64) -> PolarsResult<TurnCalls> {
    Ok(collect_table(&SpanTable::from_frame(df)?, settled_by_ns))
}

/// Which repeated (turn, tool) pairs [`collect_table`] builds calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every pair called twice or more.
    All,
    /// Only turns with a pair a rule can find something in: one of its
    /// calls failed, or two of them are the same request (same arguments,
    /// or either's unknown). A pair of successful calls with distinct
    /// arguments holds no retry chain (no failure), no repeat after success
    /// and no loop step (no request made twice); a turn of only such pairs
    /// gives no rule anything, and most turns with repeated calls are of
    /// that kind. A kept turn keeps all its repeated pairs.
    Findable,
}

/// [`collect_settled`] over a span table.
pub fn collect_table(t: &SpanTable, settled_by_ns: i64) -> TurnCalls {
    collect_table_keeping(t, settled_by_ns, Keep::All)
}
