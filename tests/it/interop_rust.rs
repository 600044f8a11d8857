//! The Rust `opentelemetry-otlp` exporter (crates.io), over `http-proto`,
//! `http-json` and `grpc-tonic` (plain, gzip, zstd, the token as metadata),
//! sends tool spans to a running `stormwatch serve`; over gRPC it retries an
//! overload as the server's `RetryInfo` says and gives up on a message that
//! can never fit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::{Compression, Protocol, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter as _};
use opentelemetry_sdk::Resource;

use crate::common::{rows_by_key, sample, spans, wait_for_sample, BudgetHold, Server};

/// (trace/span key, tool name, error class, session).
type Expected = (String, Option<&'static str>, &'static str, Option<String>);

fn resource() -> Resource {
    Resource::builder()
        .with_service_name("rust-interop")
        .build()
}

fn send(url: &str, protocol: Protocol, session: &str) -> Vec<Expected> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(url)
        .build()
        .unwrap();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("interop");
    let expected = make_spans(&tracer, session);
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();
    expected
}

/// One turn of `session` on `tracer`: the agent's root and five tool calls
/// (200, 503, 503, 429, 410).
fn make_spans(tracer: &SdkTracer, session: &str) -> Vec<Expected> {
    let mut expected = Vec::new();
    let key =
        |cx: &opentelemetry::trace::SpanContext| format!("{}/{}", cx.trace_id(), cx.span_id());

    let root = tracer
        .span_builder("invoke_agent travel-agent")
        .with_kind(SpanKind::Internal)
        .with_attributes([
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("session.id", session.to_string()),
        ])
        .start(tracer);
    let root_key = key(root.span_context());
    let cx = Context::current_with_span(root);
    for (i, (status, class)) in [
        (200, "ok"),
        (503, "unavailable"),
        (503, "unavailable"),
        (429, "rate_limited"),
        (410, "not_found"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut span = tracer
            .span_builder("execute_tool search_flights")
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", "search_flights"),
                KeyValue::new("gen_ai.tool.call.id", format!("call_{i}")),
                KeyValue::new("session.id", session.to_string()),
                KeyValue::new("http.response.status_code", i64::from(status)),
            ])
            .start_with_context(tracer, &cx);
        if status >= 400 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        expected.push((
            key(span.span_context()),
            Some("search_flights"),
            class,
            Some(session.to_string()),
        ));
        span.end();
    }
    cx.span().end();
    expected.push((root_key, None, "ok", Some(session.to_string())));
    expected
}

/// The finished spans, kept to be handed to the OTLP exporter in one call.
#[derive(Debug, Clone, Default)]
struct Collect(Arc<Mutex<Vec<SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// The spans of one turn (`make_spans`, plus `extra` attributes on each
/// call), exported over OTLP/gRPC by the tonic exporter in one `export`
/// call (one `Export` RPC, and its retries): what was sent and the result.
fn send_grpc(
    rt: &tokio::runtime::Runtime,
    url: &str,
    compression: Option<Compression>,
    metadata: Option<MetadataMap>,
    session: &str,
    extra: Option<KeyValue>,
) -> (Vec<Expected>, OTelSdkResult) {
    let collect = Collect::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collect.clone())
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("interop");
    let expected = match extra {
        None => make_spans(&tracer, session),
        Some(kv) => {
            let mut span = tracer.start("execute_tool search_flights");
            span.set_attribute(kv);
            span.end();
            Vec::new()
        }
    };
    provider.shutdown().unwrap();
    let batch = std::mem::take(&mut *collect.0.lock().unwrap());
    // The tonic channel is made (lazily) on the runtime.
    let _enter = rt.enter();
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(url);
    if let Some(c) = compression {
        builder = builder.with_compression(c);
    }
    if let Some(m) = metadata {
        builder = builder.with_metadata(m);
    }
    let mut exporter = builder.build().unwrap();
    exporter.set_resource(&resource());
    let result = rt.block_on(exporter.export(batch));
    let _ = exporter.shutdown();
    (expected, result)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn bearer(token: &str) -> MetadataMap {
    let mut m = MetadataMap::new();
    m.insert("authorization", format!("Bearer {token}").parse().unwrap());
    m
}

/// Every expected span stored with its tool, class, session and service.
fn assert_stored(data: &std::path::Path, expected: &[Expected]) {
    let df = spans(data);
    let stored = rows_by_key(
        &df,
        &["tool_name", "error_class", "session_id", "service_name"],
    );
    assert_eq!(df.height(), expected.len());
    for (key, tool, class, session) in expected {
        let row = stored
            .get(key)
            .unwrap_or_else(|| panic!("{key} not stored"));
        assert_eq!(row[0].as_deref(), *tool, "{key}");
        assert_eq!(row[1].as_deref(), Some(*class), "{key}");
        assert_eq!(&row[2], session, "{key}");
        assert_eq!(row[3].as_deref(), Some("rust-interop"), "{key}");
    }
}

const GRPC_REQUESTS: &str = "stormwatch_ingest_requests_total{transport=\"grpc\"}";

#[test]
fn rust_otlp_exporter_over_http_proto_and_http_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let url = server.traces_url();
    let mut expected = send(&url, Protocol::HttpBinary, "rust-proto");
    expected.extend(send(&url, Protocol::HttpJson, "rust-json"));
    server.stop();
    assert_stored(&data, &expected);
}

#[test]
fn rust_otlp_exporter_over_grpc_tonic_plain_gzip_and_zstd() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let rt = runtime();
    let mut expected = Vec::new();
    for (compression, session) in [
        (None, "rust-grpc"),
        (Some(Compression::Gzip), "rust-grpc-gzip"),
        (Some(Compression::Zstd), "rust-grpc-zstd"),
    ] {
        let (sent, result) = send_grpc(&rt, &server.grpc_url(), compression, None, session, None);
        result.unwrap_or_else(|e| panic!("{session}: {e}\n{}", server.log_text()));
        expected.extend(sent);
    }
    let metrics = server.metrics();
    server.stop();
    assert_eq!(sample(&metrics, GRPC_REQUESTS), 3.0, "{metrics}");
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_spans_accepted_total{transport=\"grpc\"}"
        ),
        expected.len() as f64
    );
    assert_stored(&data, &expected);
}

/// The token as `.with_metadata`: let in; a wrong one, or none, refused
/// `UNAUTHENTICATED`, which the exporter does not retry.
#[test]
fn rust_grpc_exporter_sends_the_ingest_token_as_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = "ingest-rust-5e0c2b8f1d";
    let server = Server::start(&data, &["--ingest-token", token], &[]);
    let rt = runtime();
    let url = server.grpc_url();
    for (what, metadata) in [("no token", None), ("a wrong token", Some(bearer("nope")))] {
        let (_, result) = send_grpc(&rt, &url, None, metadata, "refused", None);
        let err = result.expect_err(what);
        assert!(
            format!("{err:?}").contains("Unauthenticated") || format!("{err}").contains("token"),
            "{what}: {err}"
        );
    }
    let (expected, result) = send_grpc(
        &rt,
        &url,
        Some(Compression::Gzip),
        Some(bearer(token)),
        "rust-token",
        None,
    );
    result.unwrap();
    let metrics = server.metrics();
    server.stop();
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"unauthorized\"}"
        ),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, GRPC_REQUESTS),
        3.0,
        "not retried: {metrics}"
    );
    assert_stored(&data, &expected);
}

/// Overload is `RESOURCE_EXHAUSTED` with `RetryInfo`: the exporter
/// classifies it as throttled and retries after the delay the server gave,
/// and the export succeeds once the budget is free. A message over
/// `max_body_bytes` is `RESOURCE_EXHAUSTED` without `RetryInfo`: not
/// retried, exactly one request.
#[test]
fn rust_grpc_exporter_retries_overload_as_retry_info_says_and_not_a_message_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 1 << 20;
    let (data, server) = crate::common::server_with_budget(dir.path(), budget);
    let rt = runtime();
    let overloaded =
        "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"overloaded\"}";
    let hold = BudgetHold::take(&server, budget);
    let (expected, result) = std::thread::scope(|scope| {
        let export =
            scope.spawn(|| send_grpc(&rt, &server.grpc_url(), None, None, "rust-overload", None));
        // Two refusals, then the budget frees up.
        wait_for_sample(&server, overloaded, 2.0, Duration::from_secs(20));
        drop(hold);
        export.join().unwrap()
    });
    result.unwrap_or_else(|e| panic!("the retried export failed: {e}\n{}", server.log_text()));
    let metrics = server.metrics();
    let refused = sample(&metrics, overloaded);
    assert!(refused >= 2.0);
    assert_eq!(
        sample(&metrics, GRPC_REQUESTS),
        refused + 1.0,
        "every refusal retried, then one success: {metrics}"
    );

    let big = KeyValue::new(
        "gen_ai.tool.call.result",
        "x".repeat(budget + (budget >> 1)),
    );
    let (_, result) = send_grpc(&rt, &server.grpc_url(), None, None, "too-large", Some(big));
    assert!(result.is_err(), "a message over max_body_bytes is refused");
    let after = server.metrics();
    server.stop();
    assert_eq!(
        sample(
            &after,
            "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"too_large\"}"
        ),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(&after, GRPC_REQUESTS),
        refused + 2.0,
        "the message too large was not retried: {after}"
    );
    assert_stored(&data, &expected);
}
