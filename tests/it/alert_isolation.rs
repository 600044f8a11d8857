//! The alert sender keeps to itself: its waits on `state.sqlite` never
//! reach the async threads (OTLP acknowledgements and the dashboard go on
//! while another process holds the state's write lock), and what its
//! targets answer is read to a cap (a huge or endless body neither fills
//! memory nor hangs a delivery).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;
use stormwatch::alert::config::{AlertConfig, Target, TargetKind};
use stormwatch::alert::{commands, outbox, Mode};

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

// ---- response bodies read to a cap ----

/// What a [`BodyServer`] answers: a status and a body of `len` bytes, or a
/// chunked body that never ends (`None`).
#[derive(Clone, Copy)]
struct Huge {
    status: u16,
    len: Option<u64>,
}

/// A raw HTTP/1.1 server on 127.0.0.1 that answers every request with a
/// huge body and counts the bytes it got written before the client hung up.
struct BodyServer {
    addr: SocketAddr,
    written: Arc<AtomicU64>,
}

/// What an "endless" body stops at on the server's side (the client sees
/// no end: the last chunk never comes): enough to tell a capped read from
/// one that reads everything, without a build that reads everything
/// filling the machine's memory.
const ENDLESS_LIMIT: u64 = 256 << 20;

impl BodyServer {
    fn start(answer: Huge) -> BodyServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let written = Arc::new(AtomicU64::new(0));
        let w = Arc::clone(&written);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let w = Arc::clone(&w);
                std::thread::spawn(move || serve_one(conn, answer, &w));
            }
        });
        BodyServer { addr, written }
    }

    fn target(&self, kind: TargetKind) -> Target {
        Target {
            name: format!("huge-{}", kind.as_str()),
            kind,
            url: format!("http://{}/hook", self.addr),
            secret: None,
            kinds: Vec::new(),
            tools: Vec::new(),
            min_severity: None,
        }
    }
}

fn serve_one(mut conn: std::net::TcpStream, answer: Huge, written: &AtomicU64) {
    // The request: its head, then as many body bytes as it says.
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = got.len() - head_end;
    while body < len {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => body += n,
        }
    }
    let framing = match answer.len {
        Some(n) => format!("content-length: {n}"),
        None => "transfer-encoding: chunked".to_string(),
    };
    let head = format!(
        "HTTP/1.1 {} Answer\r\ncontent-type: text/plain\r\n{framing}\r\n\r\n",
        answer.status
    );
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let piece = b"invalid_payload ".repeat(4096); // 64 KiB
    let mut sent = 0u64;
    let limit = answer.len.unwrap_or(ENDLESS_LIMIT);
    while sent < limit {
        let n = (limit - sent).min(piece.len() as u64) as usize;
        let ok = match answer.len {
            Some(_) => conn.write_all(&piece[..n]),
            None => conn
                .write_all(format!("{n:x}\r\n").as_bytes())
                .and_then(|()| conn.write_all(&piece[..n]))
                .and_then(|()| conn.write_all(b"\r\n")),
        };
        if ok.is_err() {
            return;
        }
        sent += n as u64;
        written.fetch_add(n as u64, Ordering::Relaxed);
    }
    // An endless body: no last chunk; hold the connection until the client goes.
    let _ = conn.read(&mut buf);
}

/// One message to `t` through the sender, one attempt allowed; the row after.
async fn deliver_once(t: &Target) -> (outbox::Row, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = AlertConfig {
        max_attempts: 1,
        pace_ms: 0,
        // Far longer than any capped read takes: a read that waits for the
        // body's end fails the test's own deadline instead.
        request_timeout_secs: 60,
        ..AlertConfig::default()
    };
    let db = commands::open(&dir.path().join("state.sqlite")).unwrap();
    let s = commands::sender(db, &cfg);
    {
        let c = s.db.lock().unwrap();
        outbox::enqueue(&c, &t.name, &["SW-TEST".into()], "{}", s.clock.now_ns()).unwrap();
    }
    let started = Instant::now();
    let run = s.run(
        t.clone(),
        Mode::Drain {
            wait: Duration::from_secs(60),
        },
    );
    tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .expect("the delivery did not end within 15 s")
        .unwrap();
    let took = started.elapsed();
    let c = s.db.lock().unwrap();
    let row = outbox::list(&c, 1).unwrap().remove(0);
    (row, took)
}

/// A 2xx with a 50 MB body, or one that never ends, is a delivery, told
/// without reading the body to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2xx_with_a_huge_or_endless_body_is_delivered_without_reading_it_all() {
    for len in [Some(50u64 << 20), None] {
        let server = BodyServer::start(Huge { status: 200, len });
        let (row, took) = deliver_once(&server.target(TargetKind::Webhook)).await;
        // What the server got written before the client hung up: the cap
        // plus what the sockets' buffers hold, not the body.
        std::thread::sleep(Duration::from_millis(200));
        let written = server.written.load(Ordering::Relaxed);
        eprintln!(
            "200, {len:?} bytes: {} in {took:?}, {written} bytes written",
            row.status
        );
        assert_eq!(row.status, "delivered", "{len:?}: {row:?}");
        assert!(took < Duration::from_secs(5), "{len:?}: took {took:?}");
        assert!(written < 32 << 20, "{len:?}: {written} bytes were written");
    }
}

/// A 4xx with a 50 MB body is a dead letter and a 5xx with an endless body
/// a retry (here the last attempt): each reason holds the status and a cut
/// snippet of the body, not the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_with_a_huge_body_is_classified_and_its_body_cut_in_the_reason() {
    for (status, len, kind) in [
        (400, Some(50u64 << 20), TargetKind::Webhook),
        (503, None, TargetKind::Webhook),
        (200, None, TargetKind::Slack),
    ] {
        let server = BodyServer::start(Huge { status, len });
        let (row, took) = deliver_once(&server.target(kind)).await;
        eprintln!(
            "{status} {kind:?}, {len:?} bytes: {} in {took:?}, written {}: {:?}",
            row.status,
            server.written.load(Ordering::Relaxed),
            row.last_error
        );
        assert_eq!(row.status, "dead", "{status}: {row:?}");
        assert!(took < Duration::from_secs(5), "{status}: took {took:?}");
        let err = row.last_error.as_deref().unwrap();
        let want = match status {
            503 => "gave up: HTTP 503 invalid_payload",
            200 => "HTTP 200 with an unexpected body: invalid_payload",
            _ => "HTTP 400 invalid_payload",
        };
        assert!(err.starts_with(want), "{status}: {err}");
        assert!(err.contains("cut"), "{status}: {err}");
        assert!(err.len() < 400, "{status}: a reason of {} bytes", err.len());
        std::thread::sleep(Duration::from_millis(200));
        let written = server.written.load(Ordering::Relaxed);
        assert!(written < 32 << 20, "{status}: {written} bytes were written");
    }
}
