//! One call, one count: a tool call seen as several spans (an MCP client
//! span and its server span, a framework's tool span around one MCP
//! `tools/call`) is counted once, with the class and dependency its nest
//! says. Used by the store's rollup and by the detectors alike.

use std::collections::HashMap;

use polars::prelude::*;

use crate::spans::{SpanIndex, SpanTable};

/// Whether a frame of spans may hold one call as two tool spans: it has an
/// MCP span, or tool spans of more than one convention (frames without a
/// `tool_convention` column: always).
pub fn may_nest(df: &DataFrame) -> PolarsResult<bool> {
    let Ok(conv) = df.column("tool_convention") else {
        return Ok(true);
    };
    let mut first: Option<&str> = None;
    for c in conv.str()?.iter().flatten() {
        if c == "mcp" || first.is_some_and(|f| f != c) {
            return Ok(true);
        }
        first = Some(c);
    }
    Ok(false)
}

/// For each tool row, the row of the call it duplicates, if it is no call
/// of its own. A tool span whose parent is a tool span of the same tool in
/// the same trace, overlapping it in time, and that parent's only such
/// child, is the same call seen twice — an MCP client span and its server
/// span (the OTel MCP conventions make the client the server's parent), or
/// a framework's tool span around one MCP `tools/call` — and maps to the
/// outermost span of such a nest. A parent with several such children is a
/// wrapper around attempts (a client that retried inside one tool call):
/// the children are the calls, and the wrapper maps to itself (dropped,
/// nothing to merge). `df` holds `trace_id`, `span_id`, `parent_span_id`,
/// `tool_name`, `start_ns`, `end_ns` (and `is_tool_call`, when it holds
/// other spans too).
pub fn nested_duplicates(df: &DataFrame) -> PolarsResult<Vec<Option<usize>>> {
    let table = SpanTable::from_frame(df)?;
    let index = SpanIndex::new(&table);
    Ok(nested_in(&table, &index))
}

/// [`nested_duplicates`] over a span table.
pub fn nested_in(table: &SpanTable, index: &SpanIndex<'_>) -> Vec<Option<usize>> {
    nests_in(table, index).0
}

/// [`nested_in`], and for each row that maps to another its depth in the
/// nest: how many links up it the outermost span is (1: its parent).
fn nests_in(table: &SpanTable, index: &SpanIndex<'_>) -> (Vec<Option<usize>>, Vec<u8>) {
    let n = table.len();
    let tool_row = |i: usize| table.is_tool[i] && table.tool[i] != 0;
    // Each tool row's same-tool, overlapping parent, and how many such
    // children each parent has.
    let outer = |i: usize| -> Option<usize> {
        if !tool_row(i) || !table.has_parent[i] {
            return None;
        }
        let p = index
            .rows_of(i, table.parent[i])
            .iter()
            .rev()
            .map(|&r| r as usize)
            .find(|&r| tool_row(r))?;
        let (s, e) = (table.start[i], table.end[i]);
        let overlaps = s < table.end[p] && table.start[p] < e || s == table.start[p];
        (p != i && table.tool[p] == table.tool[i] && overlaps).then_some(p)
    };
    let cand: Vec<Option<usize>> = (0..n).map(outer).collect();
    let mut children = vec![0u32; n];
    for p in cand.iter().flatten() {
        children[*p] += 1;
    }
    let mut out = vec![None; n];
    let mut depth = vec![0u8; n];
    for (i, slot) in out.iter_mut().enumerate() {
        // Walk up through only children to the outermost span of the nest
        // (bounded: bad data may loop).
        let mut cur = i;
        for _ in 0..16 {
            match cand[cur] {
                Some(p) if children[p] == 1 && p != i => {
                    cur = p;
                    depth[i] += 1;
                }
                _ => break,
            }
        }
        if cur != i {
            *slot = Some(cur);
        }
    }
    // Wrappers around several attempts are no call of their own, nor is
    // the span they were the only child of.
    for p in 0..n {
        if children[p] >= 2 {
            if let Some(q) = out[p] {
                out[q] = Some(q);
            }
            out[p] = Some(p);
        }
    }
    (out, depth)
}

/// [`may_nest`] over a span table.
pub fn may_nest_in(table: &SpanTable) -> bool {
    if table.conventions_unknown {
        return true;
    }
    let mut first: Option<u32> = None;
    for &c in &table.convention {
        if c == 0 || first == Some(c) {
            continue;
        }
        if first.is_some() || table.dict.get(c) == Some("mcp") {
            return true;
        }
        first = Some(c);
    }
    false
}

/// Whether a call seen twice takes the inner span's class: when the inner
/// one failed and the outer one says ok, or only `unknown` where the inner
/// one knows better.
pub fn takes_inner_class(outer: Option<&str>, inner: Option<&str>) -> bool {
    let failed = |c: Option<&str>| c.is_some_and(|c| c != "ok");
    match (outer, inner) {
        (_, i) if !failed(i) => false,
        (Some("ok") | None, _) => true,
        (Some("unknown"), Some(i)) => i != "unknown",
        _ => false,
    }
}

/// `df` with each call once: nested duplicates ([`nested_duplicates`])
/// dropped, and a failure seen only on an inner span (an MCP server span's
/// `isError`) moved onto the outer one, with its class and name; and, when
/// `df` has a `dependency` column, the outer span's dependency the one of
/// the innermost span of its nest that has one (an MCP server's own name
/// over the `server.address` its client dialled).
pub fn once_per_call(df: &DataFrame) -> PolarsResult<DataFrame> {
    calls_with_dependencies(df, true, None)
}

/// The day's tool calls in `df` once each ([`once_per_call`], when `nest`:
/// the day may hold one call as several spans), and a call that has no
/// dependency of its own or in its nest given the one its direct client
/// children name (`clients`: the non-tool client spans with a dependency,
/// their `trace_id`, `parent_span_id` and `dependency`): an HTTP call the
/// tool made, when its children (those of every span of its nest) name
/// exactly one. `df` holds the ids when `nest` or `clients`.
pub fn calls_with_dependencies(
    df: &DataFrame,
    nest: bool,
    clients: Option<&DataFrame>,
) -> PolarsResult<DataFrame> {
    let n = df.height();
    let (dup, depth) = if nest {
        let table = SpanTable::from_frame(df)?;
        let index = SpanIndex::new(&table);
        nests_in(&table, &index)
    } else {
        (vec![None; n], vec![0; n])
    };
    let nested = dup.iter().any(Option::is_some);
    let dependency = match df.column("dependency") {
        Ok(c) => Some(c.str()?),
        Err(_) => None,
    };
    if !nested && (clients.is_none() || dependency.is_none()) {
        return Ok(df.clone());
    }
    let mut out = df.clone();
    if let Some(dependency) = dependency {
        let deps = call_dependencies(df, dependency, &dup, &depth, clients)?;
        out.with_column(Column::new("dependency".into(), deps))?;
    }
    if !nested {
        return Ok(out);
    }
    let class = df.column("error_class")?.str()?;
    let mut classes: Vec<Option<&str>> = class.iter().collect();
    let error_type = match df.column("error_type") {
        Ok(c) => Some(c.str()?),
        Err(_) => None,
    };
    let mut names: Option<Vec<Option<&str>>> = error_type.map(|c| c.iter().collect());
    for (i, p) in dup.iter().enumerate() {
        let Some(p) = *p else { continue };
        if takes_inner_class(classes[p], class.get(i)) {
            classes[p] = class.get(i);
            if let (Some(n), Some(t)) = (names.as_mut(), error_type) {
                n[p] = t.get(i);
            }
        }
    }
    out.with_column(Column::new("error_class".into(), classes))?;
    if let Some(n) = names {
        out.with_column(Column::new("error_type".into(), n))?;
    }
    if out.schema().contains("retryable") {
        let retryable: Vec<Option<bool>> = out
            .column("error_class")?
            .str()?
            .iter()
            .map(|c| {
                c.and_then(crate::model::ErrorClass::parse)
                    .and_then(|c| c.retryable())
            })
            .collect();
        out.with_column(Column::new("retryable".into(), retryable))?;
    }
    let keep: BooleanChunked = dup.iter().map(|d| d.is_none()).collect();
    out.filter(&keep)
}

/// Each row's dependency as a call: a nest's outer span takes the one of
/// its innermost span that has one (`dup`, `depth`: [`nests_in`]); a call
/// with none then takes the one its client children name, if exactly one.
fn call_dependencies<'a>(
    df: &'a DataFrame,
    dependency: &'a StringChunked,
    dup: &[Option<usize>],
    depth: &[u8],
    clients: Option<&'a DataFrame>,
) -> PolarsResult<Vec<Option<&'a str>>> {
    let mut deps: Vec<Option<&str>> = dependency.iter().collect();
    // How deep the dependency each outer span holds now lies (-1: none).
    let mut held: Vec<i16> = deps
        .iter()
        .map(|d| if d.is_some() { 0 } else { -1 })
        .collect();
    for (i, p) in dup.iter().enumerate() {
        let Some(p) = *p else { continue };
        if p == i {
            continue;
        }
        if let Some(d) = dependency.get(i) {
            if i16::from(depth[i]) > held[p] {
                held[p] = i16::from(depth[i]);
                deps[p] = Some(d);
            }
        }
    }
    let Some(clients) = clients else {
        return Ok(deps);
    };
    // (trace, parent) → the one dependency its client children name (`None`: several).
    let mut named: HashMap<(&str, &str), Option<&str>> = HashMap::new();
    let (ct, cp, cd) = (
        clients.column("trace_id")?.str()?,
        clients.column("parent_span_id")?.str()?,
        clients.column("dependency")?.str()?,
    );
    for ((t, p), d) in ct.iter().zip(cp.iter()).zip(cd.iter()) {
        let (Some(t), Some(p), Some(d)) = (t, p, d) else {
            continue;
        };
        named
            .entry((t, p))
            .and_modify(|seen| {
                if *seen != Some(d) {
                    *seen = None;
                }
            })
            .or_insert(Some(d));
    }
    let (trace, span) = (df.column("trace_id")?.str()?, df.column("span_id")?.str()?);
    // Every span of each call's nest: the call, and the spans mapped to it.
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in dup.iter().enumerate() {
        if let Some(p) = *p {
            if p != i {
                members.entry(p).or_default().push(i);
            }
        }
    }
    for k in 0..deps.len() {
        if dup[k].is_some() || deps[k].is_some() {
            continue;
        }
        let mut found: Option<&str> = None;
        let mut several = false;
        let nest = members.get(&k).map_or(&[][..], Vec::as_slice);
        for &m in std::iter::once(&k).chain(nest) {
            let (Some(t), Some(s)) = (trace.get(m), span.get(m)) else {
                continue;
            };
            match named.get(&(t, s)) {
                Some(Some(d)) if found.is_none_or(|f| f == *d) => found = Some(*d),
                Some(_) => several = true,
                None => {}
            }
        }
        if !several {
            deps[k] = found;
        }
    }
    Ok(deps)
}
