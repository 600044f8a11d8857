//! Any bytes as a file for `import`: every layout (JSON, JSON lines,
//! protobuf bare or framed, each gzip'd or not) must read to records or a
//! clear error, never panic. The first byte picks the file's name, since the
//! name steers the layout as much as the content does; the rest is written
//! to a file in the system's temporary directory (a tmpfs on Linux CI) and
//! read as `import` reads it, under a cap on gzip'd content (16 MiB here,
//! so a fuzzed gzip bomb stops at the cap). Every JSON line that decodes is
//! checked to normalize too.
#![no_main]
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stormwatch_otlp::ingest::{file, normalize};

const NAMES: [&str; 6] = [
    "t.json",
    "t.jsonl",
    "t.pb",
    "t.jsonl.gz",
    "t",
    "t.ndjson.gz",
];

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("stormwatch-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a scratch directory");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let path = dir().join(NAMES[pick as usize % NAMES.len()]);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(body))
        .expect("the scratch file is written");
    let limits = file::Limits { max_file_bytes: 16 << 20, max_decompressed_bytes: 16 << 20 };
    if let Ok((_, records)) = file::read(&path, &limits) {
        for r in records {
            if let Ok(req) = r.result {
                let n = normalize(&req);
                assert!(n.spans() <= req.resource_spans.iter().map(|rs| rs.scope_spans.iter().map(|s| s.spans.len()).sum::<usize>()).sum());
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
