//! Spans as a polars `DataFrame`: the Parquet schema, the conversion from a
//! columnar batch (the write path) and from rows (tests, generated data),
//! and the dedup keys read back from a frame.

use polars::prelude::*;

use crate::ingest::batch::{
    SpanBatch, StrColumn, KINDS, NO_DEPENDENCY, NO_MODEL, NO_TOOL, STATUSES,
};
use crate::model::{ErrorClass, SpanKey, SpanRow, ToolConvention};

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
        ("resource", s.clone()),
        ("scope_name", s.clone()),
        ("scope_version", s.clone()),
        ("tool_args_recorded", DataType::Boolean),
        ("dependency", s.clone()),
        ("retry_after_ms", DataType::Int64),
        ("is_model", DataType::Boolean),
        ("model_name", s),
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
        strs("scope_name", rows, |r| r.scope_name.as_deref()),
        strs("scope_version", rows, |r| r.scope_version.as_deref()),
        bools("tool_args_recorded", |r| r.tool_args_recorded),
        strs("dependency", rows, |r| r.dependency.as_deref()),
        i64s("retry_after_ms", |r| r.retry_after_ms),
        bools("is_model", |r| Some(r.is_model)),
        strs("model_name", rows, |r| r.model_name.as_deref()),
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
/// [`rows_to_frame`] of its rows.
pub fn batch_to_frame(b: &SpanBatch) -> PolarsResult<DataFrame> {
    batch_into_frame(b.clone())
}

/// [`batch_to_frame`], taking the batch: its string buffers become the
/// frame's (not copied); ids and hashes become hex text, dictionary numbers
/// and enums views of one copy of each text.
pub fn batch_into_frame(b: SpanBatch) -> PolarsResult<DataFrame> {
    let n = b.len();
    let [service_name, resource, scope_name, scope_version] = resource_columns(&b)?;
    let tools: Vec<&str> = b.tools.values().iter().map(|t| &**t).collect();
    let dependencies: Vec<&str> = b.dependencies.values().iter().map(|d| &**d).collect();
    let models: Vec<&str> = b.models.values().iter().map(|m| &**m).collect();
    let tool_ids = || b.tool.iter().map(|&t| (t != NO_TOOL).then_some(t));
    let durations: Vec<i64> = b
        .end_ns
        .iter()
        .zip(&b.start_ns)
        .map(|(e, s)| e - s)
        .collect();
    let mut columns = vec![
        hex_column("trace_id", b.trace_id.iter().map(|&t| Some(t)))?,
        hex_column("span_id", b.span_id.iter().map(|&s| Some(s)))?,
        hex_column(
            "parent_span_id",
            b.parent_span_id.iter().map(|&p| (p != [0; 8]).then_some(p)),
        )?,
        Column::default(), // name
        dict_column("kind", &KINDS, b.kind.iter().map(|&k| Some(u32::from(k))))?,
        service_name,
        Int64Chunked::from_slice("start_ns".into(), &b.start_ns).into_column(),
        Int64Chunked::from_slice("end_ns".into(), &b.end_ns).into_column(),
        Int64Chunked::from_vec("duration_ns".into(), durations).into_column(),
        dict_column(
            "status_code",
            &STATUSES,
            b.status.iter().map(|&s| Some(u32::from(s))),
        )?,
        Column::default(), // status_message
        BooleanChunked::from_iter_values("is_tool_call".into(), tool_ids().map(|t| t.is_some()))
            .into_column(),
        dict_column("tool_name", &tools, tool_ids())?,
        Column::default(), // tool_call_id
        hex_column("tool_args_hash", b.tool_args_hash.iter().copied())?,
        hex_column("tool_result_hash", b.tool_result_hash.iter().copied())?,
        dict_column(
            "tool_convention",
            &ToolConvention::ALL.map(ToolConvention::as_str),
            b.tool_convention.iter().map(|c| c.map(|c| c as u32)),
        )?,
        Column::default(), // session_id
        StringChunked::full_null("turn_id".into(), n).into_column(),
        BooleanChunked::from_slice("is_agent".into(), &b.is_agent).into_column(),
        Column::default(), // agent_call_id
        Int32Chunked::from_slice_options("http_status".into(), &b.http_status).into_column(),
        Int32Chunked::from_slice_options("rpc_status".into(), &b.rpc_status).into_column(),
        Column::default(), // error_type
        dict_column(
            "error_class",
            &ErrorClass::ALL.map(ErrorClass::as_str),
            b.error_class.iter().map(|&c| Some(c as u32)),
        )?,
        BooleanChunked::from_iter_options(
            "retryable".into(),
            b.error_class.iter().map(|c| c.retryable()),
        )
        .into_column(),
        Float64Chunked::from_slice_options("cost_usd".into(), &b.cost_usd).into_column(),
        Int64Chunked::from_slice_options("input_tokens".into(), &b.input_tokens).into_column(),
        Int64Chunked::from_slice_options("output_tokens".into(), &b.output_tokens).into_column(),
        Column::default(), // attributes
        Column::default(), // events
        resource,
        scope_name,
        scope_version,
        BooleanChunked::from_slice_options("tool_args_recorded".into(), &b.tool_args_recorded)
            .into_column(),
        dict_column(
            "dependency",
            &dependencies,
            b.dependency
                .iter()
                .map(|&d| (d != NO_DEPENDENCY).then_some(d)),
        )?,
        Int64Chunked::from_slice_options("retry_after_ms".into(), &b.retry_after_ms).into_column(),
        BooleanChunked::from_slice("is_model".into(), &b.is_model).into_column(),
        dict_column(
            "model_name",
            &models,
            b.model.iter().map(|&m| (m != NO_MODEL).then_some(m)),
        )?,
    ];
    for (at, name, c) in [
        (3, "name", b.name),
        (10, "status_message", b.status_message),
        (13, "tool_call_id", b.tool_call_id),
        (17, "session_id", b.session_id),
        (20, "agent_call_id", b.agent_call_id),
        (23, "error_type", b.error_type),
        (29, "attributes", b.attributes),
        (30, "events", b.events),
    ] {
        columns[at] = str_column(name, c)?;
    }
    DataFrame::new(n, columns)
}

/// The columns a batch's resources give its rows: service name, resource
/// JSON, instrumentation scope name and version.
fn resource_columns(b: &SpanBatch) -> PolarsResult<[Column; 4]> {
    let services: Vec<&str> = b.resources.values().iter().map(|r| &*r.service).collect();
    let resource_json: Vec<&str> = b.resources.values().iter().map(|r| &*r.json).collect();
    let scope_names: Vec<&str> = b
        .resources
        .values()
        .iter()
        .map(|r| r.scope_name.as_deref().unwrap_or(""))
        .collect();
    let scope_versions: Vec<&str> = b
        .resources
        .values()
        .iter()
        .map(|r| r.scope_version.as_deref().unwrap_or(""))
        .collect();
    let resources = &b.resources;
    let scope_ids = |version: bool| {
        b.resource.iter().map(move |&r| {
            let res = resources.get(r);
            let present = if version {
                res.scope_version.is_some()
            } else {
                res.scope_name.is_some()
            };
            present.then_some(r)
        })
    };
    Ok([
        dict_column(
            "service_name",
            &services,
            b.resource.iter().map(|&r| Some(r)),
        )?,
        dict_column(
            "resource",
            &resource_json,
            b.resource.iter().map(|&r| Some(r)),
        )?,
        dict_column("scope_name", &scope_names, scope_ids(false))?,
        dict_column("scope_version", &scope_versions, scope_ids(true))?,
    ])
}

/// A string column that takes the buffer of `c` as it is.
fn str_column(name: &str, c: StrColumn) -> PolarsResult<Column> {
    let (data, offsets, valid) = c.into_parts();
    utf8_column(name, data.into_bytes(), offsets, valid)
}

/// A string column of `LargeUtf8` parts (value `i` is
/// `data[offsets[i]..offsets[i + 1]]`, null unless `valid[i]`); polars makes
/// views into `data`, not a copy.
fn utf8_column(
    name: &str,
    data: Vec<u8>,
    offsets: Vec<i64>,
    valid: Vec<bool>,
) -> PolarsResult<Column> {
    let validity = (!valid.iter().all(|v| *v)).then(|| valid.into_iter().collect());
    let array = LargeStringArray::try_new(
        ArrowDataType::LargeUtf8,
        offsets.try_into()?,
        data.into(),
        validity,
    )?;
    Ok(Series::from_arrow(name.into(), Box::new(array))?.into_column())
}

/// A string column of `values[id]` for each id (null for `None`): views of
/// one copy of each value.
fn dict_column(
    name: &str,
    values: &[&str],
    ids: impl Iterator<Item = Option<u32>>,
) -> PolarsResult<Column> {
    let dict = StringChunked::from_slice(name.into(), values);
    let ids: IdxCa = ids.map(|i| i.map(|i| i as IdxSize)).collect();
    Ok(dict.take(&ids)?.into_column())
}

/// Lowercase hex of fixed-width ids (`None`: null).
fn hex_column<const N: usize>(
    name: &str,
    ids: impl ExactSizeIterator<Item = Option<[u8; N]>>,
) -> PolarsResult<Column> {
    let mut data = Vec::with_capacity(ids.len() * 2 * N);
    let mut offsets = Vec::with_capacity(ids.len() + 1);
    offsets.push(0i64);
    let mut valid = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(id) = &id {
            push_hex(&mut data, id);
        }
        offsets.push(data.len() as i64);
        valid.push(id.is_some());
    }
    utf8_column(name, data, offsets, valid)
}

/// Lowercase hex of `bytes`, appended.
fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 0xf) as usize]);
    }
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

/// A set of span keys, hashed with foldhash (fast, randomly seeded per set).
pub type KeySet = std::collections::HashSet<SpanKey, foldhash::fast::RandomState>;
