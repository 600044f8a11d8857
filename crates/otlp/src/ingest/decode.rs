//! Request bodies to OTLP requests: media type and encoding negotiation,
//! capped streaming decompression, protobuf and JSON decoding.

use std::io::Read;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use super::{json, IngestError};

/// The two OTLP/HTTP payload encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Protobuf,
    Json,
}

impl Format {
    /// The format a `Content-Type` names; parameters such as `charset` are ignored.
    pub fn from_content_type(value: Option<&str>) -> Result<Format, IngestError> {
        let raw = value.unwrap_or("");
        let essence = raw
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Format::Protobuf),
            "application/json" => Ok(Format::Json),
            _ => Err(IngestError::UnsupportedMediaType {
                got: if raw.is_empty() {
                    "(none)".to_string()
                } else {
                    raw.to_string()
                },
            }),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf => "application/x-protobuf",
            Format::Json => "application/json",
        }
    }
}

/// `Content-Encoding` values the receiver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Deflate,
    Zstd,
}

impl Encoding {
    pub fn from_header(value: Option<&str>) -> Result<Encoding, IngestError> {
        let raw = value.unwrap_or("").trim();
        match raw.to_ascii_lowercase().as_str() {
            "" | "identity" | "none" => Ok(Encoding::Identity),
            "gzip" | "x-gzip" => Ok(Encoding::Gzip),
            "deflate" => Ok(Encoding::Deflate),
            "zstd" => Ok(Encoding::Zstd),
            _ => Err(IngestError::UnsupportedEncoding {
                got: raw.to_string(),
            }),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Zstd => "zstd",
        }
    }
}

/// Decompress `body`, reading at most `limit` bytes of output: a body that
/// inflates past the limit is refused without ever being held whole.
pub fn decompress(
    body: bytes::Bytes,
    encoding: Encoding,
    limit: usize,
) -> Result<bytes::Bytes, IngestError> {
    decompress_with(body, encoding, limit, &mut |_| true)
}

/// Bytes of output read per step while decompressing.
const STEP: usize = 256 << 10;

/// `decompress`, asking `reserve(n)` before holding `n` more bytes of
/// output; a refusal stops with `IngestError::Busy`.
pub fn decompress_with(
    body: bytes::Bytes,
    encoding: Encoding,
    limit: usize,
    reserve: &mut dyn FnMut(usize) -> bool,
) -> Result<bytes::Bytes, IngestError> {
    let reader: Box<dyn Read + '_> = match encoding {
        Encoding::Identity => {
            if body.len() > limit {
                return Err(IngestError::TooLarge {
                    limit,
                    decompressed: false,
                });
            }
            return Ok(body);
        }
        Encoding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(&body[..])),
        // HTTP "deflate" is zlib-wrapped; some clients send raw deflate.
        Encoding::Deflate if is_zlib(&body) => Box::new(flate2::read::ZlibDecoder::new(&body[..])),
        Encoding::Deflate => Box::new(flate2::read::DeflateDecoder::new(&body[..])),
        Encoding::Zstd => Box::new(zstd::stream::read::Decoder::new(&body[..]).map_err(
            |source| IngestError::Decompress {
                encoding: "zstd",
                source,
            },
        )?),
    };
    let mut out = Vec::new();
    let mut reader = reader.take(limit as u64 + 1);
    loop {
        if !reserve(STEP) {
            return Err(IngestError::Busy);
        }
        let before = out.len();
        let n = reader
            .by_ref()
            .take(STEP as u64)
            .read_to_end(&mut out)
            .map_err(|source| IngestError::Decompress {
                encoding: encoding.name(),
                source,
            })?;
        if out.len() > limit {
            return Err(IngestError::TooLarge {
                limit,
                decompressed: true,
            });
        }
        if n == 0 || out.len() - before < STEP {
            return Ok(out.into());
        }
    }
}

/// A zlib header: deflate method and a header checksum divisible by 31.
fn is_zlib(body: &[u8]) -> bool {
    match body {
        [cmf, flg, ..] => cmf & 0x0f == 8 && ((u16::from(*cmf) << 8) | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

/// Decode an (uncompressed) body in the given format.
pub fn decode(body: &[u8], format: Format) -> Result<ExportTraceServiceRequest, IngestError> {
    match format {
        Format::Protobuf => Ok(ExportTraceServiceRequest::decode(body)?),
        Format::Json => Ok(json::decode(body)?),
    }
}
