//! The HTTP edge's one error type: every refusal becomes a status code, a
//! `google.rpc.Status` body in the request's own encoding, and `Retry-After`
//! where waiting helps.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;

use crate::ingest::{Format, IngestError};
use crate::store::StoreError;

/// `google.rpc.Status`, as OTLP/HTTP error bodies carry it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<ProtoAny>,
}

/// `google.protobuf.Any` (only ever empty here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProtoAny {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// A refused request.
#[derive(Debug)]
pub struct AppError {
    pub status: StatusCode,
    pub message: String,
    pub format: Format,
    pub retry_after: Option<u64>,
    /// Close the connection after answering (a body was left unread).
    pub close: bool,
}

// gRPC codes for the body: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE, UNIMPLEMENTED.
const INVALID_ARGUMENT: i32 = 3;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNIMPLEMENTED: i32 = 12;
const UNAVAILABLE: i32 = 14;
const UNAUTHENTICATED: i32 = 16;

impl AppError {
    pub fn new(status: StatusCode, message: impl Into<String>, format: Format) -> AppError {
        AppError {
            status,
            message: message.into(),
            format,
            retry_after: None,
            close: false,
        }
    }

    pub fn from_ingest(e: IngestError, format: Format) -> AppError {
        let status = match &e {
            IngestError::UnsupportedMediaType { .. } | IngestError::UnsupportedEncoding { .. } => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            IngestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::Busy => return AppError::busy(e.to_string(), format),
            IngestError::Decompress { .. } | IngestError::Protobuf(_) | IngestError::Json(_) => {
                StatusCode::BAD_REQUEST
            }
        };
        AppError::new(status, e.to_string(), format)
    }

    /// A store refusal. Overload says so; a disk failure is described in
    /// the server's log, not to the client (it names local paths).
    pub fn from_store(e: StoreError, format: Format) -> AppError {
        let (status, retry, message) = match &e {
            StoreError::Overloaded { retry_after_secs, .. } => (StatusCode::TOO_MANY_REQUESTS, *retry_after_secs, e.to_string()),
            StoreError::Closed => (StatusCode::SERVICE_UNAVAILABLE, 5, e.to_string()),
            StoreError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, 30, e.to_string()),
            _ => (
                StatusCode::SERVICE_UNAVAILABLE,
                5,
                "the store could not write this request (see the server log); nothing of it was kept, retry later".to_string(),
            ),
        };
        AppError {
            retry_after: Some(retry),
            ..AppError::new(status, message, format)
        }
    }

    pub fn busy(message: impl Into<String>, format: Format) -> AppError {
        AppError {
            retry_after: Some(1),
            ..AppError::new(StatusCode::TOO_MANY_REQUESTS, message, format)
        }
    }

    fn rpc_code(&self) -> i32 {
        match self.status {
            StatusCode::TOO_MANY_REQUESTS => RESOURCE_EXHAUSTED,
            StatusCode::SERVICE_UNAVAILABLE => UNAVAILABLE,
            StatusCode::METHOD_NOT_ALLOWED => UNIMPLEMENTED,
            StatusCode::UNAUTHORIZED => UNAUTHENTICATED,
            _ => INVALID_ARGUMENT,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = RpcStatus {
            code: self.rpc_code(),
            message: self.message.clone(),
            details: Vec::new(),
        };
        let body = match self.format {
            Format::Protobuf => status.encode_to_vec(),
            Format::Json => serde_json::json!({"code": status.code, "message": status.message})
                .to_string()
                .into_bytes(),
        };
        let mut resp = (self.status, body).into_response();
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.format.content_type()),
        );
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.close {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"stormwatch\""),
            );
        }
        resp
    }
}
