//! The dependency a span names (docs/detection.md §1, "The dependency"):
//! each source in its place of the precedence, what a host is cut to, what
//! does not parse, and which spans get none — through `normalize`, with the
//! row oracle giving the same rows.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use proptest::prelude::*;

use super::dependency::url_host;
use super::{normalize, rows};

const INTERNAL: i32 = 1;
const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const PRODUCER: i32 = 4;
const CONSUMER: i32 = 5;

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn span(n: u8, kind: i32, attrs: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![7; 16],
        span_id: vec![0, 0, 0, 0, 0, 0, 0, n],
        name: format!("span {n}"),
        kind,
        start_time_unix_nano: 1_785_354_394_000_000_000 + u64::from(n),
        end_time_unix_nano: 1_785_354_394_500_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

fn request(service: Option<&str>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: service
                    .map(|s| vec![super::attrs::kv_string("service.name", s)])
                    .unwrap_or_default(),
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Each span's dependency as stored, checked against the row oracle.
fn dependencies(service: Option<&str>, spans: Vec<Span>) -> Vec<Option<String>> {
    let req = request(service, spans);
    let batch = normalize(&req).batch;
    let rows = batch.rows();
    assert_eq!(rows, rows::normalize_rows(&req));
    assert!(batch.is_consistent());
    rows.into_iter().map(|r| r.dependency).collect()
}

/// The dependency of one span of `kind` with `attrs`, its resource's
/// `service.name` being `service`.
fn dependency(service: Option<&str>, kind: i32, attrs: Vec<KeyValue>) -> Option<String> {
    dependencies(service, vec![span(1, kind, attrs)]).remove(0)
}

fn client(attrs: Vec<KeyValue>) -> Option<String> {
    dependency(Some("travel-agent"), CLIENT, attrs)
}

fn tool(extra: Vec<KeyValue>) -> Vec<KeyValue> {
    let mut attrs = vec![
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "quote_fare"),
    ];
    attrs.extend(extra);
    attrs
}

#[test]
fn peer_service_comes_first() {
    assert_eq!(
        client(vec![
            s("server.address", "10.0.0.7"),
            s("url.full", "https://api.fares.example/v1"),
            s("peer.service", "Fares-API"),
        ])
        .as_deref(),
        Some("Fares-API"),
        "peer.service as sent, before server.address and url.full"
    );
    assert_eq!(
        client(vec![s("peer.service", "  "), s("server.address", "fares")]).as_deref(),
        Some("fares"),
        "a blank peer.service is none"
    );
}

#[test]
fn an_mcp_server_span_is_named_by_its_own_service() {
    let call = vec![
        s("mcp.method.name", "tools/call"),
        s("gen_ai.tool.name", "quote_fare"),
        s("server.address", "localhost"),
    ];
    // The server span of a tools/call (a tool call itself) and of the
    // protocol (tools/list): the process that serves names itself, over the
    // address it listens on.
    assert_eq!(
        dependency(Some("quote-mcp"), SERVER, call.clone()).as_deref(),
        Some("quote-mcp")
    );
    assert_eq!(
        dependency(
            Some("quote-mcp"),
            SERVER,
            vec![s("mcp.method.name", "tools/list")]
        )
        .as_deref(),
        Some("quote-mcp")
    );
    // The client span of the same call dialled the address.
    assert_eq!(
        dependency(Some("travel-agent"), CLIENT, call.clone()).as_deref(),
        Some("localhost")
    );
    // No service.name: the server span falls back to its attributes.
    assert_eq!(dependency(None, SERVER, call).as_deref(), Some("localhost"));
    // peer.service still first.
    assert_eq!(
        dependency(
            Some("quote-mcp"),
            SERVER,
            vec![
                s("mcp.method.name", "tools/call"),
                s("peer.service", "fares")
            ]
        )
        .as_deref(),
        Some("fares")
    );
}

#[test]
fn server_address_is_its_host_without_the_port() {
    for (address, host) in [
        ("fares.example", "fares.example"),
        ("Fares.Example:8443", "fares.example"),
        ("localhost:3000", "localhost"),
        ("10.1.2.3:443", "10.1.2.3"),
        ("[::1]:8080", "::1"),
        ("::1", "::1"),
        ("2001:DB8::7", "2001:db8::7"),
        ("https://Fares.example:8443/mcp", "fares.example"),
    ] {
        assert_eq!(
            client(vec![s("server.address", address)]).as_deref(),
            Some(host),
            "{address}"
        );
    }
    // An address that is no host falls through to the URL.
    assert_eq!(
        client(vec![
            s("server.address", "fares:https"),
            s("url.full", "https://fares.example/v1"),
        ])
        .as_deref(),
        Some("fares.example")
    );
}

#[test]
fn url_full_gives_its_host_lowercased_without_userinfo_or_port() {
    for (url, host) in [
        ("https://API.Fares.example:443/v1/x", "api.fares.example"),
        (
            "https://user:pa%40ss@api.fares.example/v1",
            "api.fares.example",
        ),
        (
            "https://user:p@ss@API.fares.example:8443/?q=a@b",
            "api.fares.example",
        ),
        ("http://REDACTED:REDACTED@fares.example", "fares.example"),
        ("http://fares.example?q=1", "fares.example"),
        ("http://fares.example#top", "fares.example"),
        ("//localhost/x", "localhost"),
        ("http://[2001:db8::1]:8080/x", "2001:db8::1"),
        ("grpc+tls://Quotes:50051", "quotes"),
    ] {
        assert_eq!(url_host(url).as_deref(), Some(host), "{url}");
        assert_eq!(
            client(vec![s("url.full", url)]).as_deref(),
            Some(host),
            "{url}"
        );
    }
    // The legacy attribute, when url.full is absent.
    assert_eq!(
        client(vec![s("http.url", "https://Legacy.example:8080/a")]).as_deref(),
        Some("legacy.example")
    );
    // server.address before url.full.
    assert_eq!(
        client(vec![
            s("url.full", "https://api.fares.example/v1"),
            s("server.address", "gateway.internal"),
        ])
        .as_deref(),
        Some("gateway.internal")
    );
}

#[test]
fn an_unparseable_url_gives_nothing() {
    for url in [
        "not a url",
        "api.fares.example/v1",
        "/v1/quotes",
        "https://",
        "https:///v1",
        "https://:443/v1",
        "https://user@/v1",
        "https://fares.example:https/v1",
        "https://fares example/v1",
        "https://[::1/v1",
        "https://[::1]x/v1",
        "1http://fares.example",
        "ht tp://fares.example",
        "://fares.example",
        "mailto:ops@fares.example",
    ] {
        assert_eq!(url_host(url), None, "{url}");
        assert_eq!(client(vec![s("url.full", url)]), None, "{url}");
    }
    // An unparseable url.full leaves the legacy attribute its turn.
    assert_eq!(
        client(vec![
            s("url.full", "not a url"),
            s("http.url", "http://fares.example/"),
        ])
        .as_deref(),
        Some("fares.example")
    );
}

#[test]
fn only_tool_calls_mcp_servers_and_client_spans_name_one() {
    let attrs = || {
        vec![
            s("peer.service", "fares"),
            s("url.full", "https://fares.example/"),
        ]
    };
    assert_eq!(client(attrs()).as_deref(), Some("fares"));
    assert_eq!(
        dependency(Some("a"), PRODUCER, attrs()).as_deref(),
        Some("fares")
    );
    // A tool call of any kind.
    assert_eq!(
        dependency(
            Some("a"),
            INTERNAL,
            tool(vec![s("server.address", "Fares.example:443")])
        )
        .as_deref(),
        Some("fares.example")
    );
    // Other spans, whatever they carry: an internal span, an HTTP server
    // span (its server.address is its own), a consumer, an unspecified kind.
    for kind in [0, INTERNAL, SERVER, CONSUMER] {
        assert_eq!(dependency(Some("a"), kind, attrs()), None, "kind {kind}");
    }
    // A tool call that names no server.
    assert_eq!(dependency(Some("a"), CLIENT, tool(vec![])), None);
}

#[test]
fn a_dependency_is_interned_and_survives_the_batch_being_split() {
    let spans: Vec<Span> = (1..=6)
        .map(|n| {
            let host = if n % 2 == 0 {
                "a.example"
            } else {
                "B.example:1"
            };
            span(n, CLIENT, vec![s("url.full", &format!("https://{host}/x"))])
        })
        .chain([span(7, INTERNAL, vec![])])
        .collect();
    let req = request(Some("agent"), spans);
    let batch = normalize(&req).batch;
    assert_eq!(batch.dependencies.values().len(), 2);
    let odd: Vec<u32> = (0..batch.len() as u32).filter(|r| r % 2 == 1).collect();
    let mut part = super::SpanBatch::default();
    part.extend_from(&batch, &odd);
    assert!(part.is_consistent());
    let got: Vec<Option<&str>> = (0..part.len()).map(|i| part.dependency_name(i)).collect();
    assert_eq!(got, [Some("a.example"); 3]);
    let all: Vec<Option<String>> = batch.rows().into_iter().map(|r| r.dependency).collect();
    assert_eq!(all.last(), Some(&None));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever text a span carries there, the batch and the row oracle
    /// agree, and a host found is lowercase with no port, userinfo or path.
    #[test]
    fn any_address_or_url_reads_the_same_both_ways(
        url in "[a-zA-Z0-9:/@.\\[\\]%?# -]{0,40}",
        address in "[a-zA-Z0-9:.\\[\\]-]{0,20}",
        kind in 0i32..6,
    ) {
        let got = dependencies(
            Some("svc"),
            vec![
                span(1, kind, vec![s("url.full", &url)]),
                span(2, kind, vec![s("server.address", &address), s("url.full", &url)]),
            ],
        );
        for host in got.into_iter().flatten() {
            prop_assert!(!host.is_empty());
            prop_assert!(!host.contains(['/', '@', '?', '#', ' ', '[', ']']), "{}", host);
            prop_assert_eq!(host.to_lowercase(), host.clone());
        }
    }
}
