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

/// The largest zstd window a body may use: 8 MiB, what RFC 8878 asks of
/// HTTP encoders (a frame needing more is refused). The decoder holds a
/// window this large, so it is charged before decompressing.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// `decompress`, asking `reserve(n)` before holding `n` more bytes: the
/// decoder's window (zstd), each step of output, and the copy that joins
/// the steps into one buffer. A refusal stops with `IngestError::Busy`.
/// What is held is what was reserved: each step is a buffer of exactly its
/// size, never a vector grown by doubling. A zstd frame that declares its
/// size is refused at once past `limit`, and otherwise charged that size
/// before any of it is decompressed, into one buffer of that size (so a
/// bomb that cannot be admitted now costs no decompression).
pub fn decompress_with(
    body: bytes::Bytes,
    encoding: Encoding,
    limit: usize,
    reserve: &mut dyn FnMut(usize) -> bool,
) -> Result<bytes::Bytes, IngestError> {
    let failed = |source| IngestError::Decompress {
        encoding: encoding.name(),
        source,
    };
    let mut first = STEP;
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
        Encoding::Zstd => {
            let declared = zstd::zstd_safe::get_frame_content_size(&body)
                .ok()
                .flatten();
            if declared.is_some_and(|n| n > limit as u64) {
                return Err(IngestError::TooLarge {
                    limit,
                    decompressed: true,
                });
            }
            // A frame that says how long it is needs a window no longer,
            // when the body is that one frame: a later frame may ask for a
            // window of its own, up to the largest.
            let one_frame =
                zstd::zstd_safe::find_frame_compressed_size(&body).is_ok_and(|n| n == body.len());
            let sized = declared.filter(|_| one_frame);
            let window = sized.map_or(1 << ZSTD_WINDOW_LOG_MAX, |n| {
                (n as usize).min(1 << ZSTD_WINDOW_LOG_MAX)
            });
            if !reserve(window) {
                return Err(IngestError::Busy);
            }
            if let Some(n) = sized {
                first = (n as usize).max(1);
            }
            let mut d = zstd::stream::read::Decoder::with_buffer(&body[..]).map_err(failed)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(failed)?;
            Box::new(d)
        }
    };
    let mut reader = reader.take(limit as u64 + 1);
    let mut steps: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;
    let mut size = first;
    // A byte read to learn whether the output goes on past a full step.
    let mut carry = None;
    loop {
        if !reserve(size) {
            return Err(IngestError::Busy);
        }
        let mut step = Vec::with_capacity(size);
        step.extend(carry.take());
        let room = (size - step.len()) as u64;
        reader
            .by_ref()
            .take(room)
            .read_to_end(&mut step)
            .map_err(failed)?;
        total += step.len();
        if total > limit {
            return Err(IngestError::TooLarge {
                limit,
                decompressed: true,
            });
        }
        let full = step.len() == size;
        if !step.is_empty() {
            steps.push(step);
        }
        if !full {
            break;
        }
        let mut probe = [0u8; 1];
        if reader.read(&mut probe).map_err(failed)? == 0 {
            break;
        }
        carry = Some(probe[0]);
        size = STEP;
    }
    drop(reader);
    if steps.len() <= 1 {
        let mut only = steps.pop().unwrap_or_default();
        only.shrink_to_fit();
        return Ok(only.into());
    }
    if !reserve(total) {
        return Err(IngestError::Busy);
    }
    let mut out = Vec::with_capacity(total);
    for step in steps {
        out.extend_from_slice(&step);
    }
    Ok(out.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Decompress with a reserve that records what it was asked for.
    fn charged(
        body: &[u8],
        encoding: Encoding,
        limit: usize,
    ) -> (Result<usize, IngestError>, Vec<usize>) {
        let mut asked = Vec::new();
        let out = decompress_with(
            bytes::Bytes::copy_from_slice(body),
            encoding,
            limit,
            &mut |n| {
                asked.push(n);
                true
            },
        );
        (out.map(|b| b.len()), asked)
    }

    #[test]
    fn a_zstd_frame_that_declares_its_size_is_charged_it_once_before_decompressing() {
        let raw = vec![7u8; 3 << 20];
        let z = zstd::bulk::compress(&raw, 3).unwrap();
        let (out, asked) = charged(&z, Encoding::Zstd, 4 << 20);
        assert_eq!(out.unwrap(), 3 << 20);
        // The window (no longer than the frame), then the frame's size.
        assert_eq!(asked, vec![3 << 20, 3 << 20]);
        // Past the limit: refused before anything is charged or decompressed.
        let (out, asked) = charged(&z, Encoding::Zstd, 2 << 20);
        assert!(matches!(
            out,
            Err(IngestError::TooLarge {
                decompressed: true,
                ..
            })
        ));
        assert!(asked.is_empty(), "{asked:?}");
    }

    #[test]
    fn a_small_first_frame_does_not_size_the_window_of_the_frames_after_it() {
        let mut z = zstd::bulk::compress(b"x", 3).unwrap();
        z.extend(zstd::bulk::compress(&vec![7u8; 3 << 20], 3).unwrap());
        let (out, asked) = charged(&z, Encoding::Zstd, 4 << 20);
        assert_eq!(out.unwrap(), (3 << 20) + 1);
        assert_eq!(asked[0], 1 << ZSTD_WINDOW_LOG_MAX, "{asked:?}");
    }

    #[test]
    fn output_of_unknown_size_is_charged_step_by_step_and_the_join_too() {
        use std::io::Write;
        let raw = vec![b'x'; STEP * 2 + 10];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).unwrap();
        let (out, asked) = charged(&gz.finish().unwrap(), Encoding::Gzip, 1 << 20);
        assert_eq!(out.unwrap(), raw.len());
        assert_eq!(asked, vec![STEP, STEP, STEP, raw.len()]);
        // Exactly one step: no extra step is charged to find the end.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw[..STEP]).unwrap();
        let (out, asked) = charged(&gz.finish().unwrap(), Encoding::Gzip, 1 << 20);
        assert_eq!(out.unwrap(), STEP);
        assert_eq!(asked, vec![STEP]);
    }

    #[test]
    fn a_refused_reservation_stops_decompressing() {
        let z = zstd::bulk::compress(&vec![0u8; 8 << 20], 3).unwrap();
        let mut calls = 0;
        let out = decompress_with(z.into(), Encoding::Zstd, 64 << 20, &mut |_| {
            calls += 1;
            calls < 2
        });
        assert!(matches!(out, Err(IngestError::Busy)));
        assert_eq!(calls, 2);
    }

    #[test]
    fn a_zstd_window_past_8_mib_is_refused() {
        let raw: Vec<u8> = (0..(33u32 << 20)).map(|i| (i % 251) as u8).collect();
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(25))
            .unwrap();
        let z = c.compress(&raw).unwrap();
        let (out, _) = charged(&z, Encoding::Zstd, 64 << 20);
        assert!(
            matches!(
                out,
                Err(IngestError::Decompress {
                    encoding: "zstd",
                    ..
                })
            ),
            "{out:?}"
        );
    }
}
