//! The MCP server's protocol over HTTP, against the real binary on the
//! demo: both protocol eras on `/mcp`, the header checks of 2026-07-28
//! (`Mcp-Method`, `Mcp-Name`: a mismatch is 400 with -32020), an unknown tool
//! as a tool error, the token and the Origin check, every tool's
//! `structuredContent` against its `outputSchema` (a JSON Schema validator),
//! the `query` guard, `list_incidents` then `get_incident` (what an agent
//! asks first), and `tools/list` held by a snapshot.

use reqwest_blocking::blocking::{Client, Response};
use serde_json::{json, Value};

use crate::common::{python, repo, Server};

pub(crate) const TOKEN: &str = "mcp-test-token-0123456789";
const MODERN: &str = "2026-07-28";

pub(crate) fn demo() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--demo", "--api-token", TOKEN],
        &[],
    );
    (dir, server)
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stormwatch-test", "version": "1"}
    })
}

/// A stateless 2026-07-28 request: `Mcp-Method` and `Mcp-Name` as given.
fn post(server: &Server, body: &Value, headers: &[(&str, &str)]) -> Response {
    let mut req = Client::new()
        .post(format!("http://{}/mcp", server.http))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().unwrap()
}

fn modern(server: &Server, method: &str, name: Option<&str>, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        headers.push(("Mcp-Name", n));
    }
    let r = post(server, &body, &headers);
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (status, answer(&text))
}

/// A JSON-RPC answer, sent as JSON or as one event of an SSE stream.
fn answer(text: &str) -> Value {
    let data: String = if text.trim_start().starts_with('{') {
        text.to_string()
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| d.starts_with('{'))
            .collect::<Vec<_>>()
            .join("")
    };
    serde_json::from_str(&data).unwrap_or_else(|_| json!({"raw": text}))
}

/// `tools/call` of `tool`: the JSON-RPC result.
pub(crate) fn call(server: &Server, tool: &str, arguments: Value) -> Value {
    let (status, v) = modern(
        server,
        "tools/call",
        Some(tool),
        json!({"name": tool, "arguments": arguments}),
    );
    assert_eq!(status, 200, "{tool}: {v}");
    v.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{tool}: {v}"))
}

fn tools(server: &Server) -> Vec<Value> {
    let (status, v) = modern(server, "tools/list", None, json!({}));
    assert_eq!(status, 200, "{v}");
    v["result"]["tools"].as_array().unwrap().clone()
}

/// What a test checks against the tools' output schemas, all at once, with
/// the Python `jsonschema` package (scripts/py/validate_schema.py).
#[derive(Default)]
pub(crate) struct Schemas(std::cell::RefCell<Vec<Value>>);

impl Schemas {
    /// `result` is a success whose structured content is kept for
    /// [`Schemas::check`], and whose text block is the same JSON.
    pub(crate) fn valid(&self, tools: &[Value], tool: &str, result: &Value) -> Value {
        assert_ne!(result["isError"], json!(true), "{tool}: {result}");
        let schema = tools
            .iter()
            .find(|t| t["name"] == tool)
            .and_then(|t| t.get("outputSchema"))
            .unwrap_or_else(|| panic!("{tool} has no outputSchema"));
        let content = &result["structuredContent"];
        // The same JSON as one text block, for clients that read text only.
        let text = result["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            &serde_json::from_str::<Value>(text).unwrap(),
            content,
            "{tool}"
        );
        self.0
            .borrow_mut()
            .push(json!({"name": tool, "schema": schema, "instance": content}));
        content.clone()
    }

    pub(crate) fn check(&self) {
        use std::io::Write;
        let mut child = std::process::Command::new(python("STORMWATCH_PY_MCP"))
            .arg(repo().join("scripts/py/validate_schema.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let cases = Value::Array(self.0.borrow().clone()).to_string();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(cases.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "structuredContent against outputSchema:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_tool_answers_structured_content_valid_against_its_output_schema() {
    let (_dir, server) = demo();
    let schemas = Schemas::default();
    let valid = |list: &[Value], tool: &str, r: &Value| schemas.valid(list, tool, r);
    let list = tools(&server);
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 15, "{names:?}");
    // What is broken: the incidents first, one whole.
    let incidents = valid(
        &list,
        "list_incidents",
        &call(&server, "list_incidents", json!({})),
    );
    let lines = incidents["incidents"].as_array().unwrap();
    assert_eq!(incidents["total"], lines.len(), "{incidents}");
    assert_eq!(incidents["counts"]["open"], lines.len(), "{incidents}");
    let flights = lines
        .iter()
        .find(|i| i["tools"] == json!(["search_flights"]))
        .unwrap_or_else(|| panic!("{incidents}"));
    assert!(
        flights["title"]
            .as_str()
            .unwrap()
            .starts_with("search_flights failing since 2026-07-29"),
        "{flights}"
    );
    let incident = valid(
        &list,
        "get_incident",
        &call(&server, "get_incident", json!({"id": flights["id"]})),
    );
    assert_eq!(incident["cause"], "one tool, search_flights", "{incident}");
    let members = incident["members"].as_array().unwrap();
    assert_eq!(members.len(), 2, "{incident}");
    assert_eq!(members[0]["reason"], "first finding");
    assert!(
        members[1]["reason"]
            .as_str()
            .unwrap()
            .starts_with("same tool search_flights as SW-"),
        "{incident}"
    );
    assert!(
        incident["remedy"]["summary"]
            .as_str()
            .unwrap()
            .contains("exponential backoff with jitter"),
        "{incident}"
    );
    assert_eq!(
        incident["evidence"][0]["trace_id"], "baacbed78f2b62522a113193688fafe8",
        "{incident}"
    );
    assert_eq!(incident["history"][0]["to"], "open", "{incident}");
    // The same incident as the dashboard's API has it.
    let api: Value = serde_json::from_str(
        &Client::new()
            .get(format!(
                "http://{}/api/incidents/{}",
                server.http,
                flights["id"].as_str().unwrap()
            ))
            .bearer_auth(TOKEN)
            .send()
            .unwrap()
            .text()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(api, incident);
    // A page at a time.
    let first = valid(
        &list,
        "list_incidents",
        &call(
            &server,
            "list_incidents",
            json!({"limit": 1, "state": "all"}),
        ),
    );
    assert_eq!(first["incidents"].as_array().unwrap().len(), 1, "{first}");
    let next = call(
        &server,
        "list_incidents",
        json!({"limit": 1, "state": "all", "cursor": first["next_cursor"]}),
    );
    assert_eq!(
        next["structuredContent"]["incidents"][0]["id"], lines[1]["id"],
        "{next}"
    );
    let tools_answer = valid(
        &list,
        "list_tools",
        &call(&server, "list_tools", json!({"days": 40})),
    );
    let flights = tools_answer["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "search_flights")
        .unwrap();
    assert!(
        flights["flagged_days"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-29")),
        "{flights}"
    );
    let daily = valid(
        &list,
        "get_tool_daily",
        &call(&server, "get_tool_daily", json!({"tool": "search_flights"})),
    );
    assert!(daily["flagged_days"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-29")));
    let signals = valid(
        &list,
        "list_signals",
        &call(&server, "list_signals", json!({"kind": "retry_storm"})),
    );
    let storm = &signals["signals"][0];
    let id = storm["id"].as_str().unwrap();
    let one = valid(
        &list,
        "get_signal",
        &call(&server, "get_signal", json!({"id": id})),
    );
    let remedy = &one["remedy_detail"];
    assert!(
        remedy["summary"]
            .as_str()
            .unwrap()
            .contains("exponential backoff with jitter"),
        "{remedy}"
    );
    let traces = valid(
        &list,
        "list_signal_traces",
        &call(
            &server,
            "list_signal_traces",
            json!({"id": id, "day": "2026-07-29"}),
        ),
    );
    assert_eq!(traces["traces"].as_array().unwrap().len(), 4, "{traces}");
    let first = &traces["traces"][0];
    let trace = valid(
        &list,
        "get_trace",
        &call(
            &server,
            "get_trace",
            json!({"trace_id": first["trace_id"], "day": first["day"], "attributes": true}),
        ),
    );
    let worst = &trace["loops"][0];
    assert_eq!(worst["tool"], "search_flights");
    assert_eq!(worst["attempts"], 15, "{worst}");
    assert_eq!(worst["rhythm"], "no_backoff", "{worst}");
    valid(
        &list,
        "find_retry_storms",
        &call(
            &server,
            "find_retry_storms",
            json!({"tool": "search_flights", "min_rounds": 10}),
        ),
    );
    let tables = valid(
        &list,
        "describe_tables",
        &call(&server, "describe_tables", json!({})),
    );
    assert_eq!(tables["tables"].as_array().unwrap().len(), 3);
    // What the demo's spans let stormwatch see: a scope per service, each
    // gap with its fix, the same document as /api/coverage.
    let coverage = valid(
        &list,
        "get_coverage",
        &call(&server, "get_coverage", json!({"days": 30})),
    );
    let scopes = coverage["scopes"].as_array().unwrap();
    assert!(!scopes.is_empty(), "{coverage}");
    assert!(
        scopes.iter().all(|s| s["calls"].as_u64().unwrap() > 0
            && s["gaps"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| !g["fix"].as_str().unwrap().is_empty())),
        "{coverage}"
    );
    let api: Value = serde_json::from_str(
        &Client::new()
            .get(format!("http://{}/api/coverage?days=30", server.http))
            .bearer_auth(TOKEN)
            .send()
            .unwrap()
            .text()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(api, coverage);
    let q = valid(
        &list,
        "query",
        &call(
            &server,
            "query",
            json!({"sql": "SELECT tool_name, sum(calls) AS calls FROM tool_daily GROUP BY tool_name ORDER BY calls DESC"}),
        ),
    );
    assert!(q["row_count"].as_u64().unwrap() >= 1, "{q}");
    let dry = valid(&list, "run_sweep", &call(&server, "run_sweep", json!({})));
    assert_eq!(dry["dry_run"], true);
    assert!(
        dry["changes"].as_array().unwrap().is_empty(),
        "a dry run of the swept demo changes nothing: {dry}"
    );
    let muted = valid(
        &list,
        "mute_signal",
        &call(&server, "mute_signal", json!({"id": id})),
    );
    assert_eq!(muted["state"], "muted");
    // The change is seen at once by the reads (and the dashboard's API).
    let after = call(&server, "get_signal", json!({"id": id}));
    assert_eq!(after["structuredContent"]["state"], "muted");
    let resolved = valid(
        &list,
        "resolve_signal",
        &call(&server, "resolve_signal", json!({"id": id})),
    );
    assert_eq!(resolved["state"], "resolved");
    schemas.check();
}

#[test]
fn the_2026_headers_must_match_the_body() {
    let (_dir, server) = demo();
    let args = json!({"name": "list_tools", "arguments": {}});
    for name in [None, Some("get_trace")] {
        let (status, v) = modern(&server, "tools/call", name, args.clone());
        assert_eq!(status, 400, "Mcp-Name {name:?}: {v}");
        assert_eq!(v["error"]["code"], -32020, "Mcp-Name {name:?}: {v}");
    }
    // Mcp-Method disagreeing with the body.
    let mut params = args.clone();
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let auth = format!("Bearer {TOKEN}");
    let r = post(
        &server,
        &body,
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "list_tools"),
        ],
    );
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = serde_json::from_str(&r.text().unwrap()).unwrap();
    assert_eq!(v["error"]["code"], -32020, "{v}");
    // server/discover answers without a session.
    let (status, v) = modern(&server, "server/discover", None, json!({}));
    assert_eq!(status, 200, "{v}");
    assert!(
        v["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN)),
        "{v}"
    );
}

#[test]
fn an_unknown_tool_and_a_bad_argument_are_tool_errors() {
    let (_dir, server) = demo();
    let r = call(&server, "no_such_tool", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("no_such_tool") && text.contains("list_tools"),
        "{text}"
    );
    for (tool, args, says) in [
        (
            "get_signal",
            json!({"id": "SW-NOPE"}),
            "no signal \"SW-NOPE\"",
        ),
        (
            "get_trace",
            json!({"trace_id": "not-hex"}),
            "expected a hex trace id",
        ),
        (
            "get_tool_daily",
            json!({"tool": "nope"}),
            "no tool \"nope\"",
        ),
        (
            "list_signals",
            json!({"state": "sleeping"}),
            "state: expected open",
        ),
        (
            "get_incident",
            json!({"id": "INC-NOPE"}),
            "no incident \"INC-NOPE\"; list_incidents gives the ids",
        ),
        (
            "list_incidents",
            json!({"state": "sleeping"}),
            "state: expected open, acknowledged, resolved or all",
        ),
        (
            "list_tools",
            json!({"cursor": "garbage"}),
            "cursor: expected a next_cursor",
        ),
    ] {
        let r = call(&server, tool, args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(says), "{tool}: {text}");
    }
}

#[test]
fn query_refuses_writes_files_and_what_runs_past_its_limits() {
    let (_dir, server) = demo();
    for (sql, says) in [
        ("DELETE FROM tool_daily", "only SELECT is allowed"),
        ("DROP TABLE spans", "only SELECT is allowed"),
        (
            "SELECT * FROM read_parquet('/etc/passwd')",
            "file functions are not allowed",
        ),
        (
            "SELECT * FROM read_csv('/etc/hosts')",
            "file functions are not allowed",
        ),
        (
            "SELECT 1 FROM spans; SELECT 2 FROM spans",
            "exactly one SELECT",
        ),
    ] {
        let r = call(&server, "query", json!({"sql": sql}));
        assert_eq!(r["isError"], true, "{sql}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("query refused") && text.contains(says),
            "{sql}: {text}"
        );
    }
    // Past the row limit: cut, and said so.
    let r = call(
        &server,
        "query",
        json!({"sql": "SELECT * FROM spans", "days": 7}),
    );
    let c = &r["structuredContent"];
    assert!(c["row_count"].as_u64().unwrap() <= 500, "{c}");
    assert!(c["truncated"].as_str().is_some(), "{c}");
    let r = call(
        &server,
        "query",
        json!({"sql": "SELECT 1 FROM spans", "days": 30}),
    );
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("days: expected 1 to 7"));
}

#[test]
fn the_token_and_the_origin_are_checked() {
    let (_dir, server) = demo();
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
    let base = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/list"),
    ];
    let r = post(&server, &body, &base);
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.text().unwrap().contains("Authorization: Bearer"));
    let r = post(
        &server,
        &body,
        &[base[0], base[1], ("Authorization", "Bearer wrong")],
    );
    assert_eq!(r.status().as_u16(), 401);
    let auth = format!("Bearer {TOKEN}");
    let r = post(
        &server,
        &body,
        &[
            base[0],
            base[1],
            ("Authorization", &auth),
            ("Origin", "https://evil.example"),
        ],
    );
    assert_eq!(r.status().as_u16(), 403, "{}", r.text().unwrap());
    let own = format!("http://127.0.0.1:{}", server.http.port());
    let r = post(
        &server,
        &body,
        &[base[0], base[1], ("Authorization", &auth), ("Origin", &own)],
    );
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap());
}

#[test]
fn a_2025_client_gets_a_session_and_deleting_it_ends_it() {
    let (_dir, server) = demo();
    let auth = format!("Bearer {TOKEN}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "stormwatch-test", "version": "1"}}});
    let r = post(&server, &init, &[("Authorization", &auth)]);
    assert_eq!(r.status().as_u16(), 200);
    let session = r
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let v = answer(&r.text().unwrap());
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25", "{v}");
    let h = |extra: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("Authorization", auth.clone()),
            ("Mcp-Session-Id", session.clone()),
            ("MCP-Protocol-Version", "2025-11-25".to_string()),
        ];
        v.extend(extra.iter().cloned());
        v
    };
    let send = |body: &Value, headers: &[(&'static str, String)]| {
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(&server, body, &pairs)
    };
    let r = send(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &h(&[]),
    );
    assert_eq!(r.status().as_u16(), 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let r = send(&list, &h(&[]));
    assert_eq!(r.status().as_u16(), 200);
    let v = answer(&r.text().unwrap());
    assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 15);
    let r = Client::new()
        .delete(format!("http://{}/mcp", server.http))
        .header("Authorization", &auth)
        .header("Mcp-Session-Id", &session)
        .send()
        .unwrap();
    // 204: the MCP Python SDK logs "Session termination failed" on any
    // other success code.
    assert_eq!(r.status().as_u16(), 204, "{}", r.status());
    let r = send(&list, &h(&[]));
    assert_eq!(r.status().as_u16(), 404, "an ended session is gone");
}

/// `tools/list` as the snapshot holds it: names, descriptions, schemas and
/// annotations change only on purpose. `STORMWATCH_UPDATE_SNAPSHOTS=1`
/// writes the snapshot anew.
#[test]
fn tools_list_is_held_by_a_snapshot() {
    let (_dir, server) = demo();
    let got = serde_json::to_string_pretty(&Value::Array(tools(&server))).unwrap() + "\n";
    let path = repo().join("tests/snapshots/mcp_tools_list.json");
    if std::env::var_os("STORMWATCH_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "tools/list differs from {} (run with STORMWATCH_UPDATE_SNAPSHOTS=1 to accept it):\n{got}",
        path.display()
    );
    let list: Vec<Value> = serde_json::from_str(&got).unwrap();
    for t in &list {
        let name = t["name"].as_str().unwrap();
        let a = &t["annotations"];
        let writes = matches!(name, "run_sweep" | "mute_signal" | "resolve_signal");
        assert_eq!(a["readOnlyHint"], json!(!writes), "{name}: {a}");
        if writes {
            assert_eq!(a["destructiveHint"], json!(false), "{name}: {a}");
        }
        assert_eq!(t["outputSchema"]["type"], "object", "{name}");
    }
}
