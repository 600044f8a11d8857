//! Crash safety with the real binary: concurrent exporters, `kill -9`
//! mid-stream (flushes and compactions running), restart, redelivery. Every
//! acknowledged span is present exactly once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use crate::common::{rows_by_key, spans, Server};

pub const SPANS_PER_BATCH: usize = 100;

/// A string attribute (also used by `readrace.rs`).
pub fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// Batch `id`: its own trace, 100 tool spans.
pub fn batch(id: u64) -> Vec<u8> {
    batch_of(id, SPANS_PER_BATCH)
}

/// Batch `id`: its own trace, `n` tool spans.
pub fn batch_of(id: u64, n: usize) -> Vec<u8> {
    request_of(id, n).encode_to_vec()
}

/// Batch `id` as the request message: its own trace, `n` tool spans.
pub fn request_of(id: u64, n: usize) -> ExportTraceServiceRequest {
    let mut trace = [0u8; 16];
    trace[..8].copy_from_slice(&id.to_be_bytes());
    trace[15] = 1;
    let start = 1_785_354_394_000_000_000u64 + id * 1_000_000;
    let spans = (0..n as u64)
        .map(|i| Span {
            trace_id: trace.to_vec(),
            span_id: (i + 1).to_be_bytes().to_vec(),
            name: "execute_tool search_flights".into(),
            start_time_unix_nano: start + i * 1000,
            end_time_unix_nano: start + i * 1000 + 500,
            attributes: vec![
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", "search_flights"),
            ],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Post batch `id` and return the answer.
fn send_batch(
    client: &reqwest_blocking::blocking::Client,
    url: &str,
    id: u64,
) -> reqwest_blocking::blocking::Response {
    client
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(batch(id))
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap()
}

fn post(client: &reqwest_blocking::blocking::Client, url: &str, id: u64) -> bool {
    client
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(batch(id))
        .timeout(Duration::from_secs(10))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

#[test]
fn kill_9_mid_stream_loses_no_acknowledged_span_and_doubles_none() {
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = kill_trial_store(dir.path());
    let cfg = ["--config", config.to_str().unwrap()];
    let server = Server::start(&data, &cfg, &[]);
    let url = server.traces_url();
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let unacked = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4u64)
        .map(|t| {
            let (url, acked, unacked, stop) = (
                url.clone(),
                Arc::clone(&acked),
                Arc::clone(&unacked),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let client = reqwest_blocking::blocking::Client::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = t * 1_000_000 + n;
                    n += 1;
                    if post(&client, &url, id) {
                        acked.lock().unwrap().insert(id);
                    } else {
                        unacked.lock().unwrap().insert(id);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    wait_for_acks(&acked, 60);
    server.kill();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let unacked = unacked.lock().unwrap().clone();
    assert!(
        acked.len() >= 60,
        "only {} batches acknowledged before the kill",
        acked.len()
    );

    // Restart; the exporters redeliver what was not acknowledged, and (a
    // lost response) a few batches that were.
    let server = Server::start(&data, &cfg, &[]);
    let log = server.log_text();
    assert!(
        log.contains("recovered the write-ahead log") || log.contains("listening"),
        "{log}"
    );
    let client = reqwest_blocking::blocking::Client::new();
    let resend = redelivery(&acked, &unacked);
    for id in &resend {
        assert!(
            post(&client, &server.traces_url(), *id),
            "redelivery of batch {id} failed"
        );
    }
    server.stop();

    let expected: BTreeSet<u64> = acked.union(&resend).copied().collect();
    assert_every_span_once(&data, &expected);
}

/// A data dir and a config for a kill trial: small flushes and eager
/// compaction, so the kill can land in either.
pub fn kill_trial_store(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let config = dir.join("stormwatch.toml");
    std::fs::write(
        &config,
        "[store]\nflush_rows = 700\ncompact_parts = 3\nflush_interval_secs = 1\n",
    )
    .unwrap();
    (dir.join("data"), config)
}

/// Wait (at most a minute) until `n` batches are acknowledged.
pub fn wait_for_acks(acked: &Mutex<BTreeSet<u64>>, n: usize) {
    let started = Instant::now();
    while acked.lock().unwrap().len() < n && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What exporters redeliver after a restart: every batch not acknowledged,
/// and (a lost response) a few that were.
pub fn redelivery(acked: &BTreeSet<u64>, unacked: &BTreeSet<u64>) -> BTreeSet<u64> {
    unacked
        .iter()
        .copied()
        .chain(acked.iter().copied().take(10))
        .collect()
}

/// Every span of every batch in `expected` is stored, and nothing else;
/// none twice.
pub fn assert_every_span_once(data: &std::path::Path, expected: &BTreeSet<u64>) {
    let df = spans(data);
    // rows_by_key panics if any span is stored twice.
    let stored = rows_by_key(&df, &[]);
    for id in expected {
        let mut trace = [0u8; 16];
        trace[..8].copy_from_slice(&id.to_be_bytes());
        trace[15] = 1;
        let trace_hex: String = trace.iter().map(|b| format!("{b:02x}")).collect();
        for i in 0..SPANS_PER_BATCH as u64 {
            let key = format!("{trace_hex}/{:016x}", i + 1);
            assert!(stored.contains_key(&key), "span {key} of batch {id} lost");
        }
    }
    assert_eq!(df.height(), expected.len() * SPANS_PER_BATCH);
}

#[test]
fn an_fsync_failure_refuses_that_request_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The third group commit's fdatasync fails.
    let server = Server::start(
        &data,
        &[],
        &[("STORMWATCH_FAULTS", "wal_fsync=fail_once@3")],
    );
    let client = reqwest_blocking::blocking::Client::new();
    let send = |id: u64| send_batch(&client, &server.traces_url(), id);
    assert_eq!(send(1).status(), 200);
    assert_eq!(send(2).status(), 200);
    let refused = send(3);
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(send(4).status(), 200);
    assert_eq!(send(3).status(), 200, "the retried request succeeds");
    let log = server.stop();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WAL write failed"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("injected fault at wal_fsync"),
        "{}",
        lines[0]
    );
    let stored = stored_batches(&data);
    assert_eq!(
        stored,
        (1..=4).map(|id| (id, SPANS_PER_BATCH)).collect(),
        "the two batches acknowledged before the failure, the two after"
    );
}

#[test]
fn a_parquet_write_failure_keeps_the_wal_and_the_next_flush_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("stormwatch.toml");
    std::fs::write(&config, "[store]\nflush_interval_secs = 1\n").unwrap();
    let server = Server::start(
        &data,
        &["--config", config.to_str().unwrap()],
        &[("STORMWATCH_FAULTS", "parquet_write=fail:2")],
    );
    let client = reqwest_blocking::blocking::Client::new();
    for id in 0..3 {
        assert_eq!(
            send_batch(&client, &server.traces_url(), 100 + id).status(),
            200
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&client, &server, "stormwatch_flushes_total") < 1.0 {
        assert!(Instant::now() < deadline, "no flush succeeded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        metric(&client, &server, "stormwatch_flush_failures_total"),
        2.0
    );
    let log = server.stop();
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("flush to Parquet failed; the WAL keeps the spans, retrying"))
        .collect();
    assert_eq!(failures.len(), 2, "one line per failure:\n{log}");
    assert_eq!(rows_by_key(&spans(&data), &[]).len(), 3 * SPANS_PER_BATCH);
    assert!(!log.contains("giving up on this flush"), "{log}");
}

/// One unlabelled sample of the server's `/metrics`.
fn metric(client: &reqwest_blocking::blocking::Client, server: &Server, name: &str) -> f64 {
    let text = client
        .get(format!("http://{}/metrics", server.http))
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

/// While flushes fail, the WAL is what holds the acknowledged spans: kill
/// the server then, start it without the fault, and they are all there.
#[test]
fn while_flushes_fail_the_wal_holds_everything_acknowledged_through_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("stormwatch.toml");
    std::fs::write(&config, "[store]\nflush_interval_secs = 1\n").unwrap();
    let cfg = ["--config", config.to_str().unwrap()];
    let server = Server::start(&data, &cfg, &[("STORMWATCH_FAULTS", "parquet_write=fail")]);
    let client = reqwest_blocking::blocking::Client::new();
    for id in 0..3 {
        assert_eq!(
            send_batch(&client, &server.traces_url(), 200 + id).status(),
            200
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&client, &server, "stormwatch_flush_failures_total") < 1.0 {
        assert!(Instant::now() < deadline, "no flush was tried");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&client, &server, "stormwatch_wal_bytes") > 0.0);
    assert_eq!(metric(&client, &server, "stormwatch_flushes_total"), 0.0);
    server.kill();
    let server = Server::start(&data, &cfg, &[]);
    let log = server.stop();
    assert!(log.contains("recovered the write-ahead log"), "{log}");
    assert_eq!(
        stored_batches(&data),
        (200..203).map(|id| (id, SPANS_PER_BATCH)).collect()
    );
}

/// Stored spans per batch id (the first 8 bytes of the batch's trace id).
pub fn stored_batches(data: &std::path::Path) -> std::collections::BTreeMap<u64, usize> {
    let df = spans(data);
    // rows_by_key panics if any span is stored twice.
    let keys = rows_by_key(&df, &[]);
    let mut out = std::collections::BTreeMap::new();
    for key in keys.keys() {
        let id = u64::from_str_radix(&key[..16], 16).unwrap();
        *out.entry(id).or_insert(0) += 1;
    }
    out
}

/// A filesystem of `mib` MiB at `at`, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &std::path::Path, mib: u32) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to fill it, which needs root (CI runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A disk that fills: ingest turns to 503 with Retry-After (one log line
/// naming ENOSPC), nothing acknowledged is lost, and once space returns the
/// same server takes spans again and flushes everything.
#[test]
fn a_full_disk_turns_ingest_to_503_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    let fs = Tmpfs::mount(&mnt, 24);
    let data = mnt.join("data");
    let config = dir.path().join("stormwatch.toml");
    std::fs::write(&config, "[store]\nflush_interval_secs = 1\n").unwrap();
    let cfg = ["--config", config.to_str().unwrap()];
    let server = Server::start(&data, &cfg, &[]);
    // Leave about 3 MiB free.
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..19 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let client = reqwest_blocking::blocking::Client::new();
    let send = |id: u64| send_batch(&client, &server.traces_url(), id);
    let mut acked = BTreeSet::new();
    let mut refused = None;
    for id in 0..5000 {
        let r = send(id);
        match r.status().as_u16() {
            200 => {
                acked.insert(id);
            }
            503 => {
                refused = Some(r);
                break;
            }
            other => panic!("batch {id}: {other}"),
        }
    }
    let refused = refused.expect("the disk never filled");
    assert!(refused.headers().contains_key("retry-after"));
    assert!(!acked.is_empty());
    let ready = || {
        client
            .get(format!("http://{}/readyz", server.http))
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(ready(), 503, "a full disk is not ready");
    // Space returns; the same server is ready (once /readyz's cached
    // answer, at most a second old, runs out) and takes spans again.
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    while ready() != 200 {
        assert!(
            freed.elapsed() < Duration::from_secs(3),
            "not ready again with space"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for id in 10_000..10_020 {
        assert_eq!(send(id).status(), 200, "batch {id} after space returned");
        acked.insert(id);
    }
    let log = server.stop();
    let enospc: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WAL write failed"))
        .collect();
    assert!(!enospc.is_empty(), "{log}");
    assert!(
        enospc.iter().all(|l| l.contains("No space left on device")),
        "{enospc:?}"
    );
    let stored = stored_batches(&data);
    for id in &acked {
        assert_eq!(stored.get(id), Some(&SPANS_PER_BATCH), "batch {id}");
    }
    assert_eq!(
        stored.len(),
        acked.len(),
        "only acknowledged batches are stored"
    );
    drop(fs);
}
