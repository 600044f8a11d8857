//! One unary gRPC request message read off the wire under admission, and
//! the answer written back, without tonic's codec: the length-prefixed
//! frame is parsed here as its bytes arrive (charged to the in-flight
//! budget by [`Intake`]), and a compressed message stays compressed, so
//! that it is decompressed on a decoding thread under the same cap and
//! budget as an HTTP body (`otlp::store_body`), never on the async threads.

use std::convert::Infallible;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::StreamBody;
use tonic::codegen::http;
use tonic::Status;

use super::admission::{Cut, Intake};
use crate::ingest::Encoding;

/// The gRPC frame's prefix: the compressed flag and a 4-byte length.
pub const PREFIX: usize = 5;

/// Encodings a request message may be compressed with.
const ACCEPTED: &str = "gzip,zstd,deflate";

/// The request's `grpc-encoding`: how a message with the compressed flag
/// is compressed. Another encoding is `UNIMPLEMENTED`, naming those taken.
pub fn request_encoding(headers: &http::HeaderMap) -> Result<Encoding, Status> {
    let Some(value) = headers.get("grpc-encoding") else {
        return Ok(Encoding::Identity);
    };
    match value.as_bytes() {
        b"identity" => Ok(Encoding::Identity),
        b"gzip" => Ok(Encoding::Gzip),
        b"zstd" => Ok(Encoding::Zstd),
        b"deflate" => Ok(Encoding::Deflate),
        other => {
            let mut status = Status::unimplemented(format!(
                "the message is compressed with `{}`; this receiver takes {ACCEPTED} or identity",
                String::from_utf8_lossy(other)
            ));
            status.metadata_mut().insert(
                "grpc-accept-encoding",
                tonic::metadata::MetadataValue::from_static(ACCEPTED),
            );
            Err(status)
        }
    }
}

/// A request message as it came: still compressed when `compressed`.
#[derive(Debug)]
pub struct Message {
    pub compressed: bool,
    pub bytes: Bytes,
}

/// Read the one message of a unary call, refusing one whose prefix
/// declares more than `max` bytes before any more of it is read.
pub async fn read<B>(intake: &mut Intake<B>, max: usize) -> Result<Message, Status>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let cut = |c| cut_status(c, max);
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut header: Option<(bool, usize)> = None;
    while let Some(c) = intake.chunk().await.map_err(cut)? {
        chunks.push(c);
        if header.is_none() && intake.len() >= PREFIX {
            let (compressed, len) = prefix(&chunks)?;
            if len > max {
                return Err(too_large(max, &format!("the message declares {len} bytes")));
            }
            header = Some((compressed, len));
        }
        if let Some((_, len)) = header {
            if intake.len() > PREFIX + len {
                return Err(Status::invalid_argument(
                    "a unary Export call carries one message; more bytes followed it",
                ));
            }
        }
    }
    let Some((compressed, len)) = header else {
        return Err(Status::internal(if intake.is_empty() {
            "the request carried no message".to_string()
        } else {
            format!(
                "the request ended inside the {PREFIX}-byte message prefix ({} bytes)",
                intake.len()
            )
        }));
    };
    if intake.len() < PREFIX + len {
        return Err(Status::internal(format!(
            "the request ended after {} of the message's {len} bytes",
            intake.len() - PREFIX
        )));
    }
    let all = intake.join(chunks).map_err(cut)?;
    Ok(Message {
        compressed,
        bytes: all.slice(PREFIX..),
    })
}

/// The compressed flag and length of the first message.
fn prefix(chunks: &[Bytes]) -> Result<(bool, usize), Status> {
    let mut head = [0u8; PREFIX];
    let mut got = 0;
    for c in chunks {
        let n = (PREFIX - got).min(c.len());
        head[got..got + n].copy_from_slice(&c[..n]);
        got += n;
        if got == PREFIX {
            break;
        }
    }
    let compressed = match head[0] {
        0 => false,
        1 => true,
        f => {
            return Err(Status::internal(format!(
                "protocol error: compressed flag {f} (valid flags are 0 and 1)"
            )))
        }
    };
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    Ok((compressed, len))
}

/// Past `max_body_bytes`: `RESOURCE_EXHAUSTED` without `RetryInfo` (not
/// retryable), as the HTTP receiver's 413.
pub fn too_large(max: usize, found: &str) -> Status {
    Status::resource_exhausted(format!(
        "the request is larger than this receiver's limit of {max} bytes (max_body_bytes): {found}; \
         send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)"
    ))
}

/// A body not taken whole, as its gRPC status.
pub fn cut_status(cut: Cut, max: usize) -> Status {
    match cut {
        Cut::TooLarge { .. } => too_large(max, "the message is longer"),
        Cut::NeverFits { .. } => Status::resource_exhausted(cut.to_string()),
        Cut::Busy => super::grpc_status::busy(),
        Cut::TooSlow { .. } | Cut::Timeout { .. } => Status::deadline_exceeded(cut.to_string()),
        Cut::Read(_) => Status::cancelled(cut.to_string()),
    }
}

/// A unary answer: the message, then `grpc-status: 0` in the trailers.
pub fn answer(message: &impl prost::Message) -> http::Response<tonic::body::Body> {
    let len = message.encoded_len();
    let mut data = BytesMut::with_capacity(PREFIX + len);
    data.put_u8(0);
    data.put_u32(len as u32);
    // A BytesMut grows: encoding into it cannot fail.
    let _ = message.encode(&mut data);
    let mut trailers = http::HeaderMap::new();
    trailers.insert(Status::GRPC_STATUS, http::HeaderValue::from_static("0"));
    let frames = [
        Ok::<_, Infallible>(http_body::Frame::data(data.freeze())),
        Ok(http_body::Frame::trailers(trailers)),
    ];
    let mut response = http::Response::new(tonic::body::Body::new(StreamBody::new(
        futures::stream::iter(frames),
    )));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
