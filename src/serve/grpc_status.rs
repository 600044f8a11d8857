//! gRPC statuses that tell a client when to retry: `RetryInfo` in the
//! status details and in the trailer the Python exporter reads, and the
//! overload answer built from it. Below both the receiver (`grpc`) and the
//! message reader (`grpc_message`), which answer with it.

use prost::Message;
use tonic::{Code, Status};

use super::response::{ProtoAny, RpcStatus};

/// Overload: `RESOURCE_EXHAUSTED` with `RetryInfo` (retry in a second).
pub fn busy() -> Status {
    retry_later(
        Code::ResourceExhausted,
        "too many request bytes in flight; retry later",
        1,
    )
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
