//! Error classification (detection.md §3): every span gets one `error_class`,
//! decided by the first source that has an opinion, and keeps the raw name it
//! was reported under. Control flow — an interrupt, a cancellation — is read
//! from the exception's type even on a span that did not fail: OpenInference
//! ends a LangGraph `GraphInterrupt` span OK with the exception recorded.

use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{span::Event, status::StatusCode, Status};

use super::conventions::SpanView;
use super::results::{Recorded, ResultShapes};
use super::toolcall::{self, ToolRef};
use super::{attrs, message};
use crate::model::ErrorClass;
pub use message::{from_grpc, from_http, from_text};

/// What classification found out about one span.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub class: ErrorClass,
    pub http_status: Option<i32>,
    pub rpc_status: Option<i32>,
    /// The raw name the failure was reported under (`error.type`, else the
    /// exception type), so "seven names for one 429" stays visible.
    pub error_type: Option<String>,
}

/// The verdict on a span of only attributes, status and events: its
/// result, when the convention that marks it as a tool call reads one, may
/// say the call failed (the path ingest takes, for one span on its own).
pub fn classify(attrs: &[KeyValue], status: Option<&Status>, events: &[Event]) -> Verdict {
    let view = SpanView {
        name: "",
        attrs,
        events,
        scope: "",
    };
    let tool = toolcall::detect_view(&view);
    classify_call(
        attrs,
        status,
        events,
        tool.as_ref().and_then(ToolRef::recorded),
        ResultShapes::NONE,
    )
}

/// The verdict on a span, with the result its convention read (a tool
/// call's; `None` for other spans) and the result shapes users declared.
pub fn classify_call(
    attrs: &[KeyValue],
    status: Option<&Status>,
    events: &[Event],
    result: Option<Recorded<'_>>,
    shapes: &ResultShapes,
) -> Verdict {
    let http_status = attrs::int(attrs, "http.response.status_code")
        .or_else(|| attrs::int(attrs, "http.status_code"))
        .and_then(|s| i32::try_from(s).ok());
    let rpc_status = attrs::int(attrs, "rpc.grpc.status_code").and_then(|s| i32::try_from(s).ok());
    let exception = events.iter().find(|e| e.name == "exception");
    let exception_type = exception.and_then(|e| attrs::string(&e.attributes, "exception.type"));
    let exception_message =
        exception.and_then(|e| attrs::string(&e.attributes, "exception.message"));
    let declared_type = attrs::string(attrs, "error.type");
    let is_error_status = status.is_some_and(|s| s.code == StatusCode::Error as i32);
    // An exception event or a status message on a span that did not fail was
    // handled; only a failed span's words count. But an exception that is
    // control flow stopped the call whatever its status says.
    let failed = is_error_status || declared_type.is_some();
    let control_exception = exception_type
        .as_deref()
        .is_some_and(|t| message::control_type(t).is_some());
    let error_type = declared_type.or(exception_type
        .clone()
        .filter(|_| failed || control_exception));
    let status_message = status
        .map(|s| s.message.as_str())
        .filter(|m| !m.is_empty() && is_error_status);

    // MCP (OTel MCP conventions): the JSON-RPC error code, in `error.type`
    // or `rpc.response.status_code`.
    let jsonrpc_code = attrs::string(attrs, "rpc.response.status_code")
        .into_iter()
        .chain(error_type.clone())
        .find_map(|c| message::jsonrpc(&c));
    let class = http_status
        .and_then(from_http)
        .or_else(|| rpc_status.and_then(from_grpc))
        .or_else(|| {
            // `error.type` often carries the status code itself ("503").
            error_type
                .as_deref()
                .and_then(|t| t.trim().parse::<i32>().ok())
                .and_then(from_http)
        })
        .or(jsonrpc_code)
        .or_else(|| {
            // A control-flow exception type, before any words: an
            // interrupt's payload is the application's text ("hotel not
            // found, book another?"). A cancellation whose words say it
            // timed out is a timeout.
            let words = exception_message.as_deref().or(status_message);
            [error_type.as_deref(), exception_type.as_deref()]
                .into_iter()
                .flatten()
                .find_map(message::control_type)
                .map(|c| {
                    let timed_out = words.and_then(message::words) == Some(ErrorClass::Timeout);
                    if c == ErrorClass::Cancelled && timed_out {
                        ErrorClass::Timeout
                    } else {
                        c
                    }
                })
        })
        .or_else(|| {
            message::classify(
                [
                    error_type.as_deref(),
                    exception_type.as_deref().filter(|_| failed),
                    exception_message.as_deref().filter(|_| failed),
                    status_message,
                ]
                .into_iter()
                .flatten(),
            )
        });
    // Nothing on the span decided: the result may say it failed, and name
    // the failure (ADK's `error_type`, a user's shape's value).
    let (class, error_type) = match class {
        Some(c) => (c, error_type),
        None => match result.and_then(|r| r.failure(shapes)) {
            Some(f) => (f.class, error_type.or(f.name)),
            None if failed => (ErrorClass::Unknown, error_type),
            None => (ErrorClass::Ok, error_type),
        },
    };

    Verdict {
        class,
        http_status,
        rpc_status,
        error_type,
    }
}
