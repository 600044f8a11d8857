//! The per-tool daily rollup (`rollups/tool_daily.parquet`): computed from a
//! day's parts with `queries/tool_daily.sql`, refreshed for the days a commit
//! touched, so later reads never rescan raw spans for daily numbers.

use std::collections::HashSet;
use std::fs;

use polars::prelude::*;
use polars::sql::SQLContext;

use super::layout::Layout;
use super::{parquet, wal, StoreError};
use crate::model::day_to_string;

/// The queries, as shipped in `queries/`.
pub const TOOL_DAILY_SQL: &str = include_str!("../../queries/tool_daily.sql");
pub const TOOL_ERROR_NAMES_SQL: &str = include_str!("../../queries/tool_error_names.sql");

/// Tool-call rows of one day, with MCP duplicates removed and a `day` column.
pub fn tool_rows(layout: &Layout, day: i32) -> Result<Option<LazyFrame>, StoreError> {
    let parts = layout.parts(day)?;
    if parts.is_empty() {
        return Ok(None);
    }
    let context = || format!("reading the tool calls of {}", day_to_string(day));
    let tools = parquet::scan(&parts)
        .map_err(|e| StoreError::data(context(), e))?
        .filter(col("is_tool_call"));
    let counted = [
        col("tool_name"),
        col("service_name"),
        col("duration_ns"),
        col("error_class"),
        col("retryable"),
        col("cost_usd"),
        col("error_type"),
    ];
    let day_lit = lit(day_to_string(day)).alias("day");
    // The ids are read only when the day has MCP spans to pair up: most
    // days have none, and the ids are the bulk of the bytes.
    let mcp = tools
        .clone()
        .filter(col("tool_convention").eq(lit("mcp")))
        .select([len().alias("n")])
        .collect()
        .and_then(|df| {
            Ok(df
                .column("n")?
                .cast(&DataType::UInt64)?
                .u64()?
                .get(0)
                .unwrap_or(0))
        })
        .map_err(|e| StoreError::data(context(), e))?;
    if mcp == 0 {
        return Ok(Some(tools.select(counted).with_column(day_lit)));
    }
    let mut wanted = counted.to_vec();
    wanted.extend([
        col("trace_id"),
        col("span_id"),
        col("parent_span_id"),
        col("tool_convention"),
    ]);
    let df = tools
        .select(wanted)
        .collect()
        .map_err(|e| StoreError::data(context(), e))?;
    let keep = !mcp_duplicates(&df).map_err(|e| StoreError::data(context(), e))?;
    let df = df
        .filter(&keep)
        .map_err(|e| StoreError::data(context(), e))?;
    Ok(Some(df.lazy().with_column(day_lit)))
}

/// Rows that are MCP `tools/call` spans describing the same call as a GenAI
/// (or other convention's) tool span: its parent or its child, same tool.
/// Such a call is counted once, as the non-MCP span.
pub fn mcp_duplicates(df: &DataFrame) -> PolarsResult<BooleanChunked> {
    let conv = df.column("tool_convention")?.str()?;
    let is_mcp = |i: usize| conv.get(i) == Some("mcp");
    if !(0..df.height()).any(is_mcp) {
        return Ok(BooleanChunked::full(
            "mcp_duplicate".into(),
            false,
            df.height(),
        ));
    }
    let trace = df.column("trace_id")?.str()?;
    let span = df.column("span_id")?.str()?;
    let parent = df.column("parent_span_id")?.str()?;
    let tool = df.column("tool_name")?.str()?;
    type Set<'a> =
        HashSet<(Option<&'a str>, Option<&'a str>, &'a str), foldhash::fast::RandomState>;
    let (mut by_id, mut by_parent) = (Set::default(), Set::default());
    for i in 0..df.height() {
        if let (false, Some(t)) = (is_mcp(i), tool.get(i)) {
            by_id.insert((trace.get(i), span.get(i), t));
            by_parent.insert((trace.get(i), parent.get(i), t));
        }
    }
    Ok((0..df.height())
        .map(|i| {
            let Some(t) = tool.get(i).filter(|_| is_mcp(i)) else {
                return false;
            };
            by_id.contains(&(trace.get(i), parent.get(i), t))
                || by_parent.contains(&(trace.get(i), span.get(i), t))
        })
        .collect())
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
    fs::File::create(&tmp)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, &body)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    wal::sync_dir(&layout.rollups_dir())
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

/// Recompute the rollup rows of `days`, rewrite the rollup file, and clear
/// those days from the dirty list.
pub fn refresh(layout: &Layout, days: &[i32]) -> Result<(), StoreError> {
    rewrite(
        layout,
        days,
        &layout.tool_daily(),
        TOOL_DAILY_SQL,
        &["day", "tool_name", "service_name"],
    )?;
    rewrite(
        layout,
        days,
        &layout.tool_error_names(),
        TOOL_ERROR_NAMES_SQL,
        &["day", "tool_name", "error_class", "error_type"],
    )?;
    let mut all = dirty(layout)?;
    for d in days {
        all.remove(d);
    }
    write_dirty(layout, &all)
}

fn rewrite(
    layout: &Layout,
    days: &[i32],
    path: &std::path::Path,
    sql: &str,
    order: &[&str],
) -> Result<(), StoreError> {
    let path = path.to_path_buf();
    let context = || format!("refreshing {}", path.display());
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
    let kept = match fs::metadata(&path) {
        Ok(_) => {
            let old = parquet::scan(std::slice::from_ref(&path))
                .and_then(|lf| lf.collect())
                .map_err(|e| StoreError::data(context(), e))?;
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
        Err(_) => None,
    };
    let merged = match (kept, fresh) {
        (None, None) => {
            let _ = fs::remove_file(&path);
            return Ok(());
        }
        (Some(a), None) | (None, Some(a)) => a,
        (Some(mut a), Some(b)) => {
            a.vstack_mut_owned(b)
                .map_err(|e| StoreError::data(context(), e))?;
            a
        }
    };
    let mut merged = merged
        .sort(order.to_vec(), SortMultipleOptions::default())
        .map_err(|e| StoreError::data(context(), e))?;
    let tmp = path.with_extension("parquet.tmp");
    parquet::write_file(&tmp, &mut merged)?;
    fs::rename(&tmp, &path).map_err(|e| StoreError::io(context(), e))?;
    wal::sync_dir(&layout.rollups_dir())
}
