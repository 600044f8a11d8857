//! The per-tool daily rollup and the raw error names: computed from a day's
//! parts with `queries/tool_daily.sql` and `queries/tool_error_names.sql`,
//! refreshed for the days a commit touched, so later reads never rescan raw
//! spans for daily numbers. Each refresh writes a new generation of both
//! files ([`super::rollup_set`]). Each call is counted once, with the
//! server it depends on ([`calls_with_dependencies`]); the sweep reads that
//! per tool and day with [`tool_dependencies`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;

use super::layout::Layout;
use super::{parquet, rollup_set, wal, StoreError};
use crate::model::day_to_string;

/// The queries, as shipped in `queries/`.
pub const TOOL_DAILY_SQL: &str = include_str!("../../queries/tool_daily.sql");
pub const TOOL_ERROR_NAMES_SQL: &str = include_str!("../../queries/tool_error_names.sql");

/// Tool-call rows of one day, with MCP duplicates removed and a `day` column;
/// each call with its dependency ([`calls_with_dependencies`]).
pub fn tool_rows(layout: &Layout, day: i32) -> Result<Option<LazyFrame>, StoreError> {
    let parts = layout.parts(day)?;
    if parts.is_empty() {
        return Ok(None);
    }
    let context = || format!("reading the tool calls of {}", day_to_string(day));
    let spans = parquet::scan_parts(&parts).map_err(|e| StoreError::data(context(), e))?;
    let tools = spans.clone().filter(col("is_tool_call"));
    let counted = [
        col("tool_name"),
        col("service_name"),
        col("duration_ns"),
        col("error_class"),
        col("retryable"),
        col("cost_usd"),
        col("error_type"),
        col("dependency"),
        col("end_ns"),
    ];
    let day_lit = lit(day_to_string(day)).alias("day");
    // The ids are read only when the day may hold one call as two spans
    // (an MCP span, or two conventions): most days have neither, and the
    // ids are the bulk of the bytes.
    // The day's distinct conventions are enough to tell (`may_nest`).
    let conventions = tools
        .clone()
        .select([col("tool_convention").unique()])
        .collect()
        .map_err(|e| StoreError::data(context(), e))?;
    let nest = may_nest(&conventions).map_err(|e| StoreError::data(context(), e))?;
    // The client spans that name a server (an HTTP call's `url.full`), for
    // the calls that name none: on most days there are none, and finding
    // that reads a column of nulls (parts written before the column: none).
    let clients = spans
        .filter(
            col("is_tool_call")
                .not()
                .and(col("kind").eq(lit("client")))
                .and(col("dependency").is_not_null()),
        )
        .select([col("trace_id"), col("parent_span_id"), col("dependency")])
        .collect()
        .map_err(|e| StoreError::data(context(), e))?;
    let clients = (clients.height() > 0).then_some(&clients);
    if !nest && clients.is_none() {
        return Ok(Some(tools.select(counted).with_column(day_lit)));
    }
    let mut wanted = counted.to_vec();
    wanted.extend([
        col("trace_id"),
        col("span_id"),
        col("parent_span_id"),
        col("start_ns"),
    ]);
    let df = tools
        .select(wanted)
        .collect()
        .map_err(|e| StoreError::data(context(), e))?;
    let df =
        calls_with_dependencies(&df, nest, clients).map_err(|e| StoreError::data(context(), e))?;
    Ok(Some(df.lazy().with_column(day_lit)))
}

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
    let table = super::table::SpanTable::from_frame(df)?;
    let index = super::table::SpanIndex::new(&table);
    Ok(nested_in(&table, &index))
}

/// [`nested_duplicates`] over a span table.
pub fn nested_in(
    table: &super::table::SpanTable,
    index: &super::table::SpanIndex<'_>,
) -> Vec<Option<usize>> {
    nests_in(table, index).0
}

/// [`nested_in`], and for each row that maps to another its depth in the
/// nest: how many links up it the outermost span is (1: its parent).
fn nests_in(
    table: &super::table::SpanTable,
    index: &super::table::SpanIndex<'_>,
) -> (Vec<Option<usize>>, Vec<u8>) {
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
pub fn may_nest_in(table: &super::table::SpanTable) -> bool {
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
        let table = super::table::SpanTable::from_frame(df)?;
        let index = super::table::SpanIndex::new(&table);
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

/// The dependency of each tool's calls per day, from a `tool_daily` rollup
/// frame (as [`Reader::tool_daily`](super::Reader::tool_daily) gives it):
/// (tool, day as days since the epoch) → the dependency with the most
/// failed calls that day, over the tool's services (ties: the most calls,
/// then the first name in byte order). Rows without a dependency are
/// passed over; a rollup written before the column (or a frame without
/// `tool_name`, `day`, `calls` or `errors`) gives an empty map.
pub fn tool_dependencies(rollup: &DataFrame) -> BTreeMap<(String, i32), String> {
    let mut out = BTreeMap::new();
    let counts = |name: &str| -> Option<Vec<i64>> {
        let c = rollup.column(name).ok()?.cast(&DataType::Int64).ok()?;
        Some(c.i64().ok()?.iter().map(|v| v.unwrap_or(0)).collect())
    };
    let strs = |name: &str| rollup.column(name).ok().and_then(|c| c.str().ok());
    let (Some(tool), Some(day), Some(dependency), Some(calls), Some(errors)) = (
        strs("tool_name"),
        strs("day"),
        strs("dependency"),
        counts("calls"),
        counts("errors"),
    ) else {
        return out;
    };
    // (tool, day) → dependency → (errors, calls), over the tool's services.
    type Sums<'a> = BTreeMap<&'a str, (i64, i64)>;
    let mut sums: BTreeMap<(&str, i32), Sums<'_>> = BTreeMap::new();
    for i in 0..rollup.height() {
        let (Some(t), Some(d), Some(dep)) = (
            tool.get(i),
            day.get(i).and_then(crate::model::day_from_str),
            dependency.get(i),
        ) else {
            continue;
        };
        let sum = sums.entry((t, d)).or_default().entry(dep).or_default();
        sum.0 += errors[i];
        sum.1 += calls[i];
    }
    for ((t, d), deps) in sums {
        // Most errors, then most calls; the map's order keeps the first name.
        let mut best: Option<(&str, (i64, i64))> = None;
        for (dep, n) in deps {
            if best.is_none_or(|(_, b)| n > b) {
                best = Some((dep, n));
            }
        }
        if let Some((dep, _)) = best {
            out.insert((t.to_string(), d), dep.to_string());
        }
    }
    out
}

fn run_sql(rows: LazyFrame, sql: &str) -> PolarsResult<DataFrame> {
    let mut ctx = SQLContext::new();
    ctx.register("spans", rows);
    ctx.execute(sql)?.collect()
}

fn dirty_path(layout: &Layout) -> std::path::PathBuf {
    layout.rollups_dir().join("dirty.json")
}

/// Days whose rollup rows are stale.
pub fn dirty(layout: &Layout) -> Result<std::collections::BTreeSet<i32>, StoreError> {
    let path = dirty_path(layout);
    match fs::read(&path) {
        Ok(body) => serde_json::from_slice(&body)
            .map_err(|e| StoreError::data(format!("reading {}", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
    }
}

fn write_dirty(layout: &Layout, days: &std::collections::BTreeSet<i32>) -> Result<(), StoreError> {
    let path = dirty_path(layout);
    if days.is_empty() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(days).map_err(|e| StoreError::data("encoding dirty days", e))?;
    wal::replace_file(&path, &tmp, &body)
}

/// Record days whose rollup rows must be recomputed.
pub fn mark_dirty(layout: &Layout, days: &[i32]) -> Result<(), StoreError> {
    let mut all = dirty(layout)?;
    let before = all.len();
    all.extend(days.iter().copied());
    if all.len() == before {
        return Ok(());
    }
    write_dirty(layout, &all)
}

/// Recompute the rollup rows of `days`, publish both rollups as a new
/// generation, and clear those days from the dirty list. Runs on the
/// flusher thread, where no file it reads can be reclaimed meanwhile.
pub fn refresh(layout: &Layout, days: &[i32]) -> Result<(), StoreError> {
    let current = rollup_set::read(layout)?.unwrap_or_default();
    let dir = layout.rollups_dir();
    let old = |name: &Option<String>| name.as_ref().map(|n| dir.join(n));
    let mut daily = rewritten(
        layout,
        days,
        old(&current.tool_daily),
        ("tool_daily", TOOL_DAILY_SQL),
        &["day", "tool_name", "service_name"],
    )?;
    let mut names = rewritten(
        layout,
        days,
        old(&current.tool_error_names),
        ("tool_error_names", TOOL_ERROR_NAMES_SQL),
        &["day", "tool_name", "error_class", "error_type"],
    )?;
    rollup_set::publish(layout, daily.as_mut(), names.as_mut())?;
    let mut all = dirty(layout)?;
    for d in days {
        all.remove(d);
    }
    write_dirty(layout, &all)
}

/// The rollup `old` (a file, if there is one) with the rows of `days`
/// computed again; `None` when no row is left.
fn rewritten(
    layout: &Layout,
    days: &[i32],
    old: Option<PathBuf>,
    (what, sql): (&str, &str),
    order: &[&str],
) -> Result<Option<DataFrame>, StoreError> {
    let context = || format!("refreshing the {what} rollup");
    let mut fresh: Option<DataFrame> = None;
    for &day in days {
        if let Some(rows) = tool_rows(layout, day)? {
            let computed = run_sql(rows, sql).map_err(|e| StoreError::data(context(), e))?;
            if computed.height() == 0 {
                continue;
            }
            fresh = Some(match fresh {
                None => computed,
                Some(mut acc) => {
                    acc.vstack_mut_owned(computed)
                        .map_err(|e| StoreError::data(context(), e))?;
                    acc
                }
            });
        }
    }
    let replaced: HashSet<String> = days.iter().map(|d| day_to_string(*d)).collect();
    let kept = match old {
        Some(path) => {
            let old = parquet::scan(std::slice::from_ref(&path))
                .and_then(|lf| lf.collect())
                .map_err(|e| StoreError::data(format!("reading {}", path.display()), e))?;
            let day = old
                .column("day")
                .and_then(|c| c.str().cloned())
                .map_err(|e| StoreError::data(context(), e))?;
            let mask: BooleanChunked = day
                .iter()
                .map(|d| !d.is_some_and(|d| replaced.contains(d)))
                .collect();
            Some(
                old.filter(&mask)
                    .map_err(|e| StoreError::data(context(), e))?,
            )
        }
        None => None,
    };
    let merged = match (kept, fresh) {
        (None, None) => return Ok(None),
        (Some(a), None) | (None, Some(a)) => a,
        (Some(a), Some(b)) => {
            // A rollup an earlier version wrote lacks the columns added
            // since (`dependency`): null on its rows.
            let mut a = conform(a, b.schema()).map_err(|e| StoreError::data(context(), e))?;
            a.vstack_mut_owned(b)
                .map_err(|e| StoreError::data(context(), e))?;
            a
        }
    };
    merged
        .sort(order.to_vec(), SortMultipleOptions::default())
        .map(Some)
        .map_err(|e| StoreError::data(context(), e))
}

/// `df` with exactly the columns of `schema`, in its order and types; a
/// column `df` lacks is all null.
fn conform(df: DataFrame, schema: &Schema) -> PolarsResult<DataFrame> {
    let exprs: Vec<Expr> = schema
        .iter()
        .map(|(name, dtype)| {
            if df.schema().contains(name.as_str()) {
                col(name.clone()).cast(dtype.clone())
            } else {
                lit(NULL).cast(dtype.clone()).alias(name.clone())
            }
        })
        .collect();
    df.lazy().select(exprs).collect()
}
