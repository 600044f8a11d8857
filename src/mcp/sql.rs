//! `query` and `describe_tables`: read-only polars SQL over three tables —
//! `tool_daily` (the daily rollup), `turn_summary` (the sealed days' turns)
//! and `spans` (a bounded window of days). One SELECT (or WITH … SELECT)
//! per call, naming only those tables and its own CTEs: no statement that
//! writes, no file function (`read_parquet`, `read_csv`…), a row limit, and
//! a time limit.

use std::collections::BTreeSet;

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Serialize;
use sqlparser::ast::{visit_relations, Statement};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use super::{Context, McpError};
use crate::model::day_to_string;

/// Rows a query answers at most.
pub const MAX_ROWS: usize = 500;
/// Days of spans a query may read (the `spans` table's window).
pub const MAX_SPAN_DAYS: u32 = 7;
/// How long a query may run before it is answered with an error.
pub const TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

const TABLES: [(&str, &str); 3] = [
    (
        "tool_daily",
        "the daily rollup: one row per day, tool and service (calls, errors, latency percentiles, calls by error class); every day stored",
    ),
    (
        "turn_summary",
        "the sealed days' turns that called a tool twice or more: trace, turn, when it began, its extent and span count, its session; the days of the window that are sealed",
    ),
    (
        "spans",
        "the spans of the window's days (at most 7, the newest by default): one row per span with its tool call, error class, hashes and attributes",
    ),
];

/// The statement, checked: one query that names only the tables (or its
/// own CTEs). The message says what was refused and why.
pub fn check(sql: &str) -> Result<(), McpError> {
    let refuse = |why: String| McpError::Refused(format!("query refused: {why}"));
    let statements = Parser::parse_sql(&GenericDialect {}, sql)
        .map_err(|e| refuse(format!("it does not parse as SQL ({e})")))?;
    let [statement] = statements.as_slice() else {
        return Err(refuse(format!(
            "expected exactly one SELECT statement, got {}",
            statements.len()
        )));
    };
    let Statement::Query(query) = statement else {
        let kind = statement.to_string();
        let word = kind.split_whitespace().next().unwrap_or("?").to_uppercase();
        return Err(refuse(format!(
            "only SELECT is allowed (read-only), got a {word} statement"
        )));
    };
    let mut allowed: BTreeSet<String> = TABLES.iter().map(|(t, _)| t.to_string()).collect();
    if let Some(with) = &query.with {
        for cte in &with.cte_tables {
            allowed.insert(cte.alias.name.value.to_lowercase());
        }
    }
    let mut bad = None;
    let _ = visit_relations(statement, |name| {
        let n = name.to_string().to_lowercase();
        if !allowed.contains(&n) && bad.is_none() {
            bad = Some(n);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    if let Some(n) = bad {
        let hint = if n.starts_with("read_") {
            " (file functions are not allowed: the tables are already loaded)"
        } else {
            ""
        };
        return Err(refuse(format!(
            "it reads {n:?}{hint}; the tables are tool_daily, turn_summary and spans (describe_tables gives their columns)"
        )));
    }
    Ok(())
}

/// The tables by name, the window they hold in words, and the pin that
/// keeps the span parts they scan (hold it until the query is collected).
type Tables = (Vec<(&'static str, LazyFrame)>, String, crate::store::Pin);

/// The tables over the window ending on the newest day with data.
fn tables(ctx: &Context, days: Option<u32>) -> Result<Tables, McpError> {
    let days = days.unwrap_or(1);
    if !(1..=MAX_SPAN_DAYS).contains(&days) {
        return Err(McpError::Argument(format!(
            "days: expected 1 to {MAX_SPAN_DAYS} (the spans table's window), got {days}"
        )));
    }
    let rollup = ctx.rollup()?;
    // The newest day holding spans, never one past tomorrow (see
    // `Rollup::last_day`).
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let cap = crate::ingest::window::newest_viewable_day(now_ns);
    let to = ctx
        .reader
        .newest_day(cap)?
        .or(rollup.last_day())
        .unwrap_or(0);
    let from = to - days as i32 + 1;
    let (spans, pin) = ctx.reader.spans(from..=to)?.into_parts();
    let layout = ctx.reader.layout();
    let sealed: Vec<std::path::PathBuf> = layout
        .sealed_days()?
        .into_iter()
        .filter(|d| (from..=to).contains(d))
        .map(|d| layout.sealed_dir(d).join("turns.parquet"))
        .filter(|p| p.exists())
        .collect();
    let data = |e| McpError::Data {
        context: "reading the sealed turn summaries".into(),
        source: e,
    };
    // By path, so the `date=` directories give the table its `date` column
    // (a scan of opened handles cannot). A sweep that writes a summary anew
    // renames its files over the old ones; a query planned just before reads
    // garbage and says so, and asking again answers.
    let turns = if sealed.is_empty() {
        // No sealed day in the window: the summary's columns, no rows.
        DataFrame::empty_with_schema(&crate::sweep::summary::turns_schema()).lazy()
    } else {
        crate::store::parquet::scan(&sealed).map_err(data)?
    };
    let window = format!("{} to {}", day_to_string(from), day_to_string(to));
    Ok((
        vec![
            ("tool_daily", rollup.frame.clone().lazy()),
            ("turn_summary", turns),
            ("spans", spans),
        ],
        window,
        pin,
    ))
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub dtype: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Table {
    pub name: String,
    pub description: String,
    pub columns: Vec<Column>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TablesAnswer {
    pub tables: Vec<Table>,
    /// The days the `spans` and `turn_summary` tables hold by default.
    pub window: String,
    pub limits: String,
}

pub fn describe(ctx: &Context) -> Result<TablesAnswer, McpError> {
    let (tables, window, _pin) = tables(ctx, None)?;
    let mut out = Vec::new();
    for (name, mut lf) in tables {
        let schema = lf.collect_schema().map_err(|e| McpError::Data {
            context: format!("the schema of {name}"),
            source: e,
        })?;
        out.push(Table {
            name: name.to_string(),
            description: TABLES
                .iter()
                .find(|(t, _)| *t == name)
                .map(|(_, d)| d.to_string())
                .unwrap_or_default(),
            columns: schema
                .iter()
                .map(|(n, t)| Column {
                    name: n.to_string(),
                    dtype: t.to_string(),
                })
                .collect(),
        });
    }
    Ok(TablesAnswer {
        tables: out,
        window,
        limits: format!(
            "one SELECT per call; at most {MAX_ROWS} rows; {} s; spans of at most {MAX_SPAN_DAYS} days (`days`)",
            TIME_LIMIT.as_secs()
        ),
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct QueryAnswer {
    pub columns: Vec<Column>,
    /// Rows as arrays, in the columns' order.
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: usize,
    /// The days the `spans` and `turn_summary` tables held.
    pub window: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

fn json(v: AnyValue<'_>) -> serde_json::Value {
    use serde_json::Value;
    match v {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => b.into(),
        AnyValue::String(s) => s.into(),
        AnyValue::StringOwned(s) => s.to_string().into(),
        AnyValue::Int8(n) => n.into(),
        AnyValue::Int16(n) => n.into(),
        AnyValue::Int32(n) => n.into(),
        AnyValue::Int64(n) => n.into(),
        AnyValue::UInt8(n) => n.into(),
        AnyValue::UInt16(n) => n.into(),
        AnyValue::UInt32(n) => n.into(),
        AnyValue::UInt64(n) => n.into(),
        AnyValue::Float32(f) => {
            serde_json::Number::from_f64(f64::from(f)).map_or(Value::Null, Value::Number)
        }
        AnyValue::Float64(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        other => other.to_string().trim_matches('"').to_string().into(),
    }
}

/// Run `sql` (already [`check`]ed) on the tables; blocking.
pub fn run(ctx: &Context, sql: &str, days: Option<u32>) -> Result<QueryAnswer, McpError> {
    check(sql)?;
    let (tables, window, _pin) = tables(ctx, days)?;
    let mut sql_ctx = polars::sql::SQLContext::new();
    for (name, lf) in tables {
        sql_ctx.register(name, lf);
    }
    let fail = |e: PolarsError| McpError::Refused(format!("query failed: {e}"));
    let df = sql_ctx
        .execute(sql)
        .map_err(fail)?
        .limit(MAX_ROWS as IdxSize + 1)
        .collect()
        .map_err(fail)?;
    let more = df.height() > MAX_ROWS;
    let df = df.head(Some(MAX_ROWS));
    let columns: Vec<Column> = df
        .columns()
        .iter()
        .map(|c| Column {
            name: c.name().to_string(),
            dtype: c.dtype().to_string(),
        })
        .collect();
    let mut rows = Vec::with_capacity(df.height());
    let mut chars = 0;
    let mut cut = None;
    for i in 0..df.height() {
        let row: Vec<serde_json::Value> = df
            .columns()
            .iter()
            .map(|c| c.get(i).map_or(serde_json::Value::Null, json))
            .collect();
        chars += serde_json::to_string(&row).map_or(0, |s| s.len());
        if !rows.is_empty() && chars > super::page::BUDGET_CHARS - 2_000 {
            cut = Some(format!(
                "{} of {}{} rows shown, cut to the {}-character budget; aggregate, select fewer columns or add LIMIT/OFFSET",
                rows.len(),
                df.height(),
                if more { "+" } else { "" },
                super::page::BUDGET_CHARS
            ));
            break;
        }
        rows.push(row);
    }
    let truncated = cut.or_else(|| {
        more.then(|| {
            format!("the first {MAX_ROWS} rows; the query returns more (add a LIMIT, or aggregate)")
        })
    });
    Ok(QueryAnswer {
        row_count: rows.len(),
        columns,
        rows,
        window,
        truncated,
    })
}
