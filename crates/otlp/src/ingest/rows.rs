//! The row path normalization had before the columnar batch (one
//! `SpanRow` of owned strings per span), kept as the reference the
//! columnar path is tested against: the same request must give the same
//! rows, frames and Parquet either way.

use std::borrow::Cow;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};

use super::conventions::SpanView;
use super::{attrs, classify, model_span, toolcall};
use crate::model::{to_hex, SpanRow};

/// The rows of a request's valid spans, built one `SpanRow` at a time.
pub fn normalize_rows(req: &ExportTraceServiceRequest) -> Vec<SpanRow> {
    let mut rows = Vec::new();
    for rs in &req.resource_spans {
        let resource_attrs = rs
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap_or(&[]);
        let service: Arc<str> = attrs::string(resource_attrs, "service.name")
            .unwrap_or_else(|| "unknown_service".to_string())
            .into();
        let resource_json: Arc<str> = attrs::to_json(resource_attrs).into();
        for ss in &rs.scope_spans {
            let scope = super::normalize::scope_of(ss.scope.as_ref());
            for span in &ss.spans {
                if let Ok(parent) = check_ids(span) {
                    let mut r = row(
                        span,
                        parent,
                        &service,
                        resource_attrs,
                        &resource_json,
                        scope.0,
                    );
                    r.scope_name = scope.1.clone();
                    r.scope_version = scope.2.clone();
                    rows.push(r);
                }
            }
        }
    }
    rows
}

/// Validate the ids; `Ok(parent)` with the parent's hex, `None` for a root.
fn check_ids(span: &Span) -> Result<Option<String>, String> {
    if span.trace_id.len() != 16 {
        return Err(format!(
            "trace id must be 16 bytes, got {}",
            span.trace_id.len()
        ));
    }
    if span.trace_id.iter().all(|b| *b == 0) {
        return Err("trace id is all zero".to_string());
    }
    if span.span_id.len() != 8 {
        return Err(format!(
            "span id must be 8 bytes, got {}",
            span.span_id.len()
        ));
    }
    if span.span_id.iter().all(|b| *b == 0) {
        return Err("span id is all zero".to_string());
    }
    if span.start_time_unix_nano == 0 {
        return Err("start time is missing".to_string());
    }
    if i64::try_from(span.start_time_unix_nano).is_err()
        || i64::try_from(span.end_time_unix_nano).is_err()
    {
        return Err("timestamp past the year 2262".to_string());
    }
    match span.parent_span_id.len() {
        0 => Ok(None),
        8 if span.parent_span_id.iter().all(|b| *b == 0) => Ok(None),
        8 if span.parent_span_id == span.span_id => Err(format!(
            "span {} names itself as its parent",
            to_hex(&span.span_id)
        )),
        8 => Ok(Some(to_hex(&span.parent_span_id))),
        n => Err(format!("parent span id must be empty or 8 bytes, got {n}")),
    }
}

fn row(
    span: &Span,
    parent: Option<String>,
    service: &Arc<str>,
    resource_attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
    resource_json: &Arc<str>,
    scope: &str,
) -> SpanRow {
    let a = span.attributes.as_slice();
    let start_ns = span.start_time_unix_nano as i64;
    // A span whose end precedes its start (clock skew) is stored with its
    // start as end, never with a negative duration.
    let end_ns = (span.end_time_unix_nano as i64).max(start_ns);
    let found = toolcall::detect_view(&SpanView {
        name: &span.name,
        attrs: a,
        events: &span.events,
        scope,
    });
    let verdict = classify::classify_call(
        a,
        span.status.as_ref(),
        &span.events,
        found.as_ref().and_then(toolcall::ToolRef::recorded),
        super::results::ResultShapes::NONE,
    );
    let retry_after_ms = super::retry_after::of_span(
        span,
        verdict.class,
        found.as_ref().and_then(|t| t.result),
        end_ns,
    );
    let tool = found.map(toolcall::ToolCall::from);
    let is_model = model_span::is_model(a, tool.is_some(), toolcall::is_agent(a));
    let status_code = match span.status.as_ref().map(|s| s.code) {
        Some(c) if c == StatusCode::Error as i32 => "error",
        Some(c) if c == StatusCode::Ok as i32 => "ok",
        _ => "unset",
    };
    SpanRow {
        trace_id: to_hex(&span.trace_id),
        span_id: to_hex(&span.span_id),
        parent_span_id: parent,
        name: span.name.clone(),
        kind: kind_name(span.kind),
        service_name: Arc::clone(service),
        start_ns,
        end_ns,
        duration_ns: end_ns - start_ns,
        status_code,
        status_message: span
            .status
            .as_ref()
            .map(|s| s.message.clone())
            .filter(|m| !m.is_empty()),
        is_tool_call: tool.is_some(),
        tool_name: tool.as_ref().map(|t| t.name.clone()),
        tool_call_id: tool.as_ref().and_then(|t| t.call_id.clone()),
        tool_args_hash: tool.as_ref().and_then(|t| t.args_hash.clone()),
        tool_result_hash: tool.as_ref().and_then(|t| t.result_hash.clone()),
        tool_args_recorded: tool.as_ref().map(|t| t.args_recorded),
        tool_convention: tool.as_ref().map(|t| t.convention),
        session_id: toolcall::session_id(a, resource_attrs),
        turn_id: None,
        is_agent: toolcall::is_agent(a),
        agent_call_id: attrs::string(a, "gen_ai.agent.call.id"),
        http_status: verdict.http_status,
        rpc_status: verdict.rpc_status,
        error_type: verdict.error_type,
        error_class: verdict.class,
        retryable: verdict.class.retryable(),
        cost_usd: toolcall::cost_usd(a),
        input_tokens: toolcall::input_tokens(a),
        output_tokens: toolcall::output_tokens(a),
        attributes: attrs::to_json(a),
        events: events_json(span),
        resource: Arc::clone(resource_json),
        scope_name: None,
        scope_version: None,
        dependency: super::dependency::dependency(a, span.kind, tool.is_some(), resource_attrs)
            .map(Cow::into_owned),
        retry_after_ms,
        is_model,
        model_name: is_model
            .then(|| model_span::model_name(a).map(Cow::into_owned))
            .flatten(),
    }
}

fn kind_name(kind: i32) -> &'static str {
    match kind {
        1 => "internal",
        2 => "server",
        3 => "client",
        4 => "producer",
        5 => "consumer",
        _ => "unspecified",
    }
}

fn events_json(span: &Span) -> String {
    if span.events.is_empty() {
        return "[]".to_string();
    }
    let mut out = String::from("[");
    for (i, e) in span.events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        attrs::push_str(&mut out, &e.name);
        out.push_str(&format!(
            ",\"time_ns\":{},\"attributes\":",
            e.time_unix_nano
        ));
        out.push_str(&attrs::to_json(&e.attributes));
        out.push('}');
    }
    out.push(']');
    out
}
