//! The dashboard, served by the real binary: walked in headless Chromium
//! (tests/browser/dashboard.py) on the demo data and on hostile span data,
//! and fetched over HTTP for the shapes that must render: an empty store,
//! one day, a thousand tools, a trace of ten thousand spans.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{python, repo, run, Server};

fn get(server: &Server, path: &str) -> (u16, String) {
    let r = reqwest_blocking::blocking::get(format!("http://{}{path}", server.http)).unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

fn browser(mode: &str, server: &Server, extra: &[&str]) {
    let shots = repo().join("target").join("screenshots");
    let out = Command::new(python("STORMWATCH_PY_BROWSER"))
        .arg(repo().join("tests/browser/dashboard.py"))
        .args([mode, "--base", &format!("http://{}", server.http)])
        .arg("--shots")
        .arg(&shots)
        .args(extra)
        .output()
        .expect("run the browser script");
    assert!(
        out.status.success(),
        "{mode}: {}{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
}

/// The seeds' two reads one click apart, in a real browser: the July 29
/// spike in red on the overview; the storm signal's evidence trace with 15
/// attempts and no backoff; mute from the page; the overview's incidents
/// list, the search_flights incident's page and its members' links.
#[test]
fn the_demo_incident_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--demo"], &[]);
    browser("demo", &server, &[]);
    let (status, body) = get(&server, "/api/openapi.json");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["openapi"], "3.0.3");
    // The API's state changes: JSON by default, refused from another site,
    // bad input a 400, a change that makes no sense a 409.
    let signals: Value = serde_json::from_str(&get(&server, "/api/signals?state=open").1).unwrap();
    let id = signals[0]["id"].as_str().unwrap().to_string();
    let client = reqwest_blocking::blocking::Client::new();
    let post = |path: &str, origin: Option<&str>| {
        let mut r = client.post(format!("http://{}{path}", server.http));
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        let r = r.send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(
        post(
            &format!("/api/signals/{id}/mute"),
            Some("http://evil.example")
        )
        .0,
        403
    );
    assert_eq!(post(&format!("/api/signals/{id}/unmute"), None).0, 409);
    assert_eq!(
        post(&format!("/api/signals/{id}/mute?until=3000-01-01"), None).0,
        400
    );
    assert_eq!(
        post(
            &format!("/api/signals/{id}/mute?until_escalates=maybe"),
            None
        )
        .0,
        400
    );
    let (status, body) = post(&format!("/api/signals/{id}/mute"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["state"],
        "muted"
    );
    assert_eq!(post(&format!("/api/signals/{id}/unmute"), None).0, 200);
    assert_eq!(get(&server, "/api/signals?state=bogus").0, 400);
    assert_eq!(
        get(&server, "/traces/baacbed78f2b62522a113193688fafe8?page=0").0,
        400
    );
    assert_eq!(
        get(
            &server,
            "/traces/baacbed78f2b62522a113193688fafe8?page=99999999999999999999"
        )
        .0,
        400
    );
    server.stop();
}

/// Signing in, in a real browser: a page without a session goes to
/// `/login`, the token signs in and comes back, the cookie is HttpOnly,
/// SameSite=Lax and lasts 12 h; no CSP violation on the way.
#[test]
fn signing_in_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let token = "api-0f3e1d5c2b4a6978";
    let server = Server::start(
        &dir.path().join("data"),
        &["--demo", "--api-token", token],
        &[],
    );
    browser("login", &server, &["--token", token]);
    server.stop();
}

/// One tool call: (trace, span, parent, tool, start ms, ok).
type ToolSpan = (String, String, Option<String>, String, i64, bool);

/// OTLP JSON of tool calls.
fn otlp(spans: &[ToolSpan]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|(trace, span, parent, tool, ms, ok)| {
            let start = (1_785_300_000_000i64 + ms) * 1_000_000;
            let mut attributes = vec![
                json!({"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}),
                json!({"key": "gen_ai.tool.name", "value": {"stringValue": tool}}),
            ];
            if !ok {
                attributes.push(json!({"key": "http.response.status_code", "value": {"intValue": "503"}}));
            }
            json!({
                "traceId": trace, "spanId": span, "parentSpanId": parent.clone().unwrap_or_default(),
                "name": format!("execute_tool {tool}"), "kind": 1,
                "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 50_000_000).to_string(),
                "attributes": attributes,
                "status": {"code": if *ok { 1 } else { 2 }, "message": if *ok { "" } else { "HTTP 503" }}
            })
        })
        .collect();
    json!({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})
}

/// `doc` with an agent span (`invoke_agent`) over the whole of each
/// `(trace, span id)`: the calls parented to it are one turn.
fn with_agents(mut doc: Value, agents: &[(String, String)]) -> Value {
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array_mut()
        .unwrap();
    for (trace, span) in agents {
        let start = (1_785_300_000_000i64 - 1_000) * 1_000_000;
        spans.push(json!({
            "traceId": trace, "spanId": span, "name": "invoke_agent travel", "kind": 1,
            "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 600_000_000_000i64).to_string(),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
            "status": {"code": 1}
        }));
    }
    doc
}

fn import(data: &Path, file: &Path, body: &Value) {
    std::fs::write(file, body.to_string()).unwrap();
    crate::common::import_files(data, &[file]);
}

const HOSTILE: [&str; 2] = [
    "<script>window.__pwned=1</script>",
    "\"><img src=x onerror=\"window.__pwned=1\">",
];

/// Tools named to attack the page: text everywhere, in the browser and in
/// every body the server sends.
#[test]
fn hostile_tool_names_are_inert_in_every_page_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut spans = Vec::new();
    let mut agents = Vec::new();
    for (k, tool) in HOSTILE.iter().enumerate() {
        // A storm of each in one agent turn, so they have signals,
        // evidence and an incident too.
        let trace = format!("{:032x}", 0xabc0 + k);
        let agent = format!("{:016x}", 0xa9e0 + k);
        for i in 0..8 {
            spans.push((
                trace.clone(),
                format!("{:016x}", 0x100 * (k + 1) + i),
                Some(agent.clone()),
                tool.to_string(),
                i as i64 * 60,
                false,
            ));
        }
        agents.push((trace, agent));
    }
    import(
        &data,
        &dir.path().join("hostile.json"),
        &with_agents(otlp(&spans), &agents),
    );
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            "2026-08-01",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(&data, &[], &[]);
    let mut extra = Vec::new();
    for t in HOSTILE {
        extra.extend(["--tool", t]);
    }
    browser("hostile", &server, &extra);
    let mut paths = vec![
        "/".to_string(),
        "/signals".into(),
        "/incidents?state=all".into(),
        "/api/tools".into(),
        "/api/signals".into(),
        "/api/incidents?state=all".into(),
    ];
    // The storms are incidents titled with the tools' names.
    let incidents: Value =
        serde_json::from_str(&get(&server, "/api/incidents?state=all").1).unwrap();
    let incidents = incidents["incidents"].as_array().unwrap();
    for t in HOSTILE {
        assert!(
            incidents
                .iter()
                .any(|i| i["title"].as_str().unwrap().contains(t)),
            "an incident names {t}: {incidents:?}"
        );
    }
    for i in incidents {
        let id = i["id"].as_str().unwrap();
        paths.push(format!("/incidents/{id}"));
        paths.push(format!("/api/incidents/{id}"));
    }
    for t in HOSTILE {
        let q: String = t.bytes().map(|b| format!("%{b:02X}")).collect();
        paths.push(format!("/tools/{q}"));
        paths.push(format!("/charts/tools/{q}/daily.svg"));
    }
    let signals: Value = serde_json::from_str(&get(&server, "/api/signals").1).unwrap();
    assert!(
        signals.as_array().unwrap().len() >= HOSTILE.len(),
        "a storm of each: {signals}"
    );
    for s in signals.as_array().unwrap() {
        paths.push(format!("/signals/{}", s["id"].as_str().unwrap()));
        let trace = s["evidence"][0]["trace_id"].as_str().unwrap_or("");
        if !trace.is_empty() {
            paths.push(format!("/traces/{trace}"));
        }
    }
    for p in &paths {
        let r = reqwest_blocking::blocking::get(format!("http://{}{p}", server.http)).unwrap();
        assert_eq!(r.status().as_u16(), 200, "{p}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        let body = r.text().unwrap();
        if p.starts_with("/api/") {
            // Data, not a document: the names as they are, typed as JSON.
            assert!(ct.starts_with("application/json"), "{p}: {ct}");
        } else {
            assert!(
                !body.contains("<script>window") && !body.contains("<img src=x"),
                "{p} carries raw markup"
            );
        }
    }
    server.stop();
}

/// An empty store, one day, a thousand tools, a trace of ten thousand spans:
/// every page answers 200, big traces paginate.
#[test]
fn empty_small_wide_and_deep_stores_all_render() {
    let dir = tempfile::tempdir().unwrap();
    // Empty.
    let empty = Server::start(&dir.path().join("empty"), &[], &[]);
    for p in [
        "/",
        "/signals",
        "/incidents",
        "/api/tools",
        "/api/signals",
        "/api/incidents",
        "/api/feed",
    ] {
        assert_eq!(get(&empty, p).0, 200, "empty store: {p}");
    }
    assert_eq!(get(&empty, "/incidents/INC-BCDF").0, 404);
    assert_eq!(get(&empty, "/api/incidents/INC-BCDF").0, 404);
    assert_eq!(get(&empty, "/tools/nope").0, 404);
    assert_eq!(
        get(&empty, "/traces/00000000000000000000000000000001").0,
        404
    );
    assert_eq!(get(&empty, "/traces/not-hex").0, 400);
    assert_eq!(get(&empty, "/?days=abc").0, 400);
    empty.stop();

    // One day of a thousand tools, and one trace of ten thousand calls.
    let data = dir.path().join("wide");
    let tools: Vec<_> = (0..1000)
        .map(|i| {
            (
                format!("{:032x}", 0x1000 + i),
                format!("{:016x}", 0x1000 + i),
                None,
                format!("tool_{i:04}"),
                i as i64,
                i % 7 != 0,
            )
        })
        .collect();
    import(&data, &dir.path().join("wide.json"), &otlp(&tools));
    let deep_trace = format!("{:032x}", 0xdee9_u64);
    let root = format!("{:016x}", 0xfeed);
    let deep: Vec<_> = (0..10_000)
        .map(|i| {
            (
                deep_trace.clone(),
                format!("{:016x}", 0x10_0000 + i),
                Some(root.clone()),
                format!("deep_{}", i % 5),
                i as i64 * 3,
                i % 11 != 0,
            )
        })
        .collect();
    import(&data, &dir.path().join("deep.json"), &otlp(&deep));
    // A user's own panels: one chart, one table, one whose query is wrong.
    std::fs::create_dir_all(dir.path().join("dashboards")).unwrap();
    std::fs::create_dir_all(dir.path().join("queries")).unwrap();
    let panels = dir.path().join("dashboards/overview.toml");
    std::fs::write(
        &panels,
        "[[panel]]\ntitle = \"Calls by day\"\nquery = \"queries/mine.sql\"\nchart = \"stacked_daily\"\n\n\
         [[panel]]\ntitle = \"Busiest tools\"\nquery = \"queries/busy.sql\"\nchart = \"table\"\n\n\
         [[panel]]\ntitle = \"Broken\"\nquery = \"queries/broken.sql\"\nchart = \"table\"\n",
    )
    .unwrap();
    let q = dir.path().join("queries");
    std::fs::write(
        q.join("mine.sql"),
        "SELECT day, SUM(calls) AS total, SUM(errors) AS errors FROM tool_daily GROUP BY day",
    )
    .unwrap();
    std::fs::write(q.join("busy.sql"), "SELECT tool_name, SUM(calls) AS calls FROM tool_daily GROUP BY tool_name ORDER BY calls DESC, tool_name LIMIT 3").unwrap();
    std::fs::write(
        q.join("broken.sql"),
        "SELECT no_such_column FROM tool_daily",
    )
    .unwrap();
    let server = Server::start(&data, &["--dashboard", panels.to_str().unwrap()], &[]);
    let (status, body) = get(&server, "/");
    assert_eq!(status, 200);
    assert!(
        body.contains("more tools"),
        "the overview shows the busiest 200 of 1005 tools"
    );
    assert!(
        body.contains("Calls by day") && body.contains("Busiest tools"),
        "the user's panels"
    );
    assert!(
        body.contains("<td>deep_0</td>"),
        "the table panel lists the busiest tool"
    );
    assert!(
        body.contains("queries/broken.sql) failed"),
        "a broken panel says so"
    );
    let tools: Value = serde_json::from_str(&get(&server, "/api/tools").1).unwrap();
    assert_eq!(tools["total_tools"], 1005);
    assert_eq!(tools["tools"].as_array().unwrap().len(), 200, "a page");
    let last: Value =
        serde_json::from_str(&get(&server, "/api/tools?page_size=1000&page=2").1).unwrap();
    assert_eq!(last["tools"].as_array().unwrap().len(), 5);
    assert_eq!(get(&server, "/tools/tool_0007").0, 200);
    assert_eq!(get(&server, "/api/tools/tool_0007/daily?days=7").0, 200);
    let (status, body) = get(&server, &format!("/traces/{deep_trace}"));
    assert_eq!(status, 200);
    assert!(body.contains("500 spans a page"));
    assert_eq!(body.matches("<tr class=\"span\"").count(), 500);
    let last: Value =
        serde_json::from_str(&get(&server, &format!("/api/traces/{deep_trace}?page=20")).1)
            .unwrap();
    assert_eq!(last["total_spans"], 10_000);
    assert_eq!(last["spans"].as_array().unwrap().len(), 500);
    let png = reqwest_blocking::blocking::get(format!(
        "http://{}/charts/tools/tool_0007/daily.png",
        server.http
    ))
    .unwrap();
    assert_eq!(png.headers()["content-type"], "image/png");
    server.stop();
}
