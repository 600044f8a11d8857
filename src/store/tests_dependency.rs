//! The `dependency` column from ingest to the daily rollup: an MCP nest's
//! call takes its server's name, a tool's HTTP client child names the host
//! it called, ordinary days stay null, and parts and rollups an earlier
//! version wrote (without the column) still read, as null.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use polars::prelude::*;

use super::*;
use crate::model::{day_from_str, NANOS_PER_DAY};

const INTERNAL: i32 = 1;
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

const DAY: &str = "2026-07-29";

fn day() -> i32 {
    day_from_str(DAY).unwrap()
}

/// A span of trace `trace` on [`DAY`]: id `id`, under `parent`, from
/// `from` to `to` ms past 10:00.
fn span(
    trace: u8,
    (id, parent): (u8, Option<u8>),
    kind: i32,
    (from, to): (u64, u64),
    attrs: Vec<KeyValue>,
) -> Span {
    let base = (i64::from(day()) * NANOS_PER_DAY + 36_000_000_000_000) as u64;
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![0, 0, 0, 0, 0, 0, trace, id],
        parent_span_id: parent
            .map(|p| vec![0, 0, 0, 0, 0, 0, trace, p])
            .unwrap_or_default(),
        name: format!("span {id}"),
        kind,
        start_time_unix_nano: base + from * 1_000_000,
        end_time_unix_nano: base + to * 1_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

/// One request of `(service.name, spans)` resources.
fn request(resources: Vec<(&str, Vec<Span>)>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: resources
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![s("service.name", service)],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

fn genai_tool(tool: &str) -> Vec<KeyValue> {
    vec![
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", tool),
    ]
}

fn mcp_call(tool: &str, extra: Vec<KeyValue>) -> Vec<KeyValue> {
    let mut attrs = vec![
        s("mcp.method.name", "tools/call"),
        s("gen_ai.tool.name", tool),
    ];
    attrs.extend(extra);
    attrs
}

/// Store `requests` (one flush), and read the rollup back.
fn rollup_of(requests: &[ExportTraceServiceRequest]) -> DataFrame {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), super::tests::quick()).unwrap();
    for r in requests {
        store
            .submit(crate::ingest::prepare(r))
            .unwrap()
            .wait()
            .unwrap();
    }
    store.flush().unwrap();
    store.close().unwrap();
    read_rollup(dir.path())
}

fn read_rollup(dir: &std::path::Path) -> DataFrame {
    Reader::open(dir)
        .unwrap()
        .tool_daily()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap()
}

/// (tool, service, calls, dependency) of each rollup row.
fn rows(df: &DataFrame) -> Vec<(String, String, i64, Option<String>)> {
    let strs = |n: &str| df.column(n).unwrap().str().unwrap().clone();
    let (tool, service) = (strs("tool_name"), strs("service_name"));
    let dependency = df
        .column("dependency")
        .map(|c| c.str().unwrap().clone())
        .unwrap_or_else(|_| StringChunked::full_null("dependency".into(), df.height()));
    let calls = df.column("calls").unwrap().cast(&DataType::Int64).unwrap();
    let calls = calls.i64().unwrap();
    (0..df.height())
        .map(|i| {
            (
                tool.get(i).unwrap().to_string(),
                service.get(i).unwrap().to_string(),
                calls.get(i).unwrap(),
                dependency.get(i).map(str::to_string),
            )
        })
        .collect()
}

fn row(
    tool: &str,
    service: &str,
    calls: i64,
    dep: Option<&str>,
) -> (String, String, i64, Option<String>) {
    (tool.into(), service.into(), calls, dep.map(str::to_string))
}

#[test]
fn an_mcp_nest_counts_once_with_its_servers_own_name() {
    // The framework's tool span → the MCP client span, which dialled
    // "localhost" → the MCP server span, whose process is "quote-mcp".
    let agent = vec![
        span(1, (1, None), INTERNAL, (0, 100), genai_tool("quote_fare")),
        span(
            1,
            (2, Some(1)),
            CLIENT,
            (5, 95),
            mcp_call("quote_fare", vec![s("server.address", "localhost")]),
        ),
    ];
    let server = vec![span(
        1,
        (3, Some(2)),
        SERVER,
        (10, 90),
        mcp_call("quote_fare", vec![]),
    )];
    let df = rollup_of(&[request(vec![
        ("travel-agent", agent),
        ("quote-mcp", server),
    ])]);
    assert_eq!(
        rows(&df),
        [row("quote_fare", "travel-agent", 1, Some("quote-mcp"))]
    );
    assert_eq!(
        rollup::tool_dependencies(&df),
        [(("quote_fare".to_string(), day()), "quote-mcp".to_string())].into()
    );
}

#[test]
fn an_mcp_client_without_its_server_span_names_the_address_it_dialled() {
    let agent = vec![
        span(1, (1, None), INTERNAL, (0, 100), genai_tool("quote_fare")),
        span(
            1,
            (2, Some(1)),
            CLIENT,
            (5, 95),
            mcp_call(
                "quote_fare",
                vec![s("server.address", "Quotes.internal:8000")],
            ),
        ),
    ];
    let df = rollup_of(&[request(vec![("travel-agent", agent)])]);
    assert_eq!(
        rows(&df),
        [row(
            "quote_fare",
            "travel-agent",
            1,
            Some("quotes.internal")
        )]
    );
}

#[test]
fn a_tool_takes_the_host_its_http_client_child_called() {
    let http = |trace: u8, id: u8, parent: u8, url: &str| {
        span(
            trace,
            (id, Some(parent)),
            CLIENT,
            (10, 50),
            vec![s("http.request.method", "GET"), s("url.full", url)],
        )
    };
    let spans = vec![
        // One call, one HTTP child.
        span(1, (1, None), INTERNAL, (0, 100), genai_tool("search_fares")),
        http(1, 2, 1, "https://API.Fares.example:443/v1/x"),
        // Two children, one host: that host.
        span(2, (1, None), INTERNAL, (0, 100), genai_tool("book_fare")),
        http(2, 2, 1, "https://book.example/a"),
        http(2, 3, 1, "https://Book.example:443/b"),
        // Two hosts: none of them.
        span(
            3,
            (1, None),
            INTERNAL,
            (0, 100),
            genai_tool("compare_fares"),
        ),
        http(3, 2, 1, "https://a.example/"),
        http(3, 3, 1, "https://b.example/"),
        // A tool that names its own server keeps it.
        span(
            4,
            (1, None),
            INTERNAL,
            (0, 100),
            [
                genai_tool("get_weather"),
                vec![s("peer.service", "weather")],
            ]
            .concat(),
        ),
        http(4, 2, 1, "https://weather.example/"),
        // A grandchild is not the tool's call.
        span(5, (1, None), INTERNAL, (0, 100), genai_tool("fetch_page")),
        span(5, (2, Some(1)), INTERNAL, (5, 90), vec![]),
        http(5, 3, 2, "https://pages.example/"),
    ];
    let df = rollup_of(&[request(vec![("travel-agent", spans)])]);
    assert_eq!(
        rows(&df),
        [
            row("book_fare", "travel-agent", 1, Some("book.example")),
            row("compare_fares", "travel-agent", 1, None),
            row("fetch_page", "travel-agent", 1, None),
            row("get_weather", "travel-agent", 1, Some("weather")),
            row("search_fares", "travel-agent", 1, Some("api.fares.example")),
        ]
    );
}

#[test]
fn a_day_without_servers_has_a_null_dependency() {
    let spans = (1..=3)
        .map(|t| span(t, (1, None), INTERNAL, (0, 10), genai_tool("search_fares")))
        .collect();
    let df = rollup_of(&[request(vec![("travel-agent", spans)])]);
    assert_eq!(rows(&df), [row("search_fares", "travel-agent", 3, None)]);
    assert_eq!(df.column("dependency").unwrap().dtype(), &DataType::String);
    assert!(rollup::tool_dependencies(&df).is_empty());
}

#[test]
fn tool_dependencies_picks_the_dependency_with_the_most_errors() {
    let df = df! {
        "tool_name" => ["quote", "quote", "quote", "quote", "book", "book", "book"],
        "service_name" => ["a", "b", "c", "d", "a", "b", "c"],
        "day" => ["2026-07-29", "2026-07-29", "2026-07-29", "2026-07-30", "2026-07-29", "2026-07-29", "2026-07-29"],
        "calls" => [10i64, 3, 4, 5, 8, 8, 2],
        "errors" => [2i64, 2, 1, 0, 1, 1, 0],
        "dependency" => [Some("x"), Some("y"), Some("y"), None, Some("q"), Some("p"), None],
    }
    .unwrap();
    let deps = rollup::tool_dependencies(&df);
    let d = day();
    // quote: y has 3 errors over two services, x 2; book: a tie on errors
    // and calls goes to the first name; the day without one is left out.
    assert_eq!(
        deps,
        [
            (("book".to_string(), d), "p".to_string()),
            (("quote".to_string(), d), "y".to_string()),
        ]
        .into()
    );
    // Ties on errors go to the most calls.
    let df = df! {
        "tool_name" => ["t", "t"],
        "service_name" => ["a", "b"],
        "day" => ["2026-07-29", "2026-07-29"],
        "calls" => [4i64, 9],
        "errors" => [1i64, 1],
        "dependency" => ["a.example", "b.example"],
    }
    .unwrap();
    assert_eq!(
        rollup::tool_dependencies(&df)
            .get(&("t".to_string(), d))
            .map(String::as_str),
        Some("b.example")
    );
}

/// A span part as an earlier version wrote it: the columns before
/// `dependency`.
fn old_part(layout: &Layout, day: i32, req: &ExportTraceServiceRequest) {
    let rows = crate::ingest::rows::normalize_rows(req);
    let refs: Vec<&crate::model::SpanRow> = rows.iter().collect();
    let mut df = frame::rows_to_frame(&refs)
        .unwrap()
        .drop("dependency")
        .unwrap();
    let dir = layout.day_dir(day);
    std::fs::create_dir_all(&dir).unwrap();
    parquet::write_file(&dir.join("part-0000000000000001-old.parquet"), &mut df).unwrap();
}

#[test]
fn parts_and_rollups_without_the_column_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    // A day of parts without the column, even with an MCP nest and an
    // HTTP child (the rollup's slower paths).
    let spans = vec![
        span(1, (1, None), INTERNAL, (0, 100), genai_tool("quote_fare")),
        span(
            1,
            (2, Some(1)),
            CLIENT,
            (5, 95),
            mcp_call("quote_fare", vec![]),
        ),
        span(2, (1, None), INTERNAL, (0, 100), genai_tool("search_fares")),
        span(
            2,
            (2, Some(1)),
            CLIENT,
            (5, 95),
            vec![s("url.full", "https://a.example/")],
        ),
    ];
    let req = request(vec![("travel-agent", spans)]);
    old_part(&layout, day(), &req);
    let spans = Reader::new(Arc::clone(&catalog))
        .all_spans()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(spans.height(), 4);
    assert_eq!(spans.column("dependency").unwrap().null_count(), 4);
    rollup::refresh(&catalog, &[day()]).unwrap();
    let df = read_rollup(dir.path());
    assert_eq!(
        rows(&df),
        [
            row("quote_fare", "travel-agent", 1, None),
            row("search_fares", "travel-agent", 1, None),
        ]
    );
    // A rollup an earlier version wrote, without the column: it reads,
    // names no dependency, and a refresh of another day adds to it.
    let mut old = df.drop("dependency").unwrap();
    rollup_set::publish(&catalog, Some(&mut old), None).unwrap();
    let df = read_rollup(dir.path());
    assert!(df.column("dependency").is_err());
    assert!(rollup::tool_dependencies(&df).is_empty());
    let next = day() + 1;
    let base = i64::from(next) * NANOS_PER_DAY;
    let mut fresh = span(3, (1, None), INTERNAL, (0, 10), genai_tool("quote_fare"));
    fresh.attributes.push(s("peer.service", "quotes"));
    fresh.start_time_unix_nano = base as u64;
    fresh.end_time_unix_nano = base as u64 + 1_000;
    let store = Store::open(dir.path(), super::tests::quick()).unwrap();
    store
        .submit(crate::ingest::prepare(&request(vec![(
            "travel-agent",
            vec![fresh],
        )])))
        .unwrap()
        .wait()
        .unwrap();
    store.flush().unwrap();
    store.close().unwrap();
    let df = read_rollup(dir.path());
    let deps: Vec<Option<&str>> = df
        .column("dependency")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(df.height(), 3);
    assert_eq!(deps, [None, None, Some("quotes")]);
    assert_eq!(
        rollup::tool_dependencies(&df),
        [(("quote_fare".to_string(), next), "quotes".to_string())].into()
    );
}

#[test]
fn the_mcp_fixtures_calls_depend_on_the_fare_server() {
    // pydantic-ai's tool span → fastmcp's client span → the MCP SDK's
    // client span → the fare server's span (service.name "fare-mcp"),
    // recorded from a real run (tests/it/conformance.rs replays it).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/frameworks/pydantic-ai-mcp-storm.json");
    let body = std::fs::read(path).unwrap();
    let req = crate::ingest::decode::decode(&body, crate::ingest::Format::Json).unwrap();
    let df = rollup_of(&[req]);
    let lookups: Vec<_> = rows(&df)
        .into_iter()
        .filter(|r| r.0 == "lookup_fare")
        .collect();
    assert_eq!(
        lookups,
        [row(
            "lookup_fare",
            "pydantic-ai-mcp-storm",
            8,
            Some("fare-mcp")
        )]
    );
}
