//! OTLP/gRPC: `opentelemetry.proto.collector.trace.v1.TraceService/Export`
//! on its own port (4317 by default, where gRPC exporters send without
//! configuration), served by tonic. It shares the HTTP receiver's admission,
//! decode, normalization and durable acknowledgement (`otlp::store_body`):
//! an answer is sent only once the spans are in the WAL on disk.
//!
//! The request message is taken as bytes, framing and all
//! (`grpc_message`), not by a tonic codec: its bytes are charged to the
//! in-flight budget as they arrive, a compressed message (`grpc-encoding`
//! gzip, zstd or deflate) is decompressed on a decoding thread under the
//! same cap and budget as an HTTP body, and the WAL records the bytes as
//! they came. tonic's server does the HTTP/2, the keepalive pings and the
//! deadline.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use opentelemetry_proto::tonic::collector::trace::v1::{
    trace_service_server::SERVICE_NAME, ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use tonic::codegen::{http, Service};
use tonic::{Code, Status};

use super::admission::{BodyLimits, Intake};
use super::grpc_message::{self, PREFIX};
pub use super::grpc_status::{busy, retry_later, ProtoDuration, RetryInfo, RETRY_INFO_TYPE};
use super::otlp::{store_body, OtlpState};
use super::response::AppError;
use crate::ingest::{Encoding, Format};

/// tonic's server as the receiver runs it: HTTP/2 keepalive pings (so a
/// dead client's connection is dropped), a bound on concurrent streams per
/// connection, and a deadline for a request to be answered.
pub fn server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .max_concurrent_streams(Some(64))
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(20)))
        .timeout(std::time::Duration::from_secs(60))
}

/// The receiver's routes: the trace service, and the same service as the
/// fallback for every other path, so a logs or metrics export (an exporter
/// given the whole OTLP endpoint) is answered with a message saying what is
/// served, and counted, instead of tonic's bare `UNIMPLEMENTED`.
pub fn routes(service: TraceService) -> tonic::service::Routes {
    let fallback = service.clone();
    let router = tonic::service::Routes::new(service)
        .into_axum_router()
        .fallback(move |req: axum::extract::Request| {
            let mut svc = fallback.clone();
            async move {
                match svc.call(req.map(tonic::body::Body::new)).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        })
        // Each request in flight on its connection (`conn`'s idle limit).
        .layer(axum::middleware::from_fn(super::conn::track));
    tonic::service::Routes::from(router)
}

/// The one method served.
pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The trace service, as a tower service tonic's server routes to.
#[derive(Clone)]
pub struct TraceService {
    state: Arc<OtlpState>,
    /// `Some(public host)` on a loopback listener without a token: only
    /// requests addressed to localhost (or the public host) are answered.
    loopback_only: Option<Arc<Option<String>>>,
}

impl TraceService {
    pub fn new(state: Arc<OtlpState>, loopback_only: Option<Option<String>>) -> TraceService {
        TraceService {
            state,
            loopback_only: loopback_only.map(Arc::new),
        }
    }
}

impl tonic::server::NamedService for TraceService {
    const NAME: &'static str = SERVICE_NAME;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

impl Service<http::Request<tonic::body::Body>> for TraceService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let svc = self.clone();
        Box::pin(async move {
            let counters = &svc.state.grpc;
            counters.requests.fetch_add(1, Ordering::Relaxed);
            let response = match svc.refuse_early(&req) {
                Some(status) => status.into_http(),
                None => export(&svc.state, req)
                    .await
                    .unwrap_or_else(Status::into_http),
            };
            if let Some(reason) = refusal_reason(&response) {
                counters.refuse(reason);
            }
            Ok(response)
        })
    }
}

impl TraceService {
    /// A refusal decided from the headers alone, before the body is read.
    fn refuse_early<B>(&self, req: &http::Request<B>) -> Option<Status> {
        if req.uri().path() != EXPORT_PATH {
            tracing::debug!(
                path = req.uri().path(),
                "refused a gRPC call to another method"
            );
            return Some(Status::unimplemented(format!(
                "stormwatch takes traces only ({EXPORT_PATH}); got {}. Send metrics and logs \
                 elsewhere: give exporters OTEL_EXPORTER_OTLP_TRACES_ENDPOINT rather than \
                 OTEL_EXPORTER_OTLP_ENDPOINT",
                req.uri().path()
            )));
        }
        if let Some(token) = &self.state.token {
            if !token.bearer_ok(req.headers()) {
                let sent = req.headers().contains_key(http::header::AUTHORIZATION);
                tracing::debug!(sent, "refused a gRPC export without the ingest token");
                return Some(Status::unauthenticated(if sent {
                    "the `authorization` metadata is not `Bearer <this receiver's ingest token>`"
                } else {
                    "this receiver needs a token: send the metadata `authorization: Bearer <token>` \
                     (OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>)"
                }));
            }
        }
        if let Some(public_host) = &self.loopback_only {
            let host = req
                .uri()
                .authority()
                .map(|a| a.as_str().to_string())
                .or_else(|| {
                    req.headers()
                        .get(http::header::HOST)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                });
            if let Some(h) = host {
                if !super::auth::loopback_host(&h) && public_host.as_deref() != Some(h.as_str()) {
                    tracing::warn!(host = %h, "refused a gRPC request addressed to another host (loopback listener without a token)");
                    return Some(Status::permission_denied(
                        "this receiver listens on loopback without a token and answers only requests \
                         addressed to localhost; set --ingest-token to serve it under another name",
                    ));
                }
            }
        }
        None
    }
}

/// Read the message under admission and hand its bytes, still compressed
/// if they came so, to the shared path.
async fn export(
    state: &Arc<OtlpState>,
    req: http::Request<tonic::body::Body>,
) -> Result<http::Response<tonic::body::Body>, Status> {
    let encoding = grpc_message::request_encoding(req.headers())?;
    let max = state.max_body_bytes;
    let limits = BodyLimits {
        max_bytes: max + PREFIX,
        ..state.body_limits
    };
    let mut intake = Intake::new(req.into_body(), &state.budget, limits);
    let read = grpc_message::read(&mut intake, max).await;
    let (_, mut permit) = intake.into_parts();
    let message = read?;
    permit.shrink_to(message.bytes.len());
    let encoding = match (message.compressed, encoding) {
        (false, _) => Encoding::Identity,
        (true, Encoding::Identity) => {
            return Err(Status::internal(
                "protocol error: a message with the compressed flag but no grpc-encoding",
            ))
        }
        (true, e) => e,
    };
    let done = store_body(
        state,
        &state.grpc,
        message.bytes,
        Format::Protobuf,
        encoding,
        permit,
    )
    .await
    .map_err(|e| {
        if e.status == http::StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(error = %e.message, "refused a gRPC export request: the store cannot take it; the exporter retries");
        }
        to_status(e)
    })?;
    Ok(grpc_message::answer(&ExportTraceServiceResponse {
        partial_success: done.message.map(|m| ExportTracePartialSuccess {
            rejected_spans: done.rejected as i64,
            error_message: m,
        }),
    }))
}

/// An HTTP-shaped refusal of the shared path as the OTLP spec's gRPC status:
/// overload is `RESOURCE_EXHAUSTED` with `RetryInfo` (retryable only with
/// it), a store that cannot write `UNAVAILABLE` (with a hint of when), a body
/// that can never fit `RESOURCE_EXHAUSTED` without `RetryInfo` (not
/// retryable), anything undecodable `INVALID_ARGUMENT`.
pub fn to_status(e: AppError) -> Status {
    use http::StatusCode as S;
    match e.status {
        S::TOO_MANY_REQUESTS => retry_later(
            Code::ResourceExhausted,
            e.message,
            e.retry_after.unwrap_or(1),
        ),
        S::SERVICE_UNAVAILABLE => {
            retry_later(Code::Unavailable, e.message, e.retry_after.unwrap_or(5))
        }
        S::PAYLOAD_TOO_LARGE => Status::resource_exhausted(e.message),
        S::UNAUTHORIZED => Status::unauthenticated(e.message),
        _ => Status::invalid_argument(e.message),
    }
}

/// The `/metrics` reason of a refused request, from its trailers-only status.
fn refusal_reason(response: &http::Response<tonic::body::Body>) -> Option<&'static str> {
    let code = response.headers().get(Status::GRPC_STATUS)?;
    let has_retry_info = response.headers().contains_key(Status::GRPC_STATUS_DETAILS);
    Some(match Code::from_bytes(code.as_bytes()) {
        Code::Ok => return None,
        Code::InvalidArgument => "bad_request",
        Code::Unauthenticated => "unauthorized",
        Code::PermissionDenied => "wrong_host",
        Code::ResourceExhausted if has_retry_info => "overloaded",
        Code::ResourceExhausted => "too_large",
        Code::Unavailable => "store_unavailable",
        Code::DeadlineExceeded => "body_timeout",
        Code::Unimplemented => "unimplemented",
        _ => "other",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::response::RpcStatus;
    use prost::Message;

    #[test]
    fn overload_carries_retry_info_and_too_large_does_not() {
        let busy = to_status(AppError::busy("full", Format::Protobuf));
        assert_eq!(busy.code(), Code::ResourceExhausted);
        let details = RpcStatus::decode(busy.details()).unwrap();
        assert_eq!(details.details[0].type_url, RETRY_INFO_TYPE);
        let info = RetryInfo::decode(details.details[0].value.as_slice()).unwrap();
        assert_eq!(info.retry_delay.unwrap().seconds, 1);
        let big = to_status(AppError::new(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            "too big",
            Format::Protobuf,
        ));
        assert_eq!(big.code(), Code::ResourceExhausted);
        assert!(big.details().is_empty());
        let bad = to_status(AppError::new(
            http::StatusCode::BAD_REQUEST,
            "bad",
            Format::Protobuf,
        ));
        assert_eq!(bad.code(), Code::InvalidArgument);
    }
}
