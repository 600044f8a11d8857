//! MCP clients written elsewhere against the MCP server: the MCP Python
//! SDK's `Client` (mcp 2.3.0 from PyPI, pinned in
//! `scripts/py/requirements-mcp.txt`) over Streamable HTTP in each of its
//! modes (legacy: initialize at 2025-11-25; auto: `server/discover` first;
//! 2026-07-28: stateless, no probe) and over `stormwatch mcp --stdio`, and
//! the MCP TypeScript SDK's (`@modelcontextprotocol/sdk` from npm, pinned in
//! `scripts/interop/mcp-ts/package-lock.json`) over Streamable HTTP. Each
//! walks the demo incident (search_flights flagged on July 29, its retry
//! storm and the storm's four turns that day, a loop of 15 attempts without
//! backoff, the remedy) with every structuredContent checked against its
//! tool's outputSchema; without the API token, or with a wrong one, each
//! client fails and names the 401.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{python, repo, Server, BIN};

const VENV: &str = "STORMWATCH_PY_MCP";

/// `serve` takes an API token of 16 characters or more.
const TOKEN: &str = "t0ken-mcp-clients-5e0c2a";

/// Every tool of the MCP contract (issue 14).
const TOOLS: &[&str] = &[
    "list_tools",
    "get_tool_daily",
    "list_signals",
    "get_signal",
    "list_signal_traces",
    "get_trace",
    "find_retry_storms",
    "describe_tables",
    "query",
    "run_sweep",
    "mute_signal",
    "resolve_signal",
];

/// `serve --demo` with the API token, its data in `dir/data`.
fn demo_server(dir: &Path) -> (PathBuf, Server) {
    let data = dir.join("data");
    let server = Server::start(&data, &["--demo", "--api-token", TOKEN], &[]);
    (data, server)
}

fn mcp_url(server: &Server) -> String {
    format!("http://{}/mcp", server.http)
}

/// `walk.py` with `args`, run by the venv-mcp interpreter.
fn py_walk(args: &[&str]) -> Output {
    let script = repo().join("scripts/interop/mcp-py/walk.py");
    Command::new(python(VENV))
        .arg(script)
        .args(args)
        .output()
        .unwrap()
}

/// `walk.py --url` against the server in `mode`, with `token` if any.
fn py_walk_http(server: &Server, mode: &str, token: Option<&str>) -> Output {
    let url = mcp_url(server);
    let mut args = vec!["--url", url.as_str(), "--mode", mode];
    if let Some(t) = token {
        args.extend(["--token", t]);
    }
    py_walk(&args)
}

/// `node walk.mjs --url` against the server, with `token` if any.
fn ts_walk(server: &Server, token: Option<&str>) -> Output {
    let node = std::env::var("STORMWATCH_NODE").unwrap_or_else(|_| {
        panic!("STORMWATCH_NODE is not set: run the tests through scripts/test.sh, which installs the npm packages")
    });
    let dir = repo().join("scripts/interop/mcp-ts");
    assert!(
        dir.join("node_modules/.stormwatch-lock.sha256").exists(),
        "{}/node_modules is not installed; run scripts/frameworks/setup_node.sh",
        dir.display()
    );
    let mut cmd = Command::new(node);
    cmd.current_dir(&dir)
        .arg(dir.join("walk.mjs"))
        .args(["--url", &mcp_url(server)]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.output().unwrap()
}

/// The one JSON document a walk that succeeded printed.
fn walked(what: &str, out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: the walk failed ({}):\nstderr:\n{stderr}\nstdout:\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("{what}: stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{stderr}")
    })
}

/// The walk saw the demo incident as the contract's demo walk says, at
/// `protocol`.
fn assert_demo_walk(what: &str, v: &Value, protocol: &str) {
    assert_eq!(
        v["protocol_version"], protocol,
        "{what}: negotiated protocol version: {v:#}"
    );
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no tools: {v:#}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in TOOLS {
        assert!(tools.contains(t), "{what}: tools/list lacks {t}: {tools:?}");
    }
    let flagged = v["flagged_days"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: search_flights has no flagged_days: {v:#}"));
    assert!(
        flagged.iter().any(|d| d == "2026-07-29"),
        "{what}: search_flights' flagged_days: {flagged:?}"
    );
    assert!(
        v["signal"].as_str().is_some_and(|s| !s.is_empty()),
        "{what}: signal id: {v:#}"
    );
    assert_eq!(v["signal_kind"], "retry_storm", "{what}: {v:#}");
    assert_eq!(v["signal_tool"], "search_flights", "{what}: {v:#}");
    // The walk follows the first flagged day: the four July 29 storms. On
    // every day the traces are the signal's whole evidence.
    assert_eq!(v["day"], "2026-07-29", "{what}: {v:#}");
    assert_eq!(v["traces"], 4, "{what}: the storm's traces that day: {v:#}");
    assert!(
        v["evidence"].as_u64().is_some_and(|n| n >= 4),
        "{what}: get_signal's evidence: {v:#}"
    );
    assert_eq!(
        v["traces_all_days"], v["evidence"],
        "{what}: list_signal_traces gives all the evidence get_signal counts: {v:#}"
    );
    assert_eq!(v["attempts"], 15, "{what}: the loop's attempts: {v:#}");
    assert_eq!(
        v["rhythm"], "no_backoff",
        "{what}: the loop's rhythm: {v:#}"
    );
    let remedy = v["remedy"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: get_signal's remedy is not an object: {v:#}"));
    for part in ["waiting_fixes", "cut_off", "change", "summary"] {
        assert!(
            remedy
                .get(part)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.trim().is_empty()),
            "{what}: remedy.{part} is not a non-empty string: {remedy:?}"
        );
    }
}

/// A walk refused for its token: non-zero, nothing on stdout, the 401 named.
fn assert_refused(what: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{what}: the walk succeeded without the token:\n{stdout}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: a refusal, not a crash:\n{stderr}"
    );
    assert!(stdout.trim().is_empty(), "{what}: printed {stdout}");
    assert!(
        stderr.contains("401"),
        "{what}: the client's failure names the 401:\n{stderr}"
    );
}

fn python_walk_over_http(mode: &str, protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_data, server) = demo_server(dir.path());
    let out = py_walk_http(&server, mode, Some(TOKEN));
    let what = format!("python mode {mode}");
    let v = walked(&what, &out);
    assert_eq!(v["mode"], mode);
    assert_demo_walk(&what, &v, protocol);
    server.stop();
}

#[test]
fn python_client_in_legacy_mode_walks_the_demo_at_2025_11_25() {
    python_walk_over_http("legacy", "2025-11-25");
}

#[test]
fn python_client_in_auto_mode_discovers_2026_07_28_and_walks_the_demo() {
    python_walk_over_http("auto", "2026-07-28");
}

#[test]
fn python_client_pinned_to_2026_07_28_walks_the_demo_stateless() {
    python_walk_over_http("2026-07-28", "2026-07-28");
}

#[test]
fn typescript_client_walks_the_demo_and_ends_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, server) = demo_server(dir.path());
    let out = ts_walk(&server, Some(TOKEN));
    let v = walked("typescript", &out);
    assert_eq!(v["mode"], "typescript");
    // The SDK 1.x's newest revision: it has no 2026-07-28.
    assert_demo_walk("typescript", &v, "2025-11-25");
    // DELETE ends the session (the SDK would take a 405, "not allowed", as
    // well), and the ended session's id is unknown from then on.
    let session = &v["session"];
    assert!(
        session["delete_status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s)),
        "DELETE /mcp: {session}"
    );
    assert_eq!(
        session["status_after_delete"], 404,
        "a POST with the ended session's id: {session}"
    );
    server.stop();
}

#[test]
fn python_client_over_stdio_walks_the_demo_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (data, server) = demo_server(dir.path());
    // The demo's data and signals, flushed and at rest.
    server.stop();
    let data = data.display().to_string();
    for (mode, protocol) in [
        ("legacy", "2025-11-25"),
        ("auto", "2026-07-28"),
        ("2026-07-28", "2026-07-28"),
    ] {
        let out = py_walk(&["--stdio", BIN, "--data-dir", &data, "--mode", mode]);
        let what = format!("python stdio mode {mode}");
        let v = walked(&what, &out);
        assert_demo_walk(&what, &v, protocol);
    }
}

#[test]
fn clients_without_the_token_or_with_a_wrong_one_fail_on_the_401() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, server) = demo_server(dir.path());
    for mode in ["legacy", "auto", "2026-07-28"] {
        assert_refused(
            &format!("python {mode}, no token"),
            &py_walk_http(&server, mode, None),
        );
        assert_refused(
            &format!("python {mode}, wrong token"),
            &py_walk_http(&server, mode, Some("not-the-t0ken")),
        );
    }
    assert_refused("typescript, no token", &ts_walk(&server, None));
    assert_refused(
        "typescript, wrong token",
        &ts_walk(&server, Some("not-the-t0ken")),
    );
    server.stop();
}
