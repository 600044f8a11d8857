//! Connection limits on the three ports of the real binary (issue 25, the
//! low item): a connection that sends half a request's headers (or, on the
//! gRPC port, the HTTP/2 preface and half a frame) is closed within the
//! header timeout; a kept-alive connection left idle after an answer is
//! closed after the idle timeout; an answer HTTP/2 flow control holds back
//! (a client that grants no window) is closed as a write stall after the
//! idle timeout; a peer past its connection cap is told which limit it hit
//! (a 429, or a GOAWAY with the message) and closed.
//! Raw TCP clients, HTTP/2 frames written by hand.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common::{sample, Server};

fn server(dir: &std::path::Path, admission: &str) -> Server {
    let path = dir.join("stormwatch.toml");
    std::fs::write(&path, format!("[admission]\n{admission}")).unwrap();
    Server::start(
        &dir.join("data"),
        &["--config", path.to_str().unwrap()],
        &[],
    )
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK "literal header field without indexing, new name" (no Huffman).
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// One frame: (type, flags, stream, payload); `None` at the end.
fn read_frame(s: &mut TcpStream) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).ok()?;
    Some((head[3], head[4], stream, payload))
}

/// The client preface, SETTINGS, and one Export call with an empty
/// message on stream 1.
fn grpc_export(addr: SocketAddr) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", stormwatch::serve::grpc::EXPORT_PATH),
        (":authority", &addr.to_string()),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        block.extend(literal(n, v));
    }
    out.extend(frame(HEADERS, END_HEADERS, 1, &block));
    out.extend(frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]));
    out
}

/// Serve the HTTP/2 connection's housekeeping (ACK its SETTINGS and
/// PINGs) until `until` says a frame is the one waited for; false if the
/// connection ended first.
fn h2_until(s: &mut TcpStream, mut until: impl FnMut(u8, u8, u32, &[u8]) -> bool) -> bool {
    while let Some((kind, flags, stream, payload)) = read_frame(s) {
        if until(kind, flags, stream, &payload) {
            return true;
        }
        if kind == SETTINGS && flags & ACK == 0 {
            let _ = s.write_all(&frame(SETTINGS, ACK, 0, &[]));
        }
        if kind == PING && flags & ACK == 0 {
            let _ = s.write_all(&frame(PING, ACK, 0, &payload));
        }
    }
    false
}

/// Read and drop until the server closes (or `limit` passes): when.
fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Instant> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(Instant::now()),
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(_) => return Some(Instant::now()),
        }
    }
}

/// An HTTP/1.1 answer read whole (by its Content-Length).
fn http_answer(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if all.len() >= end + 4 + len {
                return text;
            }
        }
        let n = s.read(&mut buf).expect("an answer");
        assert!(n > 0, "closed before the answer: {text}");
        all.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn half_a_header_is_closed_within_the_header_timeout_on_all_three_ports() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        dir.path(),
        "header_timeout_secs = 2\nidle_timeout_secs = 20\n",
    );
    let mut grpc_half = PREFACE.to_vec();
    grpc_half.extend(frame(SETTINGS, 0, 0, &[]));
    grpc_half.extend(&frame(HEADERS, END_HEADERS, 1, &literal(":method", "POST"))[..6]);
    let cases: Vec<(&str, SocketAddr, Vec<u8>)> = vec![
        (
            "otlp_http",
            server.otlp,
            b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-typ".to_vec(),
        ),
        (
            "http",
            server.http,
            b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nacc".to_vec(),
        ),
        ("http, nothing sent", server.http, Vec::new()),
        ("otlp_grpc", server.grpc, grpc_half),
    ];
    let results: Vec<(&str, Option<Duration>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(name, addr, bytes)| {
                scope.spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let begun = Instant::now();
                    s.write_all(bytes).unwrap();
                    (
                        *name,
                        closed_within(&mut s, Duration::from_secs(8)).map(|at| at - begun),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("half a header (header_timeout_secs = 2): closed after {results:?}");
    for (name, took) in &results {
        let took = took.unwrap_or_else(|| panic!("{name}: still open 8 s on"));
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_millis(3500),
            "{name}: closed after {took:?}"
        );
    }
    let m = server.metrics();
    for port in ["otlp_http", "otlp_grpc"] {
        let series = format!(
            "stormwatch_connections_closed_total{{port=\"{port}\",reason=\"header_timeout\"}}"
        );
        assert_eq!(sample(&m, &series), 1.0, "{series}\n{m}");
    }
    server.stop();
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout_on_all_three_ports() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        dir.path(),
        "header_timeout_secs = 10\nidle_timeout_secs = 3\n",
    );
    let http = std::thread::scope(|scope| {
        let dash = scope.spawn(|| {
            let mut s = TcpStream::connect(server.http).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
                .unwrap();
            let answer = http_answer(&mut s);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            let at = Instant::now();
            closed_within(&mut s, Duration::from_secs(10)).map(|c| c - at)
        });
        let otlp = scope.spawn(|| {
            let mut s = TcpStream::connect(server.otlp).unwrap();
            s.write_all(
                b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
            )
            .unwrap();
            let answer = http_answer(&mut s);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            let at = Instant::now();
            closed_within(&mut s, Duration::from_secs(10)).map(|c| c - at)
        });
        let grpc = scope.spawn(|| {
            let mut s = TcpStream::connect(server.grpc).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&grpc_export(server.grpc)).unwrap();
            // The answer ends with the trailers: HEADERS with END_STREAM.
            let answered = h2_until(&mut s, |kind, flags, stream, _| {
                kind == HEADERS && stream == 1 && flags & END_STREAM != 0
            });
            assert!(answered, "the Export call was not answered");
            let at = Instant::now();
            // Closed: a GOAWAY, or the end of the connection.
            h2_until(&mut s, |kind, _, _, _| kind == GOAWAY);
            let closed = Instant::now() - at;
            (closed < Duration::from_secs(10)).then_some(closed)
        });
        [
            ("http", dash.join().unwrap()),
            ("otlp_http", otlp.join().unwrap()),
            ("otlp_grpc", grpc.join().unwrap()),
        ]
    });
    eprintln!("idle keep-alive (idle_timeout_secs = 3): closed after {http:?}");
    for (name, idle) in &http {
        let idle = idle.unwrap_or_else(|| panic!("{name}: still open 10 s after its answer"));
        assert!(
            idle >= Duration::from_millis(2500) && idle < Duration::from_millis(4500),
            "{name}: closed {idle:?} after its answer"
        );
    }
    let m = server.metrics();
    for port in ["otlp_http", "otlp_grpc", "http"] {
        let series = format!(
            "stormwatch_connections_closed_total{{port=\"{port}\",reason=\"idle_timeout\"}}"
        );
        assert!(sample(&m, &series) >= 1.0, "{series}\n{m}");
    }
    server.stop();
}

#[test]
fn a_peer_past_its_connection_cap_is_told_so_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "max_connections_per_peer = 4\n");
    // The four held connections each make one exchange first (an answered
    // keep-alive request, or a PING the server acknowledges), so all four
    // are known to be accepted and counted before the fifth comes: the
    // fifth is past the cap on every run, however loaded the machine. The
    // dashboard port goes last and keeps its four, and /metrics is read
    // over one of them: a new connection would be a fifth.
    let mut kept = Vec::new();
    for (name, addr) in [
        ("otlp_http", server.otlp),
        ("otlp_grpc", server.grpc),
        ("http", server.http),
    ] {
        let held: Vec<TcpStream> = (0..4).map(|_| accepted(name, addr)).collect();
        let mut fifth = TcpStream::connect(addr).unwrap();
        fifth
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let told = if name == "otlp_grpc" {
            fifth.write_all(PREFACE).unwrap();
            let mut goaway = None;
            h2_until(&mut fifth, |kind, _, _, payload| {
                if kind == GOAWAY {
                    goaway = Some(payload.to_vec());
                }
                kind == GOAWAY
            });
            let g = goaway.expect("otlp_grpc: the fifth connection was never sent a GOAWAY");
            assert_eq!(&g[4..8], &[0, 0, 0, 0x7], "REFUSED_STREAM");
            let debug = String::from_utf8_lossy(&g[8..]).into_owned();
            assert!(
                debug.contains("too many connections from 127.0.0.1"),
                "{debug}"
            );
            assert!(
                debug.contains("admission.max_connections_per_peer"),
                "{debug}"
            );
            format!("GOAWAY REFUSED_STREAM {debug:?}")
        } else {
            let mut all = String::new();
            let _ = fifth.read_to_string(&mut all);
            assert!(
                all.starts_with("HTTP/1.1 429 Too Many Requests"),
                "{name}: the fifth connection was not told it is past the cap: {all:?}"
            );
            assert!(
                all.contains("admission.max_connections_per_peer"),
                "{name}: {all}"
            );
            format!("{:?}", all.lines().last())
        };
        assert!(
            closed_within(&mut fifth, Duration::from_secs(5)).is_some(),
            "{name}: the fifth connection was told but not closed"
        );
        eprintln!("peer cap, {name}: {what}", what = told);
        kept = held;
    }
    let mut over = kept.remove(0);
    over.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let m = http_answer(&mut over);
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    for port in ["otlp_http", "otlp_grpc", "http"] {
        let series =
            format!("stormwatch_connections_closed_total{{port=\"{port}\",reason=\"peer_cap\"}}");
        assert_eq!(sample(&m, &series), 1.0, "{series}\n{m}");
    }
    drop(over);
    drop(kept);
    server.stop();
}

/// A connection the server has accepted and counted: it answered a
/// keep-alive request (HTTP) or acknowledged a PING (gRPC) on it.
fn accepted(name: &str, addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if name == "otlp_grpc" {
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        hello.extend(frame(PING, 0, 0, b"accepted"));
        s.write_all(&hello).unwrap();
        let mut refused = false;
        let acked = h2_until(&mut s, |kind, flags, _, payload| {
            refused |= kind == GOAWAY;
            refused || (kind == PING && flags & ACK != 0 && payload == b"accepted")
        });
        assert!(acked && !refused, "{name}: a held connection was refused");
    } else {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let answer = http_answer(&mut s);
        assert!(
            !answer.starts_with("HTTP/1.1 429"),
            "{name}: a held connection was refused: {answer}"
        );
    }
    s
}

#[test]
fn an_answer_held_back_by_http2_flow_control_is_closed_as_a_write_stall() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        dir.path(),
        "header_timeout_secs = 10\nidle_timeout_secs = 3\n",
    );
    // The export, but the client's SETTINGS grant no window
    // (SETTINGS_INITIAL_WINDOW_SIZE = 0): the answer's DATA can never be
    // sent, and no socket write ever blocks. PINGs are answered.
    let mut bytes = grpc_export(server.grpc);
    let empty = frame(SETTINGS, 0, 0, &[]);
    bytes.splice(
        PREFACE.len()..PREFACE.len() + empty.len(),
        frame(SETTINGS, 0, 0, &[0x00, 0x04, 0, 0, 0, 0]),
    );
    let mut s = TcpStream::connect(server.grpc).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let begun = Instant::now();
    s.write_all(&bytes).unwrap();
    let mut data = false;
    let open = h2_until(&mut s, |kind, _, stream, _| {
        data |= kind == DATA && stream == 1;
        false
    });
    let took = begun.elapsed();
    eprintln!("an answer held by a zero window (idle_timeout_secs = 3): closed after {took:?}");
    assert!(!open && !data, "no DATA is sent into a zero window");
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(8),
        "closed after {took:?} (15 s: never)"
    );
    let m = server.metrics();
    let series = "stormwatch_connections_closed_total{port=\"otlp_grpc\",reason=\"write_stall\"}";
    assert_eq!(sample(&m, series), 1.0, "{series}\n{m}");
    server.stop();
}
