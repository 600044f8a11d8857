//! The MCP server's sessions under attack, against the real binary inside
//! a 4 GiB memory cgroup: 45 000 `initialize` calls, each as large as
//! allowed, from eight keep-alive connections (no token, on loopback)
//! leave the server up, its peak RSS bounded and exactly
//! `mcp.max_sessions` sessions made, every call past the cap answered with
//! one clear JSON-RPC error, while a session made before keeps working;
//! idle sessions expire (and an ended one frees its slot at once), so new
//! ones are accepted again; two calls that share a JSON-RPC id in one
//! session: the second is refused at once, the first still gets its own
//! answer. Also: an `initialize` past its size cap is refused, and past
//! `mcp.max_calls_in_flight` a session's call and a stateless one are.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;
use serde_json::{json, Value};

use crate::common::Server;
use crate::memcap::{peak_rss, rss, MemCap};

/// The peak RSS the flood may raise the server to: 256 sessions of at most
/// ~190 KiB each (rmcp's tasks and channels, ~105 KiB, and the largest
/// `initialize` it keeps) over an idle server of ~40 MiB, with room to
/// spare. Measured: 86 MiB (BENCHMARKS.md "Hardening v2: MCP sessions").
const PEAK_BOUND: u64 = 128 << 20;

/// An HTTP answer: status, headers (lowercase names), body.
type Reply = (u16, Vec<(String, String)>, String);

/// One HTTP/1.1 keep-alive connection, as a fast client: requests written
/// by hand, answers read by `Content-Length` or chunks.
struct Conn(BufReader<TcpStream>);

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Conn(BufReader::new(s))
    }

    /// POST `body` to `/mcp`: status, headers (lowercase names), body.
    fn post(&mut self, addr: SocketAddr, body: &str) -> std::io::Result<Reply> {
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.0.get_mut().write_all(req.as_bytes())?;
        let mut line = String::new();
        self.0.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.0.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if let Some(n) = header("content-length").and_then(|n| n.parse::<usize>().ok()) {
            body.resize(n, 0);
            self.0.read_exact(&mut body)?;
        } else if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            loop {
                line.clear();
                self.0.read_line(&mut line)?;
                let n = usize::from_str_radix(line.trim(), 16).map_err(std::io::Error::other)?;
                let mut chunk = vec![0; n + 2];
                self.0.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
    }
}

fn initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}})
    .to_string()
}

/// An `initialize` as large as one may be (60 KB of client title, under
/// the 64 KiB cap): what a session keeps, at its most.
fn big_initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1", "title": "x".repeat(60_000)}}})
    .to_string()
}

/// A JSON-RPC answer, sent as JSON or as the events of an SSE stream.
fn answer(text: &str) -> Value {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).unwrap_or(json!({"raw": text}));
    }
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| d.starts_with('{'))
        .collect();
    serde_json::from_str(&data).unwrap_or(json!({"raw": text}))
}

/// A 2025-11-25 session on `server`.
struct Session {
    http: SocketAddr,
    id: String,
    client: Client,
}

impl Session {
    /// Initialize and say so; `Err` with the status and answer when refused.
    fn open(server: &Server) -> Result<Session, (u16, Value)> {
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let r = client
            .post(format!("http://{}/mcp", server.http))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(initialize(1))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let Some(id) = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string())
        else {
            return Err((status, answer(&r.text().unwrap())));
        };
        let s = Session {
            http: server.http,
            id,
            client,
        };
        let (status, _) = s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(status, 202);
        Ok(s)
    }

    fn send(&self, body: &Value) -> (u16, Value) {
        self.try_send(body).unwrap()
    }

    fn try_send(&self, body: &Value) -> Result<(u16, Value), String> {
        let r = self
            .client
            .post(format!("http://{}/mcp", self.http))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.id)
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(body.to_string())
            .send()
            .map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        Ok((status, answer(&r.text().map_err(|e| e.to_string())?)))
    }

    /// `tools/call` of `tool` with JSON-RPC id `id`.
    fn call(&self, id: u64, tool: &str, arguments: Value) -> (u16, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
    }

    /// The session answers `tools/list`.
    fn works(&self) -> Result<(), String> {
        let (status, v) =
            self.try_send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))?;
        match v["result"]["tools"].as_array() {
            Some(t) if status == 200 && t.len() == 15 => Ok(()),
            _ => Err(format!("{status}: {v}")),
        }
    }
}

fn serve(dir: &std::path::Path, config: &str, env: &[(&str, &str)]) -> Server {
    let cfg = dir.join("stormwatch.toml");
    std::fs::write(&cfg, config).unwrap();
    Server::start(&dir.join("data"), &["--config", cfg.to_str().unwrap()], env)
}

/// What the flood got back.
#[derive(Default)]
struct Tally {
    accepted: usize,
    refused: usize,
    refusal: Option<(Value, Option<String>)>,
    other: Vec<String>,
}

#[test]
fn forty_five_thousand_initializes_make_max_sessions_and_a_clear_refusal_each() {
    let dir = tempfile::tempdir().unwrap();
    let cap = MemCap::new(4 << 30);
    let mut server = serve(dir.path(), "[sweep]\ninterval_secs = 0\n", &[]);
    let pid = server.child.id();
    cap.add(pid);
    let kept = Session::open(&server).unwrap();
    kept.works().unwrap();
    let before = peak_rss(pid);

    const CALLS: usize = 45_000;
    let next = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let peak = Arc::new(AtomicU64::new(before));
    let started = Instant::now();
    let flood: Vec<_> = (0..8)
        .map(|_| {
            let (next, tally, addr) = (Arc::clone(&next), Arc::clone(&tally), server.http);
            std::thread::spawn(move || {
                let mut conn = Conn::new(addr);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= CALLS {
                        return;
                    }
                    let got = conn.post(addr, &big_initialize(i as u64 + 10));
                    let failed = got.is_err();
                    let mut t = tally.lock().unwrap();
                    match got {
                        Ok((200, h, _)) if h.iter().any(|(k, _)| k == "mcp-session-id") => {
                            t.accepted += 1
                        }
                        Ok((503, h, body)) => {
                            t.refused += 1;
                            if t.refusal.is_none() {
                                let retry = h
                                    .iter()
                                    .find(|(k, _)| k == "retry-after")
                                    .map(|(_, v)| v.clone());
                                t.refusal = Some((answer(&body), retry));
                            }
                        }
                        Ok((status, _, body)) => t.other.push(format!("{status}: {body}")),
                        Err(e) => t.other.push(format!("connection: {e}")),
                    }
                    if t.other.len() > 50 {
                        return;
                    }
                    drop(t);
                    if failed {
                        std::thread::sleep(Duration::from_millis(100));
                        match TcpStream::connect(addr) {
                            Ok(_) => conn = Conn::new(addr),
                            Err(_) => return,
                        }
                    }
                }
            })
        })
        .collect();
    // While it runs: the kept session still answers; the peak is sampled
    // (a process the kernel kills has no /proc entry left to read).
    let mut kept_failures = Vec::new();
    while !flood.iter().all(|t| t.is_finished()) {
        peak.fetch_max(peak_rss(pid), Ordering::Relaxed);
        if server.child.try_wait().unwrap().is_none() {
            if let Err(e) = kept.works() {
                kept_failures.push(e);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    flood.into_iter().for_each(|t| t.join().unwrap());
    let took = started.elapsed();
    let peak = peak.load(Ordering::Relaxed).max(peak_rss(pid));
    let t = tally.lock().unwrap();
    eprintln!(
        "{CALLS} initializes in {took:.1?}: {} sessions, {} refused, {} other; peak RSS {} MiB (before {} MiB, now {} MiB), OOM kills {}",
        t.accepted,
        t.refused,
        t.other.len(),
        peak >> 20,
        before >> 20,
        rss(pid) >> 20,
        cap.oom_kills()
    );
    let log = server.log_text();
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server died; its log ends:\n{}",
        &log[log.char_indices().rev().nth(3000).map_or(0, |(i, _)| i)..]
    );
    assert_eq!(cap.oom_kills(), 0);
    assert!(t.other.is_empty(), "{:?}", &t.other[..t.other.len().min(5)]);
    assert_eq!(
        t.accepted, 255,
        "the default cap (256) less the kept session"
    );
    assert_eq!(t.refused, CALLS - 255);
    assert!(peak < PEAK_BOUND, "peak RSS {} MiB", peak >> 20);
    assert!(took < Duration::from_secs(240), "{took:?}");
    let (refusal, retry) = t.refusal.clone().unwrap();
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(refusal["error"]["code"], -32000, "{refusal}");
    assert!(
        message.starts_with(
            "session limit reached: 256 of 256 MCP sessions are live (mcp.max_sessions)"
        ) && message.contains("reuse your session")
            && message.contains("2026-07-28"),
        "{message}"
    );
    assert_eq!(refusal["error"]["data"]["limit"], 256);
    assert!(
        refusal["id"].as_u64().is_some_and(|i| i >= 10),
        "answers the request's id: {refusal}"
    );
    assert!(retry.is_some(), "Retry-After");
    assert!(kept_failures.is_empty(), "{kept_failures:?}");
    kept.works().unwrap();
}

#[test]
fn idle_sessions_expire_and_an_ended_one_frees_its_slot_so_new_ones_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        "[sweep]\ninterval_secs = 0\n[mcp]\nmax_sessions = 3\nsession_idle_secs = 5\n",
        &[],
    );
    // An initialize past its size cap makes no session.
    let huge = initialize(1).replace("\"flood\"", &format!("\"{}\"", "x".repeat(70_000)));
    let (status, _, body) = Conn::new(server.http).post(server.http, &huge).unwrap();
    let refusal = answer(&body);
    assert_eq!(status, 413, "{body}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("initialize too large: at most 65536 bytes"),
        "{refusal}"
    );
    let kept = Session::open(&server).unwrap();
    let idle = Session::open(&server).unwrap();
    let ended = Session::open(&server).unwrap();
    let (status, refusal) = Session::open(&server).err().expect("a fourth is refused");
    assert_eq!(status, 503);
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("session limit reached: 3 of 3"),
        "{refusal}"
    );
    // The stateless protocol the refusal points to needs no session.
    let modern = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stormwatch-test", "version": "1"}}}});
    let r = kept
        .client
        .post(format!("http://{}/mcp", server.http))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/list")
        .body(modern.to_string())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        answer(&r.text().unwrap())["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(15)
    );
    let r = ended
        .client
        .delete(format!("http://{}/mcp", server.http))
        .header("Mcp-Session-Id", &ended.id)
        .send()
        .unwrap();
    assert!(r.status().is_success());
    let fourth = Session::open(&server).expect("an ended session frees its slot");
    // The kept session is used every second; the others are left idle.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        kept.works().unwrap();
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(
        idle.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .0,
        404
    );
    assert_eq!(
        fourth
            .send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .0,
        404
    );
    let _a = Session::open(&server).expect("accepted once idle ones expired");
    let _b = Session::open(&server).expect("accepted once idle ones expired");
    assert!(Session::open(&server).is_err(), "and the cap holds again");
    kept.works().unwrap();
}

#[test]
fn a_call_reusing_an_id_in_flight_is_refused_at_once_and_the_first_gets_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    // Every sweep takes three seconds: a call that stays in flight.
    let server = serve(
        dir.path(),
        "[sweep]\ninterval_secs = 0\n",
        &[("STORMWATCH_FAULTS", "sweep=delay:3000")],
    );
    let s = Arc::new(Session::open(&server).unwrap());
    let first = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            let started = Instant::now();
            let got = s.call(5, "run_sweep", json!({"dry_run": true}));
            (got, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    let started = Instant::now();
    let (status, second) = s.call(5, "list_tools", json!({}));
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_secs(1),
        "refused at once, not after {took:?}"
    );
    assert_eq!(second["id"], 5, "{second}");
    assert_eq!(second["error"]["code"], -32600, "{second}");
    let message = second["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("request id 5 is already in flight in this session"),
        "{message}"
    );
    let ((status, first), took) = first.join().unwrap();
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(first["id"], 5);
    assert_eq!(
        first["result"]["structuredContent"]["dry_run"], true,
        "its own answer: {first}"
    );
    // Once answered, the id may be used again: the server frees it as the
    // answer goes out, so a client that reads the answer first may be a
    // moment early (under load); within a second it is free.
    let deadline = Instant::now() + Duration::from_secs(2);
    let again = loop {
        let (_, again) = s.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}));
        let early = again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already in flight"));
        if !early || Instant::now() > deadline {
            break again;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(again["result"]["tools"].is_array(), "{again}");
}

#[test]
fn past_max_calls_in_flight_a_session_call_and_a_stateless_one_are_refused_until_one_ends() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        "[sweep]\ninterval_secs = 0\n[mcp]\nmax_calls_in_flight = 1\n",
        &[("STORMWATCH_FAULTS", "sweep=delay:5000")],
    );
    let s = Arc::new(Session::open(&server).unwrap());
    let first = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            // Right after the session opened, its `initialized` notification
            // may still hold the one place for a moment: ask until taken.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut id = 1000;
            loop {
                let got = s.call(id, "run_sweep", json!({"dry_run": true}));
                if got.1["error"]["code"] != -32000 || Instant::now() > deadline {
                    break got;
                }
                id += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // Once the first call holds the one place (it then runs 5 s), a second
    // is refused. When the first has arrived depends on the machine's load:
    // ask until refused (an answered `list_tools` meanwhile is harmless).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut id = 2;
    let in_session = loop {
        let (_, got) = s.call(id, "list_tools", json!({}));
        if got["error"]["code"] == -32000 || Instant::now() > deadline {
            break got;
        }
        id += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(in_session["error"]["code"], -32000, "{in_session}");
    let modern = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stormwatch-test", "version": "1"}}}});
    let stateless = || {
        s.client
            .post(format!("http://{}/mcp", server.http))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/list")
            .body(modern.to_string())
            .send()
            .unwrap()
    };
    let r = stateless();
    assert_eq!(r.status().as_u16(), 503);
    let refusal = answer(&r.text().unwrap());
    assert_eq!(refusal["id"], 3);
    for v in [&in_session, &refusal] {
        let m = v["error"]["message"].as_str().unwrap();
        assert!(
            m.starts_with("too many MCP calls in flight: 1 at once (mcp.max_calls_in_flight)"),
            "{m}"
        );
    }
    let (status, first) = first.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        first["result"]["structuredContent"]["dry_run"], true,
        "{first}"
    );
    assert_eq!(
        stateless().status().as_u16(),
        200,
        "its place is free again"
    );
    s.works().unwrap();
}
