//! Error classification (detection.md §3): every span gets one `error_class`,
//! decided by the first source that has an opinion, and keeps the raw name it
//! was reported under.

use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{span::Event, status::StatusCode, Status};

use super::results::{Recorded, ResultShapes};
use super::{attrs, message};
use crate::model::{ErrorClass, ToolConvention};

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

/// Attribute keys that hold a tool's result, across conventions
/// (pydantic-ai's `tool_response` before it wrote the GenAI key).
pub const RESULT_KEYS: &[&str] = &[
    "gen_ai.tool.call.result",
    "output.value",
    "ai.toolCall.result",
    "traceloop.entity.output",
    "mcp.tool.result",
    "tool.output",
    "tool_response",
];

/// The verdict on a span that may be a tool call: its result, when one
/// of [`RESULT_KEYS`] holds it, may say the call failed.
pub fn classify(attrs: &[KeyValue], status: Option<&Status>, events: &[Event]) -> Verdict {
    let result = RESULT_KEYS.iter().find_map(|k| attrs::get(attrs, k));
    classify_call(
        attrs,
        status,
        events,
        result.map(|value| Recorded {
            tool: "",
            value,
            convention: ToolConvention::Fallback,
        }),
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
    // handled; only a failed span's words count.
    let failed = is_error_status || declared_type.is_some();
    let error_type = declared_type.or(exception_type.clone().filter(|_| failed));
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
        })
        .or_else(|| result.and_then(|r| r.failure(shapes)))
        .unwrap_or(if failed {
            ErrorClass::Unknown
        } else {
            ErrorClass::Ok
        });

    Verdict {
        class,
        http_status,
        rpc_status,
        error_type,
    }
}

/// HTTP status → class; `None` for statuses that are not failures.
pub fn from_http(status: i32) -> Option<ErrorClass> {
    Some(match status {
        429 => ErrorClass::RateLimited,
        408 => ErrorClass::Timeout,
        502..=504 => ErrorClass::Unavailable,
        500..=599 => ErrorClass::ServerError,
        401 | 403 => ErrorClass::Auth,
        404 | 410 => ErrorClass::NotFound,
        400 | 409 | 413 | 422 => ErrorClass::InvalidRequest,
        400..=499 => ErrorClass::ClientError,
        _ => return None,
    })
}

/// gRPC status code → class; `None` for OK and codes the table leaves open.
pub fn from_grpc(code: i32) -> Option<ErrorClass> {
    Some(match code {
        8 => ErrorClass::RateLimited,
        14 => ErrorClass::Unavailable,
        4 => ErrorClass::Timeout,
        16 | 7 => ErrorClass::Auth,
        5 => ErrorClass::NotFound,
        3 | 9 | 11 => ErrorClass::InvalidRequest,
        13 | 2 => ErrorClass::ServerError,
        _ => return None,
    })
}

/// Words in an error name or message → class (a status code or reason
/// phrase in it first).
pub fn from_text(text: &str) -> Option<ErrorClass> {
    message::classify([text])
}
