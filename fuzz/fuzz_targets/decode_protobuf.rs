//! Any bytes as an OTLP protobuf body: decode and normalize must return, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stormwatch_otlp::ingest::{decode, normalize, Format};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode::decode(data, Format::Protobuf) {
        let n = normalize(&req);
        assert!(n.spans() as u64 + n.rejected >= n.spans() as u64);
    }
});
