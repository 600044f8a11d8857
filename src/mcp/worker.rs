//! The query worker (`stormwatch mcp --query-worker`, started by
//! `sandbox`, never by hand): reads one [`Request`] from stdin, checks the
//! statement again, runs it over the data directory and writes one
//! [`Reply`] to stdout. A watchdog thread ends the process past the
//! request's memory or time limit (exit [`EXIT_MEMORY`] / [`EXIT_TIME`]),
//! so a worker whose server is gone still stops.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use super::sandbox::{Reply, Request, EXIT_MEMORY, EXIT_TIME};
use crate::telemetry::own_resident_bytes;

/// The largest request read (a statement is at most 16 KiB).
const MAX_REQUEST_BYTES: u64 = 64 << 10;

/// Answer one request from `input` on `out`. An error of the query is a
/// [`Reply::Error`]; only a request that cannot be read is an `Err`.
pub fn run(data_dir: &Path, input: impl Read, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let mut text = Vec::new();
    input.take(MAX_REQUEST_BYTES).read_to_end(&mut text)?;
    let request: Request = serde_json::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("the query worker's request did not decode: {e}"))?;
    watch(request.memory_bytes, Duration::from_millis(request.time_ms));
    let reply = match answer(data_dir, &request) {
        Ok(a) => Reply::Answer(a),
        Err(e) => Reply::Error(e.to_string()),
    };
    serde_json::to_writer(&mut *out, &reply)?;
    out.flush()?;
    Ok(())
}

fn answer(data_dir: &Path, request: &Request) -> Result<super::sql::QueryAnswer, super::McpError> {
    // A slow query, for the tests (`STORMWATCH_FAULTS=query_worker=delay:MS`).
    crate::faults::check("query_worker")
        .map_err(|e| super::McpError::Refused(format!("query failed: {e}")))?;
    let reader = crate::store::Reader::open(data_dir)?;
    let rollup = crate::read::data::RollupCache::default().get(&reader)?;
    super::sql::execute(&reader, &rollup, &request.sql, request.days)
}

/// End the process once its resident set passes `memory_bytes` or its
/// time passes `time` (a second after the server would have stopped it).
fn watch(memory_bytes: u64, time: Duration) {
    let started = Instant::now();
    let deadline = time + Duration::from_secs(1);
    std::thread::spawn(move || loop {
        if own_resident_bytes() > memory_bytes {
            eprintln!(
                "query worker: past its memory limit ({} MiB), stopping",
                memory_bytes >> 20
            );
            std::process::exit(EXIT_MEMORY);
        }
        if started.elapsed() > deadline {
            eprintln!(
                "query worker: past its time limit ({} s), stopping",
                time.as_secs()
            );
            std::process::exit(EXIT_TIME);
        }
        std::thread::sleep(Duration::from_millis(5));
    });
}
