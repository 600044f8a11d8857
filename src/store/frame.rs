//! Spans as a polars `DataFrame`: the Parquet schema, the conversion from a
//! columnar batch (the write path) and from rows (tests, generated data),
//! and the dedup keys read back from a frame.

use polars::prelude::*;

use super::memtable::KeySet;
use crate::ingest::batch::{SpanBatch, StrColumn, KINDS, NO_TOOL, STATUSES};
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

/// Build a frame with [`schema`] from a batch: the same frame as
/// [`rows_to_frame`] of its rows. Ids and hashes become hex text here.
pub fn batch_to_frame(b: &SpanBatch) -> PolarsResult<DataFrame> {
    let n = b.len();
    let strs = |name: &str, c: &StrColumn| text_column(name, n, |i| c.get(i));
    let texts = |name: &str, f: &dyn Fn(usize) -> Option<&'static str>| text_column(name, n, f);
    let resources = |f: fn(&crate::ingest::batch::Resource) -> &str| -> Vec<&str> {
        b.resources.values().iter().map(f).collect()
    };
    let services = resources(|r| &r.service);
    let resource_json = resources(|r| &r.json);
    let tools: Vec<&str> = b.tools.values().iter().map(|t| &**t).collect();
    let i64s = |name: &str, v: &[i64]| Int64Chunked::from_slice(name.into(), v).into_column();
    let opt_i64s = |name: &str, v: &[Option<i64>]| {
        Int64Chunked::from_slice_options(name.into(), v).into_column()
    };
    let opt_i32s = |name: &str, v: &[Option<i32>]| {
        Int32Chunked::from_slice_options(name.into(), v).into_column()
    };
    let durations: Vec<i64> = b
        .end_ns
        .iter()
        .zip(&b.start_ns)
        .map(|(e, s)| e - s)
        .collect();
    let columns = vec![
        hex_column("trace_id", &b.trace_id, |_| true),
        hex_column("span_id", &b.span_id, |_| true),
        hex_column("parent_span_id", &b.parent_span_id, |p| *p != [0; 8]),
        strs("name", &b.name),
        texts("kind", &|i| Some(KINDS[b.kind[i] as usize])),
        text_column("service_name", n, |i| {
            Some(services[b.resource[i] as usize])
        }),
        i64s("start_ns", &b.start_ns),
        i64s("end_ns", &b.end_ns),
        i64s("duration_ns", &durations),
        texts("status_code", &|i| Some(STATUSES[b.status[i] as usize])),
        strs("status_message", &b.status_message),
        BooleanChunked::from_iter_values(
            "is_tool_call".into(),
            b.tool.iter().map(|&t| t != NO_TOOL),
        )
        .into_column(),
        text_column("tool_name", n, |i| {
            let t = b.tool[i];
            (t != NO_TOOL).then(|| tools[t as usize])
        }),
        strs("tool_call_id", &b.tool_call_id),
        opt_hex_column("tool_args_hash", &b.tool_args_hash),
        opt_hex_column("tool_result_hash", &b.tool_result_hash),
        texts("tool_convention", &|i| {
            b.tool_convention[i].map(|c| c.as_str())
        }),
        strs("session_id", &b.session_id),
        StringChunked::full_null("turn_id".into(), n).into_column(),
        BooleanChunked::from_slice("is_agent".into(), &b.is_agent).into_column(),
        strs("agent_call_id", &b.agent_call_id),
        opt_i32s("http_status", &b.http_status),
        opt_i32s("rpc_status", &b.rpc_status),
        strs("error_type", &b.error_type),
        texts("error_class", &|i| Some(b.error_class[i].as_str())),
        BooleanChunked::from_iter_options(
            "retryable".into(),
            b.error_class.iter().map(|c| c.retryable()),
        )
        .into_column(),
        Float64Chunked::from_slice_options("cost_usd".into(), &b.cost_usd).into_column(),
        opt_i64s("input_tokens", &b.input_tokens),
        opt_i64s("output_tokens", &b.output_tokens),
        strs("attributes", &b.attributes),
        strs("events", &b.events),
        text_column("resource", n, |i| {
            Some(resource_json[b.resource[i] as usize])
        }),
    ];
    DataFrame::new(n, columns)
}

/// A text column of `n` values, value `i` from `f(i)`.
fn text_column<'a>(name: &str, n: usize, f: impl Fn(usize) -> Option<&'a str>) -> Column {
    let mut out = StringChunkedBuilder::new(name.into(), n);
    for i in 0..n {
        out.append_option(f(i));
    }
    out.finish().into_column()
}

/// Lowercase hex of fixed-width ids, null where `present` says so.
fn hex_column<const N: usize>(
    name: &str,
    ids: &[[u8; N]],
    present: impl Fn(&[u8; N]) -> bool,
) -> Column {
    let mut out = StringChunkedBuilder::new(name.into(), ids.len());
    let mut text = vec![0u8; 2 * N];
    for id in ids {
        if present(id) {
            out.append_value(hex_into(id, &mut text));
        } else {
            out.append_null();
        }
    }
    out.finish().into_column()
}

fn opt_hex_column(name: &str, hashes: &[Option<[u8; 16]>]) -> Column {
    let mut out = StringChunkedBuilder::new(name.into(), hashes.len());
    let mut text = [0u8; 32];
    for h in hashes {
        match h {
            Some(h) => out.append_value(hex_into(h, &mut text)),
            None => out.append_null(),
        }
    }
    out.finish().into_column()
}

/// `bytes` as lowercase hex in `out` (twice their length).
fn hex_into<'a>(bytes: &[u8], out: &'a mut [u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = DIGITS[(b & 0xf) as usize];
    }
    std::str::from_utf8(out).unwrap_or_default()
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
