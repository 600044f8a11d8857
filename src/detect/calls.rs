//! Tool calls grouped by turn, and what each turn looked like as a whole
//! (duration, span count), from a [`SpanTable`]: the sweep's kernel. Turns
//! are numbered densely, the calls bucketed by turn and sorted by tool in
//! one pass, so counting calls per (turn, tool) costs integer compares;
//! only the pairs called twice or more become [`Call`]s with their strings,
//! so a day of a million calls costs a few sorts, not a million small
//! allocations. Calls stopped on purpose (control flow: an interrupt, a
//! cancellation) are no calls here, only spans of their turn.

use std::collections::{BTreeMap, HashMap};

use polars::prelude::*;

use super::turns::{self, Anchor};
use crate::model::ErrorClass;
use crate::spans::{may_nest_in, nested_in, takes_inner_class};
use crate::spans::{SpanIndex, SpanTable};

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

/// The columns [`collect`] reads (all but the ids, times and `tool_name`
/// may be missing).
pub use crate::spans::COLUMNS;

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

/// Whether two of `rows` are the same request (`chains::same_args`: equal
/// arguments, or either's unknown).
fn repeats_a_request(t: &SpanTable, rows: &[u32]) -> bool {
    use crate::spans::Hex;
    let mut args: Vec<Hex> = rows.iter().map(|&i| t.args.get(i as usize)).collect();
    if args.contains(&Hex::None) {
        return true;
    }
    args.sort_unstable();
    args.windows(2).any(|w| w[0] == w[1])
}

#[derive(Debug, Clone, Copy)]
struct TurnStat {
    /// The turn's first row.
    row: usize,
    /// When the turn began: its anchor span's start (else its first span's).
    began_ns: i64,
    start_ns: i64,
    end_ns: i64,
    spans: usize,
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

/// [`collect_table`], building calls only for the pairs `keep` names.
pub fn collect_table_keeping(t: &SpanTable, settled_by_ns: i64, keep: Keep) -> TurnCalls {
    let n = t.len();
    let index = SpanIndex::new(t);
    let anchors = turns::anchors(t, &index);
    // Nested duplicates are looked for only where one call can be two
    // spans (an MCP span, or two conventions), as the rollup does.
    let nested = may_nest_in(t).then(|| nested_in(t, &index));
    let nested_of = |i: usize| nested.as_ref().and_then(|v| v[i]);
    // The row whose class each call counts with: its own, or its inner
    // duplicate's failure.
    let mut class_src: Vec<u32> = (0..n as u32).collect();
    for (i, p) in nested.iter().flatten().enumerate() {
        if let Some(p) = *p {
            if takes_inner_class(t.class_str(class_src[p] as usize), t.class_str(i)) {
                class_src[p] = i as u32;
            }
        }
    }
    let class_of = |i: usize| t.class[class_src[i] as usize];

    // Number the turns densely in order of first sight; a turn's extent and
    // span count as we go.
    let mut by_row: Vec<u32> = vec![u32::MAX; n];
    let mut by_call: HashMap<u32, u32, Fast> = HashMap::default();
    let mut stats: Vec<TurnStat> = Vec::new();
    let mut turn_of: Vec<u32> = Vec::with_capacity(n);
    for (i, anchor) in anchors.iter().enumerate() {
        let (s, e) = (t.start[i], t.end[i]);
        let slot = match anchor {
            Anchor::Row(r) => &mut by_row[*r],
            Anchor::AgentCall(c) => by_call.entry(*c).or_insert(u32::MAX),
        };
        if *slot == u32::MAX {
            *slot = stats.len() as u32;
            let began = match anchor {
                Anchor::Row(r) => t.start[*r],
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
        let k = *slot;
        let st = &mut stats[k as usize];
        st.start_ns = st.start_ns.min(s);
        if matches!(anchor, Anchor::AgentCall(_)) {
            st.began_ns = st.began_ns.min(s);
        }
        st.end_ns = st.end_ns.max(e);
        st.spans += 1;
        turn_of.push(k);
    }
    // A call stopped on purpose (`interrupted`, `cancelled`: detection.md
    // §3) is no attempt of anything: neither a failure nor a success, in no
    // chain, no repeat and no loop; it stays a span of its turn.
    let is_call = |i: usize| t.is_tool[i] && nested_of(i).is_none() && !class_of(i).control_flow();
    let waits = stated_waits(t, &index, is_call);

    // The calls bucketed by turn (a counting sort), each bucket in row order.
    let mut offsets = vec![0u32; stats.len() + 1];
    for i in (0..n).filter(|&i| is_call(i)) {
        offsets[turn_of[i] as usize + 1] += 1;
    }
    for k in 1..offsets.len() {
        offsets[k] += offsets[k - 1];
    }
    let mut fill = offsets.clone();
    let mut bucket = vec![0u32; offsets[stats.len()] as usize];
    for i in (0..n).filter(|&i| is_call(i)) {
        let k = turn_of[i] as usize;
        bucket[fill[k] as usize] = i as u32;
        fill[k] += 1;
    }

    let day = |k: u32| crate::model::day_of_ns(stats[k as usize].began_ns);
    let mut last_call: HashMap<(u32, i32), i64, Fast> = HashMap::default();
    // (tool, day) → (failures, calls, turn number) of the turns it failed in.
    type Worst = HashMap<(u32, i32), Vec<(i64, i64, u32)>, Fast>;
    let mut worst = Worst::default();
    let mut healthy: HashMap<u32, (Vec<f64>, Vec<f64>), Fast> = HashMap::default();
    let mut seq_of: Vec<u32> = vec![0; n];
    // Rows of the (turn, tool) pairs called twice or more.
    let mut repeated_rows: Vec<u32> = Vec::new();
    let mut by_tool: Vec<u32> = Vec::new();
    let mut turn_rows: Vec<u32> = Vec::new();
    for k in 0..stats.len() {
        let rows = &bucket[offsets[k] as usize..offsets[k + 1] as usize];
        if rows.is_empty() {
            continue;
        }
        by_tool.clear();
        by_tool.extend(rows.iter().copied().filter(|&i| t.tool[i as usize] != 0));
        by_tool.sort_by_key(|&i| (t.tool[i as usize], i));
        let st = stats[k];
        let mut repeats = false;
        let mut findable = keep == Keep::All;
        turn_rows.clear();
        for g in by_tool.chunk_by(|a, b| t.tool[*a as usize] == t.tool[*b as usize]) {
            let tool = t.tool[g[0] as usize];
            let calls = g.len() as i64;
            let failures = g.iter().filter(|&&i| class_of(i as usize).failed()).count() as i64;
            let last = g.iter().map(|&i| t.start[i as usize]).max().unwrap_or(0);
            if calls >= 2 {
                repeats = true;
                // (A call with no class counts as `unknown`, a failure, in the rules.)
                let failed = |i: &u32| {
                    !matches!(
                        class_of(*i as usize),
                        crate::spans::Class::Known(ErrorClass::Ok)
                    )
                };
                findable |= g.iter().any(failed) || repeats_a_request(t, g);
                turn_rows.extend_from_slice(g);
            }
            if st.end_ns <= settled_by_ns {
                let l = last_call.entry((tool, day(k as u32))).or_insert(i64::MIN);
                *l = (*l).max(last);
            }
            if failures > 0 {
                worst
                    .entry((tool, day(k as u32)))
                    .or_default()
                    .push((failures, calls, k as u32));
            } else {
                let h = healthy.entry(tool).or_default();
                h.0.push((st.end_ns - st.start_ns) as f64 / 1e9);
                h.1.push(st.spans as f64);
            }
        }
        // A turn is kept whole: the rules read its other repeated calls too
        // (a read-only call between a success and its repeat).
        if findable {
            repeated_rows.extend_from_slice(&turn_rows);
        }
        if repeats {
            // The place of every call of the turn among its calls, by start.
            let mut order: Vec<u32> = rows.to_vec();
            order.sort_by_key(|&i| (t.start[i as usize], t.span[i as usize], i));
            for (place, &i) in order.iter().enumerate() {
                seq_of[i as usize] = place as u32;
            }
        }
    }

    // The session of each turn: its anchor's (the user's request: a
    // supervisor's, not a sub-agent's), else the first any span has.
    let mut anchor_session: Vec<u32> = vec![0; stats.len()];
    for (i, a) in anchors.iter().enumerate() {
        if let Anchor::Row(r) = a {
            if t.session[*r] != 0 {
                anchor_session[turn_of[i] as usize] = t.session[*r];
            }
        }
    }
    let mut turn_session = anchor_session.clone();
    for (i, &k) in turn_of.iter().enumerate() {
        if turn_session[k as usize] == 0 {
            turn_session[k as usize] = t.session[i];
        }
    }
    let session = |id: u32| t.dict.get(id).map(str::to_string);
    let dict = |id: u32| t.dict.get(id).unwrap_or("").to_string();

    let mut ids: HashMap<u32, String, Fast> = HashMap::default();
    let mut out = TurnCalls::default();
    repeated_rows.sort_unstable();
    for &i in &repeated_rows {
        let i = i as usize;
        let k = turn_of[i];
        let turn_id = ids
            .entry(k)
            .or_insert_with(|| turns::turn_id(anchors[i], t))
            .clone();
        if !out.turns.contains_key(&turn_id) {
            let st = stats[k as usize];
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
                    session_id: session(turn_session[k as usize]),
                },
            );
        }
        // The anchor's session, else the call's own, else any of the turn's.
        let own_session = match (anchor_session[k as usize], t.session[i]) {
            (0, 0) => turn_session[k as usize],
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
            class: class_of(i).class(),
            args_hash: t.hex_str(t.args.get(i)),
            result_hash: t.hex_str(t.result.get(i)),
            session_id: session(own_session),
            cost_usd: t.cost_of(i),
            seq: seq_of[i],
            retry_after_ms: waits.get(&(i as u32)).map(|w| w.ms),
            wait_from_ns: waits.get(&(i as u32)).map(|w| w.from_ns),
        });
    }
    out.models = super::models::of_turns(t, &index, &turn_of, &ids);
    for ((tool, day), turns_) in worst {
        // Worst first; ties by turn id, so the order of rows in the parts
        // (a compaction re-sorts them) changes nothing.
        let mut turns_: Vec<(i64, i64, u32, String)> = turns_
            .into_iter()
            .map(|(f, c, k)| (f, c, k, turns::turn_id(anchors[stats[k as usize].row], t)))
            .collect();
        turns_.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.3.cmp(&b.3)));
        let kept = turns_
            .into_iter()
            .take(WORST_TURNS)
            .map(|(failures, calls, k, turn)| {
                let row = stats[k as usize].row;
                FailingTurn {
                    turn,
                    trace_id: t.trace_str(row),
                    calls: calls.max(0) as usize,
                    failures: failures.max(0) as usize,
                    session_id: session(turn_session[k as usize]),
                }
            })
            .collect();
        out.failing.insert((dict(tool), day), kept);
    }
    out.last_call = last_call
        .into_iter()
        .map(|((tool, day), ns)| ((dict(tool), day), ns))
        .collect();
    let mut by_service: HashMap<(u32, i32), u64, Fast> = HashMap::default();
    for st in &stats {
        let anchor = match anchors[st.row] {
            Anchor::Row(r) => r,
            Anchor::AgentCall(_) => st.row,
        };
        let day = crate::model::day_of_ns(st.began_ns);
        *by_service.entry((t.service[anchor], day)).or_insert(0) += 1;
    }
    out.turns_by_service = by_service
        .into_iter()
        .map(|((service, day), n)| ((dict(service), day), n))
        .collect();
    out.calls.sort_by(|a, b| {
        (&a.turn, &a.tool, a.start_ns, &a.span_id).cmp(&(&b.turn, &b.tool, b.start_ns, &b.span_id))
    });
    out.healthy = healthy
        .into_iter()
        .map(|(tool, (d, s))| {
            (
                dict(tool),
                Healthy {
                    duration_s: super::median(d),
                    spans: super::median(s),
                },
            )
        })
        .collect();
    out
}

/// How much a span below a call may stick out of it and still have run
/// inside it (clocks of two processes, whole-millisecond starts).
const INSIDE_SLACK_NS: i64 = 1_000_000;

/// A wait a call was told: how long (ms) and from when — the end of the
/// span that stated it (the call's own, or the HTTP child's, which may end
/// long before the call when the tool slept out the wait inside itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatedWait {
    /// The end of the span that stated it (ns).
    pub from_ns: i64,
    pub ms: i64,
    /// Stated by the call's own span (ranks before any child's).
    pub own: bool,
}

impl StatedWait {
    /// When the wait is over (ns): the stating span's end plus the wait.
    pub fn deadline_ns(&self) -> i64 {
        self.from_ns
            .saturating_add(self.ms.saturating_mul(1_000_000))
    }
}

/// Whether a failure of this class is one waiting can fix (rate limited,
/// unavailable, timeout, network, server error: the retryable, transient
/// classes); a wait stated on any other (a `retry_after` echoed in a 400's
/// body) is no wait (docs/detection.md §4.9).
pub fn waitable(c: ErrorClass) -> bool {
    c.retryable() == Some(true)
}

/// Per call row, the wait it was told (docs/detection.md §4.9): its own
/// span's, else the one of the latest-ending failed span below it (up
/// through spans that are no call) that ran inside it; own waits rank
/// first. Only spans of a class waiting can fix ([`waitable`]) state one.
pub fn stated_waits(
    t: &SpanTable,
    index: &SpanIndex<'_>,
    is_call: impl Fn(usize) -> bool,
) -> HashMap<u32, StatedWait, Fast> {
    let mut out: HashMap<u32, StatedWait, Fast> = HashMap::default();
    for i in (0..t.len()).filter(|&i| t.retry_after[i] > 0) {
        let ms = t.retry_after[i];
        if !t.class[i].failed() || !waitable(t.class[i].class()) {
            continue;
        }
        if is_call(i) {
            out.insert(
                i as u32,
                StatedWait {
                    from_ns: t.end[i],
                    ms,
                    own: true,
                },
            );
            continue;
        }
        // Up through spans that are no call (a client span's parents, an
        // MCP nest's inner spans), a bounded walk: parent cycles end it.
        let mut r = i;
        for _ in 0..64 {
            let Some(p) = index.parent_of(r) else {
                break;
            };
            if is_call(p) {
                let inside = t.start[i] + INSIDE_SLACK_NS >= t.start[p]
                    && t.end[i] <= t.end[p] + INSIDE_SLACK_NS;
                if inside {
                    let w = out.entry(p as u32).or_insert(StatedWait {
                        from_ns: i64::MIN,
                        ms: 0,
                        own: false,
                    });
                    if !w.own && t.end[i] > w.from_ns {
                        *w = StatedWait {
                            from_ns: t.end[i],
                            ms,
                            own: false,
                        };
                    }
                }
                break;
            }
            r = p;
        }
    }
    out
}
