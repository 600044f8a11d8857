//! Control flow in the daily rollup (docs/detection.md §3): calls
//! `interrupted` and `cancelled` count in `calls` and in their own columns,
//! never in `errors`, `error_rate` or the classes' failures; a rollup an
//! earlier version wrote (without those columns) still reads, as none.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::Event, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};
use polars::prelude::*;

use super::*;
use crate::model::{day_from_str, ErrorClass, NANOS_PER_DAY};

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// A `book_flight` call (GenAI) on `day`, the `n`th, ending with `status`
/// and, when given, an exception of type `exception`.
fn call(day: i32, n: u8, status: StatusCode, exception: Option<&str>) -> Span {
    let base = (i64::from(day) * NANOS_PER_DAY + 36_000_000_000_000) as u64;
    Span {
        trace_id: vec![n; 16],
        span_id: vec![1, 0, 0, 0, 0, 0, 0, n],
        name: "execute_tool book_flight".into(),
        kind: 1,
        start_time_unix_nano: base + u64::from(n) * 1_000_000,
        end_time_unix_nano: base + u64::from(n) * 1_000_000 + 500_000,
        attributes: vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "book_flight"),
        ],
        status: Some(Status {
            code: status as i32,
            message: String::new(),
        }),
        events: exception
            .map(|t| Event {
                name: "exception".into(),
                attributes: vec![s("exception.type", t)],
                ..Default::default()
            })
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

fn store(dir: &std::path::Path, spans: Vec<Span>) {
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![s("service.name", "booking-agent")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let store = Store::open(dir, super::tests::quick()).unwrap();
    store
        .submit(crate::ingest::prepare(&req))
        .unwrap()
        .wait()
        .unwrap();
    store.flush().unwrap();
    store.close().unwrap();
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

/// A day of five calls: ok, a 503, a LangGraph interrupt recorded on an OK
/// span (as OpenInference does), a NodeInterrupt on an ERROR span, a
/// cancellation.
fn day_of_five(day: i32) -> Vec<Span> {
    vec![
        call(day, 1, StatusCode::Ok, None),
        call(day, 2, StatusCode::Error, Some("HTTPError: HTTP 503")),
        call(
            day,
            3,
            StatusCode::Ok,
            Some("langgraph.errors.GraphInterrupt"),
        ),
        call(
            day,
            4,
            StatusCode::Error,
            Some("langgraph.errors.NodeInterrupt"),
        ),
        call(day, 5, StatusCode::Error, Some("CancelledError")),
    ]
}

#[test]
fn control_flow_counts_apart_from_failures_in_the_rollup() {
    let dir = tempfile::tempdir().unwrap();
    let day = day_from_str("2026-07-29").unwrap();
    store(dir.path(), day_of_five(day));
    let df = read_rollup(dir.path());
    let int = |name: &str| {
        df.column(name)
            .unwrap()
            .cast(&DataType::Int64)
            .unwrap()
            .i64()
            .unwrap()
            .get(0)
    };
    assert_eq!(df.height(), 1);
    assert_eq!(int("calls"), Some(5));
    assert_eq!(int("errors"), Some(1));
    assert_eq!(int("unavailable"), Some(1));
    assert_eq!(int("interrupted"), Some(2));
    assert_eq!(int("cancelled"), Some(1));
    assert_eq!(int("unknown"), Some(0));
    assert_eq!(int("retryable_errors"), Some(1));
    assert_eq!(int("deterministic_errors"), Some(0));
    let rate = df.column("error_rate").unwrap().f64().unwrap().get(0);
    assert_eq!(rate, Some(0.2));
    assert_eq!(int("successes"), Some(1));
    for class in ErrorClass::failures() {
        let want = i64::from(class == ErrorClass::Unavailable);
        assert_eq!(int(class.as_str()), Some(want), "{class:?}");
    }
}

/// A column's values as integers (null where the row has none).
fn ints(df: &DataFrame, name: &str) -> Vec<Option<i64>> {
    df.column(name)
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .collect()
}

#[test]
fn a_rollup_without_the_control_flow_columns_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let day = day_from_str("2026-07-29").unwrap();
    store(dir.path(), day_of_five(day));
    // As an earlier version wrote it: no `interrupted`, no `cancelled`.
    let mut old = read_rollup(dir.path()).drop_many(["interrupted", "cancelled"]);
    rollup_set::publish(&catalog, Some(&mut old), None).unwrap();
    let df = read_rollup(dir.path());
    assert!(df.column("interrupted").is_err());
    assert_eq!(ints(&df, "calls"), [Some(5)]);
    // A refresh of the next day adds to it: the old row reads none, the
    // new one its own.
    store(dir.path(), day_of_five(day + 1));
    let df = read_rollup(dir.path());
    // (`detect::daily_rows` reads a null as none: detect's tests.)
    assert_eq!(ints(&df, "interrupted"), [None, Some(2)]);
    assert_eq!(ints(&df, "cancelled"), [None, Some(1)]);
}
