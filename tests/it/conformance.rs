//! The framework conformance suite (docs/detection.md §1): mainstream
//! agent frameworks, each pinned (`scripts/py/requirements-*.txt`) and run
//! offline with a scripted model, send their own OpenTelemetry spans —
//! the framework's tracing, the MCP Python SDK's native client and server
//! spans — to a running `stormwatch serve`; then what is stored, what the
//! sweep finds, `/api/tools` and the coverage report must be what a person
//! reading those traces would say.
//!
//! Every harness (`scripts/frameworks/<framework>_agent.py <scenario>
//! --endpoint URL`) runs one agent turn and prints a manifest: the trace,
//! the session, the tool, its calls and failures, and every span it (and
//! its MCP server) exported, each with the tool it is a call of. The
//! scenarios, the same for every framework:
//!
//! - **storm**: one tool called 8 times with the same arguments, every call
//!   failing with "HTTP 503 Service Unavailable" → exactly one
//!   `retry_storm`, of 8 calls and 8 failures, class `unavailable` where
//!   the framework records the words (the OpenAI Agents SDK's default
//!   error function does not: `unknown`, and the coverage report says so);
//! - **healthy**: one tool called 8 times with 8 different arguments, two
//!   of them failing deterministically (404) → no signal at all;
//! - **MCP storm**: the storm through an MCP tool (`lookup_fare` on the MCP
//!   Python SDK 2.x over stdio, traced on both sides: framework span → MCP
//!   client span → MCP server span) → one storm of 8, and `/api/tools`
//!   holding that tool with 8 calls and no other tool;
//! - **hand-offs**: the storm split over sub-agents of one request — ADK's
//!   `transfer_to_agent` (4 + 4 calls in sibling agent spans under the
//!   workflow), a LangGraph graph running two ReAct sub-agents — → one
//!   storm of 8 in the request's turn;
//! - **blind** (Google ADK by default): the storm, recorded without
//!   arguments, results or failures → the coverage report names the
//!   service blind for all three, with ADK's own switch.
//!
//! The same checks run on the recorded OTLP bodies
//! (`fixtures/frameworks/<fixture>.json`) through `import`, with no
//! framework installed: a framework release that changes its spans shows
//! up as a failing replay. Problems are collected and reported together,
//! with the sweep's signals, so one failing run shows everything.

use std::path::Path;
use std::process::Command;

use crate::common::{python, repo, rows_by_key, run, spans, Server};

/// A framework harness: the venv whose interpreter runs it, and its script.
#[derive(Clone, Copy)]
struct Harness {
    label: &'static str,
    venv: &'static str,
    script: &'static str,
}

const ADK: Harness = Harness {
    label: "google-adk",
    venv: "STORMWATCH_PY_ADK",
    script: "adk_agent.py",
};
const OAI_AGENTS: Harness = Harness {
    label: "openai-agents + openinference",
    venv: "STORMWATCH_PY_OAI_AGENTS",
    script: "oai_agents_agent.py",
};
const PYDANTIC_MCP: Harness = Harness {
    label: "pydantic-ai + MCP",
    venv: "STORMWATCH_PY_PYDANTIC_MCP",
    script: "pydantic_ai_mcp_agent.py",
};
const STRANDS: Harness = Harness {
    label: "strands",
    venv: "STORMWATCH_PY_STRANDS",
    script: "strands_agent.py",
};
const SMOLAGENTS: Harness = Harness {
    label: "smolagents + openinference",
    venv: "STORMWATCH_PY_SMOLAGENTS",
    script: "smolagents_agent.py",
};
const LANGGRAPH: Harness = Harness {
    label: "langgraph + openinference",
    venv: "STORMWATCH_PY_LANGGRAPH",
    script: "langgraph_agent.py",
};

/// What a scenario must come to.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// One retry storm of `calls` calls, all failed, of this class.
    Storm {
        tool: &'static str,
        calls: u64,
        class: &'static str,
    },
    /// No signal at all; `/api/tools` holds `tool` with `calls` calls and no
    /// other tool.
    Nothing { tool: &'static str, calls: u64 },
    /// A storm through an MCP tool: as `Storm`, and `/api/tools` holds the
    /// tool with `calls` calls and no other tool.
    McpStorm {
        tool: &'static str,
        calls: u64,
        class: &'static str,
    },
    /// The coverage report names these gaps for the service, each with a
    /// fix naming `fix`.
    Blind {
        gaps: &'static [&'static str],
        fix: &'static str,
    },
}

#[derive(Clone, Copy)]
struct Case {
    harness: Harness,
    /// The harness's arguments before `--endpoint`: the scenario, and any flag.
    scenario: &'static str,
    /// `fixtures/frameworks/{fixture}.json`.
    fixture: &'static str,
    expect: Expect,
}

const STORM: Expect = Expect::Storm {
    tool: "search_flights",
    calls: 8,
    class: "unavailable",
};
const HEALTHY: Expect = Expect::Nothing {
    tool: "web_search",
    calls: 8,
};
const MCP_STORM: Expect = Expect::McpStorm {
    tool: "lookup_fare",
    calls: 8,
    class: "unavailable",
};

fn case(harness: Harness, scenario: &'static str, fixture: &'static str, expect: Expect) -> Case {
    Case {
        harness,
        scenario,
        fixture,
        expect,
    }
}

fn adk() -> Vec<Case> {
    vec![
        case(ADK, "storm-reflect", "adk-storm-reflect", STORM),
        case(ADK, "storm-dict", "adk-storm-dict", STORM),
        // One request handed from a front desk to a billing agent twice
        // (transfer_to_agent: sibling invoke_agent spans under the
        // workflow), 4 + 4 failing calls: one storm of 8.
        case(ADK, "storm-handoff", "adk-storm-handoff", STORM),
        case(ADK, "healthy", "adk-healthy", HEALTHY),
        case(
            ADK,
            "storm-default",
            "adk-storm-default",
            Expect::Blind {
                gaps: &["arguments", "results", "failures"],
                fix: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            },
        ),
    ]
}

fn oai_agents() -> Vec<Case> {
    vec![
        case(OAI_AGENTS, "storm", "oai-agents-storm", STORM),
        case(
            OAI_AGENTS,
            "storm-redacted",
            "oai-agents-storm-redacted",
            Expect::Storm {
                tool: "search_flights",
                calls: 8,
                class: "unknown",
            },
        ),
        case(OAI_AGENTS, "healthy", "oai-agents-healthy", HEALTHY),
        // OpenInference's GenAI mapping copies the tool's schema into
        // gen_ai.tool.call.arguments: eight queries must stay eight.
        case(
            OAI_AGENTS,
            "healthy --genai-semconv",
            "oai-agents-healthy-genai",
            HEALTHY,
        ),
        case(OAI_AGENTS, "mcp-storm", "oai-agents-mcp-storm", MCP_STORM),
    ]
}

fn pydantic_mcp() -> Vec<Case> {
    vec![
        case(
            PYDANTIC_MCP,
            "mcp-storm",
            "pydantic-ai-mcp-storm",
            MCP_STORM,
        ),
        case(
            PYDANTIC_MCP,
            "mcp-healthy",
            "pydantic-ai-mcp-healthy",
            Expect::Nothing {
                tool: "lookup_fare",
                calls: 8,
            },
        ),
    ]
}

fn strands() -> Vec<Case> {
    vec![
        case(STRANDS, "storm", "strands-storm", STORM),
        case(STRANDS, "storm-latest", "strands-storm-latest", STORM),
        case(STRANDS, "healthy", "strands-healthy", HEALTHY),
        case(STRANDS, "mcp-storm", "strands-mcp-storm", MCP_STORM),
    ]
}

fn smolagents() -> Vec<Case> {
    vec![
        case(SMOLAGENTS, "storm", "smolagents-storm", STORM),
        case(SMOLAGENTS, "healthy", "smolagents-healthy", HEALTHY),
    ]
}

fn langgraph() -> Vec<Case> {
    vec![
        case(LANGGRAPH, "storm", "langgraph-storm", STORM),
        case(LANGGRAPH, "healthy", "langgraph-healthy", HEALTHY),
        // A plain StateGraph running two ReAct sub-agents one after the
        // other, 4 + 4 failing calls: one storm of 8 in the graph's turn.
        case(
            LANGGRAPH,
            "storm-subagents",
            "langgraph-storm-subagents",
            STORM,
        ),
        // A ToolException the ToolNode answers: the TOOL span ends OK, the
        // failure only in the ToolMessage it records as output.
        case(
            LANGGRAPH,
            "storm-toolexception",
            "langgraph-storm-toolexception",
            STORM,
        ),
    ]
}

/// Run one scenario against the server; its stdout is the manifest.
fn run_scenario(server: &Server, c: &Case) -> serde_json::Value {
    let mut cmd = Command::new(python(c.harness.venv));
    cmd.arg(repo().join("scripts/frameworks").join(c.harness.script));
    cmd.args(c.scenario.split_whitespace());
    cmd.args(["--endpoint", &server.traces_url()]);
    // The exporters read OTEL_* from the environment; start from none.
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{} {}: {}\nserver log:\n{}",
        c.harness.label,
        c.scenario,
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("manifest: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `stormwatch sweep --format json` an hour after `end_ns`, so every turn
/// has settled.
fn sweep(data: &Path, end_ns: i64) -> serde_json::Value {
    let now =
        (chrono::DateTime::from_timestamp_nanos(end_ns) + chrono::Duration::hours(1)).to_rfc3339();
    json_of(&["sweep", "--now", &now, "--format", "json"], data)
}

/// `stormwatch <args> --data-dir data` as JSON.
fn json_of(args: &[&str], data: &Path) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--data-dir", data.to_str().unwrap()]);
    let out = run(&all, &[]);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The newest span end in the store.
fn last_end_ns(data: &Path) -> i64 {
    let df = spans(data);
    let ends = df.column("end_ns").unwrap().i64().unwrap().clone();
    (0..ends.len())
        .filter_map(|i| ends.get(i))
        .max()
        .unwrap_or(0)
}

/// What the sweep (and, for an MCP storm, `/api/tools`; for a blind run,
/// the coverage report) says against what the case expects.
fn detection_problems(c: &Case, data: &Path, report: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let signals = report["signals"].as_array().unwrap();
    let storm = match c.expect {
        Expect::Storm { tool, calls, class } | Expect::McpStorm { tool, calls, class } => {
            Some((tool, calls, class))
        }
        _ => None,
    };
    if let Some((tool, calls, class)) = storm {
        let storms: Vec<&serde_json::Value> = signals
            .iter()
            .filter(|s| s["kind"] == "retry_storm")
            .collect();
        let want_key = format!("v1:retry_storm:{tool}:{class}");
        match storms[..] {
            [s] if s["key"] == want_key.as_str() => {
                let evidence = s["evidence"].as_array().unwrap();
                let counts: Vec<(u64, u64)> = evidence
                    .iter()
                    .map(|e| {
                        (
                            e["calls"].as_u64().unwrap_or(0),
                            e["failures"].as_u64().unwrap_or(0),
                        )
                    })
                    .collect();
                if counts != [(calls, calls)] {
                    problems.push(format!(
                        "one storm of {calls} calls and {calls} failures expected; its evidence counts (calls, failures) {counts:?}"
                    ));
                }
            }
            _ => problems.push(format!(
                "exactly one retry_storm signal {want_key} expected; got {:?}",
                storms.iter().map(|s| &s["key"]).collect::<Vec<_>>()
            )),
        }
    } else if !signals.is_empty() && matches!(c.expect, Expect::Nothing { .. }) {
        problems.push("no signal expected".into());
    }
    if let Expect::McpStorm { tool, calls, .. } | Expect::Nothing { tool, calls } = c.expect {
        problems.extend(api_tools_problems(data, tool, calls));
    }
    if let Expect::Blind { gaps, fix } = c.expect {
        let coverage = json_of(&["coverage", "--format", "json", "--days", "366"], data);
        let scopes = coverage["scopes"].as_array().unwrap();
        for gap in gaps {
            let found = scopes.iter().any(|s| {
                s["gaps"].as_array().unwrap().iter().any(|g| {
                    g["what"] == *gap && g["fix"].as_str().is_some_and(|f| f.contains(fix))
                })
            });
            if !found {
                problems.push(format!(
                    "the coverage report names no {gap} gap with a fix naming {fix}: {coverage:#}"
                ));
            }
        }
    }
    problems
}

/// `/api/tools` of a server over `data`: `tool` with `calls` calls, and no other tool.
fn api_tools_problems(data: &Path, tool: &str, calls: u64) -> Vec<String> {
    let server = Server::start(data, &[], &[]);
    let text =
        reqwest_blocking::blocking::get(format!("http://{}/api/tools?days=366", server.http))
            .unwrap()
            .text()
            .unwrap();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    server.stop();
    let tools: Vec<(String, u64)> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tool"].as_str().unwrap().to_string(),
                t["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    if tools != [(tool.to_string(), calls)] {
        vec![format!(
            "/api/tools should hold {tool} with {calls} calls and no other tool; it holds {tools:?}"
        )]
    } else {
        Vec::new()
    }
}

/// Every span the manifest lists is stored once, as a call of the tool the
/// manifest names (or of none), and nothing else is stored.
fn stored_problems(data: &Path, manifest: &serde_json::Value) -> Vec<String> {
    let df = spans(data);
    let stored = rows_by_key(&df, &["tool_name", "is_tool_call"]);
    let mut problems = Vec::new();
    let list = manifest["spans"].as_array().unwrap();
    for s in list {
        let key = format!(
            "{}/{}",
            s["trace_id"].as_str().unwrap(),
            s["span_id"].as_str().unwrap()
        );
        let want = s["tool_name"].as_str();
        match stored.get(&key) {
            None => problems.push(format!("span {key} ({}) not stored", s["name"])),
            Some(row) => {
                let is_call = row[1].as_deref() == Some("true");
                let got = if is_call { row[0].as_deref() } else { None };
                if got != want {
                    problems.push(format!(
                        "span {key} ({}) stored as a call of {got:?}, want {want:?}",
                        s["name"]
                    ));
                }
            }
        }
    }
    if df.height() != list.len() {
        problems.push(format!("{} spans stored, {} sent", df.height(), list.len()));
    }
    problems
}

fn report(c: &Case, how: &str, problems: &[String], report: &serde_json::Value) {
    assert!(
        problems.is_empty(),
        "{} {} ({how}):\n- {}\nsweep signals:\n{}",
        c.harness.label,
        c.scenario,
        problems.join("\n- "),
        crate::frameworks::summary(report)
    );
}

/// Live: run the scenario against a real `serve`, stop it (flush), check
/// the store, the sweep and what the case expects.
fn check_live(c: &Case) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let manifest = run_scenario(&server, c);
    server.stop();
    let mut problems = Vec::new();
    // One turn is one trace (an MCP client's handshake before the turn
    // may make traces of its own).
    let traces = manifest["trace_ids"].as_array().unwrap();
    if traces.len() != 1 && !matches!(c.expect, Expect::McpStorm { .. }) {
        problems.push(format!("one turn is one trace: {traces:?}"));
    }
    // What the harness says it did: 8 calls, all failing in a storm, two in
    // a healthy turn.
    let want = match c.expect {
        Expect::Storm { calls, .. } | Expect::McpStorm { calls, .. } => (calls, calls),
        Expect::Nothing { calls, .. } => (calls, 2),
        Expect::Blind { .. } => (8, 8),
    };
    let did = (
        manifest["tool_calls"].as_u64().unwrap_or(0),
        manifest["failures"].as_u64().unwrap_or(0),
    );
    if did != want {
        problems.push(format!(
            "the harness made (calls, failures) {did:?}, the scenario is {want:?}"
        ));
    }
    problems.extend(stored_problems(&data, &manifest));
    let swept = sweep(&data, last_end_ns(&data));
    problems.extend(detection_problems(c, &data, &swept));
    report(c, "live", &problems, &swept);
}

/// Replay: the recorded OTLP body through `import`, the same checks.
fn check_fixture(c: &Case) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = repo()
        .join("fixtures/frameworks")
        .join(format!("{}.json", c.fixture));
    crate::common::import_files(&data, &[&path]);
    let swept = sweep(&data, last_end_ns(&data));
    let problems = detection_problems(c, &data, &swept);
    report(c, "replayed fixture", &problems, &swept);
}

fn live(cases: Vec<Case>) {
    for c in &cases {
        check_live(c);
    }
}

#[test]
fn google_adk_runs_read_right() {
    live(adk());
}

#[test]
fn openai_agents_with_openinference_runs_read_right() {
    live(oai_agents());
}

#[test]
fn pydantic_ai_with_mcp_tools_runs_read_right() {
    live(pydantic_mcp());
}

#[test]
fn strands_agents_runs_read_right() {
    live(strands());
}

#[test]
fn smolagents_with_openinference_runs_read_right() {
    live(smolagents());
}

#[test]
fn langgraph_with_openinference_runs_read_right() {
    live(langgraph());
}

#[test]
fn every_recorded_framework_run_replays_the_same() {
    let cases: Vec<Case> = [
        adk(),
        oai_agents(),
        pydantic_mcp(),
        strands(),
        smolagents(),
        langgraph(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for c in &cases {
        check_fixture(c);
    }
}
