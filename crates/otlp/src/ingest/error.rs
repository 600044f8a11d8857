//! The ingest stage's error: what was wrong with a request or a file.

/// Everything that can make ingest refuse a body.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(
        "unsupported content type {got:?}: expected application/x-protobuf or application/json"
    )]
    UnsupportedMediaType { got: String },
    #[error("unsupported content encoding {got:?}: expected gzip, deflate, zstd or identity")]
    UnsupportedEncoding { got: String },
    #[error("request body is over the {limit}-byte limit{}", if *.decompressed { " once decompressed" } else { "" })]
    TooLarge { limit: usize, decompressed: bool },
    #[error("too many request bytes in flight; retry later")]
    Busy,
    #[error("could not decompress the {encoding} body: {source}")]
    Decompress {
        encoding: &'static str,
        source: std::io::Error,
    },
    #[error("could not decode the OTLP protobuf body: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("could not decode the OTLP JSON body: {0}")]
    Json(#[from] super::json::JsonError),
}
