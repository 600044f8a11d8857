//! The per-tool daily rollup and the raw error names: computed from a day's
//! parts with `queries/tool_daily.sql` and `queries/tool_error_names.sql`,
//! refreshed for the days a commit touched, so later reads never rescan raw
//! spans for daily numbers. Each refresh writes a new generation of both
//! files ([`crate::store::catalog::rollup_set`]). Each call is counted once, with the
//! server it depends on ([`calls_with_dependencies`](crate::spans::calls_with_dependencies)); the sweep reads that
//! per tool and day with [`tool_dependencies`].

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;

use crate::model::day_to_string;
use crate::spans::{calls_with_dependencies, may_nest};
use crate::store::catalog::dirty::{dirty, write_dirty};
use crate::store::catalog::handle::Catalog;
use crate::store::catalog::layout::Layout;
use crate::store::{catalog::rollup_set, format::parquet, StoreError};

/// The queries, as shipped in `queries/`.
pub const TOOL_DAILY_SQL: &str = include_str!("../../../queries/tool_daily.sql");
pub const TOOL_ERROR_NAMES_SQL: &str = include_str!("../../../queries/tool_error_names.sql");

/// Tool-call rows of one day, with MCP duplicates removed and a `day` column;
/// each call with its dependency ([`calls_with_dependencies`](crate::spans::calls_with_dependencies)).
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

/// The dependency of each tool's calls per day, from a `tool_daily` rollup
/// frame (as [`Reader::tool_daily`](crate::store::Reader::tool_daily) gives it):
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

/// Recompute the rollup rows of `days`, publish both rollups as a new
/// generation, and clear those days from the dirty list. Runs on the
/// flusher thread, where no file it reads can be reclaimed meanwhile.
pub fn refresh(catalog: &Catalog, days: &[i32]) -> Result<(), StoreError> {
    let layout = catalog.layout();
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
    rollup_set::publish(catalog, daily.as_mut(), names.as_mut())?;
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
