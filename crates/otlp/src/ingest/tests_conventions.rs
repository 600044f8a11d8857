//! The conventions layer on the span shapes the frameworks send
//! (docs/detection.md §1): each case is a shape seen from a real framework
//! (the issue that found it names the framework and version), read as the
//! call a person reading the trace would see.

use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::Event, Status};

use super::conventions::SpanView;
use super::{classify, toolcall};
use crate::model::{ErrorClass, ToolConvention};

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn event(name: &str, attrs: Vec<KeyValue>) -> Event {
    Event {
        name: name.into(),
        attributes: attrs,
        ..Default::default()
    }
}

/// (tool name, convention, args hash, class) of a span, or `None` when it is no call.
fn read(
    name: &str,
    attrs: &[KeyValue],
    events: &[Event],
    scope: &str,
    status: Option<Status>,
) -> Option<(String, ToolConvention, Option<u128>, ErrorClass)> {
    let view = SpanView {
        name,
        attrs,
        events,
        scope,
    };
    let t = toolcall::detect_view(&view)?;
    let v = classify::classify_call(
        attrs,
        status.as_ref(),
        events,
        t.recorded(),
        super::results::ResultShapes::NONE,
    );
    Some((t.name.into_owned(), t.convention, t.args_hash, v.class))
}

const SCHEMA: &str =
    r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;

fn openinference_tool(input: &str, output: &str) -> Vec<KeyValue> {
    vec![
        s("openinference.span.kind", "TOOL"),
        s("tool.name", "get_weather"),
        s("tool.parameters", SCHEMA),
        s("input.value", input),
        s("output.value", output),
    ]
}

#[test]
fn openinference_arguments_are_the_input_not_the_tool_schema() {
    let hash = |city: &str| {
        read(
            "get_weather",
            &openinference_tool(&format!(r#"{{"city": "{city}"}}"#), "sunny"),
            &[],
            "openinference.instrumentation.openai_agents",
            None,
        )
        .unwrap()
        .2
    };
    assert_ne!(
        hash("Paris"),
        hash("Lisbon"),
        "eight cities are eight requests"
    );
    assert!(hash("Paris").is_some());
    // smolagents wraps the call: its kwargs are the arguments, and they hash
    // as the same arguments sent plain by any other convention.
    let wrapped = read(
        "get_weather",
        &openinference_tool(
            r#"{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"city": "Paris"}}"#,
            "sunny",
        ),
        &[],
        "openinference.instrumentation.smolagents",
        None,
    )
    .unwrap()
    .2;
    assert_eq!(wrapped, hash("Paris"));
    let kwargs_only = read(
        "get_weather",
        &openinference_tool(r#"{"kwargs": {"city": "Paris"}}"#, "sunny"),
        &[],
        "",
        None,
    )
    .unwrap()
    .2;
    assert_eq!(kwargs_only, hash("Paris"));
    let genai = read(
        "execute_tool get_weather",
        &[
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "get_weather"),
            s("gen_ai.tool.call.arguments", r#"{"city":"Paris"}"#),
        ],
        &[],
        "",
        None,
    )
    .unwrap()
    .2;
    assert_eq!(genai, hash("Paris"));
    // Positional arguments count too; an empty wrapper is no arguments.
    let positional = read(
        "get_weather",
        &openinference_tool(r#"{"args": ["Paris"], "kwargs": {}}"#, "sunny"),
        &[],
        "",
        None,
    )
    .unwrap()
    .2;
    assert!(positional.is_some() && positional != hash("Paris"));
    let empty = read(
        "get_weather",
        &openinference_tool(r#"{"args": [], "kwargs": {}}"#, "sunny"),
        &[],
        "",
        None,
    )
    .unwrap()
    .2;
    assert_eq!(empty, None);
}

#[test]
fn mcp_client_spans_name_their_tool_and_protocol_spans_are_no_calls() {
    let client = read(
        "MCP send tools/call lookup_fare",
        &[
            s("mcp.method.name", "tools/call"),
            s("jsonrpc.request.id", "3"),
        ],
        &[],
        "mcp-python-sdk",
        None,
    )
    .unwrap();
    assert_eq!(client.0, "lookup_fare");
    assert_eq!(client.1, ToolConvention::Mcp);
    let server = read(
        "tools/call lookup_fare",
        &[
            s("mcp.method.name", "tools/call"),
            s("gen_ai.tool.name", "lookup_fare"),
            s("error.type", "tool_error"),
        ],
        &[],
        "mcp-python-sdk",
        None,
    )
    .unwrap();
    assert_eq!(server.0, "lookup_fare");
    for (name, method) in [
        ("MCP send initialize", "initialize"),
        ("MCP send tools/list", "tools/list"),
        ("tools/list", "tools/list"),
        ("server/discover", "server/discover"),
        ("notifications/initialized", "notifications/initialized"),
    ] {
        // Protocol, even with a tool name or GenAI operation beside it.
        let attrs = [
            s("mcp.method.name", method),
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "lookup_fare"),
        ];
        assert_eq!(read(name, &attrs, &[], "", None), None, "{name}");
    }
}

#[test]
fn smolagents_final_answer_is_bookkeeping() {
    let attrs = [
        s("openinference.span.kind", "TOOL"),
        s("tool.name", "final_answer"),
        s(
            "input.value",
            r#"{"args": [], "kwargs": {"answer": "done"}}"#,
        ),
    ];
    assert_eq!(
        read(
            "FinalAnswerTool",
            &attrs,
            &[],
            "openinference.instrumentation.smolagents",
            None
        ),
        None
    );
    // Another framework's tool of that name is a call like any other.
    assert!(read("final_answer", &attrs, &[], "my-app", None).is_some());
}

#[test]
fn adk_failures_handled_before_the_span_ends_are_read_from_the_result() {
    let span = |result: &str| {
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "search_flights"),
            s("gen_ai.tool.call.result", result),
        ]
    };
    let class = |result: &str| {
        read(
            "execute_tool search_flights",
            &span(result),
            &[],
            "gcp.vertex.agent",
            None,
        )
        .unwrap()
        .3
    };
    assert_eq!(
        class(
            r#"{"response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN", "error_type": "RuntimeError", "error_details": "HTTP 503 Service Unavailable", "retry_count": 3}"#
        ),
        ErrorClass::Unavailable
    );
    assert_eq!(
        class(r#"{"status": "error", "error_message": "HTTP 503 Service Unavailable"}"#),
        ErrorClass::Unavailable
    );
    assert_eq!(
        class(r#"{"result": {"status": "error", "error_message": "HTTP 404 Not Found"}}"#),
        ErrorClass::NotFound
    );
    assert_eq!(
        class(r#"{"status": "error", "error_message": "the upstream said no"}"#),
        ErrorClass::Unknown
    );
    // A status that is not a failure, and a successful result, stay ok.
    assert_eq!(
        class(r#"{"status": "running", "progress": 36}"#),
        ErrorClass::Ok
    );
    assert_eq!(
        class(r#"{"status": "success", "report": "sunny"}"#),
        ErrorClass::Ok
    );
}

/// An OpenInference TOOL span of `tool` with this input and output.
fn oi_tool(tool: &str, input: &str, output: &str) -> Vec<KeyValue> {
    vec![
        s("openinference.span.kind", "TOOL"),
        s("tool.name", tool),
        s("input.value", input),
        s("output.value", output),
    ]
}

#[test]
fn the_mcp_sdks_error_text_naming_the_tool_is_a_failure_under_any_convention() {
    let out = "Error executing tool lookup_fare: HTTP 503 Service Unavailable";
    let got = read(
        "lookup_fare",
        &oi_tool("lookup_fare", r#"{"origin":"SFO"}"#, out),
        &[],
        "openinference.instrumentation.openai_agents",
        None,
    )
    .unwrap();
    assert_eq!(got.3, ErrorClass::Unavailable);
    // The OpenAI Agents SDK's default error function: unknown.
    let default_fn = read(
        "lookup_fare",
        &oi_tool(
            "lookup_fare",
            r#"{"origin":"SFO"}"#,
            "An error occurred while running the tool. Please try again. Error: boom",
        ),
        &[],
        "",
        None,
    )
    .unwrap();
    assert_eq!(default_fn.3, ErrorClass::Unknown);
    // The same text as a GenAI tool's result (a framework traced by other
    // instrumentation handing an MCP isError on) is a failure too.
    let genai = |tool: &str| {
        read(
            "execute_tool",
            &[
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", tool),
                s("gen_ai.tool.call.result", out),
            ],
            &[],
            "",
            None,
        )
        .unwrap()
        .3
    };
    assert_eq!(genai("lookup_fare"), ErrorClass::Unavailable);
    // A tool whose output merely quotes another tool's failure is not failing.
    assert_eq!(genai("read_log"), ErrorClass::Ok);
}

#[test]
fn strands_legacy_arguments_and_results_live_in_events() {
    let attrs = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "search_flights"),
        s("gen_ai.tool.call.id", "tooluse_1"),
    ];
    let events = [
        event(
            "gen_ai.tool.message",
            vec![
                s("role", "tool"),
                s("content", r#"{"origin": "SFO", "destination": "JFK"}"#),
                s("id", "tooluse_1"),
            ],
        ),
        event(
            "gen_ai.choice",
            vec![
                s(
                    "message",
                    r#"{"status": "error", "content": [{"text": "Error: HTTP 503 Service Unavailable"}], "toolUseId": "tooluse_1"}"#,
                ),
                s("id", "tooluse_1"),
            ],
        ),
    ];
    let got = read(
        "execute_tool search_flights",
        &attrs,
        &events,
        "strands.telemetry.tracer",
        None,
    )
    .unwrap();
    let latest = read(
        "execute_tool search_flights",
        &[
            attrs[0].clone(),
            attrs[1].clone(),
            s(
                "gen_ai.tool.call.arguments",
                r#"{"destination":"JFK","origin":"SFO"}"#,
            ),
        ],
        &[],
        "",
        None,
    )
    .unwrap();
    assert!(got.2.is_some());
    assert_eq!(got.2, latest.2, "the event's arguments are the attribute's");
    assert_eq!(got.3, ErrorClass::Unavailable);
}

/// (class, raw name) of a GenAI tool span's result under `shapes`.
fn with_shapes(
    tool: &str,
    result: &str,
    shapes: &super::results::ResultShapes,
) -> (ErrorClass, Option<String>) {
    let attrs = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", tool),
        s("gen_ai.tool.call.result", result),
    ];
    let t = toolcall::detect_view(&SpanView::bare("execute_tool", &attrs)).unwrap();
    let v = classify::classify_call(&attrs, None, &[], t.recorded(), shapes);
    (v.class, v.error_type)
}

fn shape(
    pointer: &str,
    equals: &[&str],
    message: Option<&str>,
    class: Option<&str>,
    tools: &[&str],
) -> super::results::ResultShape {
    super::results::ResultShape {
        pointer: pointer.into(),
        equals: equals.iter().map(|e| e.to_string()).collect(),
        message: message.map(Into::into),
        class: class.map(Into::into),
        tools: tools.iter().map(|t| t.to_string()).collect(),
    }
}

#[test]
fn a_result_shape_a_user_declared_reads_their_own_tools_failures() {
    use super::results::ResultShapes;
    let shapes = ResultShapes(vec![
        shape(
            "/outcome/state",
            &["FAILED"],
            Some("/outcome/reason"),
            None,
            &["book_*"],
        ),
        shape(
            "/outcome/state",
            &["DECLINED"],
            Some("/outcome/reason"),
            Some("invalid_request"),
            &["book_*"],
        ),
    ]);
    assert!(shapes.0.iter().all(|s| s.problem().is_none()));
    let class = |tool: &str, result: &str| with_shapes(tool, result, &shapes).0;
    let failed = r#"{"outcome": {"state": "FAILED", "reason": "upstream 503"}}"#;
    assert_eq!(
        with_shapes("book_flight", failed, &shapes),
        (ErrorClass::Unavailable, Some("FAILED".to_string())),
        "the class from its words, the value as the raw name"
    );
    // The words say nothing: the shape's declared class.
    assert_eq!(
        class(
            "book_hotel",
            r#"{"outcome": {"state": "DECLINED", "reason": "card declined"}}"#
        ),
        ErrorClass::InvalidRequest
    );
    assert_eq!(
        class("book_flight", r#"{"outcome": {"state": "CONFIRMED"}}"#),
        ErrorClass::Ok
    );
    // Another tool's result of the same shape is not read by it.
    assert_eq!(class("search_flights", failed), ErrorClass::Ok);
    // What the documented shapes say still holds beside it.
    assert_eq!(
        class(
            "book_flight",
            r#"{"ok": false, "error": "HTTP 429 Too Many Requests"}"#
        ),
        ErrorClass::RateLimited
    );
    // Inside the frameworks' envelopes: ADK's {"result": "<json text>"},
    // a LangChain tool message, an MCP text content block.
    let inner = r#"{\"outcome\": {\"state\": \"FAILED\", \"reason\": \"Gateway Timeout\"}}"#;
    for wrapped in [
        format!(r#"{{"result": "{inner}"}}"#),
        format!(
            r#"{{"type": "tool", "data": {{"content": "{inner}", "tool_call_id": "call_1", "status": "success"}}}}"#
        ),
        format!(r#"{{"type": "text", "text": "{inner}"}}"#),
    ] {
        assert_eq!(
            class("book_flight", &wrapped),
            ErrorClass::Timeout,
            "{wrapped}"
        );
    }
    // No `equals`: any value but null, false, 0, "", [] and {} fails the call.
    let any = ResultShapes(vec![shape("/err", &[], Some("/err"), None, &[])]);
    assert_eq!(
        with_shapes("t", r#"{"err": "Gateway Timeout"}"#, &any).0,
        ErrorClass::Timeout
    );
    for ok in [
        r#"{"err": null}"#,
        r#"{"err": false}"#,
        r#"{"err": ""}"#,
        r#"{"err": 0.0}"#,
        r#"{"err": []}"#,
        r#"{"err": {}}"#,
    ] {
        assert_eq!(with_shapes("t", ok, &any).0, ErrorClass::Ok, "{ok}");
    }
    // A text result (no JSON) is compared whole by a pointer into it: none.
    assert_eq!(with_shapes("t", "FAILED", &any).0, ErrorClass::Ok);
}

#[test]
fn a_result_shape_names_what_is_wrong_with_it() {
    let problem = |sh: super::results::ResultShape| sh.problem();
    let (key, why) = problem(shape("status", &[], None, None, &[])).unwrap();
    assert_eq!(key, "pointer");
    assert!(why.contains("\"status\""), "{why}");
    assert_eq!(
        problem(shape("", &["x"], None, None, &[])).unwrap().0,
        "pointer"
    );
    assert_eq!(
        problem(shape("/a~2b", &[], None, None, &[])).unwrap().0,
        "pointer"
    );
    assert_eq!(
        problem(shape("/s", &[], Some("reason"), None, &[]))
            .unwrap()
            .0,
        "message"
    );
    assert_eq!(
        problem(shape("/s", &[], None, Some("broken"), &[]))
            .unwrap()
            .0,
        "class"
    );
    assert_eq!(
        problem(shape("/s", &[], None, Some("ok"), &[])).unwrap().0,
        "class"
    );
    assert_eq!(
        problem(shape("/s", &[""], None, None, &[])).unwrap().0,
        "equals"
    );
    assert_eq!(
        problem(shape("/s", &[], None, None, &[""])).unwrap().0,
        "tools"
    );
    assert_eq!(
        problem(shape("/a~1b/~0c", &[], None, Some("timeout"), &["a*b*c"])),
        None
    );
}

#[test]
fn a_result_cut_short_by_a_length_limit_is_read_as_far_as_it_goes() {
    // ADK's ReflectAndRetryToolPlugin answer (1 300+ characters) cut at 400
    // by an attribute length limit: no longer JSON, its first members whole.
    let whole = r#"{"response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN", "error_type": "HTTPError", "error_details": "HTTP 503 Service Unavailable", "retry_count": 2, "reflection_guidance": "The call to tool `search_flights` failed. Think about why, and \"try\" {something} else"}"#;
    let cut = &whole[..whole.len() - 40];
    assert!(serde_json::from_str::<serde_json::Value>(cut).is_err());
    let read = super::results::cut_object(cut).unwrap();
    assert_eq!(read["retry_count"], 2);
    assert!(read.get("reflection_guidance").is_none());
    let attrs = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "search_flights"),
        s("gen_ai.tool.call.result", cut),
    ];
    let got = read_span(&attrs);
    assert_eq!(got, ErrorClass::Unavailable);
    // Cut inside the first member: nothing whole, nothing read.
    assert_eq!(super::results::cut_object(&whole[..30]), None);
    assert_eq!(super::results::cut_object("not json"), None);
}

fn read_span(attrs: &[KeyValue]) -> ErrorClass {
    read("execute_tool", attrs, &[], "", None).unwrap().3
}

#[test]
fn a_langchain_tool_message_with_status_error_is_a_failure() {
    // LangGraph's ToolNode answering a ToolException: the TOOL span ends OK,
    // the failure only in the serialized ToolMessage (OpenInference output.value).
    let out = r#"{"type": "tool", "data": {"content": "HTTP 503 Service Unavailable", "type": "tool", "name": "search_flights", "tool_call_id": "call_02", "status": "error"}}"#;
    let attrs = openinference_tool(r#"{"origin": "SFO"}"#, out);
    assert_eq!(
        read(
            "search_flights",
            &attrs,
            &[],
            "openinference.instrumentation.langchain",
            None
        )
        .unwrap()
        .3,
        ErrorClass::Unavailable
    );
    let ok = out.replace(r#""status": "error""#, r#""status": "success""#);
    let attrs = openinference_tool(r#"{"origin": "SFO"}"#, &ok);
    assert_eq!(
        read(
            "search_flights",
            &attrs,
            &[],
            "openinference.instrumentation.langchain",
            None
        )
        .unwrap()
        .3,
        ErrorClass::Ok
    );
}

#[test]
fn an_mcp_error_handed_on_as_a_text_content_block_is_a_failure() {
    // The OpenAI Agents SDK's tool span for an MCP isError result: OK, the
    // MCP SDK's error text in a content block.
    let out = r#"{"type": "text", "text": "Error executing tool lookup_fare: HTTP 503 Service Unavailable"}"#;
    let attrs = oi_tool("lookup_fare", r#"{"origin": "SFO"}"#, out);
    let got = read(
        "lookup_fare",
        &attrs,
        &[],
        "openinference.instrumentation.openai_agents",
        None,
    )
    .unwrap();
    assert_eq!(got.3, ErrorClass::Unavailable);
    // A text block of an ordinary answer is no failure.
    let attrs = openinference_tool(
        r#"{"origin": "SFO"}"#,
        r#"{"type": "text", "text": "EUR 412"}"#,
    );
    assert_eq!(
        read("lookup_fare", &attrs, &[], "", None).unwrap().3,
        ErrorClass::Ok
    );
}

#[test]
fn openinference_spans_with_genai_attributes_keep_their_own_arguments() {
    // OPENINFERENCE_ENABLE_GENAI_SEMCONV copies tool.parameters (the
    // schema) into gen_ai.tool.call.arguments: the input is the call's.
    let with_genai = |city: &str| {
        let mut attrs = openinference_tool(&format!(r#"{{"city": "{city}"}}"#), "sunny");
        attrs.push(s("gen_ai.operation.name", "execute_tool"));
        attrs.push(s("gen_ai.tool.call.arguments", SCHEMA));
        read("get_weather", &attrs, &[], "", None).unwrap()
    };
    let (paris, lisbon) = (with_genai("Paris"), with_genai("Lisbon"));
    assert_eq!(paris.1, ToolConvention::OpenInference);
    assert_ne!(paris.2, lisbon.2);
}

#[test]
fn glob_matches_runs_of_characters_only_where_a_star_is() {
    use super::conventions::glob;
    assert!(glob("book_*", "book_flight"));
    assert!(glob("book_*", "book_"));
    assert!(!glob("book_*", "rebook_flight"));
    assert!(glob("*_flight", "book_flight"));
    assert!(glob("a*b*c", "a-b-c"));
    assert!(glob("a*b*c", "abc"));
    assert!(!glob("a*b*c", "acb"));
    assert!(glob("exact", "exact"));
    assert!(!glob("exact", "exactly"));
    assert!(glob("*", "anything"));
    assert!(!glob("ab*ab", "ab"));
    assert!(glob("handoff to *", "handoff to refunds-agent"));
}

#[test]
fn a_frameworks_hand_offs_are_bookkeeping_not_calls() {
    // Google ADK's transfer_to_agent (TransferToAgentTool), the OpenAI
    // Agents SDK's hand-off span through OpenInference.
    let adk = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "transfer_to_agent"),
        s("gen_ai.tool.type", "TransferToAgentTool"),
    ];
    assert_eq!(
        read(
            "execute_tool transfer_to_agent",
            &adk,
            &[],
            "gcp.vertex.agent",
            None
        ),
        None
    );
    let handoff = [
        s("openinference.span.kind", "TOOL"),
        s("input.value", "triage-agent"),
        s("output.value", "refunds-agent"),
    ];
    assert_eq!(
        read(
            "handoff to refunds-agent",
            &handoff,
            &[],
            "openinference.instrumentation.openai_agents",
            None
        ),
        None
    );
    // The same names from another framework are calls like any other.
    assert!(read("execute_tool transfer_to_agent", &adk, &[], "my-app", None).is_some());
    // A scope that only starts with the same letters is another scope.
    assert!(read(
        "execute_tool transfer_to_agent",
        &adk,
        &[],
        "gcp.vertex.agents",
        None
    )
    .is_some());
}

#[test]
fn workflow_and_chain_spans_may_open_a_turn() {
    assert!(toolcall::is_agent(&[s(
        "gen_ai.operation.name",
        "invoke_workflow"
    )]));
    for op in ["invoke_swarm", "invoke_graph"] {
        assert!(
            toolcall::is_agent(&[s("gen_ai.operation.name", op)]),
            "{op}"
        );
    }
    assert!(toolcall::is_agent(&[s("openinference.span.kind", "CHAIN")]));
    assert!(!toolcall::is_agent(&[s("gen_ai.operation.name", "chat")]));
    assert!(!toolcall::is_agent(&[s("openinference.span.kind", "LLM")]));
}

#[test]
fn strands_text_blocks_are_looked_into_for_failures_and_shapes() {
    // Strands records a tool's return value as untyped text blocks, in
    // gen_ai.tool.call.result (latest) and the gen_ai.choice event (legacy).
    let blocks =
        r#"[{"text": "{\"success\": false, \"error\": \"HTTP 503 Service Unavailable\"}"}]"#;
    let latest = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "reserve_table"),
        s("gen_ai.tool.call.result", blocks),
    ];
    assert_eq!(read_span(&latest), ErrorClass::Unavailable);
    let legacy = read(
        "execute_tool reserve_table",
        &latest[..2],
        &[event("gen_ai.choice", vec![s("message", blocks)])],
        "strands.telemetry.tracer",
        None,
    )
    .unwrap();
    assert_eq!(legacy.3, ErrorClass::Unavailable);
    // A user's shape reads the tool's own payload inside them.
    let own =
        r#"[{"text": "{\"outcome\": {\"state\": \"FAILED\", \"reason\": \"upstream 503\"}}"}]"#;
    let shapes = super::results::ResultShapes(vec![shape(
        "/outcome/state",
        &["FAILED"],
        Some("/outcome/reason"),
        None,
        &["reserve_*"],
    )]);
    assert_eq!(
        with_shapes("reserve_table", own, &shapes).0,
        ErrorClass::Unavailable
    );
    // A plain text block of an answer is no failure.
    assert_eq!(
        with_shapes(
            "reserve_table",
            r#"[{"text": "table 12 at 19:00"}]"#,
            &shapes
        )
        .0,
        ErrorClass::Ok
    );
    // Strands' hand-off in a Swarm is bookkeeping.
    let handoff = [
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", "handoff_to_agent"),
    ];
    assert_eq!(
        read(
            "execute_tool handoff_to_agent",
            &handoff,
            &[],
            "strands.telemetry.tracer",
            None
        ),
        None
    );
}
