//! Any bytes as an OTLP/JSON body: decode and normalize must return, never
//! panic; what decodes re-encodes and decodes to as many spans.
#![no_main]
use libfuzzer_sys::fuzz_target;
use stormwatch_otlp::ingest::{decode, json, normalize, Format};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode::decode(data, Format::Json) {
        let spans = normalize(&req).spans();
        let again = json::decode(json::encode(&req).as_bytes()).expect("re-encoded JSON decodes");
        assert_eq!(normalize(&again).spans(), spans);
    }
});
