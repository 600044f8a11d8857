//! The real binary under more load than its disk can take: it refuses with
//! 429 and `Retry-After` instead of queueing without bound, its memory stays
//! under the stated bound, and every acknowledged span is stored; SIGTERM
//! in the middle of it exits 0 in time and loses nothing acknowledged.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::Server;
use crate::crash::{batch_of, stored_batches};

/// What the clients saw.
#[derive(Default)]
struct Seen {
    acked: BTreeSet<u64>,
    busy: u64,
    busy_without_retry_after: u64,
    unavailable: u64,
    failed: u64,
}

/// `threads` clients posting `spans`-span batches as fast as they can until
/// `stop`; each keeps its own ids.
fn blast(
    url: &str,
    threads: u64,
    spans: usize,
    stop: &Arc<AtomicBool>,
) -> (Arc<Mutex<Seen>>, Vec<std::thread::JoinHandle<()>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let handles = (0..threads)
        .map(|t| {
            let (url, seen, stop) = (url.to_string(), Arc::clone(&seen), Arc::clone(stop));
            std::thread::spawn(move || {
                let client = reqwest_blocking::blocking::Client::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = t * 1_000_000 + n;
                    n += 1;
                    let r = client
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(batch_of(id, spans))
                        .timeout(Duration::from_secs(60))
                        .send();
                    let mut s = seen.lock().unwrap();
                    match r.map(|r| (r.status().as_u16(), r.headers().contains_key("retry-after")))
                    {
                        Ok((200, _)) => {
                            s.acked.insert(id);
                        }
                        Ok((429, has)) => {
                            s.busy += 1;
                            s.busy_without_retry_after += u64::from(!has);
                        }
                        Ok((503, _)) => s.unavailable += 1,
                        Ok((other, _)) => panic!("batch {id}: status {other}"),
                        Err(_) => {
                            s.failed += 1;
                            drop(s);
                            // A refused connection (the server stopping): back off.
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })
        })
        .collect();
    (seen, handles)
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib / 1024.0
}

/// The memory bound stated for these settings (README, Running it): request
/// bodies and their decoded rows in flight (8 MiB by estimate), the WAL queue
/// (8 MiB), unflushed rows (32 MiB), the Parquet flush of a frozen table, and
/// about 25 MiB for the idle binary, plus what the allocator keeps beyond
/// them. Measured peaks (2026-12-06, 20 runs on 2 shared cores): 240-276
/// MiB, median 255; 309-373 (median 337, once 387 in CI) while mimalloc
/// took transparent huge pages and bodies were decoded on the blocking pool
/// (BENCHMARKS.md, "Overload"). The bound leaves room for other kernels and
/// huge-page settings.
const RSS_BOUND_MIB: f64 = 384.0;

#[test]
fn overload_is_refused_with_retry_after_under_a_memory_bound_and_nothing_acked_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("stormwatch.toml");
    std::fs::write(
        &config,
        "[ingest]\nmax_body_bytes = 2097152\nmax_inflight_bytes = 8388608\n\n\
         [store]\nmax_pending_bytes = 8388608\nmax_memory_bytes = 33554432\nflush_interval_secs = 1\n",
    )
    .unwrap();
    // A slow disk: every group commit takes 40 ms more.
    let server = Server::start(
        &data,
        &["--config", config.to_str().unwrap()],
        &[("STORMWATCH_FAULTS", "wal_fsync=delay:40")],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, clients) = blast(&server.traces_url(), 12, 2000, &stop);
    std::thread::sleep(Duration::from_secs(8));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let rss = peak_rss_mib(server.child.id());
    let log = server.stop();
    let seen = seen.lock().unwrap();
    eprintln!(
        "overload: {} acked, {} refused 429, {} 503, peak RSS {rss:.0} MiB",
        seen.acked.len(),
        seen.busy,
        seen.unavailable
    );
    assert!(seen.busy > 0, "the clients never outran the disk");
    assert_eq!(seen.busy_without_retry_after, 0);
    assert_eq!(seen.failed, 0, "{log}");
    assert!(
        seen.acked.len() > 10,
        "only {} batches acknowledged",
        seen.acked.len()
    );
    assert!(
        rss < RSS_BOUND_MIB,
        "peak RSS {rss:.0} MiB over {RSS_BOUND_MIB} MiB"
    );
    let stored = stored_batches(&data);
    for id in &seen.acked {
        assert_eq!(stored.get(id), Some(&2000), "acknowledged batch {id}");
    }
    assert_eq!(stored.len(), seen.acked.len(), "a refused batch was stored");
}

#[test]
fn sigterm_under_load_exits_0_in_time_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--shutdown-timeout", "10"], &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, clients) = blast(&server.traces_url(), 6, 500, &stop);
    let started = Instant::now();
    while seen.lock().unwrap().acked.len() < 50 {
        assert!(started.elapsed() < Duration::from_secs(60), "no load");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopping = Instant::now();
    let log = server.stop();
    let took = stopping.elapsed();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    assert!(took < Duration::from_secs(12), "exit took {took:?}");
    assert!(log.contains("store flushed and closed"), "{log}");
    let seen = seen.lock().unwrap();
    let stored = stored_batches(&data);
    for id in &seen.acked {
        assert_eq!(stored.get(id), Some(&500), "acknowledged batch {id}");
    }
    // A request can be stored whose answer the stopping server never sent;
    // the exporter retries it and dedup keeps one copy. Nothing else.
    let extra = stored.len() - seen.acked.len();
    assert!(extra <= 6, "{extra} unacknowledged batches stored");
    eprintln!(
        "sigterm under load: {} acked, exit in {took:?}, {extra} stored without an answer",
        seen.acked.len()
    );
}
