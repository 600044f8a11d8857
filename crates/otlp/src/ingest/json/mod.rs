//! OTLP/JSON decoding, as the spec writes it (hex ids, lowerCamelCase keys,
//! 64-bit integers as strings or numbers, integer enums) and as leniently as
//! the Collector reads it (snake_case keys, enum names, base64 ids).
//!
//! The document is parsed into a `serde_json::Value` and walked, so every
//! error names the field path that was wrong.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use serde_json::Value;

/// Why a JSON body could not be decoded: where, and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JsonError {
    pub path: String,
    pub message: String,
}

type Result<T> = std::result::Result<T, JsonError>;

mod encode;
mod fields;

pub use encode::encode;
use fields::{
    enumeration, err, field, from_base64, id, int64, kind_of, list, object, string, uint32_field,
    uint64_field,
};

/// Decode one `ExportTraceServiceRequest` from JSON bytes.
pub fn decode(bytes: &[u8]) -> Result<ExportTraceServiceRequest> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| JsonError {
        path: "$".to_string(),
        message: format!("not valid JSON ({e})"),
    })?;
    decode_value(&value)
}

/// Decode an already parsed JSON document.
pub fn decode_value(value: &Value) -> Result<ExportTraceServiceRequest> {
    let root = object(value, "$")?;
    let resource_spans = list(root, "$", "resourceSpans", "resource_spans", resource_spans)?;
    Ok(ExportTraceServiceRequest { resource_spans })
}

fn resource_spans(v: &Value, path: &str) -> Result<ResourceSpans> {
    let obj = object(v, path)?;
    let resource = match field(obj, "resource", "resource") {
        None => None,
        Some((r, _)) => {
            let p = format!("{path}.resource");
            let r = object(r, &p)?;
            Some(Resource {
                attributes: list(r, &p, "attributes", "attributes", key_value)?,
                dropped_attributes_count: uint32_field(
                    r,
                    &p,
                    "droppedAttributesCount",
                    "dropped_attributes_count",
                )?,
                ..Default::default()
            })
        }
    };
    Ok(ResourceSpans {
        resource,
        scope_spans: list(obj, path, "scopeSpans", "scope_spans", scope_spans)?,
        schema_url: string(obj, path, "schemaUrl", "schema_url")?,
    })
}

fn scope_spans(v: &Value, path: &str) -> Result<ScopeSpans> {
    let obj = object(v, path)?;
    let scope = match field(obj, "scope", "scope") {
        None => None,
        Some((s, _)) => {
            let p = format!("{path}.scope");
            let s = object(s, &p)?;
            Some(InstrumentationScope {
                name: string(s, &p, "name", "name")?,
                version: string(s, &p, "version", "version")?,
                attributes: list(s, &p, "attributes", "attributes", key_value)?,
                dropped_attributes_count: uint32_field(
                    s,
                    &p,
                    "droppedAttributesCount",
                    "dropped_attributes_count",
                )?,
            })
        }
    };
    Ok(ScopeSpans {
        scope,
        spans: list(obj, path, "spans", "spans", span)?,
        schema_url: string(obj, path, "schemaUrl", "schema_url")?,
    })
}

const KINDS: &[&str] = &[
    "UNSPECIFIED",
    "INTERNAL",
    "SERVER",
    "CLIENT",
    "PRODUCER",
    "CONSUMER",
];
const STATUS_CODES: &[&str] = &["UNSET", "OK", "ERROR"];

fn span(v: &Value, path: &str) -> Result<Span> {
    let obj = object(v, path)?;
    let status = match field(obj, "status", "status") {
        None => None,
        Some((s, _)) => {
            let p = format!("{path}.status");
            let s = object(s, &p)?;
            Some(Status {
                message: string(s, &p, "message", "message")?,
                code: enumeration(s, &p, "code", "code", "STATUS_CODE_", STATUS_CODES)?,
            })
        }
    };
    Ok(Span {
        trace_id: id(obj, path, "traceId", "trace_id", 16)?,
        span_id: id(obj, path, "spanId", "span_id", 8)?,
        trace_state: string(obj, path, "traceState", "trace_state")?,
        parent_span_id: id(obj, path, "parentSpanId", "parent_span_id", 8)?,
        flags: uint32_field(obj, path, "flags", "flags")?,
        name: string(obj, path, "name", "name")?,
        kind: enumeration(obj, path, "kind", "kind", "SPAN_KIND_", KINDS)?,
        start_time_unix_nano: uint64_field(obj, path, "startTimeUnixNano", "start_time_unix_nano")?,
        end_time_unix_nano: uint64_field(obj, path, "endTimeUnixNano", "end_time_unix_nano")?,
        attributes: list(obj, path, "attributes", "attributes", key_value)?,
        dropped_attributes_count: uint32_field(
            obj,
            path,
            "droppedAttributesCount",
            "dropped_attributes_count",
        )?,
        events: list(obj, path, "events", "events", event)?,
        dropped_events_count: uint32_field(
            obj,
            path,
            "droppedEventsCount",
            "dropped_events_count",
        )?,
        links: list(obj, path, "links", "links", link)?,
        dropped_links_count: uint32_field(obj, path, "droppedLinksCount", "dropped_links_count")?,
        status,
    })
}

fn event(v: &Value, path: &str) -> Result<span::Event> {
    let obj = object(v, path)?;
    Ok(span::Event {
        time_unix_nano: uint64_field(obj, path, "timeUnixNano", "time_unix_nano")?,
        name: string(obj, path, "name", "name")?,
        attributes: list(obj, path, "attributes", "attributes", key_value)?,
        dropped_attributes_count: uint32_field(
            obj,
            path,
            "droppedAttributesCount",
            "dropped_attributes_count",
        )?,
    })
}

fn link(v: &Value, path: &str) -> Result<span::Link> {
    let obj = object(v, path)?;
    Ok(span::Link {
        trace_id: id(obj, path, "traceId", "trace_id", 16)?,
        span_id: id(obj, path, "spanId", "span_id", 8)?,
        trace_state: string(obj, path, "traceState", "trace_state")?,
        attributes: list(obj, path, "attributes", "attributes", key_value)?,
        dropped_attributes_count: uint32_field(
            obj,
            path,
            "droppedAttributesCount",
            "dropped_attributes_count",
        )?,
        flags: uint32_field(obj, path, "flags", "flags")?,
    })
}

fn key_value(v: &Value, path: &str) -> Result<KeyValue> {
    let obj = object(v, path)?;
    let value = match field(obj, "value", "value") {
        None => None,
        Some((v, _)) => Some(any_value(v, &format!("{path}.value"))?),
    };
    Ok(KeyValue {
        key: string(obj, path, "key", "key")?,
        value,
        ..Default::default()
    })
}

fn any_value(v: &Value, path: &str) -> Result<AnyValue> {
    use any_value::Value as V;
    let obj = object(v, path)?;
    let pick = |camel: &str, snake: &str| field(obj, camel, snake);
    let value = if let Some((s, key)) = pick("stringValue", "string_value") {
        match s {
            Value::String(s) => Some(V::StringValue(s.clone())),
            other => {
                return err(
                    &format!("{path}.{key}"),
                    format!("expected a string, got {}", kind_of(other)),
                )
            }
        }
    } else if let Some((b, key)) = pick("boolValue", "bool_value") {
        match b {
            Value::Bool(b) => Some(V::BoolValue(*b)),
            other => {
                return err(
                    &format!("{path}.{key}"),
                    format!("expected a boolean, got {}", kind_of(other)),
                )
            }
        }
    } else if let Some((i, key)) = pick("intValue", "int_value") {
        Some(V::IntValue(int64(i, &format!("{path}.{key}"))?))
    } else if let Some((d, key)) = pick("doubleValue", "double_value") {
        let p = format!("{path}.{key}");
        Some(V::DoubleValue(match d {
            Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            Value::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other
                    .parse()
                    .map_or_else(|_| err(&p, format!("expected a number, got {other:?}")), Ok)?,
            },
            other => return err(&p, format!("expected a number, got {}", kind_of(other))),
        }))
    } else if let Some((a, key)) = pick("arrayValue", "array_value") {
        let p = format!("{path}.{key}");
        let a = object(a, &p)?;
        Some(V::ArrayValue(ArrayValue {
            values: list(a, &p, "values", "values", any_value)?,
        }))
    } else if let Some((kv, key)) = pick("kvlistValue", "kvlist_value") {
        let p = format!("{path}.{key}");
        let kv = object(kv, &p)?;
        Some(V::KvlistValue(KeyValueList {
            values: list(kv, &p, "values", "values", key_value)?,
        }))
    } else if let Some((b, key)) = pick("bytesValue", "bytes_value") {
        let p = format!("{path}.{key}");
        match b {
            Value::String(s) => Some(V::BytesValue(
                from_base64(s).map_or_else(|| err(&p, "expected base64"), Ok)?,
            )),
            other => {
                return err(
                    &p,
                    format!("expected a base64 string, got {}", kind_of(other)),
                )
            }
        }
    } else {
        None
    };
    Ok(AnyValue { value })
}
