//! The answer budget holds for every field of every MCP answer: a trace
//! whose root span is named with 10 MB and whose tool (a retry storm of
//! six failed calls) is named with 10 MB more, read through every reading
//! tool — `get_trace` (with and without attributes), `list_tools`,
//! `get_tool_daily`'s error, `run_sweep`, `list_signals`, `get_signal`,
//! `list_signal_traces`, `list_incidents`, `get_incident`,
//! `find_retry_storms`, `query` — answers at most the
//! budget, the long strings cut with a marker, the cut said in
//! `truncated`, and still valid against each tool's `outputSchema`.

use serde_json::{json, Value};

use crate::common::{import_files, Server};
use crate::mcp_http::Schemas;
use crate::sweep::{span, str_v};

/// `page::BUDGET_CHARS`.
const BUDGET: usize = 24_000;
const MODERN: &str = "2026-07-28";

/// A stateless 2026-07-28 `method` call: the HTTP body's length and the
/// JSON-RPC answer.
fn modern(server: &Server, method: &str, name: Option<&str>, mut params: Value) -> (usize, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stormwatch-test", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = reqwest_blocking::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .unwrap()
        .post(format!("http://{}/mcp", server.http))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", method);
    if let Some(n) = name {
        req = req.header("Mcp-Name", n);
    }
    let r = req.body(body.to_string()).send().unwrap();
    assert_eq!(r.status().as_u16(), 200, "{method} {name:?}");
    let text = r.text().unwrap();
    (text.len(), serde_json::from_str(&text).unwrap())
}

/// `tools/call` of `tool`: its result, held to the budget (checked here).
fn call(server: &Server, tool: &str, arguments: Value) -> Value {
    let (len, v) = modern(
        server,
        "tools/call",
        Some(tool),
        json!({"name": tool, "arguments": arguments}),
    );
    let r = v
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{tool}: {v}"));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.len() <= BUDGET,
        "{tool}: a text of {} characters",
        text.len()
    );
    if let Some(s) = r.get("structuredContent") {
        let n = s.to_string().len();
        assert!(n <= BUDGET, "{tool}: structuredContent of {n} characters");
    }
    eprintln!("{tool}: {len} bytes answered");
    // The whole answer: the JSON and its copy as text, and the envelope.
    assert!(len <= 3 * BUDGET, "{tool}: {len} bytes answered");
    r
}

fn is_cut(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() < BUDGET && s.ends_with("characters cut]"))
}

fn said_cut(answer: &Value) -> bool {
    answer["truncated"]
        .as_str()
        .is_some_and(|t| t.contains("-character budget") && t.contains("cut to it"))
}

#[test]
fn ten_megabyte_names_are_cut_to_the_budget_in_every_reading_tool() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let name = "n".repeat(10 << 20);
    let tool = "t".repeat(10 << 20);
    let trace = "cd".repeat(16);
    // Two hours ago, so the storm has settled when it is swept.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let t0 = (now.as_secs() - 7_200) * 1_000_000_000;
    let s = 1_000_000_000;
    let mut spans = vec![span(
        &trace,
        100,
        None,
        &name,
        (t0, t0 + 30 * s),
        &[("gen_ai.operation.name", str_v("invoke_agent"))],
        false,
    )];
    for i in 0..6 {
        let start = t0 + s + i * 2 * s;
        spans.push(span(
            &trace,
            i + 1,
            Some(100),
            "execute_tool big",
            (start, start + s),
            &[
                ("gen_ai.operation.name", str_v("execute_tool")),
                ("gen_ai.tool.name", str_v(&tool)),
            ],
            true,
        ));
    }
    let file = dir.path().join("big.json");
    let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]});
    std::fs::write(&file, doc.to_string()).unwrap();
    drop((doc, name, tool));
    import_files(&data, &[&file]);
    let server = Server::start(&data, &["--sweep-interval", "0"], &[]);
    let (_, list) = modern(&server, "tools/list", None, json!({}));
    let list = list["result"]["tools"].as_array().unwrap().clone();
    let schemas = Schemas::default();
    let valid = |tool: &str, r: &Value| schemas.valid(&list, tool, r);

    let t = valid(
        "get_trace",
        &call(&server, "get_trace", json!({"trace_id": trace})),
    );
    let root = t["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["span_id"] == format!("{:016x}", 100))
        .unwrap();
    assert!(
        is_cut(&root["name"]),
        "{}",
        &root["name"].to_string()[..200]
    );
    assert!(is_cut(&t["loops"][0]["tool"]));
    assert!(said_cut(&t), "{}", t["truncated"]);
    let t = valid(
        "get_trace",
        &call(
            &server,
            "get_trace",
            json!({"trace_id": trace, "attributes": true, "limit": 3}),
        ),
    );
    assert!(said_cut(&t), "{}", t["truncated"]);

    let tools = valid("list_tools", &call(&server, "list_tools", json!({})));
    assert!(
        is_cut(&tools["tools"][0]["tool"]) && said_cut(&tools),
        "{tools}"
    );
    let err = call(&server, "get_tool_daily", json!({"tool": "nope"}));
    assert_eq!(err["isError"], true);
    assert!(err["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("characters cut]"));

    let sweep = valid(
        "run_sweep",
        &call(&server, "run_sweep", json!({"dry_run": false})),
    );
    assert!(said_cut(&sweep), "{sweep}");
    let signals = valid("list_signals", &call(&server, "list_signals", json!({})));
    let storm = signals["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "retry_storm")
        .expect("a storm signal");
    assert!(is_cut(&storm["tool"]) && said_cut(&signals), "{storm}");
    let id = storm["id"].as_str().unwrap();
    let one = valid(
        "get_signal",
        &call(&server, "get_signal", json!({"id": id})),
    );
    assert!(said_cut(&one), "{one}");
    valid(
        "list_signal_traces",
        &call(&server, "list_signal_traces", json!({"id": id})),
    );
    // The storm's incident is titled with the tool's name: cut too.
    let incidents = valid(
        "list_incidents",
        &call(&server, "list_incidents", json!({})),
    );
    let first = &incidents["incidents"][0];
    assert!(
        is_cut(&first["title"]) && said_cut(&incidents),
        "{incidents}"
    );
    let incident = valid(
        "get_incident",
        &call(&server, "get_incident", json!({"id": first["id"]})),
    );
    assert!(said_cut(&incident), "{incident}");
    let storms = valid(
        "find_retry_storms",
        &call(&server, "find_retry_storms", json!({})),
    );
    assert!(is_cut(&storms["storms"][0]["tool"]), "{storms}");
    // Whatever the sandbox answers, it is held to the budget too.
    call(
        &server,
        "query",
        json!({"sql": "SELECT name FROM spans LIMIT 3"}),
    );
    schemas.check();
}
