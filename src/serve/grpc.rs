//! OTLP/gRPC: `opentelemetry.proto.collector.trace.v1.TraceService/Export`
//! on its own port (4317 by default, where gRPC exporters send without
//! configuration), served by tonic. It shares the HTTP receiver's admission,
//! decode, normalization and durable acknowledgement (`otlp::store_body`):
//! an answer is sent only once the spans are in the WAL on disk.
//!
//! The request message is taken as bytes (`RawCodec`), not decoded by the
//! generated prost codec on the async thread: the decoding runs on a blocking
//! thread under the memory budget, and the WAL records the bytes as they came.
//! tonic itself does the gRPC framing, the gzip/zstd decompression (capped at
//! `max_body_bytes`) and the status trailers.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::{
    trace_service_server::SERVICE_NAME, ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, Body as HttpBody, Service};
use tonic::{Code, Status};

use super::otlp::{kib, store_body, OtlpCounters, OtlpState};
use super::response::{AppError, ProtoAny, RpcStatus};
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
        });
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
                None => {
                    // The body is charged to the in-flight budget as it
                    // arrives, before tonic buffers the whole message.
                    let held = Held::new(&svc.state);
                    let (parts, body) = req.into_parts();
                    let charged = Charged {
                        inner: body,
                        held: held.clone(),
                        bytes: 0,
                    };
                    let req = http::Request::from_parts(parts, tonic::body::Body::new(charged));
                    export(&svc.state, req, held).await
                }
            };
            let response = rewrite_too_large(response, svc.state.max_body_bytes);
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

/// Decode the message with tonic (framing, decompression, size cap) and
/// hand its bytes to the shared path.
async fn export(
    state: &Arc<OtlpState>,
    req: http::Request<tonic::body::Body>,
    held: Held,
) -> http::Response<tonic::body::Body> {
    let mut grpc = tonic::server::Grpc::new(RawCodec { held })
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd)
        .max_decoding_message_size(state.max_body_bytes);
    grpc.unary(
        ExportMethod {
            state: Arc::clone(state),
        },
        req,
    )
    .await
}

/// The in-flight budget's permits a request holds so far: taken by its body
/// as frames arrive, topped up by the decoder for the decompressed message,
/// then handed on with the message.
#[derive(Clone)]
struct Held {
    budget: Arc<Semaphore>,
    /// The whole budget, in KiB permits.
    total: u32,
    permit: Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>,
}

impl Held {
    fn new(state: &OtlpState) -> Held {
        Held {
            budget: Arc::clone(&state.inflight),
            total: state.inflight_total,
            permit: Arc::default(),
        }
    }

    /// Hold permits for at least `bytes`, taking the difference from the
    /// budget: `never_fits` past the whole budget (not retryable), `busy`
    /// when the rest is not free now.
    fn at_least(&self, bytes: usize) -> Result<(), Status> {
        let want = kib(bytes);
        if want > self.total {
            return Err(never_fits(bytes, self.total));
        }
        let mut held = self.permit.lock().unwrap_or_else(|e| e.into_inner());
        let have = held.as_ref().map_or(0, |p| p.num_permits() as u32);
        if want > have {
            let more = Arc::clone(&self.budget)
                .try_acquire_many_owned(want - have)
                .map_err(|_| busy())?;
            match held.as_mut() {
                Some(p) => p.merge(more),
                None => *held = Some(more),
            }
        }
        Ok(())
    }
}

/// A request body that charges its bytes to the in-flight budget as they
/// arrive; past the budget it ends with `RESOURCE_EXHAUSTED` + `RetryInfo`
/// (tonic answers a body's `Status` error as that status), so memory stays
/// bounded however many requests stream in at once.
struct Charged {
    inner: tonic::body::Body,
    held: Held,
    bytes: usize,
}

impl HttpBody for Charged {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            self.bytes += data.len();
            if let Err(refusal) = self.held.at_least(self.bytes) {
                return Poll::Ready(Some(Err(refusal)));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Not retryable: the same request is refused again however long one waits.
fn never_fits(bytes: usize, total_kib: u32) -> Status {
    Status::resource_exhausted(format!(
        "a request of {bytes} bytes or more can never fit the in-flight budget of {total_kib} KiB \
         (ingest.max_inflight_bytes); send smaller batches"
    ))
}

fn busy() -> Status {
    retry_later(
        Code::ResourceExhausted,
        "too many request bytes in flight; retry later",
        1,
    )
}

/// A request message's bytes, with the in-flight budget's permits for them.
pub struct Admitted {
    bytes: Bytes,
    permit: OwnedSemaphorePermit,
}

/// The codec: requests stay bytes (charged against the in-flight budget as
/// they are taken), responses are prost-encoded.
struct RawCodec {
    held: Held,
}

impl Codec for RawCodec {
    type Encode = ExportTraceServiceResponse;
    type Decode = Admitted;
    type Encoder = ResponseEncoder;
    type Decoder = Held;

    fn encoder(&mut self) -> ResponseEncoder {
        ResponseEncoder
    }

    fn decoder(&mut self) -> Held {
        self.held.clone()
    }
}

struct ResponseEncoder;

impl Encoder for ResponseEncoder {
    type Item = ExportTraceServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

/// Decoding a message takes its bytes with the permits held for them.
impl Decoder for Held {
    type Item = Admitted;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Admitted>, Status> {
        let len = src.remaining();
        // The body's bytes are charged already; a decompressed message may
        // need more.
        self.at_least(len)?;
        let permit = self
            .permit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(busy)?;
        Ok(Some(Admitted {
            bytes: src.copy_to_bytes(len),
            permit,
        }))
    }
}

/// The unary method: the shared path, its refusals as gRPC statuses.
struct ExportMethod {
    state: Arc<OtlpState>,
}

impl tonic::server::UnaryService<Admitted> for ExportMethod {
    type Response = ExportTraceServiceResponse;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<Self::Response>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Admitted>) -> Self::Future {
        let state = Arc::clone(&self.state);
        Box::pin(async move {
            let Admitted { bytes, permit } = request.into_inner();
            let counters: &OtlpCounters = &state.grpc;
            let done = store_body(
                &state,
                counters,
                bytes,
                Format::Protobuf,
                Encoding::Identity,
                permit,
            )
            .await
            .map_err(|e| {
                if e.status == http::StatusCode::SERVICE_UNAVAILABLE {
                    tracing::warn!(error = %e.message, "refused a gRPC export request: the store cannot take it; the exporter retries");
                }
                to_status(e)
            })?;
            Ok(tonic::Response::new(ExportTraceServiceResponse {
                partial_success: done.message.map(|m| ExportTracePartialSuccess {
                    rejected_spans: done.rejected as i64,
                    error_message: m,
                }),
            }))
        })
    }
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

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<ProtoDuration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProtoDuration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

pub const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// A status with `RetryInfo { retry_delay: secs }` in its details
/// (`grpc-status-details-bin`, where tonic and Go exporters read it) and in
/// the `google.rpc.retryinfo-bin` trailer (where the Python exporter does).
pub fn retry_later(code: Code, message: impl Into<String>, secs: u64) -> Status {
    let message = message.into();
    let info = RetryInfo {
        retry_delay: Some(ProtoDuration {
            seconds: secs as i64,
            nanos: 0,
        }),
    };
    let details = RpcStatus {
        code: code as i32,
        message: message.clone(),
        details: vec![ProtoAny {
            type_url: RETRY_INFO_TYPE.to_string(),
            value: info.encode_to_vec(),
        }],
    };
    let mut status = Status::with_details(code, message, details.encode_to_vec().into());
    // The Python exporter reads the delay from this trailer instead.
    status.metadata_mut().insert_bin(
        "google.rpc.retryinfo-bin",
        tonic::metadata::MetadataValue::from_bytes(&info.encode_to_vec()),
    );
    status
}

/// tonic answers a message longer than the cap `OUT_OF_RANGE`, which OTLP
/// exporters retry; it can never fit, so say `RESOURCE_EXHAUSTED` without
/// `RetryInfo` (not retryable), as the HTTP receiver's 413 does.
fn rewrite_too_large(
    mut response: http::Response<tonic::body::Body>,
    limit: usize,
) -> http::Response<tonic::body::Body> {
    let out_of_range = response
        .headers()
        .get(Status::GRPC_STATUS)
        .is_some_and(|v| v.as_bytes() == b"11");
    if out_of_range {
        let found = Status::from_header_map(response.headers())
            .map(|s| s.message().to_string())
            .unwrap_or_default();
        let status = Status::resource_exhausted(format!(
            "the request is larger than this receiver's limit of {limit} bytes (max_body_bytes): {found}; \
             send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)"
        ));
        response.headers_mut().remove(Status::GRPC_MESSAGE);
        response.headers_mut().remove(Status::GRPC_STATUS_DETAILS);
        let _ = status.add_header(response.headers_mut());
    }
    response
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
        Code::Unimplemented => "unimplemented",
        _ => "other",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
