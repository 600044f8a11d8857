//! stormwatch's ingest stage, as a crate of its own: from an OTLP request
//! body or a file to a columnar batch of normalized spans.
//!
//! - [`ingest`]: protobuf and JSON decoding, decompression with limits,
//!   attribute resolution, tool-call detection and error classification.
//! - [`model`]: the span row, the error classes and the small value types
//!   (days, ids) every later stage shares.
//!
//! It touches no disk beyond the files it is given and no network, and it
//! depends on no query engine: the fuzz targets in `fuzz/` build it alone.

pub mod ingest;
pub mod model;
