//! Span rows as a polars `DataFrame`: the Parquet schema, the conversion from
//! rows, and the dedup keys read back from a frame.

use polars::prelude::*;

use super::memtable::KeySet;
use crate::model::{SpanKey, SpanRow};

/// Columns of a stored span part, in order, with their types.
pub fn schema() -> Schema {
    let s = DataType::String;
    let mut schema = Schema::default();
    for (name, dtype) in [
        ("trace_id", s.clone()),
        ("span_id", s.clone()),
        ("parent_span_id", s.clone()),
        ("name", s.clone()),
        ("kind", s.clone()),
        ("service_name", s.clone()),
        ("start_ns", DataType::Int64),
        ("end_ns", DataType::Int64),
        ("duration_ns", DataType::Int64),
        ("status_code", s.clone()),
        ("status_message", s.clone()),
        ("is_tool_call", DataType::Boolean),
        ("tool_name", s.clone()),
        ("tool_call_id", s.clone()),
        ("tool_args_hash", s.clone()),
        ("tool_result_hash", s.clone()),
        ("tool_convention", s.clone()),
        ("session_id", s.clone()),
        ("turn_id", s.clone()),
        ("is_agent", DataType::Boolean),
        ("agent_call_id", s.clone()),
        ("http_status", DataType::Int32),
        ("rpc_status", DataType::Int32),
        ("error_type", s.clone()),
        ("error_class", s.clone()),
        ("retryable", DataType::Boolean),
        ("cost_usd", DataType::Float64),
        ("input_tokens", DataType::Int64),
        ("output_tokens", DataType::Int64),
        ("attributes", s.clone()),
        ("events", s.clone()),
        ("resource", s),
    ] {
        schema.with_column(name.into(), dtype);
    }
    schema
}

fn strs<'a>(
    name: &str,
    rows: &'a [&SpanRow],
    f: impl Fn(&'a SpanRow) -> Option<&'a str>,
) -> Column {
    Column::new(name.into(), rows.iter().map(|r| f(r)).collect::<Vec<_>>())
}

/// Build a frame with [`schema`] from rows.
pub fn rows_to_frame(rows: &[&SpanRow]) -> PolarsResult<DataFrame> {
    let i64s = |name: &str, f: fn(&SpanRow) -> Option<i64>| {
        Column::new(name.into(), rows.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let i32s = |name: &str, f: fn(&SpanRow) -> Option<i32>| {
        Column::new(name.into(), rows.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let bools = |name: &str, f: fn(&SpanRow) -> Option<bool>| {
        Column::new(name.into(), rows.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let columns = vec![
        strs("trace_id", rows, |r| Some(&r.trace_id)),
        strs("span_id", rows, |r| Some(&r.span_id)),
        strs("parent_span_id", rows, |r| r.parent_span_id.as_deref()),
        strs("name", rows, |r| Some(&r.name)),
        strs("kind", rows, |r| Some(r.kind)),
        strs("service_name", rows, |r| Some(r.service_name.as_ref())),
        i64s("start_ns", |r| Some(r.start_ns)),
        i64s("end_ns", |r| Some(r.end_ns)),
        i64s("duration_ns", |r| Some(r.duration_ns)),
        strs("status_code", rows, |r| Some(r.status_code)),
        strs("status_message", rows, |r| r.status_message.as_deref()),
        bools("is_tool_call", |r| Some(r.is_tool_call)),
        strs("tool_name", rows, |r| r.tool_name.as_deref()),
        strs("tool_call_id", rows, |r| r.tool_call_id.as_deref()),
        strs("tool_args_hash", rows, |r| r.tool_args_hash.as_deref()),
        strs("tool_result_hash", rows, |r| r.tool_result_hash.as_deref()),
        strs("tool_convention", rows, |r| {
            r.tool_convention.map(|c| c.as_str())
        }),
        strs("session_id", rows, |r| r.session_id.as_deref()),
        strs("turn_id", rows, |r| r.turn_id.as_deref()),
        bools("is_agent", |r| Some(r.is_agent)),
        strs("agent_call_id", rows, |r| r.agent_call_id.as_deref()),
        i32s("http_status", |r| r.http_status),
        i32s("rpc_status", |r| r.rpc_status),
        strs("error_type", rows, |r| r.error_type.as_deref()),
        strs("error_class", rows, |r| Some(r.error_class.as_str())),
        bools("retryable", |r| r.retryable),
        Column::new(
            "cost_usd".into(),
            rows.iter().map(|r| r.cost_usd).collect::<Vec<_>>(),
        ),
        i64s("input_tokens", |r| r.input_tokens),
        i64s("output_tokens", |r| r.output_tokens),
        strs("attributes", rows, |r| Some(&r.attributes)),
        strs("events", rows, |r| Some(&r.events)),
        strs("resource", rows, |r| Some(r.resource.as_ref())),
    ];
    let df = DataFrame::new(rows.len(), columns)?;
    // Casting pins the declared types even for an all-null column.
    let target = schema();
    df.lazy()
        .select(
            target
                .iter()
                .map(|(name, dtype)| col(name.clone()).cast(dtype.clone()))
                .collect::<Vec<_>>(),
        )
        .collect()
}

/// An empty frame with the span schema, for a store with no parts.
pub fn empty() -> DataFrame {
    DataFrame::empty_with_schema(&schema())
}

/// The dedup key of every row of a frame holding `trace_id` and `span_id`.
pub fn keys(df: &DataFrame) -> PolarsResult<Vec<Option<SpanKey>>> {
    let traces = df.column("trace_id")?.str()?;
    let spans = df.column("span_id")?.str()?;
    Ok(traces
        .iter()
        .zip(spans.iter())
        .map(|(t, s)| SpanKey::from_hex(t?, s?))
        .collect())
}

/// Keep the first row of each (trace id, span id) not in `seen`.
pub fn dedup(df: DataFrame, seen: &mut KeySet) -> PolarsResult<DataFrame> {
    let mask: BooleanChunked = keys(&df)?
        .into_iter()
        .map(|k| k.is_none_or(|k| seen.insert(k)))
        .collect();
    if mask.all() {
        return Ok(df);
    }
    df.filter(&mask)
}
