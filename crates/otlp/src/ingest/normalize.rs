//! From a decoded OTLP request to a columnar [`SpanBatch`]: id validation
//! (the spans the spec says to reject), the time window (spans dated past
//! the receive time's bounds, [`super::window`]), tool-call detection,
//! session, dependency, model spans, error class — each value appended straight to its column, no
//! row in between.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};

use super::batch::{Resource, SpanBatch, NO_DEPENDENCY, NO_MODEL, NO_TOOL};
use super::conventions::SpanView;
use super::model_span;
use super::results::ResultShapes;
use super::retry_after;
use super::toolcall::ToolRef;
use super::window::{Outside, Window};
use super::{attrs, classify, toolcall};

/// The spans of one request and what was rejected from it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Normalized {
    pub batch: SpanBatch,
    /// Spans rejected, for any reason (the partial success's count).
    pub rejected: u64,
    /// Of those, spans dated after the receive time's window.
    pub rejected_future: u64,
    /// Of those, spans on a day before the retention's first.
    pub rejected_past: u64,
    /// The first few reasons, for the partial-success message.
    pub reasons: Vec<String>,
}

impl Normalized {
    /// The partial-success message: what was rejected and why.
    pub fn reject_message(&self) -> Option<String> {
        if self.rejected == 0 {
            return None;
        }
        let more = self.rejected as usize - self.reasons.len().min(self.rejected as usize);
        let mut msg = format!("rejected {} span(s)", self.rejected);
        let by: Vec<String> = [
            (self.rejected_future, "dated in the future"),
            (self.rejected_past, "older than the retention"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !by.is_empty() {
            msg.push_str(&format!(" ({})", by.join(", ")));
        }
        msg.push_str(": ");
        msg.push_str(&self.reasons.join("; "));
        if more > 0 {
            msg.push_str(&format!("; and {more} more"));
        }
        Some(msg)
    }

    /// Spans refused for their time (outside the receive time's window).
    pub fn outside(&self) -> u64 {
        self.rejected_future + self.rejected_past
    }

    /// Spans kept.
    pub fn spans(&self) -> usize {
        self.batch.len()
    }

    /// Memory the kept spans hold.
    pub fn mem_bytes(&self) -> usize {
        self.batch.mem_bytes()
    }
}

const MAX_REASONS: usize = 5;

/// Normalize every span of a request. Spans with an invalid trace id (not 16
/// bytes, or all zero), span id (not 8 bytes, or all zero), parent span id
/// (neither empty nor 8 bytes, or the span's own id) or no start time are
/// rejected, the rest kept. Every time is accepted (see [`normalize_within`]).
pub fn normalize(req: &ExportTraceServiceRequest) -> Normalized {
    normalize_within(req, &Window::unbounded())
}

/// [`normalize`], also rejecting the spans whose times fall outside
/// `window` (the receive time's, [`super::window::TimeBounds::at`]).
pub fn normalize_within(req: &ExportTraceServiceRequest, window: &Window) -> Normalized {
    normalize_with(req, window, ResultShapes::NONE)
}

/// [`normalize_within`], reading tool results with the shapes users
/// declared besides the documented ones.
pub fn normalize_with(
    req: &ExportTraceServiceRequest,
    window: &Window,
    shapes: &ResultShapes,
) -> Normalized {
    let mut out = Normalized::default();
    let spans: usize = req
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    out.batch.reserve(spans);
    for rs in &req.resource_spans {
        let resource_attrs = rs
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap_or(&[]);
        let service: Arc<str> = attrs::string_cow(resource_attrs, "service.name")
            .unwrap_or(Cow::Borrowed("unknown_service"))
            .as_ref()
            .into();
        let json: Arc<str> = attrs::to_json(resource_attrs).into();
        for ss in &rs.scope_spans {
            let (scope, scope_name, scope_version) = scope_of(ss.scope.as_ref());
            let resource = out.batch.resources.intern(&Resource {
                service: Arc::clone(&service),
                json: Arc::clone(&json),
                scope_name,
                scope_version,
            });
            for span in &ss.spans {
                match check(span, window) {
                    Ok(ids) => {
                        push(
                            &mut out.batch,
                            span,
                            &ids,
                            resource,
                            resource_attrs,
                            scope,
                            shapes,
                        );
                        if out.batch.len() == 1 {
                            // The first span's texts size the rest (one growth, not a dozen).
                            let b = &mut out.batch;
                            b.attributes.reserve_bytes(b.attributes.data_len() * spans);
                            b.name.reserve_bytes(b.name.data_len() * spans);
                        }
                    }
                    Err((outside, reason)) => {
                        out.rejected += 1;
                        match outside {
                            Some(Outside::Future) => out.rejected_future += 1,
                            Some(Outside::PastRetention) => out.rejected_past += 1,
                            None => {}
                        }
                        if out.reasons.len() < MAX_REASONS {
                            out.reasons.push(format!("span {:?}: {reason}", span.name));
                        }
                    }
                }
            }
        }
    }
    debug_assert!(out.batch.is_consistent());
    out
}

/// A valid span's ids; the parent all zero for a root.
pub(super) struct Ids {
    trace: [u8; 16],
    span: [u8; 8],
    parent: [u8; 8],
}

/// Whether a span is kept: its ids and times valid, its times inside
/// `window`; if not, why (and which window bound, for a time outside it).
pub(super) fn check(span: &Span, window: &Window) -> Result<Ids, (Option<Outside>, String)> {
    let ids = check_ids(span).map_err(|reason| (None, reason))?;
    if i64::try_from(span.start_time_unix_nano).is_err()
        || i64::try_from(span.end_time_unix_nano).is_err()
    {
        // Later than any time stored: in the future, whenever the window
        // bounds the future (counted so); a bad value all the same.
        let outside = (window.latest_ns() < i64::MAX).then_some(Outside::Future);
        return Err((outside, "timestamp past the year 2262".to_string()));
    }
    window
        .check(
            span.start_time_unix_nano as i64,
            span.end_time_unix_nano as i64,
        )
        .map_err(|(outside, reason)| (Some(outside), reason))?;
    Ok(ids)
}

/// Validate the ids and the times.
fn check_ids(span: &Span) -> Result<Ids, String> {
    let Ok(trace) = <[u8; 16]>::try_from(span.trace_id.as_slice()) else {
        return Err(format!(
            "trace id must be 16 bytes, got {}",
            span.trace_id.len()
        ));
    };
    if trace == [0; 16] {
        return Err("trace id is all zero".to_string());
    }
    let Ok(span_id) = <[u8; 8]>::try_from(span.span_id.as_slice()) else {
        return Err(format!(
            "span id must be 8 bytes, got {}",
            span.span_id.len()
        ));
    };
    if span_id == [0; 8] {
        return Err("span id is all zero".to_string());
    }
    if span.start_time_unix_nano == 0 {
        return Err("start time is missing".to_string());
    }
    let parent = match span.parent_span_id.len() {
        0 => [0; 8],
        8 => <[u8; 8]>::try_from(span.parent_span_id.as_slice()).unwrap_or([0; 8]),
        n => return Err(format!("parent span id must be empty or 8 bytes, got {n}")),
    };
    // A span cannot have started inside itself: such a parent is a bug in
    // the sender, and a parent graph with a loop has no root for the turn.
    if parent == span_id {
        return Err(format!(
            "span {} names itself as its parent",
            crate::model::to_hex(&span_id)
        ));
    }
    Ok(Ids {
        trace,
        span: span_id,
        parent,
    })
}

/// A scope's name (`""` when none) and its stored name and version.
pub(super) fn scope_of(
    scope: Option<&InstrumentationScope>,
) -> (&str, Option<Arc<str>>, Option<Arc<str>>) {
    let text = |s: &str| (!s.is_empty()).then(|| Arc::from(s));
    match scope {
        Some(s) => (s.name.as_str(), text(&s.name), text(&s.version)),
        None => ("", None, None),
    }
}

/// Append one valid span to every column.
fn push(
    b: &mut SpanBatch,
    span: &Span,
    ids: &Ids,
    resource: u32,
    resource_attrs: &[KeyValue],
    scope: &str,
    shapes: &ResultShapes,
) {
    let a = span.attributes.as_slice();
    let start_ns = span.start_time_unix_nano as i64;
    // A span whose end precedes its start (clock skew) is stored with its
    // start as end, never with a negative duration.
    let end_ns = (span.end_time_unix_nano as i64).max(start_ns);
    let tool = toolcall::detect_view(&SpanView {
        name: &span.name,
        attrs: a,
        events: &span.events,
        scope,
    });
    let verdict = classify::classify_call(
        a,
        span.status.as_ref(),
        &span.events,
        tool.as_ref().and_then(ToolRef::recorded),
        shapes,
    );
    let status = match span.status.as_ref().map(|s| s.code) {
        Some(c) if c == StatusCode::Error as i32 => 2,
        Some(c) if c == StatusCode::Ok as i32 => 1,
        _ => 0,
    };
    b.trace_id.push(ids.trace);
    b.span_id.push(ids.span);
    b.parent_span_id.push(ids.parent);
    b.name.push(&span.name);
    b.kind.push(if (1..=5).contains(&span.kind) {
        span.kind as u8
    } else {
        0
    });
    b.resource.push(resource);
    b.start_ns.push(start_ns);
    b.end_ns.push(end_ns);
    b.status.push(status);
    b.status_message.push_opt(
        span.status
            .as_ref()
            .map(|s| s.message.as_str())
            .filter(|m| !m.is_empty()),
    );
    match &tool {
        Some(t) => {
            let id = b.tools.intern(t.name.as_ref());
            b.tool.push(id);
        }
        None => b.tool.push(NO_TOOL),
    }
    let dependency =
        match super::dependency::dependency(a, span.kind, tool.is_some(), resource_attrs) {
            Some(d) => b.dependencies.intern(d.as_ref()),
            None => NO_DEPENDENCY,
        };
    b.dependency.push(dependency);
    b.tool_call_id
        .push_opt(tool.as_ref().and_then(|t| t.call_id.as_deref()));
    b.tool_args_hash.push(
        tool.as_ref()
            .and_then(|t| t.args_hash)
            .map(u128::to_be_bytes),
    );
    b.tool_result_hash.push(
        tool.as_ref()
            .and_then(|t| t.result_hash)
            .map(u128::to_be_bytes),
    );
    b.tool_args_recorded
        .push(tool.as_ref().map(|t| t.args_recorded));
    b.tool_convention.push(tool.as_ref().map(|t| t.convention));
    b.session_id
        .push_opt(toolcall::session_id_cow(a, resource_attrs).as_deref());
    let is_agent = toolcall::is_agent(a);
    b.is_agent.push(is_agent);
    let is_model = model_span::is_model(a, tool.is_some(), is_agent);
    b.is_model.push(is_model);
    let model = match is_model.then(|| model_span::model_name(a)).flatten() {
        Some(m) => b.models.intern(m.as_ref()),
        None => NO_MODEL,
    };
    b.model.push(model);
    b.agent_call_id
        .push_opt(attrs::string_cow(a, "gen_ai.agent.call.id").as_deref());
    b.http_status.push(verdict.http_status);
    b.rpc_status.push(verdict.rpc_status);
    b.error_type.push_opt(verdict.error_type.as_deref());
    b.error_class.push(verdict.class);
    b.retry_after_ms.push(retry_after::of_span(
        span,
        verdict.class,
        tool.as_ref().and_then(|t| t.result),
        end_ns,
    ));
    b.cost_usd.push(toolcall::cost_usd(a));
    b.input_tokens.push(toolcall::input_tokens(a));
    b.output_tokens.push(toolcall::output_tokens(a));
    b.attributes.push_with(|out| attrs::push_object(out, a));
    b.events.push_with(|out| push_events(out, span));
}

/// The span's events as a JSON array (`[]` when there are none).
fn push_events(out: &mut String, span: &Span) {
    out.push('[');
    for (i, e) in span.events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        attrs::push_str(out, &e.name);
        let _ = write!(out, ",\"time_ns\":{},\"attributes\":", e.time_unix_nano);
        attrs::push_object(out, &e.attributes);
        out.push('}');
    }
    out.push(']');
}
