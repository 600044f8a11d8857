//! The alert sender's waits on `state.sqlite` never reach the async
//! threads: OTLP acknowledgements and the dashboard go on while another
//! process holds the state's write lock. (What its targets answer is read
//! to a cap: `alert_bodies.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;
use stormwatch::alert::{commands, outbox};

use crate::common::Server;

/// Alert targets in the lock test: more than the runtime's two workers, so
/// on a runtime where each sender's SQLite wait took a worker, none is left.
const TARGETS: usize = 3;

/// How long the test holds `BEGIN IMMEDIATE` (less than the sender's 10 s
/// busy timeout, so the senders wait it out rather than fail).
const HOLD: Duration = Duration::from_secs(5);

/// An OTLP/JSON export of one tool-call span, its ids from `n`.
fn export(n: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    serde_json::json!({
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "lock-test"}}]},
            "scopeSpans": [{"spans": [{
                "traceId": format!("{:032x}", 0xabc0_0000_0000u64 + n),
                "spanId": format!("{:016x}", n + 1),
                "name": "execute_tool search_flights",
                "startTimeUnixNano": (now - 2_000_000).to_string(),
                "endTimeUnixNano": now.to_string(),
                "kind": 1,
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": "search_flights"}}
                ]
            }]}]
        }]
    })
    .to_string()
}

/// The body of `hook-{i}`'s messages.
fn body_of(i: usize) -> String {
    format!("{{\"target\":\"hook-{i}\"}}")
}

/// Latencies of OTLP acknowledgements and of `/api/tools`, in turns.
#[derive(Default)]
struct Latencies {
    otlp: Vec<Duration>,
    tools: Vec<Duration>,
}

impl Latencies {
    fn p99(v: &[Duration]) -> Duration {
        let mut s = v.to_vec();
        s.sort();
        s[(s.len() * 99 / 100).min(s.len() - 1)]
    }

    fn max(v: &[Duration]) -> Duration {
        v.iter().copied().max().unwrap_or_default()
    }
}

/// One OTLP export and one `/api/tools`, each timed; both must succeed.
fn round(client: &Client, server: &Server, n: &AtomicU64, out: &mut Latencies) {
    let body = export(n.fetch_add(1, Ordering::Relaxed));
    let t = Instant::now();
    let r = client
        .post(server.traces_url())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .unwrap_or_else(|e| panic!("OTLP export failed: {e}; log:\n{}", server.log_text()));
    let status = r.status();
    let _ = r.bytes();
    out.otlp.push(t.elapsed());
    assert_eq!(status, 200, "log:\n{}", server.log_text());
    let t = Instant::now();
    let r = client
        .get(format!("http://{}/api/tools?days=7", server.http))
        .send()
        .unwrap_or_else(|e| panic!("/api/tools failed: {e}; log:\n{}", server.log_text()));
    let status = r.status();
    let _ = r.bytes();
    out.tools.push(t.elapsed());
    assert_eq!(status, 200, "log:\n{}", server.log_text());
}

/// The proof: three webhook targets with due messages keep the
/// senders on `state.sqlite`; the test holds the state's write lock for
/// 5 s, on a serve of two async workers (a 2-core machine); OTLP exports
/// and `/api/tools` go on being answered about as fast as before.
#[test]
fn a_held_state_lock_stalls_neither_otlp_nor_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (hook, hook_addr, _rt) = crate::alerts::background((204, ""));
    let cfg = dir.path().join("stormwatch.toml");
    let mut toml = "[alert]\npace_ms = 50\nrequest_timeout_secs = 5\n".to_string();
    for i in 0..TARGETS {
        toml.push_str(&format!(
            "\n[[alert.targets]]\nname = \"hook-{i}\"\nkind = \"webhook\"\nurl = \"http://{hook_addr}/hook-{i}\"\n"
        ));
    }
    std::fs::write(&cfg, toml).unwrap();

    // Messages due now, more than the senders can send in the test (20 a
    // second each at this pace), so they work the outbox throughout.
    let state = data.join("state.sqlite");
    {
        let mut c = commands::open(&state).unwrap();
        let tx = c.transaction().unwrap();
        let now = stormwatch::alert::Clock::System.now_ns();
        for i in 0..TARGETS {
            for _ in 0..2000 {
                outbox::enqueue(
                    &tx,
                    &format!("hook-{i}"),
                    &["SW-TEST".into()],
                    &body_of(i),
                    now,
                )
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }

    let server = Server::start(
        &data,
        &["--config", cfg.to_str().unwrap(), "--sweep-interval", "0"],
        // Two workers, whatever the machine: the 2-core case.
        &[("TOKIO_WORKER_THREADS", "2")],
    );
    let client = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // A target's messages are told apart by their bodies.
    let hits_of = |i: usize, from: Instant, to: Instant| {
        hook.hits()
            .iter()
            .filter(|h| h.body == body_of(i) && (from..to).contains(&h.at.into_std()))
            .count()
    };
    // Every sender at work before the baseline.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    while (0..TARGETS).any(|i| hits_of(i, started, Instant::now()) == 0) {
        assert!(
            Instant::now() < deadline,
            "the senders did not start; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The baseline: the same requests, the senders busy, no lock held.
    let n = AtomicU64::new(0);
    let mut before = Latencies::default();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) || before.otlp.len() < 30 {
        round(&client, &server, &n, &mut before);
    }

    // Hold the write lock for 5 s on a thread of its own; the requests go on meanwhile.
    let locked = Arc::new(std::sync::Barrier::new(2));
    let holder = {
        let locked = Arc::clone(&locked);
        let state = state.clone();
        std::thread::spawn(move || {
            let c = rusqlite::Connection::open(&state).unwrap();
            c.busy_timeout(Duration::from_secs(10)).unwrap();
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            let from = Instant::now();
            locked.wait();
            std::thread::sleep(HOLD);
            let to = Instant::now();
            c.execute_batch("COMMIT").unwrap();
            (from, to)
        })
    };
    locked.wait();
    let mut during = Latencies::default();
    while !holder.is_finished() {
        round(&client, &server, &n, &mut during);
    }
    let (lock_from, lock_to) = holder.join().unwrap();

    // The senders did wait on the lock: no delivery from half a second in
    // (a message claimed just before may still go out) until its end…
    for i in 0..TARGETS {
        let in_lock = hits_of(i, lock_from + Duration::from_millis(500), lock_to);
        assert_eq!(
            in_lock, 0,
            "hook-{i} was sent to while the state was locked"
        );
    }
    // … and go on after it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while (0..TARGETS).any(|i| hits_of(i, lock_to, Instant::now()) == 0) {
        assert!(
            Instant::now() < deadline,
            "the senders did not resume after the lock; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The bound: five times the baseline's p99, at least 500 ms (the
    // machine is shared, an fsync can take a few hundred ms), at most 2 s.
    // A runtime whose workers wait on SQLite answers nothing until the lock
    // is released: about 5 s for the first request in the lock, far above
    // any of these.
    let p99 = Latencies::p99(&before.otlp).max(Latencies::p99(&before.tools));
    let bound = (p99 * 5).clamp(Duration::from_millis(500), Duration::from_secs(2));
    let (otlp_max, tools_max) = (Latencies::max(&during.otlp), Latencies::max(&during.tools));
    eprintln!(
        "baseline: {} rounds, OTLP p99 {:?}, /api/tools p99 {:?}; during the lock: {} rounds, OTLP max {otlp_max:?} p99 {:?}, /api/tools max {tools_max:?}; bound {bound:?}",
        before.otlp.len(),
        Latencies::p99(&before.otlp),
        Latencies::p99(&before.tools),
        during.otlp.len(),
        Latencies::p99(&during.otlp),
    );
    assert!(
        otlp_max < bound,
        "an OTLP export took {otlp_max:?} while the state was locked (bound {bound:?}, baseline p99 {p99:?})"
    );
    assert!(
        tools_max < bound,
        "/api/tools took {tools_max:?} while the state was locked (bound {bound:?}, baseline p99 {p99:?})"
    );
    // Requests kept coming through the 5 s: at least one a second.
    assert!(
        during.otlp.len() >= 5,
        "only {} OTLP exports answered during the 5 s lock",
        during.otlp.len()
    );
    let log = server.stop();
    assert!(!log.contains("state file error"), "{log}");
}
