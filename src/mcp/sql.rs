//! `query` and `describe_tables`: read-only polars SQL over three tables —
//! `tool_daily` (the daily rollup), `turn_summary` (the summarized days' turns)
//! and `spans` (a bounded window of days). One SELECT (or WITH … SELECT)
//! per call that passes the allowlist (`stormwatch-sqlguard`): the tables
//! and its own CTEs only, no table function, allowed functions only; a row
//! limit and a character budget. [`execute`] runs it; `query` calls it in a
//! worker process (`sandbox`) under a memory and a time limit.

use polars::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Context, McpError};
use crate::model::day_to_string;

/// Rows a query answers at most.
pub const MAX_ROWS: usize = 500;
/// Days of spans a query may read (the `spans` table's window).
pub const MAX_SPAN_DAYS: u32 = 7;

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

/// The statement, checked by the allowlist (`stormwatch-sqlguard`: the
/// tables and the statement's own CTEs only, no table function whatever
/// its name, allowed functions only, no cross join); the message says what
/// was refused and why, from the statement alone.
pub fn check(sql: &str) -> Result<(), McpError> {
    // The guard walks the parsed statement recursively (and prints a part
    // of it for a refusal): thousands of nested terms fit in 16 KiB and
    // need more stack than a runtime thread's 2 MiB, so it runs on a
    // thread of its own with room for the deepest statement accepted.
    let verdict = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("sql-guard".into())
            .stack_size(GUARD_STACK_BYTES)
            .spawn_scoped(scope, || stormwatch_sqlguard::check(sql))
            .map(|h| h.join())
    });
    match verdict {
        Ok(Ok(checked)) => checked
            .map(|_| ())
            .map_err(|r| McpError::Refused(r.to_string())),
        Ok(Err(_)) => Err(McpError::Refused(
            "query refused: the statement could not be checked (the check failed), so it was not run".into(),
        )),
        Err(e) => Err(McpError::Refused(format!(
            "query refused: the statement could not be checked ({e}), so it was not run"
        ))),
    }
}

/// The guard's thread stack: 64 MiB, mapped, touched only as deep as a
/// statement goes (a 16 KiB chain of 8 000 terms uses a few MiB).
const GUARD_STACK_BYTES: usize = 64 << 20;

/// The tables by name, the window they hold in words, and the pin that
/// keeps the span parts they scan (hold it until the query is collected).
type Tables = (Vec<(&'static str, LazyFrame)>, String, crate::store::Pin);

/// The tables over the window ending on the newest day with data; the
/// rollup is the one the caches hold (in a worker, read from the store).
fn tables(
    reader: &crate::store::Reader,
    rollup: &crate::read::data::Rollup,
    days: Option<u32>,
) -> Result<Tables, McpError> {
    let days = days.unwrap_or(1);
    if !(1..=MAX_SPAN_DAYS).contains(&days) {
        return Err(McpError::Argument(format!(
            "days: expected 1 to {MAX_SPAN_DAYS} (the spans table's window), got {days}"
        )));
    }
    // The newest day holding spans, never one past tomorrow (see
    // `Rollup::last_day`).
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let cap = crate::ingest::window::newest_viewable_day(now_ns);
    let to = reader.newest_day(cap)?.or(rollup.last_day()).unwrap_or(0);
    let from = to - days as i32 + 1;
    let (spans, pin) = reader.spans(from..=to)?.into_parts();
    let summaries = reader.summary_paths(from..=to, "turns.parquet")?;
    let data = |e| McpError::Data {
        context: "reading the sealed turn summaries".into(),
        source: e,
    };
    // By path, so the `date=` directories give the table its `date` column
    // (a scan of opened handles cannot). A sweep that writes a summary anew
    // renames its files over the old ones; a query planned just before reads
    // garbage and says so, and asking again answers.
    let turns = if summaries.is_empty() {
        // No day summary in the window: the summary's columns, no rows.
        DataFrame::empty_with_schema(&crate::sweep::summary::turns_schema()).lazy()
    } else {
        crate::store::parquet::scan(&summaries).map_err(data)?
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

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
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
    /// The functions a statement may call; any other is refused.
    pub functions: Vec<String>,
}

pub fn describe(ctx: &Context) -> Result<TablesAnswer, McpError> {
    let rollup = ctx.rollup()?;
    let (tables, window, _pin) = tables(&ctx.reader, &rollup, None)?;
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
            "one SELECT per call (the tables and its own CTEs, no file functions, no cross joins: a join's ON equates a column of each side; expressions nested at most {} deep; only the `functions` listed); at most {MAX_ROWS} rows; {} s and {} MiB (the query runs in a worker process, stopped at either); spans of at most {MAX_SPAN_DAYS} days (`days`)",
            stormwatch_sqlguard::MAX_EXPR_DEPTH,
            ctx.sandbox.limits.time.as_secs(),
            ctx.sandbox.limits.memory_bytes >> 20
        ),
        functions: stormwatch_sqlguard::FUNCTIONS
            .iter()
            .map(|f| f.to_string())
            .collect(),
    })
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
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

/// The longest string value a row shows; longer ones are cut, marked.
pub const MAX_CELL_CHARS: usize = 2_000;

/// A string as a row shows it: cut past [`MAX_CELL_CHARS`], counted in `cut`.
fn cell(s: &str, cut: &mut usize) -> serde_json::Value {
    match s.char_indices().nth(MAX_CELL_CHARS) {
        None => s.into(),
        Some((at, _)) => {
            *cut += 1;
            format!("{}… [cut: {} characters]", &s[..at], s.chars().count()).into()
        }
    }
}

fn json(v: AnyValue<'_>, cut: &mut usize) -> serde_json::Value {
    use serde_json::Value;
    match v {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => b.into(),
        AnyValue::String(s) => cell(s, cut),
        AnyValue::StringOwned(s) => cell(&s, cut),
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
        other => cell(other.to_string().trim_matches('"'), cut),
    }
}

/// Check `sql` and run it on the tables, in this process; blocking. The
/// `query` tool runs this in a worker process (`sandbox`), never in the
/// server: a statement the allowlist passes can still ask for more memory
/// or time than the server has to give.
pub fn execute(
    reader: &crate::store::Reader,
    rollup: &crate::read::data::Rollup,
    sql: &str,
    days: Option<u32>,
) -> Result<QueryAnswer, McpError> {
    check(sql)?;
    let (tables, window, _pin) = tables(reader, rollup, days)?;
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
    let mut cells_cut = 0usize;
    for i in 0..df.height() {
        let row: Vec<serde_json::Value> = df
            .columns()
            .iter()
            .map(|c| {
                c.get(i)
                    .map_or(serde_json::Value::Null, |v| json(v, &mut cells_cut))
            })
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
    let cells = (cells_cut > 0).then(|| {
        format!(
            "{cells_cut} value(s) longer than {MAX_CELL_CHARS} characters cut (select substr(column, 1, n) to see part of one)"
        )
    });
    let truncated = cut
        .or_else(|| {
            more.then(|| {
                format!(
                    "the first {MAX_ROWS} rows; the query returns more (add a LIMIT, or aggregate)"
                )
            })
        })
        .map(|t| match &cells {
            Some(c) => format!("{t}; {c}"),
            None => t,
        })
        .or(cells);
    Ok(QueryAnswer {
        row_count: rows.len(),
        columns,
        rows,
        window,
        truncated,
    })
}
