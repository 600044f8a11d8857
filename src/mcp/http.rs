//! `/mcp` over HTTP: rmcp's Streamable HTTP service (sessions for
//! 2025-11-25 clients, stateless answers for 2026-07-28 ones) behind an
//! admission check. An `initialize` (a POST without `Mcp-Session-Id`) is
//! read first: past [`MAX_INITIALIZE_BYTES`] it is refused, and past
//! `mcp.max_sessions` live sessions it is answered with a JSON-RPC error
//! (503, `Retry-After`) saying which limit, how many, and what to do,
//! instead of a session being made. Its session's permit is taken here and
//! kept by [`Sessions::create_session`], so the count cannot race. A
//! stateless request holds a place among `mcp.max_calls_in_flight` while
//! it is answered, as a session's call does.

use std::cell::Cell;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::limits::{McpConfig, MAX_BODY_BYTES, MAX_INITIALIZE_BYTES};
use super::sessions::{Sessions, AT_CAPACITY, RESERVED};
use super::{Context, Stormwatch};

/// The `/mcp` service. `hosts` are the `Host` values accepted against DNS
/// rebinding (`None`: any, on a listener the token guards); a request with
/// an `Origin` is refused unless it is one of `origins`.
pub fn http_service(
    ctx: Arc<Context>,
    hosts: Option<Vec<String>>,
    origins: Vec<String>,
    limits: &McpConfig,
) -> axum::Router {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default().with_json_response(true);
    config = match hosts {
        Some(h) => config.with_allowed_hosts(h),
        None => config.disable_allowed_hosts(),
    };
    config = if origins.is_empty() {
        config.enforce_origin_validation()
    } else {
        config.with_allowed_origins(origins)
    };
    config.max_request_body_bytes = MAX_BODY_BYTES;
    let sessions = Arc::new(Sessions::new(limits));
    let service = StreamableHttpService::new(
        move || Ok(Stormwatch::new(Arc::clone(&ctx))),
        Arc::clone(&sessions),
        config,
    );
    axum::Router::new()
        .fallback_service(service)
        .layer(axum::middleware::from_fn_with_state(sessions, admit))
}

/// What the admission check reads of a request: its method and id.
#[derive(serde::Deserialize, Default)]
struct Probe {
    method: Option<String>,
    id: Option<Value>,
}

/// Admit an `initialize` only within the limits; everything else passes.
async fn admit(State(sessions): State<Arc<Sessions>>, req: Request, next: Next) -> Response {
    if req.method() == Method::DELETE {
        // rmcp answers an ended session 202; the MCP Python SDK takes
        // anything but 200 or 204 as a failed termination (and logs it on
        // every exit), so the session's end is said as 204 No Content.
        let answer = next.run(req).await;
        if answer.status() == StatusCode::ACCEPTED {
            return StatusCode::NO_CONTENT.into_response();
        }
        return answer;
    }
    if req.method() != Method::POST || req.headers().contains_key("mcp-session-id") {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: request body exceeds {MAX_BODY_BYTES} bytes (or was not read whole)"),
        )
            .into_response();
    };
    let probe: Probe = serde_json::from_slice(&bytes).unwrap_or_default();
    let req = Request::from_parts(parts, Body::from(bytes.clone()));
    let id = probe.id.unwrap_or(Value::Null);
    if probe.method.as_deref() != Some("initialize") {
        // A stateless request (2026-07-28) is a call like a session's.
        if id.is_null() {
            return next.run(req).await;
        }
        return match sessions.call_permit() {
            Ok(_permit) => next.run(req).await,
            Err(e) => refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                e.code.0,
                e.message.into_owned(),
                e.data.unwrap_or(Value::Null),
                Some(1),
            ),
        };
    }
    if bytes.len() > MAX_INITIALIZE_BYTES {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            id,
            -32600,
            format!(
                "initialize too large: at most {MAX_INITIALIZE_BYTES} bytes (a session keeps what it declares), got {}",
                bytes.len()
            ),
            json!({"limit_bytes": MAX_INITIALIZE_BYTES, "got_bytes": bytes.len()}),
            None,
        );
    }
    match sessions.reserve() {
        Ok(permit) => RESERVED.scope(Cell::new(Some(permit)), next.run(req)).await,
        Err(_) => {
            let l = sessions.limits();
            sessions.refused();
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                AT_CAPACITY.0,
                format!(
                    "session limit reached: {} of {} MCP sessions are live (mcp.max_sessions); reuse your session (its Mcp-Session-Id), end finished ones (DELETE /mcp), retry once idle ones expire (after {} s without a message), or use protocol 2026-07-28, which needs no session",
                    sessions.live(),
                    l.max_sessions,
                    l.session_idle_secs
                ),
                json!({
                    "limit": l.max_sessions,
                    "live": sessions.live(),
                    "session_idle_secs": l.session_idle_secs,
                }),
                Some(l.session_idle_secs.min(60)),
            )
        }
    }
}

/// A JSON-RPC error answering request `id`, with an HTTP status.
fn refuse(
    status: StatusCode,
    id: Value,
    code: i32,
    message: String,
    data: Value,
    retry_after: Option<u64>,
) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message, "data": data},
    });
    let mut resp = (status, axum::Json(body)).into_response();
    if let Some(secs) = retry_after {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}
