//! `POST /v1/traces` (and `POST /`): OTLP/HTTP in protobuf or JSON, any of
//! the usual encodings, answered in the encoding it came in. A request is
//! acknowledged only once its spans are in the WAL on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::sync::Semaphore;

use super::admission::{BodyLimits, Budget, Charge, Cut, Intake, Short};
use super::decoders;
use super::response::AppError;
use crate::ingest::{self, Encoding, Format};
use crate::store::Store;

/// What the receiver needs.
pub struct OtlpState {
    pub store: Arc<Store>,
    pub max_body_bytes: usize,
    /// Bytes of request bodies held in memory at once, in KiB permits.
    pub budget: Arc<Budget>,
    /// How fast and how soon a body must arrive.
    pub body_limits: BodyLimits,
    /// What the OTLP/HTTP receiver did.
    pub counters: OtlpCounters,
    /// What the OTLP/gRPC receiver did.
    pub grpc: OtlpCounters,
    /// The bearer token exporters must send, when one is set.
    pub token: Option<Arc<super::auth::Token>>,
    /// Refused bodies being read and dropped at once (bounded: shedding load
    /// must not cost unbounded reads).
    pub drains: Arc<Semaphore>,
}

/// Counters of what the receiver did, for `/metrics`.
#[derive(Debug, Default)]
pub struct OtlpCounters {
    pub requests: AtomicU64,
    pub spans_accepted: AtomicU64,
    /// Spans of accepted requests rejected one by one (invalid ids).
    pub spans_rejected_invalid: AtomicU64,
    /// Spans refused one by one for a time after the receive time's window.
    pub spans_rejected_future: AtomicU64,
    /// Spans refused one by one for a day the retention drops.
    pub spans_rejected_past: AtomicU64,
    /// Spans of decoded requests the store refused (full queue, write failure).
    pub spans_refused_store: AtomicU64,
    /// Refused requests by reason.
    refused: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl OtlpCounters {
    pub fn refuse(&self, reason: &'static str) {
        let mut m = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(reason).or_insert(0) += 1;
    }

    /// (reason, requests), by reason.
    pub fn refused(&self) -> Vec<(&'static str, u64)> {
        let m = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().map(|(r, n)| (*r, *n)).collect()
    }
}

/// The `/metrics` label of a refused request's status.
pub fn refusal_reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "body_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::TOO_MANY_REQUESTS => "overloaded",
        StatusCode::SERVICE_UNAVAILABLE => "store_unavailable",
        _ => "other",
    }
}

impl OtlpState {
    /// With the default `[admission]` settings.
    pub fn new(store: Arc<Store>, max_body_bytes: usize, max_inflight_bytes: usize) -> OtlpState {
        let admission = crate::config::AdmissionConfig::default();
        OtlpState::with_admission(store, max_body_bytes, max_inflight_bytes, &admission)
    }

    pub fn with_admission(
        store: Arc<Store>,
        max_body_bytes: usize,
        max_inflight_bytes: usize,
        admission: &crate::config::AdmissionConfig,
    ) -> OtlpState {
        OtlpState {
            store,
            max_body_bytes,
            budget: Arc::new(Budget::new(
                max_inflight_bytes,
                admission.reserved_share,
                max_body_bytes,
            )),
            body_limits: BodyLimits {
                max_bytes: max_body_bytes,
                min_rate: admission.min_body_rate_bytes,
                timeout: std::time::Duration::from_secs(admission.body_timeout_secs),
            },
            counters: OtlpCounters::default(),
            grpc: OtlpCounters::default(),
            token: None,
            drains: Arc::new(Semaphore::new(MAX_DRAINS)),
        }
    }
}

/// The receiver's routes.
pub fn router(state: Arc<OtlpState>) -> Router {
    let traces = post(export).fallback(method_not_allowed);
    Router::new()
        .route("/v1/traces", traces.clone())
        .route("/", traces)
        .with_state(state)
}

/// The encoding to answer a refusal in: the request's, or JSON when it has
/// none we speak.
fn reply_format(headers: &HeaderMap) -> Format {
    Format::from_content_type(header_str(headers, header::CONTENT_TYPE)).unwrap_or(Format::Json)
}

async fn method_not_allowed(headers: HeaderMap) -> Response {
    let format = reply_format(&headers);
    let mut resp = AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "only POST is accepted on an OTLP traces endpoint",
        format,
    )
    .into_response();
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    resp
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Refused bodies read and dropped at once.
const MAX_DRAINS: usize = 16;

/// Read and drop a refused request's body (up to `limit`, for at most a few
/// seconds), so the client, still sending, gets the answer and its
/// Retry-After instead of a reset connection. Nothing is kept: memory stays
/// flat. With `MAX_DRAINS` running already, mark the answer to close the
/// connection instead.
async fn drain(state: &OtlpState, body: Body, limit: usize, mut answer: AppError) -> AppError {
    let Ok(_slot) = state.drains.try_acquire() else {
        answer.close = true;
        return answer;
    };
    let mut body = http_body_util::Limited::new(body, limit);
    let done = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return false;
            }
        }
        true
    })
    .await;
    answer.close = !matches!(done, Ok(true));
    answer
}

pub use super::admission::kib;

async fn export(
    State(state): State<Arc<OtlpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    state.counters.requests.fetch_add(1, Ordering::Relaxed);
    let result = handle(&state, &headers, body).await;
    if let Err(e) = &result {
        state.counters.refuse(refusal_reason(e.status));
        if e.status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(status = e.status.as_u16(), error = %e.message, "refused an export request: the store cannot take it; the exporter retries");
        } else {
            tracing::debug!(status = e.status.as_u16(), error = %e.message, "refused an export request");
        }
    }
    result
}

async fn handle(state: &OtlpState, headers: &HeaderMap, body: Body) -> Result<Response, AppError> {
    if let Some(token) = &state.token {
        if !token.bearer_ok(headers) {
            let refusal = AppError::new(
                StatusCode::UNAUTHORIZED,
                "this receiver needs a token: send `Authorization: Bearer <token>` \
                 (OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>)",
                reply_format(headers),
            );
            return Err(drain(state, body, state.max_body_bytes, refusal).await);
        }
    }
    let format = Format::from_content_type(header_str(headers, header::CONTENT_TYPE))
        .map_err(|e| AppError::from_ingest(e, Format::Json))?;
    let encoding = Encoding::from_header(header_str(headers, header::CONTENT_ENCODING))
        .map_err(|e| AppError::from_ingest(e, format))?;
    let limit = state.max_body_bytes;
    let too_large = |decompressed| {
        AppError::from_ingest(
            ingest::IngestError::TooLarge {
                limit,
                decompressed,
            },
            format,
        )
    };
    let declared =
        header_str(headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large(false));
    }
    // Memory admission: a body holds permits for the bytes that arrived,
    // and must keep arriving.
    let mut intake = Intake::new(body, &state.budget, state.body_limits);
    let read = intake.read_all().await;
    let (body, permit) = intake.into_parts();
    let body = match read {
        Ok(bytes) => bytes,
        Err(cut) => {
            drop(permit);
            return Err(refuse_cut(state, body, cut, format).await);
        }
    };
    // Whatever the body was charged for beyond its own bytes is given back.
    let mut permit = permit;
    permit.shrink_to(body.len());
    let done = store_body(state, &state.counters, body, format, encoding, permit).await?;
    Ok(success(format, done.rejected, done.message))
}

/// A body not taken whole, as the answer: a body refused for the budget
/// is drained (so the client reads its 429 and Retry-After); one too slow
/// or too late is answered and its connection closed.
async fn refuse_cut(state: &OtlpState, body: Body, cut: Cut, format: Format) -> AppError {
    let message = cut.to_string();
    match cut {
        Cut::TooLarge { limit } => {
            let too_large = ingest::IngestError::TooLarge {
                limit,
                decompressed: false,
            };
            let mut e = AppError::from_ingest(too_large, format);
            e.close = true;
            e
        }
        Cut::NeverFits { .. } => {
            let mut e = AppError::new(StatusCode::PAYLOAD_TOO_LARGE, message, format);
            e.close = true;
            e
        }
        Cut::Busy => {
            let busy = AppError::busy(message, format);
            drain(state, body, state.max_body_bytes, busy).await
        }
        Cut::TooSlow { .. } | Cut::Timeout { .. } => {
            let mut e = AppError::new(StatusCode::REQUEST_TIMEOUT, message, format);
            e.close = true;
            e
        }
        Cut::Read(_) => {
            let mut e = AppError::new(StatusCode::BAD_REQUEST, message, format);
            e.close = true;
            e
        }
    }
}

/// What an accepted export request did: spans rejected one by one (invalid
/// ids, a time outside the window) and the partial-success message naming why.
#[derive(Debug)]
pub struct Accepted {
    pub rejected: u64,
    pub message: Option<String>,
}

/// The part of an export both transports share: decompress (when
/// `encoding` says so), decode and normalize on a decoding thread
/// ([`decoders`]), charging what grows against the in-flight budget `permit`
/// already holds the body's share of; then submit to the store and wait for
/// the WAL fsync. Counted in `counters`.
pub async fn store_body(
    state: &OtlpState,
    counters: &OtlpCounters,
    body: bytes::Bytes,
    format: Format,
    encoding: Encoding,
    permit: Charge,
) -> Result<Accepted, AppError> {
    let limit = state.max_body_bytes;
    // Decompressed output and a parsed JSON tree are charged as they grow.
    let total = state.budget.total_kib() as usize;
    // The receive time's window: spans dated outside it are refused one by one.
    let window = state.store.window_now();
    let shapes = state.store.result_shapes();
    // On one of the decoding threads, not the blocking pool.
    let decoded = decoders::run(move || {
        let mut permit = permit;
        // A request that needs more than the whole budget can never be
        // admitted: that is a 413, not a 429 to retry forever.
        let mut never_fits = false;
        let prepared = {
            let mut reserve = |bytes: usize| match permit.add_work(bytes) {
                Ok(()) => true,
                Err(short) => {
                    never_fits |= short == Short::NeverFits;
                    false
                }
            };
            ingest::prepare_body_with(
                body,
                format,
                encoding,
                limit,
                ingest::Rules {
                    window: &window,
                    shapes: &shapes,
                },
                &mut reserve,
            )
        };
        let prepared = prepared.and_then(|p| {
            // Of what decompressing and decoding held, the payload is left;
            // the decoded rows are held until the WAL takes them too.
            permit.shrink_to(p.wal_payload.len());
            match permit.add_work(p.mem_bytes()) {
                Ok(()) => Ok(p),
                Err(short) => {
                    never_fits |= short == Short::NeverFits;
                    Err(ingest::IngestError::Busy)
                }
            }
        });
        let prepared = match prepared {
            Err(ingest::IngestError::Busy) if never_fits => Err(ingest::IngestError::TooLarge {
                limit: total * 1024,
                decompressed: true,
            }),
            other => other,
        };
        (prepared, permit)
    })
    .await
    .map_err(|e| {
        AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("decoder task failed: {e}"),
            format,
        )
    })?;
    let (prepared, permit) = decoded;
    let prepared = prepared.map_err(|e| AppError::from_ingest(e, format))?;
    let rejected = prepared.normalized.rejected;
    let (future, past) = (
        prepared.normalized.rejected_future,
        prepared.normalized.rejected_past,
    );
    let reject_message = prepared.normalized.reject_message();
    let accepted = prepared.spans() as u64;
    if accepted > 0 {
        let refused = |e| {
            counters
                .spans_refused_store
                .fetch_add(accepted, Ordering::Relaxed);
            AppError::from_store(e, format)
        };
        state
            .store
            .submit(prepared)
            .map_err(refused)?
            .done()
            .await
            .map_err(refused)?;
    }
    drop(permit);
    counters
        .spans_accepted
        .fetch_add(accepted, Ordering::Relaxed);
    counters
        .spans_rejected_invalid
        .fetch_add(rejected - future - past, Ordering::Relaxed);
    counters
        .spans_rejected_future
        .fetch_add(future, Ordering::Relaxed);
    counters
        .spans_rejected_past
        .fetch_add(past, Ordering::Relaxed);
    Ok(Accepted {
        rejected,
        message: reject_message,
    })
}

/// The spec's success answer: empty, or a partial success naming what was rejected.
fn success(format: Format, rejected: u64, message: Option<String>) -> Response {
    let body = match format {
        Format::Protobuf => ExportTraceServiceResponse {
            partial_success: message.clone().map(|m| ExportTracePartialSuccess {
                rejected_spans: rejected as i64,
                error_message: m,
            }),
        }
        .encode_to_vec(),
        Format::Json => match message {
            None => b"{}".to_vec(),
            Some(m) => serde_json::json!({"partialSuccess": {"rejectedSpans": rejected.to_string(), "errorMessage": m}})
                .to_string()
                .into_bytes(),
        },
    };
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    resp
}
