//! Admission under attack, against the real binary in a memory cgroup
//! (issue 25, items 5 and 6 and the connection limits): slow uploads that
//! declare 64 MiB while a real exporter (the Rust `opentelemetry-otlp`
//! exporter, over HTTP and over gRPC) keeps exporting; uploads that take
//! the general part of the budget and stall; zstd bombs over gRPC while
//! `/healthz` is timed; half-sent headers and idle keep-alive connections on
//! the three ports; a peer past its connection cap. Each prints its figures
//! (`cargo test ... -- --nocapture`), as BENCHMARKS.md quotes them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry::trace::{Span as _, Tracer, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter as _};

use crate::common::{sample, Server};
use crate::memcap::{peak_rss, rss, MemCap};

const MIB: u64 = 1 << 20;

/// The servers of these tests run in a cgroup of this much memory.
const CGROUP: u64 = 4 << 30;

/// A server with `config` (the `[ingest]` / `[admission]` keys under test)
/// in a memory cgroup.
fn capped(dir: &Path, config: &str) -> (Server, MemCap) {
    let path = dir.join("stormwatch.toml");
    std::fs::write(&path, config).unwrap();
    let server = Server::start(
        &dir.join("data"),
        &["--config", path.to_str().unwrap()],
        &[],
    );
    let cap = MemCap::new(CGROUP);
    cap.add(server.child.id());
    (server, cap)
}

/// Latencies, sorted: (p50, p99, max).
fn quantiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    assert!(!v.is_empty());
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), *v.last().unwrap())
}

/// The finished spans, kept to be handed to the exporter.
#[derive(Debug, Clone, Default)]
struct Collect(std::sync::Arc<Mutex<Vec<SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// Five tool-call spans of export `i`.
fn batch(i: usize) -> Vec<SpanData> {
    let collect = Collect::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collect.clone())
        .build();
    let tracer = provider.tracer("admission");
    for call in 0..5 {
        let mut span = tracer.start("execute_tool search_flights");
        span.set_attribute(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        span.set_attribute(KeyValue::new("gen_ai.tool.name", "search_flights"));
        span.set_attribute(KeyValue::new("session.id", format!("adm-{i}")));
        span.set_attribute(KeyValue::new("gen_ai.tool.call.id", format!("call_{call}")));
        span.end();
    }
    provider.shutdown().unwrap();
    let spans = std::mem::take(&mut *collect.0.lock().unwrap());
    spans
}

/// What a real exporter saw: each export's latency and error.
struct Exports(Vec<(Duration, Option<String>)>);

impl Exports {
    fn failed(&self) -> Vec<&String> {
        self.0.iter().filter_map(|(_, e)| e.as_ref()).collect()
    }

    fn summary(&self, what: &str) -> String {
        let (p50, p99, max) = quantiles(self.0.iter().map(|(d, _)| *d).collect());
        format!(
            "{what}: {} exports, {} failed, latency p50 {p50:?} p99 {p99:?} max {max:?}",
            self.0.len(),
            self.failed().len()
        )
    }
}

/// The Rust OTLP exporter (HTTP protobuf, or tonic gRPC) exporting one
/// small batch every 200 ms for `run`.
fn keep_exporting(server: &Server, grpc: bool, run: Duration) -> Exports {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _enter = rt.enter();
    let exporter = if grpc {
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(server.grpc_url())
            .with_timeout(Duration::from_secs(10))
            .build()
    } else {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(server.traces_url())
            .with_timeout(Duration::from_secs(10))
            .build()
    }
    .unwrap();
    let mut out = Vec::new();
    let end = Instant::now() + run;
    let mut i = 0;
    while Instant::now() < end {
        let spans = batch(i);
        let begun = Instant::now();
        let result = if grpc {
            rt.block_on(exporter.export(spans))
        } else {
            futures::executor::block_on(exporter.export(spans))
        };
        out.push((begun.elapsed(), result.err().map(|e| e.to_string())));
        i += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    Exports(out)
}

/// An upload that declares `declared` bytes, sends `burst` of them at
/// once, then a byte every 250 ms; whenever the server answers or closes,
/// the answer's first line and how long the upload lasted are noted and
/// it starts again, until `stop`.
fn upload(
    addr: SocketAddr,
    declared: usize,
    burst: usize,
    stop: &AtomicBool,
    cuts: &Mutex<Vec<(Duration, String)>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect(addr) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        s.set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        let head = format!(
            "POST /v1/traces HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-protobuf\r\n\
             content-length: {declared}\r\n\r\n"
        );
        let opened = Instant::now();
        let mut sent =
            s.write_all(head.as_bytes()).is_ok() && s.write_all(&vec![0x0a; burst]).is_ok();
        let mut answer = Vec::new();
        while sent && !stop.load(Ordering::Relaxed) {
            let mut buf = [0u8; 4096];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        // The head, and any body that came with it.
                        std::thread::sleep(Duration::from_millis(50));
                        if let Ok(n) = s.read(&mut buf) {
                            answer.extend_from_slice(&buf[..n]);
                        }
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    sent = s.write_all(&[0x0a]).is_ok();
                }
                Err(_) => break,
            }
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let text = String::from_utf8_lossy(&answer);
        let first = text.lines().next().unwrap_or("(closed without an answer)");
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        cuts.lock()
            .unwrap()
            .push((opened.elapsed(), format!("{first} {body}")));
    }
}

/// Four uploads declaring 64 MiB (the default `max_body_bytes`), trickling
/// a byte every 250 ms, while the exporter exports over HTTP and then over
/// gRPC: every export goes in, each within a second; the uploads are cut
/// with a 408 naming the minimum rate once a 5 s window passes below it.
#[test]
fn four_trickling_64_mib_uploads_do_not_starve_a_real_exporter() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _cap) = capped(dir.path(), "");
    let stop = AtomicBool::new(false);
    let cuts = Mutex::new(Vec::new());
    let (http, grpc) = std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| upload(server.otlp, 64 << 20, 0, &stop, &cuts));
        }
        std::thread::sleep(Duration::from_secs(1));
        let http = keep_exporting(&server, false, Duration::from_secs(12));
        let grpc = keep_exporting(&server, true, Duration::from_secs(8));
        stop.store(true, Ordering::Relaxed);
        (http, grpc)
    });
    let peak = peak_rss(server.child.id());
    let cuts = cuts.into_inner().unwrap();
    eprintln!("trickling uploads: {}", http.summary("OTLP/HTTP exporter"));
    eprintln!("trickling uploads: {}", grpc.summary("OTLP/gRPC exporter"));
    eprintln!(
        "trickling uploads: {} cut, first after {:?}: {:?}; server peak RSS {} MiB",
        cuts.len(),
        cuts.first().map(|c| c.0),
        cuts.first().map(|c| &c.1),
        peak / MIB
    );
    for (exports, what) in [(&http, "http"), (&grpc, "grpc")] {
        assert!(
            exports.failed().is_empty(),
            "{what}: {:?}\n{}",
            exports.failed(),
            server.log_text()
        );
        let (_, _, max) = quantiles(exports.0.iter().map(|(d, _)| *d).collect());
        assert!(max < Duration::from_secs(1), "{}", exports.summary(what));
    }
    assert!(cuts.len() >= 4, "every upload cut at least once: {cuts:?}");
    for (lasted, answer) in &cuts {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("admission.min_body_rate_bytes"), "{answer}");
        assert!(*lasted < Duration::from_secs(8), "cut after {lasted:?}");
    }
    assert!(peak < 512 * MIB, "peak RSS {} MiB", peak / MIB);
    server.stop();
}

/// Four uploads that send 12 MiB of a declared 16 MiB at once and stall:
/// together they take the budget's general part (48 of 64 MiB). The
/// exporter's exports still go in, on the reserve, which a body still
/// arriving can only borrow for 2 s.
#[test]
fn uploads_that_take_the_general_budget_and_stall_leave_the_reserve_to_exporters() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _cap) = capped(
        dir.path(),
        "[ingest]\nmax_body_bytes = 16777216\nmax_inflight_bytes = 67108864\n",
    );
    let stop = AtomicBool::new(false);
    let cuts = Mutex::new(Vec::new());
    let http = std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| upload(server.otlp, 16 << 20, 12 << 20, &stop, &cuts));
        }
        std::thread::sleep(Duration::from_secs(1));
        let available = sample(
            &server.metrics(),
            "stormwatch_ingest_inflight_kib_available",
        );
        eprintln!("stalled uploads: {available} KiB of the budget free while they hold");
        let http = keep_exporting(&server, false, Duration::from_secs(10));
        stop.store(true, Ordering::Relaxed);
        http
    });
    let peak = peak_rss(server.child.id());
    let cuts = cuts.into_inner().unwrap();
    eprintln!("stalled uploads: {}", http.summary("OTLP/HTTP exporter"));
    eprintln!(
        "stalled uploads: {} cut: {:?}; server peak RSS {} MiB",
        cuts.len(),
        cuts.iter()
            .map(|c| (c.0, c.1.lines().next().unwrap_or("")))
            .take(4)
            .collect::<Vec<_>>(),
        peak / MIB
    );
    assert!(http.failed().is_empty(), "{:?}", http.failed());
    let (_, _, max) = quantiles(http.0.iter().map(|(d, _)| *d).collect());
    assert!(max < Duration::from_secs(1), "{}", http.summary("http"));
    assert!(peak < 512 * MIB, "peak RSS {} MiB", peak / MIB);
    server.stop();
}

/// `/healthz` over one kept-alive connection, every 10 ms until `stop`.
fn time_healthz(addr: SocketAddr, stop: &AtomicBool) -> Vec<Duration> {
    let client = reqwest_blocking::blocking::Client::new();
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let begun = Instant::now();
        let status = client
            .get(format!("http://{addr}/healthz"))
            .timeout(Duration::from_secs(20))
            .send()
            .map(|r| r.status().as_u16());
        out.push(begun.elapsed());
        assert_eq!(status.ok(), Some(200));
        std::thread::sleep(Duration::from_millis(10));
    }
    out
}

/// One Export call whose message is `message` (already zstd-compressed),
/// sent as it is: the status code and message it was answered with, and
/// whether the status carried RetryInfo.
async fn send_compressed(
    channel: tonic::transport::Channel,
    message: bytes::Bytes,
) -> (tonic::Code, String, bool) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(1);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    let req = tonic::codegen::http::Request::builder()
        .method("POST")
        .uri(stormwatch::serve::grpc::EXPORT_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-encoding", "zstd")
        .body(tonic::body::Body::new(http_body_util::Full::new(
            bytes::Bytes::from(frame),
        )))
        .unwrap();
    let resp = match channel.oneshot(req).await {
        Ok(r) => r,
        Err(e) => return (tonic::Code::Unknown, format!("transport: {e}"), false),
    };
    let (parts, body) = resp.into_parts();
    let trailers = match body.collect().await {
        Ok(c) => c.trailers().cloned(),
        Err(e) => return (tonic::Code::Unknown, format!("body: {e}"), false),
    };
    let status = tonic::Status::from_header_map(&parts.headers)
        .or_else(|| trailers.as_ref().and_then(tonic::Status::from_header_map));
    match status {
        Some(s) => (s.code(), s.message().to_string(), !s.details().is_empty()),
        None => (tonic::Code::Unknown, "no grpc-status".to_string(), false),
    }
}

/// 64 concurrent streams on one connection sending 2 KB zstd bombs (63 MiB
/// of zeros each) for 6 s while `/healthz` is timed: `/healthz` stays under
/// 200 ms at p99 and 500 ms at most, every bomb is refused
/// (`RESOURCE_EXHAUSTED`, or `INVALID_ARGUMENT` for one that had the
/// budget and was decoded), and a bomb past the 64 MiB cap is
/// `RESOURCE_EXHAUSTED` without RetryInfo, naming the cap.
///
/// The in-flight budget is 96 MiB here, so that two bombs inflating at once
/// (one per decoding thread) cannot both fit and the budget's refusal is
/// certain to be seen. Under the default 256 MiB, two decoding threads
/// rarely hold enough at once for a refusal (3 of 691 bombs in one run),
/// which made the count a matter of timing.
#[test]
fn zstd_bombs_over_grpc_do_not_stall_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _cap) = capped(dir.path(), "[ingest]\nmax_inflight_bytes = 100663296\n");
    let bomb = bytes::Bytes::from(zstd::bulk::compress(&vec![0u8; 63 << 20], 19).unwrap());
    let over_cap = bytes::Bytes::from(zstd::bulk::compress(&vec![0u8; 65 << 20], 19).unwrap());
    assert!(bomb.len() < 4096, "{}", bomb.len());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.grpc_url();
    let channel = rt.block_on(async {
        tonic::transport::Channel::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
    let stop = AtomicBool::new(false);
    let (healthz, answers) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| time_healthz(server.http, &stop));
        std::thread::sleep(Duration::from_millis(500));
        let answers = rt.block_on(async {
            let end = tokio::time::Instant::now() + Duration::from_secs(6);
            let mut streams = tokio::task::JoinSet::new();
            for _ in 0..64 {
                let (channel, bomb) = (channel.clone(), bomb.clone());
                streams.spawn(async move {
                    let mut got = Vec::new();
                    while tokio::time::Instant::now() < end {
                        got.push(send_compressed(channel.clone(), bomb.clone()).await);
                    }
                    got
                });
            }
            let mut all = Vec::new();
            while let Some(got) = streams.join_next().await {
                all.extend(got.unwrap());
            }
            all
        });
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        (sampler.join().unwrap(), answers)
    });
    let over = rt.block_on(send_compressed(channel, over_cap));
    let peak = peak_rss(server.child.id());
    let count = |code| answers.iter().filter(|a| a.0 == code).count();
    let (p50, p99, max) = quantiles(healthz.clone());
    eprintln!(
        "zstd bombs: {} sent: {} RESOURCE_EXHAUSTED, {} INVALID_ARGUMENT, {} other; /healthz ({} samples) p50 {p50:?} p99 {p99:?} max {max:?}; server peak RSS {} MiB",
        answers.len(),
        count(tonic::Code::ResourceExhausted),
        count(tonic::Code::InvalidArgument),
        answers.len() - count(tonic::Code::ResourceExhausted) - count(tonic::Code::InvalidArgument),
        healthz.len(),
        peak / MIB
    );
    eprintln!("zstd bombs: past the cap: {over:?}");
    eprintln!(
        "zstd bombs: server RSS after the attack {} MiB",
        rss(server.child.id()) / MIB
    );
    let others: Vec<_> = answers
        .iter()
        .filter(|a| {
            !matches!(
                a.0,
                tonic::Code::ResourceExhausted | tonic::Code::InvalidArgument
            )
        })
        .take(3)
        .collect();
    assert!(others.is_empty(), "{others:?}");
    assert!(count(tonic::Code::ResourceExhausted) > 0);
    assert_eq!(over.0, tonic::Code::ResourceExhausted, "{over:?}");
    assert!(!over.2, "past the cap is not retryable: {over:?}");
    assert!(over.1.contains("67108864"), "{over:?}");
    assert!(
        p99 < Duration::from_millis(200) && max < Duration::from_millis(500),
        "/healthz p99 {p99:?} max {max:?}"
    );
    assert!(peak < 768 * MIB, "peak RSS {} MiB", peak / MIB);
    server.stop();
}
