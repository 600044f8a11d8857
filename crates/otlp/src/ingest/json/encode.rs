//! OTLP/JSON encoding, as the spec writes it.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::Value;

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
