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
use serde_json::{Map, Value};

/// Why a JSON body could not be decoded: where, and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JsonError {
    pub path: String,
    pub message: String,
}

type Result<T> = std::result::Result<T, JsonError>;

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

fn err<T>(path: &str, message: impl Into<String>) -> Result<T> {
    Err(JsonError {
        path: path.to_string(),
        message: message.into(),
    })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().map_or_else(
        || err(path, format!("expected an object, got {}", kind_of(v))),
        Ok,
    )
}

/// The field under its camelCase or snake_case name; `null` counts as absent.
fn field<'a>(obj: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<(&'a Value, String)> {
    [camel, snake].into_iter().find_map(|k| {
        obj.get(k)
            .filter(|v| !v.is_null())
            .map(|v| (v, k.to_string()))
    })
}

fn list<T>(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    item: fn(&Value, &str) -> Result<T>,
) -> Result<Vec<T>> {
    let Some((v, key)) = field(obj, camel, snake) else {
        return Ok(Vec::new());
    };
    let p = format!("{path}.{key}");
    let arr = v.as_array().map_or_else(
        || err(&p, format!("expected an array, got {}", kind_of(v))),
        Ok,
    )?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| item(v, &format!("{p}[{i}]")))
        .collect()
}

fn string(obj: &Map<String, Value>, path: &str, camel: &str, snake: &str) -> Result<String> {
    match field(obj, camel, snake) {
        None => Ok(String::new()),
        Some((Value::String(s), _)) => Ok(s.clone()),
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected a string, got {}", kind_of(v)),
        ),
    }
}

/// A 64-bit integer given as a number or a decimal string.
fn int64(v: &Value, path: &str) -> Result<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i64)
            })
            .map_or_else(
                || err(path, format!("expected a 64-bit integer, got {n}")),
                Ok,
            ),
        Value::String(s) => s.trim().parse().map_or_else(
            |_| err(path, format!("expected a 64-bit integer, got {s:?}")),
            Ok,
        ),
        other => err(path, format!("expected an integer, got {}", kind_of(other))),
    }
}

fn uint64_field(obj: &Map<String, Value>, path: &str, camel: &str, snake: &str) -> Result<u64> {
    match field(obj, camel, snake) {
        None => Ok(0),
        Some((Value::Number(n), key)) => n.as_u64().map_or_else(
            || {
                err(
                    &format!("{path}.{key}"),
                    format!("expected an unsigned 64-bit integer, got {n}"),
                )
            },
            Ok,
        ),
        Some((Value::String(s), key)) => s.trim().parse().map_or_else(
            |_| {
                err(
                    &format!("{path}.{key}"),
                    format!("expected an unsigned 64-bit integer, got {s:?}"),
                )
            },
            Ok,
        ),
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected an integer, got {}", kind_of(v)),
        ),
    }
}

fn uint32_field(obj: &Map<String, Value>, path: &str, camel: &str, snake: &str) -> Result<u32> {
    let n = uint64_field(obj, path, camel, snake)?;
    u32::try_from(n).map_or_else(
        |_| {
            err(
                &format!("{path}.{camel}"),
                format!("{n} does not fit 32 bits"),
            )
        },
        Ok,
    )
}

/// An enum given as its number or its name (`SPAN_KIND_CLIENT`, or just `CLIENT`).
fn enumeration(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    prefix: &str,
    names: &[&str],
) -> Result<i32> {
    match field(obj, camel, snake) {
        None => Ok(0),
        Some((Value::Number(n), key)) => {
            n.as_i64().and_then(|i| i32::try_from(i).ok()).map_or_else(
                || {
                    err(
                        &format!("{path}.{key}"),
                        format!("expected an enum number, got {n}"),
                    )
                },
                Ok,
            )
        }
        Some((Value::String(s), key)) => {
            let upper = s.trim().to_ascii_uppercase();
            let bare = upper.strip_prefix(prefix).unwrap_or(&upper);
            if let Some(i) = names.iter().position(|n| *n == bare) {
                return Ok(i as i32);
            }
            upper.parse().map_or_else(
                |_| {
                    err(
                        &format!("{path}.{key}"),
                        format!(
                            "expected one of {} (with or without {prefix}), got {s:?}",
                            names.join(", ")
                        ),
                    )
                },
                Ok,
            )
        }
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected an enum, got {}", kind_of(v)),
        ),
    }
}

/// An id: hex as the spec has it, or base64 as some older exporters sent.
/// A wrong length is kept so normalization rejects that one span (partial
/// success); characters that are neither make the body undecodable (400),
/// as the Collector answers too.
fn id(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    len: usize,
) -> Result<Vec<u8>> {
    let Some((v, key)) = field(obj, camel, snake) else {
        return Ok(Vec::new());
    };
    let p = format!("{path}.{key}");
    let Value::String(s) = v else {
        return err(&p, format!("expected a hex string, got {}", kind_of(v)));
    };
    let s = s.trim();
    if let Some(bytes) = from_hex(s) {
        return Ok(bytes);
    }
    // Base64 only at the lengths `len` bytes take, padded or not, so that
    // no hex id of a wrong length is read as base64.
    let padded = len.div_ceil(3) * 4;
    let unpadded = (len * 4).div_ceil(3);
    if s.len() == padded || s.len() == unpadded {
        if let Some(bytes) = from_base64(s) {
            return Ok(bytes);
        }
    }
    err(
        &p,
        format!("expected {} hex characters, got {s:?}", len * 2),
    )
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Standard or URL-safe base64, padded or not, trailing bits ignored: what
/// protobuf's JSON mapping accepts for `bytes` (Go's protojson reads both
/// alphabets, with or without padding).
fn from_base64(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
    use base64::engine::DecodePaddingMode;
    use base64::{alphabet, Engine};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
    STANDARD.decode(s).or_else(|_| URL_SAFE.decode(s)).ok()
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

/// Encode a request as OTLP/JSON, as the spec writes it (hex ids, int64 as
/// strings, integer enums). Used by the tests and the fixture tooling.
pub fn encode(req: &ExportTraceServiceRequest) -> String {
    serde_json::json!({
        "resourceSpans": req.resource_spans.iter().map(|rs| serde_json::json!({
            "resource": {"attributes": rs.resource.as_ref().map(|r| kvs(&r.attributes)).unwrap_or_default()},
            "scopeSpans": rs.scope_spans.iter().map(|ss| serde_json::json!({
                "scope": ss.scope.as_ref().map(|s| serde_json::json!({"name": s.name, "version": s.version})),
                "spans": ss.spans.iter().map(encode_span).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
    .to_string()
}

fn encode_span(s: &Span) -> Value {
    use crate::model::to_hex;
    serde_json::json!({
        "traceId": to_hex(&s.trace_id),
        "spanId": to_hex(&s.span_id),
        "parentSpanId": to_hex(&s.parent_span_id),
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": s.start_time_unix_nano.to_string(),
        "endTimeUnixNano": s.end_time_unix_nano.to_string(),
        "attributes": kvs(&s.attributes),
        "events": s.events.iter().map(|e| serde_json::json!({
            "timeUnixNano": e.time_unix_nano.to_string(),
            "name": e.name,
            "attributes": kvs(&e.attributes),
        })).collect::<Vec<_>>(),
        "status": s.status.as_ref().map(|st| serde_json::json!({"code": st.code, "message": st.message})),
    })
}

fn kvs(attrs: &[KeyValue]) -> Vec<Value> {
    attrs
        .iter()
        .map(|kv| serde_json::json!({"key": kv.key, "value": kv.value.as_ref().map(encode_any)}))
        .collect()
}

fn encode_any(v: &AnyValue) -> Value {
    use any_value::Value as V;
    match &v.value {
        None => serde_json::json!({}),
        Some(V::StringValue(s)) => serde_json::json!({"stringValue": s}),
        Some(V::BoolValue(b)) => serde_json::json!({"boolValue": b}),
        Some(V::IntValue(i)) => serde_json::json!({"intValue": i.to_string()}),
        Some(V::DoubleValue(d)) if d.is_finite() => serde_json::json!({"doubleValue": d}),
        Some(V::DoubleValue(d)) => {
            serde_json::json!({"doubleValue": if d.is_nan() { "NaN" } else if *d > 0.0 { "Infinity" } else { "-Infinity" }})
        }
        Some(V::ArrayValue(a)) => {
            serde_json::json!({"arrayValue": {"values": a.values.iter().map(encode_any).collect::<Vec<_>>()}})
        }
        Some(V::KvlistValue(kv)) => serde_json::json!({"kvlistValue": {"values": kvs(&kv.values)}}),
        Some(V::BytesValue(b)) => serde_json::json!({"bytesValue": to_base64(b)}),
        Some(V::StringValueStrindex(i)) => serde_json::json!({"stringValueStrindex": i}),
    }
}

fn to_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
