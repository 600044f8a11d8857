//! Reads racing the store's background work, in one process as `serve` runs
//! them: sweeps one after another (the code `POST /api/sweep` runs), the
//! dashboard's and the MCP server's reads (the rollup cache, a trace, a
//! day's spans) while ingest, flushes every 50 ms, compaction at two parts,
//! rollup refreshes and seal compaction of past days replace files under
//! them. No read may fail, and once they are done no replaced file is left.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{
    status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};
use polars::prelude::*;
use stormwatch::model::NANOS_PER_DAY;
use stormwatch::store::{Store, StoreOptions};

use crate::crash::s;

/// How long the load runs.
const RUN: Duration = Duration::from_secs(15);

/// Turn `id` on `day`: an agent span and eight calls of one tool under it,
/// the first five failing (a retry storm), ids unique to the turn.
fn turn(id: u64, day: i32) -> ExportTraceServiceRequest {
    let mut trace = [0u8; 16];
    trace[..8].copy_from_slice(&id.to_be_bytes());
    trace[15] = 7;
    let start = i64::from(day) * NANOS_PER_DAY + (id as i64 % 80_000) * 1_000_000_000;
    let agent = Span {
        trace_id: trace.to_vec(),
        span_id: 1u64.to_be_bytes().to_vec(),
        name: "invoke_agent planner".into(),
        start_time_unix_nano: start as u64,
        end_time_unix_nano: (start + 9_000_000) as u64,
        attributes: vec![
            s("gen_ai.operation.name", "invoke_agent"),
            s("gen_ai.agent.name", "planner"),
        ],
        ..Default::default()
    };
    let tool = format!("tool_{}", id % 5);
    let mut spans = vec![agent];
    for i in 0..8u64 {
        let at = start + 1_000_000 * (i as i64 + 1);
        let failed = i < 5;
        let mut attributes = vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", &tool),
        ];
        if failed {
            attributes.push(s("error.type", "TimeoutError"));
        }
        spans.push(Span {
            trace_id: trace.to_vec(),
            span_id: (i + 2).to_be_bytes().to_vec(),
            parent_span_id: 1u64.to_be_bytes().to_vec(),
            name: format!("execute_tool {tool}"),
            start_time_unix_nano: at as u64,
            end_time_unix_nano: (at + 500_000) as u64,
            attributes,
            status: failed.then(|| Status {
                code: StatusCode::Error as i32,
                message: "timed out".into(),
            }),
            ..Default::default()
        });
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: None,
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[test]
fn reads_never_fail_while_the_store_replaces_files_under_them() {
    // The store's warnings (a failed seal, a failed reclaim) in the output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        flush_interval: Duration::from_millis(50),
        compact_parts: 2,
        rollup_interval: Duration::from_millis(20),
        seal_after: Some(Duration::from_secs(1)),
        retired_grace: Duration::ZERO,
        ..StoreOptions::default()
    };
    let store = Arc::new(Store::open(dir.path(), opts).unwrap());
    let today = (now_ns() / NANOS_PER_DAY) as i32;
    let stop = Arc::new(AtomicBool::new(false));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let fail = |what: &str, e: String| {
        failures.lock().unwrap().push(format!("{what}: {e}"));
    };
    let (sweeps, reads) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let most_pending = AtomicUsize::new(0);
    let slow = AtomicUsize::new(0);
    let layout = store.layout().clone();
    let catalog = Arc::clone(store.catalog());
    let started = Instant::now();
    std::thread::scope(|scope| {
        // Ingest: today and one past day at a time (the hot one moves every
        // second, so the others go quiet and are sealed again).
        // Ingest pauses 1.5 s in every 5 (a quiet spell: the flusher's
        // merges catch up and the sealer seals the quiet past days).
        scope.spawn(|| {
            let mut id = 0u64;
            while started.elapsed() < RUN {
                if started.elapsed().as_millis() % 5000 >= 3500 {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                id += 1;
                let past = today - 1 - (started.elapsed().as_secs() % 3) as i32;
                for day in [today, past] {
                    let prepared =
                        stormwatch::ingest::prepare(&turn(id * 2 + u64::from(day == past), day));
                    match store.submit(prepared).and_then(|ack| ack.wait()) {
                        Ok(_) => {}
                        Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(5)),
                        Err(e) => fail("ingest", e.to_string()),
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            stop.store(true, Ordering::Release);
        });
        // Sweeps, one after another.
        scope.spawn(|| {
            let config = stormwatch::config::Config::default();
            let reader = store.reader();
            let mut state = stormwatch::signal::StateDb::open(&reader.layout().state_db()).unwrap();
            while !stop.load(Ordering::Acquire) {
                let opts = stormwatch::sweep::SweepOptions::from_config(&config, now_ns(), None);
                match stormwatch::sweep::run(&reader, &mut state, &config.detect, &opts) {
                    Ok(_) | Err(stormwatch::sweep::SweepError::Empty(_)) => {
                        sweeps.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => fail("sweep", e.to_string()),
                }
            }
        });
        // How many replaced files wait to be deleted, sampled: held only
        // by the reads in flight, not piling up.
        scope.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                most_pending.fetch_max(
                    stormwatch::store::retire::pending(&catalog),
                    Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        // Slow reads: the scan planned (its files' footers read), then
        // collected a little later, as a sweep that was descheduled between
        // the two; a file replaced or deleted meanwhile fails it.
        scope.spawn(|| {
            let reader = store.reader();
            let pause = || std::thread::sleep(Duration::from_millis(30));
            while !stop.load(Ordering::Acquire) {
                let spans = reader.spans(today - 3..=today).and_then(|mut scan| {
                    scan.collect_schema()
                        .map_err(|e| stormwatch::store::StoreError::data("planning", e))?;
                    pause();
                    scan.collect()
                        .map_err(|e| stormwatch::store::StoreError::data("collecting", e))
                });
                if let Err(e) = spans {
                    fail("a slow read of spans", e.to_string());
                }
                let names = reader.tool_error_names().and_then(|scan| match scan {
                    None => Ok(None),
                    Some(mut scan) => {
                        scan.collect_schema()
                            .map_err(|e| stormwatch::store::StoreError::data("planning", e))?;
                        pause();
                        scan.collect()
                            .map(Some)
                            .map_err(|e| stormwatch::store::StoreError::data("collecting", e))
                    }
                });
                if let Err(e) = names {
                    fail("a slow read of the error names", e.to_string());
                }
                slow.fetch_add(1, Ordering::Relaxed);
            }
        });
        // The dashboard's and the MCP server's reads.
        scope.spawn(|| {
            let cache = stormwatch::read::cache::Reads::new(store.reader());
            let reader = store.reader();
            let trace = format!("{:016x}{:016x}", 40u64, 7u64);
            while !stop.load(Ordering::Acquire) {
                if let Err(e) = cache.rollup() {
                    fail("the rollup", e.to_string());
                }
                if let Err(e) = reader.trace_spans(today - 3..=today, &trace) {
                    fail("a trace", e.to_string());
                }
                if let Err(e) = reader.collect_spans(today - 3..=today, |lf| lf.select([len()])) {
                    fail("spans", e.to_string());
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        });
    });
    // The readers are done: a flush (which reclaims what no pin holds)
    // leaves no replaced file, with the store still running.
    store.flush().unwrap();
    let pending_after = stormwatch::store::retire::pending(&catalog);
    let stats = store.stats();
    let (flushes, compactions, seals, seal_failures) = (
        stats.flushes.load(Ordering::Relaxed),
        stats.compactions.load(Ordering::Relaxed),
        stats.seal_compactions.load(Ordering::Relaxed),
        stats.seal_failures.load(Ordering::Relaxed),
    );
    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} failed reads, e.g. {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let (sweeps, reads) = (sweeps.into_inner(), reads.into_inner());
    let most_pending = most_pending.into_inner();
    let slow = slow.into_inner();
    eprintln!("{sweeps} sweeps, {reads} rounds of reads, {slow} slow reads, {flushes} flushes, {compactions} compactions, {seals} seal compactions ({seal_failures} failed), at most {most_pending} replaced files waiting; no read failed");
    assert_eq!(seal_failures, 0);
    assert_eq!(
        pending_after, 0,
        "replaced files left once no read holds them"
    );
    assert!(
        most_pending <= 64,
        "{most_pending} replaced files waited at once"
    );
    assert!(sweeps >= 5, "only {sweeps} sweeps ran");
    assert!(reads >= 20, "only {reads} rounds of reads ran");
    assert!(slow >= 20, "only {slow} slow reads ran");
    assert!(compactions >= 20, "only {compactions} compactions ran");
    assert!(seals >= 1, "no day was sealed");
    // Closed: every replaced file is gone, and its manifest entry.
    store.close().unwrap();
    assert_eq!(stormwatch::store::retire::pending(&catalog), 0);
    for day in layout.days().unwrap() {
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(layout.day_dir(day).join("_parts.json")).unwrap(),
        )
        .unwrap();
        assert!(m.get("retired").is_none(), "{m}");
        let named = m["parts"].as_array().unwrap().len();
        let on_disk = std::fs::read_dir(layout.day_dir(day))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
            .count();
        assert_eq!(on_disk, named, "day {day}");
    }
}
