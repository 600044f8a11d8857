//! Model calls from model spans (detection.md §1, "Model spans"): one
//! model call made of nested model spans counts once, with its tokens once.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};

use super::calls::collect_table;
use super::chains::{rounds, Attempt};
use super::driver::{drive, CostParams, Driver, ModelCall};
use crate::spans::SpanTable;

const BASE_NS: u64 = 1_780_000_000_000_000_000;

pub(crate) fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

pub(crate) fn i(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

/// Span `id` under `parent`, from `from` to `to` ms.
pub(crate) fn span(
    id: u8,
    parent: Option<u8>,
    (from, to): (u64, u64),
    attrs: Vec<KeyValue>,
) -> Span {
    Span {
        trace_id: vec![7; 16],
        span_id: vec![0, 0, 0, 0, 0, 0, 7, id],
        parent_span_id: parent
            .map(|p| vec![0, 0, 0, 0, 0, 0, 7, p])
            .unwrap_or_default(),
        name: format!("span {id}"),
        kind: 1,
        start_time_unix_nano: BASE_NS + from * 1_000_000,
        end_time_unix_nano: BASE_NS + to * 1_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

pub(crate) fn failing_tool(id: u8, at: u64) -> Span {
    let mut sp = span(
        id,
        Some(1),
        (at, at + 100),
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "search_flights"),
            s("error.type", "HTTP 503"),
        ],
    );
    sp.status = Some(Status {
        code: StatusCode::Error as i32,
        ..Default::default()
    });
    sp
}

/// A GenAI `chat` span (with tokens when `outer`) and an OpenInference
/// `LLM` child inside it (always with tokens): one model call.
fn nested_call(id: u8, at: u64, outer: Option<(i64, i64)>) -> Vec<Span> {
    let mut chat = vec![
        s("gen_ai.operation.name", "chat"),
        s("gen_ai.request.model", "gpt-4o"),
    ];
    if let Some((a, b)) = outer {
        chat.extend([
            i("gen_ai.usage.input_tokens", a),
            i("gen_ai.usage.output_tokens", b),
        ]);
    }
    vec![
        span(id, Some(1), (at, at + 300), chat),
        span(
            id + 1,
            Some(id),
            (at + 10, at + 290),
            vec![
                s("openinference.span.kind", "LLM"),
                s("llm.model_name", "gpt-4o-2024-08-06"),
                i("llm.token_count.prompt", 1000),
                i("llm.token_count.completion", 40),
            ],
        ),
    ]
}

/// The frame of one request of `spans` (service `travel-agent`).
pub(crate) fn frame(spans: Vec<Span>) -> polars::prelude::DataFrame {
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![s("service.name", "travel-agent")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let rows = crate::ingest::rows::normalize_rows(&req);
    let refs: Vec<&crate::model::SpanRow> = rows.iter().collect();
    crate::store::frame::rows_to_frame(&refs).unwrap()
}

pub(crate) fn table(spans: Vec<Span>) -> SpanTable {
    SpanTable::from_frame(&frame(spans)).unwrap()
}

fn attempts(starts: &[u64]) -> Vec<Attempt<'static>> {
    starts
        .iter()
        .map(|&s| Attempt {
            class: crate::model::ErrorClass::Unavailable,
            args: None,
            result: None,
            start_ns: (BASE_NS + s * 1_000_000) as i64,
            end_ns: (BASE_NS + (s + 100) * 1_000_000) as i64,
            retry_after_ms: None,
            wait_from_ns: None,
        })
        .collect()
}

/// The model calls of the one turn, and the driver of the chain of
/// attempts at 0, 1000 and 2000 ms.
fn calls_and_driver(spans: Vec<Span>) -> (Vec<ModelCall>, Driver, i64, i64) {
    let t = table(spans);
    let tc = collect_table(&t, i64::MAX);
    assert_eq!(tc.models.len(), 1, "{:?}", tc.models);
    let models = tc.models.into_values().next().unwrap();
    let d = drive(
        &rounds(&attempts(&[0, 1000, 2000])),
        &models,
        &CostParams::default(),
    );
    (models, d.driver, d.input_tokens, d.output_tokens)
}

pub(crate) fn agent() -> Span {
    span(
        1,
        None,
        (0, 3000),
        vec![
            s("gen_ai.operation.name", "invoke_agent"),
            s("gen_ai.agent.name", "travel"),
        ],
    )
}

#[test]
fn a_genai_chat_span_with_an_openinference_llm_child_is_one_model_call() {
    // Each chat span records its own tokens: they count, the child's not.
    let mut spans = vec![
        agent(),
        failing_tool(2, 0),
        failing_tool(3, 1000),
        failing_tool(4, 2000),
    ];
    spans.extend(nested_call(10, 200, Some((900, 30))));
    spans.extend(nested_call(20, 1200, Some((950, 35))));
    let (models, driver, input, output) = calls_and_driver(spans);
    assert_eq!(models.len(), 2, "{models:?}");
    assert_eq!(driver, Driver::Model);
    assert_eq!((input, output), (900 + 950, 30 + 35));
    assert_eq!(models[0].model.as_deref(), Some("gpt-4o"));

    // The outer span without tokens: the largest its model-span
    // descendants recorded, once.
    let mut spans = vec![
        agent(),
        failing_tool(2, 0),
        failing_tool(3, 1000),
        failing_tool(4, 2000),
    ];
    spans.extend(nested_call(10, 200, None));
    spans.extend(nested_call(20, 1200, None));
    let (models, driver, input, output) = calls_and_driver(spans);
    assert_eq!(models.len(), 2, "{models:?}");
    assert_eq!(driver, Driver::Model);
    assert_eq!((input, output), (2000, 80));
}

#[test]
fn a_model_span_under_a_model_span_is_no_call_of_its_own_at_any_depth() {
    // chat → (a plain span) → LLM → LLM: one call; its tokens (output only
    // on the outer) the outer's output and the largest input below.
    let mut spans = vec![agent(), failing_tool(2, 0), failing_tool(3, 1000)];
    spans.push(span(
        10,
        Some(1),
        (200, 800),
        vec![
            s("gen_ai.operation.name", "chat"),
            s("gen_ai.request.model", "gpt-4o"),
            i("gen_ai.usage.output_tokens", 7),
        ],
    ));
    spans.push(span(
        11,
        Some(10),
        (210, 790),
        vec![s("http.method", "POST")],
    ));
    spans.push(span(
        12,
        Some(11),
        (220, 780),
        vec![
            s("openinference.span.kind", "LLM"),
            i("llm.token_count.prompt", 300),
            i("llm.token_count.completion", 9),
        ],
    ));
    spans.push(span(
        13,
        Some(12),
        (230, 770),
        vec![
            s("openinference.span.kind", "LLM"),
            i("llm.token_count.prompt", 500),
        ],
    ));
    let t = table(spans);
    let tc = collect_table(&t, i64::MAX);
    let models: Vec<&ModelCall> = tc.models.values().flatten().collect();
    assert_eq!(models.len(), 1, "{models:?}");
    assert_eq!(
        (models[0].input_tokens, models[0].output_tokens),
        (Some(500), Some(7))
    );
}
