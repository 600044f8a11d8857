//! What an alert target answers is read to a cap: a huge or endless body
//! neither fills memory nor hangs a delivery, and a refusal's reason shows
//! the start of its body, cut.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stormwatch::alert::{commands, outbox, Mode};
use stormwatch::alert::{AlertConfig, Target, TargetKind};

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
            // A PagerDuty target posts only with its key.
            routing_key: (kind == TargetKind::PagerDuty).then(|| "k".repeat(32)),
            ..Target::new(
                &format!("huge-{}", kind.as_str()),
                kind,
                &format!("http://{}/hook", self.addr),
            )
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
    for (len, kind) in [
        (Some(50u64 << 20), TargetKind::Webhook),
        (None, TargetKind::Webhook),
        (None, TargetKind::PagerDuty),
    ] {
        let server = BodyServer::start(Huge { status: 200, len });
        let (row, took) = deliver_once(&server.target(kind)).await;
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
        // PagerDuty's 400: its `errors` when the body is JSON; this one is
        // not (and is cut), so its start, as any target's.
        (400, Some(50u64 << 20), TargetKind::PagerDuty),
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
