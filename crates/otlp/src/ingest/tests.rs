//! Tests of the decoding and normalization of export requests.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::Event, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};
use proptest::prelude::*;

use super::*;
use crate::model::{ErrorClass, ToolConvention};

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}
fn s(key: &str, v: &str) -> KeyValue {
    kv(key, Value::StringValue(v.into()))
}
fn i(key: &str, v: i64) -> KeyValue {
    kv(key, Value::IntValue(v))
}

fn error_status(msg: &str) -> Option<Status> {
    Some(Status {
        code: StatusCode::Error as i32,
        message: msg.into(),
    })
}

/// One classification case: attributes, status message (an ERROR status when
/// `Some`), exception type, expected class.
fn check(
    attrs: Vec<KeyValue>,
    status: Option<&str>,
    exception: Option<&str>,
    expected: ErrorClass,
) {
    let events: Vec<Event> = exception
        .map(|t| Event {
            name: "exception".into(),
            attributes: vec![s("exception.type", t)],
            ..Default::default()
        })
        .into_iter()
        .collect();
    let st = status.and_then(error_status);
    let got = classify::classify(&attrs, st.as_ref(), &events).class;
    assert_eq!(
        got, expected,
        "attrs {attrs:?} status {status:?} exception {exception:?}"
    );
}

#[test]
fn http_statuses_map_to_classes() {
    for (code, class) in [
        (429, ErrorClass::RateLimited),
        (408, ErrorClass::Timeout),
        (502, ErrorClass::Unavailable),
        (503, ErrorClass::Unavailable),
        (504, ErrorClass::Unavailable),
        (500, ErrorClass::ServerError),
        (501, ErrorClass::ServerError),
        (401, ErrorClass::Auth),
        (403, ErrorClass::Auth),
        (404, ErrorClass::NotFound),
        (410, ErrorClass::NotFound),
        (400, ErrorClass::InvalidRequest),
        (409, ErrorClass::InvalidRequest),
        (413, ErrorClass::InvalidRequest),
        (422, ErrorClass::InvalidRequest),
        (418, ErrorClass::ClientError),
        (200, ErrorClass::Ok),
    ] {
        check(
            vec![i("http.response.status_code", code)],
            None,
            None,
            class,
        );
        // The legacy key and a string value decide the same way.
        check(
            vec![s("http.status_code", &code.to_string())],
            None,
            None,
            class,
        );
    }
}

#[test]
fn grpc_statuses_map_to_classes() {
    for (code, class) in [
        (8, ErrorClass::RateLimited),
        (14, ErrorClass::Unavailable),
        (4, ErrorClass::Timeout),
        (16, ErrorClass::Auth),
        (7, ErrorClass::Auth),
        (5, ErrorClass::NotFound),
        (3, ErrorClass::InvalidRequest),
        (9, ErrorClass::InvalidRequest),
        (11, ErrorClass::InvalidRequest),
        (13, ErrorClass::ServerError),
        (2, ErrorClass::ServerError),
        (0, ErrorClass::Ok),
    ] {
        check(vec![i("rpc.grpc.status_code", code)], None, None, class);
    }
}

#[test]
fn names_and_messages_map_to_classes() {
    let e = |t: &str| vec![s("error.type", t)];
    check(e("TimeoutError"), Some(""), None, ErrorClass::Timeout);
    check(e("DeadlineExceeded"), Some(""), None, ErrorClass::Timeout);
    check(
        e("ConnectionResetError"),
        Some(""),
        None,
        ErrorClass::Network,
    );
    check(
        vec![],
        Some("TypeError: fetch failed"),
        None,
        ErrorClass::Network,
    );
    check(
        vec![],
        Some("ECONNREFUSED 10.0.0.1:443"),
        None,
        ErrorClass::Network,
    );
    check(e("RateLimitError"), Some(""), None, ErrorClass::RateLimited);
    check(
        vec![],
        Some("Too Many Requests"),
        None,
        ErrorClass::RateLimited,
    );
    check(
        vec![],
        Some("quota exceeded for project"),
        None,
        ErrorClass::RateLimited,
    );
    check(
        e("ValidationError"),
        Some(""),
        None,
        ErrorClass::InvalidRequest,
    );
    check(
        e("InvalidAirportCode"),
        Some(""),
        None,
        ErrorClass::InvalidRequest,
    );
    check(
        vec![],
        Some("blocked by content policy"),
        None,
        ErrorClass::Policy,
    );
    check(
        vec![],
        Some("moderation rejected the prompt"),
        None,
        ErrorClass::Policy,
    );
    check(
        vec![],
        Some(""),
        Some("httpx.ReadTimeout"),
        ErrorClass::Timeout,
    );
    // error.type holding the status code itself.
    check(e("503"), None, None, ErrorClass::Unavailable);
    check(e("429"), None, None, ErrorClass::RateLimited);
    // An ERROR span nothing explains.
    check(vec![], Some("something broke"), None, ErrorClass::Unknown);
    check(e("WeirdThing"), None, None, ErrorClass::Unknown);
    // Nothing failed.
    check(vec![], None, None, ErrorClass::Ok);
    // A handled exception on a span that did not fail is not an error.
    check(vec![], None, Some("TimeoutError"), ErrorClass::Ok);
}

#[test]
fn the_first_source_that_decides_wins() {
    // HTTP beats gRPC beats words.
    check(
        vec![
            i("http.response.status_code", 429),
            i("rpc.grpc.status_code", 14),
        ],
        Some("timeout"),
        None,
        ErrorClass::RateLimited,
    );
    check(
        vec![
            i("rpc.grpc.status_code", 14),
            s("error.type", "TimeoutError"),
        ],
        Some(""),
        None,
        ErrorClass::Unavailable,
    );
    // A 2xx decides nothing: the words do.
    check(
        vec![
            i("http.response.status_code", 200),
            s("error.type", "TimeoutError"),
        ],
        Some(""),
        None,
        ErrorClass::Timeout,
    );
}

#[test]
fn tool_results_that_say_they_failed() {
    // A tool call's result (the GenAI convention reads it).
    let r = |v: &str| {
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "search"),
            s("gen_ai.tool.call.result", v),
        ]
    };
    check(
        r(r#"{"isError": true, "content": []}"#),
        None,
        None,
        ErrorClass::Unknown,
    );
    check(r(r#"{"ok": false}"#), None, None, ErrorClass::Unknown);
    check(
        r(r#"{"success": false, "status": 503}"#),
        None,
        None,
        ErrorClass::Unavailable,
    );
    check(
        r(r#"{"error": {"status": 429, "message": "slow down"}}"#),
        None,
        None,
        ErrorClass::RateLimited,
    );
    check(
        r(r#"{"error": "request timed out"}"#),
        None,
        None,
        ErrorClass::Timeout,
    );
    check(
        r(r#"{"error": null, "ok": true}"#),
        None,
        None,
        ErrorClass::Ok,
    );
    check(r(r#"{"error": ""}"#), None, None, ErrorClass::Ok);
    // A success's error count or list is no failure.
    check(
        r(r#"{"rate": 1.08, "error": 0}"#),
        None,
        None,
        ErrorClass::Ok,
    );
    check(
        r(r#"{"amount": 10.8, "error": [], "warnings": []}"#),
        None,
        None,
        ErrorClass::Ok,
    );
    check(
        r(r#"{"errors": 2, "error": [{"code": 429}]}"#),
        None,
        None,
        ErrorClass::Unknown,
    );
    check(r("plain text result"), None, None, ErrorClass::Ok);
    // The same result on a span no convention marks as a call: not read.
    check(
        vec![s("gen_ai.tool.call.result", r#"{"ok": false}"#)],
        None,
        None,
        ErrorClass::Ok,
    );
}

#[test]
fn seven_names_for_one_429_are_one_class() {
    // The seed's lesson: the class is the same whatever the name; the name is kept.
    for name in [
        "extract_failed",
        "FATAL",
        "fetch failed",
        "igJson unparsable json",
        "all sources failed",
    ] {
        let attrs = vec![i("http.response.status_code", 429), s("error.type", name)];
        let st = error_status("x");
        let v = classify::classify(&attrs, st.as_ref(), &[]);
        assert_eq!(v.class, ErrorClass::RateLimited);
        assert_eq!(v.error_type.as_deref(), Some(name));
    }
}

/// Tool detection: attributes → (name, convention) or none.
fn tool(span_name: &str, attrs: Vec<KeyValue>, expected: Option<(&str, ToolConvention)>) {
    let got = toolcall::detect(span_name, &attrs).map(|t| (t.name, t.convention));
    assert_eq!(
        got,
        expected.map(|(n, c)| (n.to_string(), c)),
        "{span_name} {attrs:?}"
    );
}

#[test]
fn tool_calls_are_recognised_in_every_convention() {
    use ToolConvention::*;
    tool(
        "execute_tool search_flights",
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "search_flights"),
        ],
        Some(("search_flights", GenAi)),
    );
    tool(
        "execute_tool search_flights",
        vec![s("gen_ai.operation.name", "execute_tool")],
        Some(("search_flights", GenAi)),
    );
    tool(
        "weather",
        vec![
            s("openinference.span.kind", "TOOL"),
            s("tool.name", "get_weather"),
        ],
        Some(("get_weather", OpenInference)),
    );
    tool(
        "x.tool",
        vec![
            s("traceloop.span.kind", "tool"),
            s("traceloop.entity.name", "lookup"),
        ],
        Some(("lookup", OpenLlmetry)),
    );
    tool(
        "ai.toolCall",
        vec![
            s("ai.toolCall.name", "quote_price"),
            s("ai.toolCall.id", "c1"),
        ],
        Some(("quote_price", VercelAi)),
    );
    tool(
        "tools/call book",
        vec![
            s("mcp.method.name", "tools/call"),
            s("gen_ai.tool.name", "book"),
        ],
        Some(("book", Mcp)),
    );
    tool(
        "something",
        vec![s("tool.name", "fetch_page")],
        Some(("fetch_page", Fallback)),
    );
    tool(
        "chat gpt-4o",
        vec![s("gen_ai.operation.name", "chat")],
        None,
    );
    tool(
        "invoke_agent",
        vec![s("gen_ai.operation.name", "invoke_agent")],
        None,
    );
    // First match wins: a GenAI span that also carries tool.name keeps the GenAI name.
    tool(
        "execute_tool a",
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "a"),
            s("tool.name", "b"),
        ],
        Some(("a", GenAi)),
    );
}

#[test]
fn arguments_hash_ignores_key_order_and_whitespace() {
    let a = toolcall::args_hash(r#"{"from":"LIS","to":"BER"}"#);
    let b = toolcall::args_hash(r#"{ "to": "BER",  "from": "LIS" }"#);
    let c = toolcall::args_hash(r#"{"from":"LIS","to":"OPO"}"#);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 32);
}

#[test]
fn session_comes_from_the_first_key_present_span_before_resource() {
    let span = vec![
        s("gen_ai.conversation.id", "conv-1"),
        s("langfuse.session.id", "lf"),
    ];
    assert_eq!(toolcall::session_id(&span, &[]).as_deref(), Some("conv-1"));
    let resource = vec![s("session.id", "res")];
    assert_eq!(toolcall::session_id(&[], &resource).as_deref(), Some("res"));
    assert_eq!(
        toolcall::session_id(&[s("session.id", "own")], &resource).as_deref(),
        Some("own")
    );
}

fn span(trace: Vec<u8>, id: Vec<u8>, parent: Vec<u8>, attrs: Vec<KeyValue>) -> Span {
    Span {
        trace_id: trace,
        span_id: id,
        parent_span_id: parent,
        name: "execute_tool search_flights".into(),
        kind: 1,
        start_time_unix_nano: 1_785_354_394_532_000_000,
        end_time_unix_nano: 1_785_354_399_332_000_000,
        attributes: attrs,
        status: error_status("Service Unavailable"),
        ..Default::default()
    }
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
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
    }
}

#[test]
fn invalid_ids_are_rejected_one_by_one() {
    let good = span(vec![1; 16], vec![2; 8], vec![], vec![]);
    let cases = [
        span(vec![1; 16], vec![5; 8], vec![5; 8], vec![]),
        span(vec![1; 15], vec![2; 8], vec![], vec![]),
        span(vec![0; 16], vec![2; 8], vec![], vec![]),
        span(vec![1; 16], vec![2; 7], vec![], vec![]),
        span(vec![1; 16], vec![0; 8], vec![], vec![]),
        span(vec![1; 16], vec![3; 8], vec![4; 3], vec![]),
    ];
    let mut spans = vec![good];
    spans.extend(cases);
    let n = normalize(&request(spans));
    assert_eq!(n.spans(), 1);
    assert_eq!(n.rejected, 6);
    let msg = n.reject_message().unwrap();
    assert!(
        msg.contains("span 0505050505050505 names itself as its parent"),
        "{msg}"
    );
    assert!(msg.contains("trace id must be 16 bytes, got 15"), "{msg}");
    assert!(msg.contains("span id is all zero"), "{msg}");
}

#[test]
fn a_row_carries_everything_the_span_said() {
    let attrs = vec![
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "search_flights"),
        s("gen_ai.tool.call.id", "call_7"),
        s("gen_ai.tool.call.arguments", r#"{"from":"LIS"}"#),
        s("session.id", "sess-bruno-0729-b"),
        i("http.response.status_code", 503),
        s("error.type", "503"),
    ];
    let n = normalize(&request(vec![span(
        vec![0xab; 16],
        vec![0xcd; 8],
        vec![0xef; 8],
        attrs,
    )]));
    let r = &n.batch.row(0);
    assert_eq!(r.trace_id, "ab".repeat(16));
    assert_eq!(r.parent_span_id.as_deref(), Some("efefefefefefefef"));
    assert_eq!(&*r.service_name, "travel-agent");
    assert!(r.is_tool_call);
    assert_eq!(r.tool_name.as_deref(), Some("search_flights"));
    assert_eq!(r.tool_call_id.as_deref(), Some("call_7"));
    assert_eq!(r.session_id.as_deref(), Some("sess-bruno-0729-b"));
    assert_eq!(r.error_class, ErrorClass::Unavailable);
    assert_eq!(r.retryable, Some(true));
    assert_eq!(r.http_status, Some(503));
    assert_eq!(r.duration_ns, 4_800_000_000);
    assert_eq!(r.status_code, "error");
    let attrs: serde_json::Value = serde_json::from_str(&r.attributes).unwrap();
    assert_eq!(attrs["http.response.status_code"], 503);
}

#[test]
fn json_accepts_spec_form_and_lenient_form_alike() {
    let spec = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
      "scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174",
      "parentSpanId":"","name":"n","kind":3,"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":1544712661000000000,
      "attributes":[{"key":"http.response.status_code","value":{"intValue":"429"}},{"key":"d","value":{"doubleValue":1.5}}],
      "status":{"code":2,"message":"x"}}]}]}]}"#;
    let lenient = r#"{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"svc"}}]},
      "scope_spans":[{"scope":{"name":"s"},"spans":[{"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b174",
      "name":"n","kind":"SPAN_KIND_CLIENT","start_time_unix_nano":1544712660000000000,"end_time_unix_nano":"1544712661000000000",
      "attributes":[{"key":"http.response.status_code","value":{"int_value":429}},{"key":"d","value":{"double_value":"1.5"}}],
      "status":{"code":"STATUS_CODE_ERROR","message":"x"}}]}]}]}"#;
    let a = json::decode(spec.as_bytes()).unwrap();
    let b = json::decode(lenient.as_bytes()).unwrap();
    assert_eq!(a, b);
    let row = &normalize(&a).batch.row(0);
    assert_eq!(row.kind, "client");
    assert_eq!(row.error_class, ErrorClass::RateLimited);
}

#[test]
fn json_ids_and_bytes_in_base64_either_alphabet_padded_or_not() {
    // Ids as older exporters sent them (protobuf's JSON mapping: base64),
    // and a bytes attribute, which the spec writes in base64.
    let trace = [
        0xfbu8, 0xff, 0x3e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xfe,
    ];
    let span = [0xfbu8, 0xef, 0xff, 4, 5, 6, 7, 8];
    let body = |t: &str, s: &str, b: &str| {
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"{t}","spanId":"{s}","name":"n",
            "attributes":[{{"key":"blob","value":{{"bytesValue":"{b}"}}}}]}}]}}]}}]}}"#
        )
    };
    for (t, s, b) in [
        ("+/8+AQIDBAUGBwgJCgsM/g==", "++//BAUGBwg=", "AP8="),
        ("-_8-AQIDBAUGBwgJCgsM_g", "--__BAUGBwg", "AP8"),
    ] {
        let req = json::decode(body(t, s, b).as_bytes()).unwrap();
        let got = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(got.trace_id, trace, "{t}");
        assert_eq!(got.span_id, span, "{s}");
        assert_eq!(
            got.attributes[0].value,
            Some(AnyValue {
                value: Some(Value::BytesValue(vec![0, 0xff]))
            }),
            "{b}"
        );
        // Written back in the spec's form: hex ids, standard padded base64.
        let again = json::encode(&req);
        assert!(again.contains("\"AP8=\""), "{again}");
        let back = json::decode(again.as_bytes()).unwrap();
        assert_eq!(
            back.resource_spans[0].scope_spans,
            req.resource_spans[0].scope_spans
        );
    }
    let e = json::decode(body("not base64 at all!!!!!!!", "++//BAUGBwg=", "AP8=").as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("traceId") && e.contains("32 hex characters"),
        "{e}"
    );
    let e = json::decode(body("+/8+AQIDBAUGBwgJCgsM/g==", "++//BAUGBwg=", "A*8=").as_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("base64"), "{e}");
}

#[test]
fn json_errors_name_the_field() {
    let cases = [
        (r#"{"resourceSpans":{}}"#, "$.resourceSpans: expected an array"),
        (r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":42}]}]}]}"#, "$.resourceSpans[0].scopeSpans[0].spans[0].traceId: expected a hex string, got a number"),
        (r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}"#, "traceId: expected 32 hex characters"),
        (r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SIDEWAYS"}]}]}]}"#, "kind: expected one of"),
        (r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}"#, "startTimeUnixNano: expected an unsigned 64-bit integer"),
        ("[1,2]", "$: expected an object, got an array"),
        ("{not json", "$: not valid JSON"),
    ];
    for (body, expected) in cases {
        let e = json::decode(body.as_bytes()).unwrap_err().to_string();
        assert!(e.contains(expected), "{body}: {e}");
    }
}

#[test]
fn bodies_decompress_under_a_cap() {
    use std::io::Write;
    let raw = vec![b'{'; 10_000];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let gz = bytes::Bytes::from(gz.finish().unwrap());
    assert_eq!(
        decode::decompress(gz.clone(), Encoding::Gzip, 10_000)
            .unwrap()
            .len(),
        10_000
    );
    assert!(matches!(
        decode::decompress(gz, Encoding::Gzip, 9_999),
        Err(IngestError::TooLarge {
            decompressed: true,
            ..
        })
    ));
    let z = bytes::Bytes::from(zstd::encode_all(&raw[..], 3).unwrap());
    assert_eq!(
        decode::decompress(z, Encoding::Zstd, 10_000).unwrap().len(),
        10_000
    );
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zl.write_all(&raw).unwrap();
    assert_eq!(
        decode::decompress(zl.finish().unwrap().into(), Encoding::Deflate, 10_000)
            .unwrap()
            .len(),
        10_000
    );
    let mut raw_deflate =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    raw_deflate.write_all(&raw).unwrap();
    assert_eq!(
        decode::decompress(
            raw_deflate.finish().unwrap().into(),
            Encoding::Deflate,
            10_000
        )
        .unwrap()
        .len(),
        10_000
    );
    assert!(matches!(
        decode::decompress(bytes::Bytes::from_static(b"not gzip"), Encoding::Gzip, 100),
        Err(IngestError::Decompress { .. })
    ));
}

fn arb_attrs() -> impl Strategy<Value = Vec<KeyValue>> {
    let value = prop_oneof![
        any::<String>().prop_map(Value::StringValue),
        any::<bool>().prop_map(Value::BoolValue),
        any::<i64>().prop_map(Value::IntValue),
        (-1e12f64..1e12).prop_map(Value::DoubleValue),
    ];
    prop::collection::vec(("[a-z.]{1,20}", value), 0..6)
        .prop_map(|kvs| kvs.into_iter().map(|(k, v)| kv(&k, v)).collect())
}

fn arb_span() -> impl Strategy<Value = Span> {
    (
        prop::array::uniform16(any::<u8>()),
        prop::array::uniform8(any::<u8>()),
        prop::option::of(prop::array::uniform8(1u8..)),
        "[ -~]{0,30}",
        0i32..6,
        1u64..(i64::MAX as u64 / 2),
        0u64..10_000_000_000,
        arb_attrs(),
        prop::option::of((0i32..3, "[ -~]{0,20}")),
        prop::option::of(prop_oneof![
            Just("search_flights"),
            Just("book_flight"),
            Just("quote_price")
        ]),
    )
        .prop_map(
            |(t, sid, parent, name, kind, start, dur, mut attrs, status, tool)| {
                if let Some(tool) = tool {
                    attrs.push(s("gen_ai.operation.name", "execute_tool"));
                    attrs.push(s("gen_ai.tool.name", tool));
                }
                Span {
                    trace_id: t.to_vec(),
                    span_id: sid.to_vec(),
                    parent_span_id: parent.map(|p| p.to_vec()).unwrap_or_default(),
                    name,
                    kind,
                    start_time_unix_nano: start,
                    end_time_unix_nano: start + dur,
                    attributes: attrs,
                    status: status.map(|(code, message)| Status { code, message }),
                    ..Default::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// protobuf encode → decode → same rows, and OTLP/JSON encode → decode → same rows.
    #[test]
    fn encode_decode_round_trip_gives_the_same_rows(spans in prop::collection::vec(arb_span(), 0..8)) {
        use prost::Message;
        let req = request(spans);
        let expected = normalize(&req);
        let pb = req.encode_to_vec();
        let from_pb = decode::decode(&pb, Format::Protobuf).unwrap();
        prop_assert_eq!(&normalize(&from_pb), &expected);
        let js = json::encode(&req);
        let from_js = decode::decode(js.as_bytes(), Format::Json).unwrap();
        prop_assert_eq!(&normalize(&from_js), &expected);
    }

    /// The columnar batch holds what the row path built, span for span.
    #[test]
    fn the_batch_holds_the_row_paths_rows(spans in prop::collection::vec(arb_span(), 0..8)) {
        let req = request(spans);
        prop_assert_eq!(normalize(&req).batch.rows(), rows::normalize_rows(&req));
    }

    /// Whatever bytes arrive, decoding returns an error or a request; it never panics.
    #[test]
    fn decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode::decode(&bytes, Format::Protobuf);
        let _ = decode::decode(&bytes, Format::Json);
        let _ = decode::decompress(bytes.clone().into(), Encoding::Gzip, 1 << 16);
        let _ = decode::decompress(bytes.clone().into(), Encoding::Zstd, 1 << 16);
        let _ = decode::decompress(bytes.into(), Encoding::Deflate, 1 << 16);
    }
}

/// A failure whose only clue is its words: status ERROR with `message` as
/// the status message and as an exception event's message, no HTTP attribute.
fn from_words(error_type: Option<&str>, message: &str) -> ErrorClass {
    let attrs: Vec<KeyValue> = error_type.map(|t| s("error.type", t)).into_iter().collect();
    let events = vec![Event {
        name: "exception".into(),
        attributes: vec![s("exception.message", message)],
        ..Default::default()
    }];
    classify::classify(&attrs, error_status(message).as_ref(), &events).class
}

#[test]
fn seven_names_of_one_429_in_the_words_alone_are_rate_limited() {
    // The seed's table: one HTTP 429 logged under seven names, each with
    // nothing but its message (the Vercel AI SDK and pydantic-ai record a
    // failed tool so: status ERROR plus an exception event).
    for (name, message) in [
        (Some("extract_failed"), "product page: HTTP 429"),
        (
            None,
            "ig-3 coverage 0/11: all sources failed (429 from IG private API)",
        ),
        (Some("TypeError"), "fetch failed: status code 429"),
        (None, "enrich: web_profile_info returned 429"),
        (None, "HTTP 429 Too Many Requests"),
        (
            Some("HTTPError"),
            "429 Client Error: Too Many Requests for url: https://x/y",
        ),
        (Some("AxiosError"), "Request failed with status code 429"),
    ] {
        assert_eq!(
            from_words(name, message),
            ErrorClass::RateLimited,
            "{name:?} {message:?}"
        );
    }
}

#[test]
fn status_codes_and_reason_phrases_in_messages_decide_the_class() {
    use ErrorClass::*;
    for (message, class) in [
        ("upstream 503 Service Unavailable", Unavailable),
        ("status code 502", Unavailable),
        ("Bad Gateway", Unavailable),
        ("HTTP/1.1 504 Gateway Timeout", Unavailable),
        ("Error: 401 Unauthorized", Auth),
        ("upstream returned 404 for /v2/contracts/7", NotFound),
        ("Request failed with status code 503.", Unavailable),
        ("503: upstream connect error", Unavailable),
        ("response 422 Unprocessable Entity", InvalidRequest),
        ("500 Internal Server Error", ServerError),
        // Numbers that are not statuses, and words as before.
        ("took 503 ms, then: connection reset by peer", Network),
        ("line 404: unexpected token", Unknown),
        ("merge conflict in src/main.rs", Unknown),
        // Numbers that count things, and words that outrank a lone phrase.
        (
            "Validation error: received 500 items, the maximum is 100",
            InvalidRequest,
        ),
        ("500 tokens is the maximum for this tool", Unknown),
        (
            "Rate limit exceeded; further requests are forbidden for 60 s",
            RateLimited,
        ),
        ("Timed out waiting for page; element not found", Timeout),
        ("deadline exceeded after 30s", Timeout),
        ("connect ECONNREFUSED 127.0.0.1:443", Network),
    ] {
        assert_eq!(from_words(None, message), class, "{message:?}");
    }
}

#[test]
fn mcp_errors_get_a_class() {
    use ErrorClass::*;
    // JSON-RPC error codes, as the OTel MCP conventions put them in error.type.
    for (code, class) in [
        ("-32602", InvalidRequest),
        ("-32601", NotFound),
        ("-32603", ServerError),
        ("-32001", Timeout),
    ] {
        let attrs = vec![s("mcp.method.name", "tools/call"), s("error.type", code)];
        let got = classify::classify(&attrs, error_status("").as_ref(), &[]).class;
        assert_eq!(got, class, "{code}");
    }
    // `isError` with a text content that says why.
    let result =
        r#"{"content":[{"type":"text","text":"upstream 503 Service Unavailable"}],"isError":true}"#;
    let attrs = vec![
        s("mcp.method.name", "tools/call"),
        s("error.type", "tool_error"),
        s("gen_ai.tool.call.result", result),
    ];
    let got = classify::classify(&attrs, error_status("").as_ref(), &[]).class;
    assert_eq!(got, Unavailable);
}

#[test]
fn a_tools_call_span_is_mcp_whatever_else_it_carries() {
    // The OTel MCP conventions set gen_ai.operation.name = execute_tool on
    // the client span too: still an MCP call (so its server span pairs up).
    tool(
        "tools/call get-weather",
        vec![
            s("mcp.method.name", "tools/call"),
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "get-weather"),
        ],
        Some(("get-weather", ToolConvention::Mcp)),
    );
}

#[test]
fn structured_arguments_hash_like_their_json_text_and_empty_ones_not_at_all() {
    let structured = kv(
        "gen_ai.tool.call.arguments",
        Value::KvlistValue(opentelemetry_proto::tonic::common::v1::KeyValueList {
            values: vec![s("to", "BER"), s("from", "LIS")],
        }),
    );
    let base = || {
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "search_flights"),
        ]
    };
    let hash = |extra: KeyValue| {
        let mut a = base();
        a.push(extra);
        toolcall::detect("execute_tool search_flights", &a)
            .unwrap()
            .args_hash
    };
    let text = hash(s(
        "gen_ai.tool.call.arguments",
        r#"{"from":"LIS","to":"BER"}"#,
    ));
    assert!(text.is_some());
    assert_eq!(hash(structured), text);
    for empty in ["{}", "[]", "", "null", "  "] {
        assert_eq!(
            hash(s("gen_ai.tool.call.arguments", empty)),
            None,
            "{empty:?}"
        );
    }
    // Results are hashed too, for loops and polling.
    let mut a = base();
    a.push(s("gen_ai.tool.call.result", r#"{"status":"running"}"#));
    let t = toolcall::detect("execute_tool job", &a).unwrap();
    assert!(t.result_hash.is_some());
}
