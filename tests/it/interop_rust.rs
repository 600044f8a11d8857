//! The Rust `opentelemetry-otlp` exporter (crates.io), over `http-proto`
//! and `http-json`, sends tool spans to a running `stormwatch serve`.

use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

use crate::common::{rows_by_key, spans, Server};

/// (trace/span key, tool name, error class, session).
type Expected = (String, Option<&'static str>, &'static str, Option<String>);

fn send(url: &str, protocol: Protocol, session: &str) -> Vec<Expected> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(url)
        .build()
        .unwrap();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name("rust-interop")
                .build(),
        )
        .build();
    let tracer = provider.tracer("interop");
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
        .start(&tracer);
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
            .start_with_context(&tracer, &cx);
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
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();
    expected
}

#[test]
fn rust_otlp_exporter_over_http_proto_and_http_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let url = server.traces_url();
    let mut expected = send(&url, Protocol::HttpBinary, "rust-proto");
    expected.extend(send(&url, Protocol::HttpJson, "rust-json"));
    server.stop();
    let df = spans(&data);
    let stored = rows_by_key(
        &df,
        &["tool_name", "error_class", "session_id", "service_name"],
    );
    assert_eq!(df.height(), expected.len());
    for (key, tool, class, session) in expected {
        let row = stored
            .get(&key)
            .unwrap_or_else(|| panic!("{key} not stored"));
        assert_eq!(row[0].as_deref(), tool, "{key}");
        assert_eq!(row[1].as_deref(), Some(class), "{key}");
        assert_eq!(row[2], session, "{key}");
        assert_eq!(row[3].as_deref(), Some("rust-interop"), "{key}");
    }
}
