//! Any bytes under every content encoding: decompression respects its cap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stormwatch_otlp::ingest::{decode, Encoding};

fuzz_target!(|data: &[u8]| {
    for enc in [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd] {
        if let Ok(out) = decode::decompress(bytes::Bytes::copy_from_slice(data), enc, 1 << 20) {
            assert!(out.len() <= 1 << 20);
        }
    }
});
