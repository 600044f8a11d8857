//! Hardening v2, timestamps (issue 25), against the real binary: a span
//! dated 2262 is refused on both transports (named in the partial success,
//! counted on `/metrics`, no day made) and the views keep today; 2000 spans
//! on 2000 future days make no file and no slow flush. The low items are in
//! `bounds_low.rs`, with the helpers here.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use reqwest_blocking::blocking::Client;
use serde_json::{json, Value};

use crate::common::{sample, Server};
use crate::crash::s;

const DAY_NS: i64 = 86_400_000_000_000;
/// 2262-01-01T00:00:00Z, inside an i64 of nanoseconds.
const Y2262_NS: i64 = 9_214_646_400_000_000_000;

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

fn today() -> String {
    stormwatch::model::day_to_string(stormwatch::model::day_of_ns(now_ns()))
}

/// A tool call of `tool` on trace `trace`, starting at `start_ns`.
pub(crate) fn tool_span(trace: u64, id: u64, tool: &str, start_ns: i64) -> Span {
    let mut t = [0u8; 16];
    t[..8].copy_from_slice(&trace.to_be_bytes());
    t[15] = 7;
    Span {
        trace_id: t.to_vec(),
        span_id: (id + 1).to_be_bytes().to_vec(),
        name: format!("execute_tool {tool}"),
        start_time_unix_nano: start_ns as u64,
        end_time_unix_nano: (start_ns + 1_000_000) as u64,
        attributes: vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", tool),
        ],
        ..Default::default()
    }
}

pub(crate) fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
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

/// POST a protobuf request; the decoded answer.
fn post(server: &Server, req: &ExportTraceServiceRequest) -> ExportTraceServiceResponse {
    let r = Client::new()
        .post(server.traces_url())
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", server.log_text());
    ExportTraceServiceResponse::decode(r.bytes().unwrap().as_ref()).unwrap()
}

pub(crate) fn get_json(server: &Server, path: &str) -> (u16, Value) {
    let r = Client::new()
        .get(format!("http://{}{path}", server.http))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(json!({"raw": text})),
    )
}

/// `tools/call` over MCP (stateless, 2026-07-28; loopback needs no token).
fn mcp(server: &Server, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "bounds-test", "version": "1"}}}});
    let r = Client::new()
        .post(format!("http://{}/mcp", server.http))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .body(body.to_string())
        .send()
        .unwrap();
    let text = r.text().unwrap();
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("");
    let v: Value = serde_json::from_str(if data.is_empty() { &text } else { &data })
        .unwrap_or_else(|_| panic!("{tool}: {text}"));
    v["result"]["structuredContent"].clone()
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The `date=` directories under `spans/`.
fn span_days(data: &Path) -> Vec<String> {
    let mut days: Vec<String> = std::fs::read_dir(data.join("spans"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("date=")
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    days.sort();
    days
}

fn quick_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let cfg = dir.join("stormwatch.toml");
    std::fs::write(
        &cfg,
        format!("[store]\nflush_interval_secs = 1\nrollup_interval_secs = 1\n{extra}"),
    )
    .unwrap();
    cfg
}

#[test]
fn a_span_dated_2262_is_refused_on_both_transports_and_the_views_keep_today() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = quick_config(dir.path(), "");
    let server = Server::start(&data, &["--config", cfg.to_str().unwrap()], &[]);
    let now = now_ns() - 60_000_000_000;
    let mut spans: Vec<Span> = (0..20)
        .map(|i| tool_span(1, i, "book_today", now + i as i64))
        .collect();
    spans.push(tool_span(2, 0, "book_2262", Y2262_NS));
    let answer = post(&server, &request(spans));
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 1, "{partial:?}");
    let msg = &partial.error_message;
    assert!(
        msg.starts_with("rejected 1 span(s) (1 dated in the future): span \"execute_tool book_2262\": starts 2262-01-01T00:00:00.000Z, after "),
        "{msg}"
    );
    assert!(
        msg.contains("(the receive time + 7200 s, ingest.max_future_secs)"),
        "{msg}"
    );
    // The same over gRPC.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let grpc = rt.block_on(async {
        let mut c = TraceServiceClient::connect(server.grpc_url())
            .await
            .unwrap();
        c.export(request(vec![
            tool_span(3, 0, "book_today", now + 100),
            tool_span(4, 0, "book_2262", Y2262_NS + DAY_NS),
        ]))
        .await
        .unwrap()
        .into_inner()
    });
    let partial = grpc.partial_success.expect("a gRPC partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial
            .error_message
            .contains("starts 2262-01-02T00:00:00.000Z"),
        "{partial:?}"
    );
    let m = server.metrics();
    for t in ["http", "grpc"] {
        let series =
            format!("stormwatch_spans_rejected_total{{transport=\"{t}\",reason=\"future\"}}");
        assert_eq!(sample(&m, &series), 1.0, "{series}\n{m}");
    }
    assert_eq!(
        sample(&m, "stormwatch_spans_accepted_total{transport=\"http\"}"),
        20.0
    );
    // The views end on today and hold today's calls.
    let deadline = Instant::now() + Duration::from_secs(30);
    let tools = loop {
        let (status, v) = get_json(&server, "/api/tools?days=7");
        assert_eq!(status, 200, "{v}");
        if v["tools"].as_array().is_some_and(|t| !t.is_empty()) {
            break v;
        }
        assert!(Instant::now() < deadline, "no tools after 30 s: {v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(tools["to"], today(), "{tools}");
    assert_eq!(tools["tools"][0]["tool"], "book_today", "{tools}");
    assert_eq!(tools["tools"][0]["calls"], 21, "{tools}");
    assert_eq!(tools["total_tools"], 1, "{tools}");
    let listed = mcp(&server, "list_tools", json!({}));
    assert_eq!(listed["to"], today(), "{listed}");
    assert_eq!(listed["tools"][0]["tool"], "book_today", "{listed}");
    let q = mcp(
        &server,
        "query",
        json!({"sql": "SELECT count(*) AS n FROM spans"}),
    );
    assert_eq!(q["window"], format!("{} to {}", today(), today()), "{q}");
    assert_eq!(q["rows"][0][0], 21, "{q}");
    server.stop();
    // Today's day only: no 2262 directory.
    let days = span_days(&data);
    assert!(!days.iter().any(|d| d.starts_with("2262")), "{days:?}");
    assert_eq!(
        days,
        [stormwatch::model::day_to_string(
            stormwatch::model::day_of_ns(now)
        )]
    );
}

#[test]
fn two_thousand_spans_on_two_thousand_future_days_make_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = quick_config(dir.path(), "");
    let server = Server::start(&data, &["--config", cfg.to_str().unwrap()], &[]);
    let before = files(&data).len();
    let now = now_ns();
    let spans: Vec<Span> = (0..2000u64)
        .map(|i| {
            tool_span(
                100 + i,
                0,
                &format!("future_{}", i % 50),
                now + (i as i64 + 1) * DAY_NS,
            )
        })
        .collect();
    let req = request(spans);
    let bytes = req.encode_to_vec().len();
    let answer = post(&server, &req);
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 2000);
    assert!(
        partial
            .error_message
            .starts_with("rejected 2000 span(s) (2000 dated in the future): "),
        "{}",
        partial.error_message
    );
    assert!(
        partial.error_message.ends_with("; and 1995 more"),
        "{}",
        partial.error_message
    );
    assert_eq!(
        sample(
            &server.metrics(),
            "stormwatch_spans_rejected_total{transport=\"http\",reason=\"future\"}"
        ),
        2000.0
    );
    // Two flush intervals, then a stop (its final flush timed).
    std::thread::sleep(Duration::from_millis(2500));
    let during = files(&data).len();
    let stopping = Instant::now();
    server.stop();
    let stop = stopping.elapsed();
    let after = files(&data);
    eprintln!(
        "2000 future days ({bytes} bytes): files {before} before, {during} two flushes on, {} after the stop; stop (final flush) {stop:?}",
        after.len()
    );
    assert!(span_days(&data).is_empty(), "{:?}", span_days(&data));
    assert!(
        after.len() <= before + 2,
        "files made: {before} before, {} after: {after:?}",
        after.len()
    );
    assert!(stop < Duration::from_secs(5), "the stop took {stop:?}");
}
