//! Ingest benchmark (not a test): end-to-end OTLP ingest over loopback into a
//! running `stormwatch serve` (protobuf, batches of 512 spans, several
//! keep-alive clients, durable acknowledgement), over HTTP and over gRPC (a
//! tonic client, one HTTP/2 connection per client), next to
//! decode-and-normalize alone, measured in the same run. Prints spans/s, the
//! server's peak RSS and the ratios; medians over `--runs` repetitions.
//!
//!     cargo bench --bench ingest -- [--runs 5] [--batches 2000] [--clients 4]
//!     cargo bench --bench ingest -- --target 127.0.0.1:4318        # drive a running server (HTTP)
//!     cargo bench --bench ingest -- --grpc-target 127.0.0.1:4317   # the same over gRPC
//!     cargo bench --bench ingest -- --decode-only                   # decode + normalize alone (for a profile)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

const SPANS_PER_BATCH: usize = 512;
const TOOLS: &[&str] = &[
    "search_flights",
    "book_flight",
    "quote_price",
    "get_weather",
    "fetch_page",
];

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

/// A realistic agent batch: tool spans with GenAI attributes, some failing.
fn batch(base_ns: u64, id: u64) -> Bytes {
    let mut trace = [0u8; 16];
    trace[..8].copy_from_slice(&id.to_be_bytes());
    trace[15] = 7;
    let start = base_ns + id * 10_000_000;
    let spans = (0..SPANS_PER_BATCH as u64)
        .map(|i| {
            let tool = TOOLS[(i as usize) % TOOLS.len()];
            let fail = i % 7 == 0;
            let mut attrs = vec![
                kv(
                    "gen_ai.operation.name",
                    Value::StringValue("execute_tool".into()),
                ),
                kv("gen_ai.tool.name", Value::StringValue(tool.into())),
                kv(
                    "gen_ai.tool.call.id",
                    Value::StringValue(format!("call_{id}_{i}")),
                ),
                kv(
                    "gen_ai.tool.call.arguments",
                    Value::StringValue(format!(
                        "{{\"from\":\"LIS\",\"to\":\"BER\",\"n\":{}}}",
                        i % 13
                    )),
                ),
                kv(
                    "session.id",
                    Value::StringValue(format!("sess-{}", id % 1000)),
                ),
            ];
            if fail {
                attrs.push(kv("http.response.status_code", Value::IntValue(503)));
                attrs.push(kv("error.type", Value::StringValue("503".into())));
            }
            Span {
                trace_id: trace.to_vec(),
                // Span 1 is the (unsent) agent span every call hangs under.
                span_id: (i + 2).to_be_bytes().to_vec(),
                parent_span_id: vec![0, 0, 0, 0, 0, 0, 0, 1],
                name: format!("execute_tool {tool}"),
                kind: 1,
                start_time_unix_nano: start + i * 1_000_000,
                end_time_unix_nano: start + i * 1_000_000 + 800_000,
                attributes: attrs,
                status: fail.then(|| Status {
                    code: 2,
                    message: "Service Unavailable".into(),
                }),
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue("bench-agent".into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
    .into()
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Decode + normalize every batch on `threads` threads; spans/s.
fn decode_only(batches: &[Bytes], threads: usize) -> f64 {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(b) = batches.get(i) else { break };
                let req = ExportTraceServiceRequest::decode(b.as_ref()).unwrap();
                let n = stormwatch::ingest::normalize(&req);
                assert_eq!(n.spans(), SPANS_PER_BATCH);
                std::hint::black_box(n);
            });
        }
    });
    (batches.len() * SPANS_PER_BATCH) as f64 / started.elapsed().as_secs_f64()
}

/// One keep-alive HTTP/1.1 POST; true on 200.
fn post(stream: &mut BufReader<TcpStream>, host: &str, body: &[u8]) -> bool {
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let w = stream.get_mut();
    if w.write_all(head.as_bytes())
        .and_then(|()| w.write_all(body))
        .is_err()
    {
        return false;
    }
    let mut status = String::new();
    if stream.read_line(&mut status).is_err() {
        return false;
    }
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).is_err() || line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut buf = vec![0u8; len];
    let _ = stream.read_exact(&mut buf);
    status.starts_with("HTTP/1.1 200")
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Send every batch to `host` with `clients` keep-alive connections; spans/s
/// acknowledged and the number of retried requests.
fn drive(host: &str, batches: &[Bytes], clients: usize) -> (f64, usize) {
    let next = AtomicUsize::new(0);
    let retries = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..clients {
            s.spawn(|| {
                let mut stream = BufReader::new(TcpStream::connect(host).unwrap());
                stream.get_mut().set_nodelay(true).unwrap();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = batches.get(i) else { break };
                    while !post(&mut stream, host, b) {
                        retries.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(5));
                        stream = BufReader::new(TcpStream::connect(host).unwrap());
                    }
                }
            });
        }
    });
    let rate = (batches.len() * SPANS_PER_BATCH) as f64 / started.elapsed().as_secs_f64();
    (rate, retries.load(Ordering::Relaxed))
}

/// Pre-encoded requests out, responses ignored: the gRPC twin of `post`.
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;
    fn encoder(&mut self) -> BytesCodec {
        BytesCodec
    }
    fn decoder(&mut self) -> BytesCodec {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = ();
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

/// `drive` over gRPC: `clients` tonic clients, each on its own HTTP/2
/// connection, one request in flight each; a refused request is retried.
fn drive_grpc(host: &str, batches: &[Bytes], clients: usize) -> (f64, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let retries = std::sync::Arc::new(AtomicUsize::new(0));
    let batches = std::sync::Arc::new(batches.to_vec());
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{host}"))
                .unwrap()
                .tcp_nodelay(true)
                .connect()
                .await
                .unwrap();
            let (next, retries, batches, path) =
                (next.clone(), retries.clone(), batches.clone(), path.clone());
            tasks.push(tokio::spawn(async move {
                let mut grpc = tonic::client::Grpc::new(channel);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = batches.get(i) else { break };
                    loop {
                        grpc.ready().await.unwrap();
                        let req = tonic::Request::new(b.clone());
                        match grpc.unary(req, path.clone(), BytesCodec).await {
                            Ok(_) => break,
                            Err(_) => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let rate = (batches.len() * SPANS_PER_BATCH) as f64 / started.elapsed().as_secs_f64();
    (rate, retries.load(Ordering::Relaxed))
}

#[derive(Clone, Copy, PartialEq)]
enum Transport {
    Http,
    Grpc,
}

/// End to end: spans/s acknowledged, peak RSS (KiB), retried requests.
fn end_to_end(batches: &[Bytes], clients: usize, transport: Transport) -> (f64, u64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let (otlp, grpc, http) = (free_port(), free_port(), free_port());
    // `STORMWATCH_BIN`: another build of the server (a worktree's copy,
    // the target directory being shared).
    let bin = std::env::var_os("STORMWATCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_stormwatch").into());
    let mut child = Command::new(bin)
        .args([
            "serve",
            "--otlp-addr",
            &format!("127.0.0.1:{otlp}"),
            "--otlp-grpc-addr",
            &format!("127.0.0.1:{grpc}"),
            "--http-addr",
            &format!("127.0.0.1:{http}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let port = if transport == Transport::Http {
        otlp
    } else {
        grpc
    };
    let host = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(&host).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (rate, retries) = match transport {
        Transport::Http => drive(&host, batches, clients),
        Transport::Grpc => drive_grpc(&host, batches, clients),
    };
    let rss = peak_rss_kib(child.id());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    (rate, rss, retries)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = arg("--runs", 5);
    let n = arg("--batches", 4000);
    let clients = arg("--clients", 4);
    // An hour before now: inside the receivers' window and the default
    // retention, so every span is written (a fixed date falls out of both
    // as time passes, and the receivers refuse its spans cheaply).
    let base_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        - 3_600_000_000_000;
    let batches: Vec<Bytes> = (0..n as u64).map(|id| batch(base_ns, id)).collect();
    // `--target HOST:PORT`: only drive an already running server (for profiling it).
    let args: Vec<String> = std::env::args().collect();
    if let Some(host) = args
        .iter()
        .position(|a| a == "--target")
        .and_then(|i| args.get(i + 1))
    {
        let (rate, retried) = drive(host, &batches, clients);
        println!("{host}: {rate:.0} spans/s acknowledged, {retried} retried requests");
        return;
    }
    if let Some(host) = args
        .iter()
        .position(|a| a == "--grpc-target")
        .and_then(|i| args.get(i + 1))
    {
        let (rate, retried) = drive_grpc(host, &batches, clients);
        println!("{host} (gRPC): {rate:.0} spans/s acknowledged, {retried} retried requests");
        return;
    }
    if args.iter().any(|a| a == "--decode-only") {
        for run in 1..=runs {
            let d1 = decode_only(&batches, 1);
            println!("run {run}: decode+normalize {d1:.0} spans/s (1 thread)");
        }
        return;
    }
    let bytes: usize = batches.iter().map(Bytes::len).sum();
    println!(
        "ingest benchmark: {n} batches x {SPANS_PER_BATCH} spans ({:.1} MiB protobuf), {clients} clients, {runs} runs, {} cores",
        bytes as f64 / (1 << 20) as f64,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (mut dec1, mut dec2) = (vec![], vec![]);
    let (mut http, mut http_ratio, mut http_rss) = (vec![], vec![], vec![]);
    let (mut grpc, mut grpc_ratio, mut grpc_rss) = (vec![], vec![], vec![]);
    for run in 1..=runs {
        let d1 = decode_only(&batches, 1);
        let d2 = decode_only(&batches, 2);
        let (h, hr, h_retried) = end_to_end(&batches, clients, Transport::Http);
        let (g, gr, g_retried) = end_to_end(&batches, clients, Transport::Grpc);
        println!(
            "run {run}: decode+normalize {:.0} spans/s (1 thread), {:.0} spans/s (2 threads); \
             HTTP end to end {:.0} spans/s ({:.0}% of 2-thread decode), peak RSS {} MiB, {h_retried} retried; \
             gRPC end to end {:.0} spans/s ({:.0}%), peak RSS {} MiB, {g_retried} retried",
            d1, d2, h, 100.0 * h / d2, hr / 1024, g, 100.0 * g / d2, gr / 1024
        );
        dec1.push(d1);
        dec2.push(d2);
        http.push(h);
        http_ratio.push(h / d2);
        http_rss.push(hr as f64);
        grpc.push(g);
        grpc_ratio.push(g / d2);
        grpc_rss.push(gr as f64);
    }
    println!(
        "median: decode+normalize {:.0} spans/s (1 thread), {:.0} (2 threads); \
         HTTP end to end {:.0} spans/s ({:.0}% of decode), peak RSS {:.0} MiB; \
         gRPC end to end {:.0} spans/s ({:.0}% of decode), peak RSS {:.0} MiB",
        median(dec1),
        median(dec2),
        median(http),
        100.0 * median(http_ratio),
        median(http_rss) / 1024.0,
        median(grpc),
        100.0 * median(grpc_ratio),
        median(grpc_rss) / 1024.0,
    );
}
