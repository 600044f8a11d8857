//! One frame's coverage counts: each tool call once, as its outermost span
//! (the layers of a call traced more than once — framework span, MCP client,
//! MCP server — counted apart), under the service and scope of that span;
//! its turn resolved as the rules resolve it (`detect::turns`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use polars::prelude::*;

use super::ScopeCoverage;
use crate::detect::turns::{self, Anchor};
use crate::spans::nested_in;
use crate::spans::{Hex, SpanIndex, SpanTable};

/// The columns the counts read: the span table's (the scope among them),
/// and the scope's version and whether arguments were recorded.
pub fn columns() -> impl Iterator<Item = &'static str> {
    crate::spans::COLUMNS
        .into_iter()
        .chain(["scope_version", "tool_args_recorded"])
}

/// The trace ids of the tool calls in `df` that started at or after
/// `from_ns` and whose topmost stored ancestor names a parent that is not
/// in `df`: their turn may have begun before (the day before, or before a
/// `since` time), so its spans are read too before counting.
pub fn cut_traces(df: &DataFrame, from_ns: i64) -> PolarsResult<HashSet<String>> {
    let t = SpanTable::from_frame(df)?;
    let index = SpanIndex::new(&t);
    let mut out = HashSet::new();
    for i in (0..t.len()).filter(|&i| t.is_tool[i] && t.start[i] >= from_ns) {
        let mut top = i;
        for _ in 0..64 {
            match index.parent_of(top) {
                Some(p) => top = p,
                None => break,
            }
        }
        if t.has_parent[top] {
            out.insert(t.trace_str(i));
        }
    }
    Ok(out)
}

/// The counts of the tool calls in `df` that started at or after `from_ns`
/// (`df` may hold earlier spans of their turns; it has the columns of
/// [`columns`]; the scope and `tool_args_recorded` columns may be missing
/// or null: parts written before they were stored, where arguments count as
/// recorded when they have a hash), one per (service, scope, version),
/// without gaps.
pub fn of_frame(df: &DataFrame, from_ns: i64) -> PolarsResult<Vec<ScopeCoverage>> {
    let t = SpanTable::from_frame(df)?;
    let index = SpanIndex::new(&t);
    let nested = nested_in(&t, &index);
    let strs = |name: &str| -> PolarsResult<Vec<Option<String>>> {
        Ok(match df.column(name) {
            Ok(c) => c
                .cast(&DataType::String)?
                .str()?
                .iter()
                .map(|s| s.map(str::to_string))
                .collect(),
            Err(_) => vec![None; df.height()],
        })
    };
    let scope = strs("scope_name")?;
    let version = strs("scope_version")?;
    let convention = strs("tool_convention")?;
    let service = strs("service_name")?;
    let recorded: Vec<Option<bool>> = match df.column("tool_args_recorded") {
        Ok(c) => c.bool()?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    // Each span's turn (docs/detection.md §2), and the turns with a session
    // anywhere: a call is in an agent turn when its turn is anchored on an
    // agent span (or an agent call id), and has a session when its turn does.
    let anchors = turns::anchors(&t, &index);
    let turn_key = |a: &Anchor| match *a {
        Anchor::Row(r) => (0u8, r as u64),
        Anchor::AgentCall(c) => (1, u64::from(c)),
    };
    let mut session_turns = HashSet::new();
    for (i, a) in anchors.iter().enumerate() {
        if t.session[i] != 0 {
            session_turns.insert(turn_key(a));
        }
    }
    let in_agent_turn = |i: usize| match anchors[i] {
        Anchor::Row(r) => t.is_agent[r],
        Anchor::AgentCall(_) => true,
    };
    // Each call's layers: the outer row and its nested duplicates (a wrapper
    // around attempts is no call).
    let mut layers: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in (0..t.len()).filter(|&i| t.is_tool[i]) {
        match nested[i] {
            Some(o) if o == i => {}
            Some(o) => layers.entry(o).or_default().push(i),
            None => layers.entry(i).or_default().push(i),
        }
    }
    type Key = (String, Option<String>, Option<String>);
    let mut by: BTreeMap<Key, (ScopeCoverage, BTreeSet<String>)> = BTreeMap::new();
    for (&o, rows) in layers.iter().filter(|(&o, _)| t.start[o] >= from_ns) {
        let scope_key = (
            service[o].clone().unwrap_or_default(),
            scope[o].clone(),
            version[o].clone(),
        );
        let (c, conventions) = by.entry(scope_key).or_default();
        conventions.extend(rows.iter().filter_map(|&r| convention[r].clone()));
        let any = |f: &dyn Fn(usize) -> bool| rows.iter().any(|&r| f(r));
        let failed = any(&|r| t.class[r].failed());
        c.calls += 1;
        c.layers += rows.len().saturating_sub(1) as u64;
        let has_args = |r: usize| recorded[r].unwrap_or(!matches!(t.args.get(r), Hex::None));
        c.with_arguments += u64::from(any(&has_args));
        if failed {
            c.failed += 1;
            let known = any(&|r| t.class[r].failed() && t.class_str(r) != Some("unknown"));
            c.failed_with_class += u64::from(known);
        } else {
            c.with_results += u64::from(any(&|r| !matches!(t.result.get(r), Hex::None)));
        }
        c.with_session += u64::from(session_turns.contains(&turn_key(&anchors[o])));
        c.in_agent_turn += u64::from(in_agent_turn(o));
        c.unknown_shape += u64::from(convention[o].as_deref() == Some("fallback"));
    }
    Ok(by
        .into_iter()
        .map(|((service, scope, version), (mut c, conventions))| {
            c.service = service;
            c.scope = scope;
            c.scope_version = version;
            c.conventions = conventions.into_iter().collect();
            c
        })
        .collect())
}
