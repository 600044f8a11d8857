//! Ingest: OTLP protobuf and JSON decoding, decompression with limits,
//! attribute resolution, tool-call detection and error classification, from a
//! request body or a file to a columnar batch of spans. Touches no disk and
//! no network beyond reading the files it is given.

pub mod attrs;
pub mod batch;
mod canon;
pub mod classify;
pub mod column;
pub mod conventions;
pub mod decode;
pub mod dependency;
mod error;
pub mod file;
pub mod file_limits;
pub mod json;
pub mod message;
pub mod model_span;
pub mod normalize;
pub mod results;
pub mod retry_after;
#[doc(hidden)]
pub mod rows;
pub mod toolcall;
pub mod window;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_canon;
#[cfg(test)]
mod tests_control;
#[cfg(test)]
mod tests_dependency;
#[cfg(test)]
mod tests_file;
#[cfg(test)]
mod tests_file_limits;
#[cfg(test)]
mod tests_model_span;
#[cfg(test)]
mod tests_window;

pub use batch::SpanBatch;
pub use decode::{Encoding, Format};
pub use error::IngestError;
pub use normalize::{normalize, normalize_with, normalize_within, Normalized};
pub use results::{ResultShape, ResultShapes};
pub use window::{Outside, TimeBounds, Window};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// A decoded request, ready for the store: its spans and the bytes the WAL keeps.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub normalized: Normalized,
    /// The request as OTLP protobuf: what the write-ahead log records and
    /// recovery decodes again.
    pub wal_payload: bytes::Bytes,
}

impl Prepared {
    /// Spans kept (the valid ones).
    pub fn spans(&self) -> usize {
        self.normalized.spans()
    }

    /// Memory the decoded spans hold until the store takes them (the WAL
    /// payload not included).
    pub fn mem_bytes(&self) -> usize {
        self.normalized.mem_bytes()
    }
}

/// Decompress, decode and normalize one OTLP/HTTP body, every span time
/// accepted.
pub fn prepare_body(
    body: bytes::Bytes,
    format: Format,
    encoding: Encoding,
    limit: usize,
) -> Result<Prepared, IngestError> {
    prepare_body_with(body, format, encoding, limit, Rules::NONE, &mut |_| true)
}

/// What reading a request depends on besides the request: the receive
/// time's window, and the result shapes users declared.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub window: &'a Window,
    pub shapes: &'a ResultShapes,
}

impl Rules<'static> {
    /// Every span time accepted, no shape declared.
    pub const NONE: Rules<'static> = Rules {
        window: &Window::unbounded(),
        shapes: ResultShapes::NONE,
    };
}

/// Memory a JSON body takes while parsed, per byte of it (a `serde_json::Value` tree).
pub const JSON_EXPANSION: usize = 6;

/// `prepare_body` by `rules` (spans outside its window rejected, tool
/// results read with its shapes too), asking `reserve(n)`
/// before holding `n` more bytes (decompressed output, the parsed JSON
/// tree); a refusal is `Busy`.
pub fn prepare_body_with(
    body: bytes::Bytes,
    format: Format,
    encoding: Encoding,
    limit: usize,
    rules: Rules<'_>,
    reserve: &mut dyn FnMut(usize) -> bool,
) -> Result<Prepared, IngestError> {
    let raw = if encoding == Encoding::Identity {
        decode::decompress(body, encoding, limit)?
    } else {
        decode::decompress_with(body, encoding, limit, reserve)?
    };
    if format == Format::Json && !reserve(raw.len() * JSON_EXPANSION) {
        return Err(IngestError::Busy);
    }
    let request = decode::decode(&raw, format)?;
    let payload = match format {
        Format::Protobuf => raw,
        Format::Json => request.encode_to_vec().into(),
    };
    Ok(prepare_request(
        &request,
        payload,
        rules.window,
        rules.shapes,
    ))
}

/// Normalize a decoded request (tool results read with the users'
/// `shapes` too), rejecting spans outside `window`; `payload`
/// must be its protobuf encoding. When spans were refused for their time,
/// the WAL payload is the request without them: a replay, which takes every
/// time, must not bring them back.
pub fn prepare_request(
    request: &ExportTraceServiceRequest,
    payload: bytes::Bytes,
    window: &Window,
    shapes: &ResultShapes,
) -> Prepared {
    let normalized = normalize_with(request, window, shapes);
    let wal_payload = if normalized.outside() > 0 {
        window::retain_spans(request, |s| normalize::check(s, window).is_ok())
            .encode_to_vec()
            .into()
    } else {
        payload
    };
    Prepared {
        normalized,
        wal_payload,
    }
}

/// Normalize a request (every span time accepted) and encode it for the WAL.
pub fn prepare(request: &ExportTraceServiceRequest) -> Prepared {
    prepare_within(request, &Window::unbounded(), ResultShapes::NONE)
}

/// [`prepare`], rejecting spans outside `window`, tool results read with
/// the users' `shapes` too.
pub fn prepare_within(
    request: &ExportTraceServiceRequest,
    window: &Window,
    shapes: &ResultShapes,
) -> Prepared {
    prepare_request(request, request.encode_to_vec().into(), window, shapes)
}

#[cfg(test)]
mod tests_conventions;
