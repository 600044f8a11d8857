//! Who is knocking (docs/detection.md §4.2, "Driver"), on real frameworks'
//! traces: a storm the model drove (a model round trip between every two
//! attempts) says `model`, with the round trips and tokens its stored
//! model spans record between the attempts, and a remedy naming the
//! framework's own cap; a storm a retry decorator drove in a tool's body
//! (attempts back to back, the turn's model calls before and after) says
//! `code`, with the remedy that fixes the wrapper.
//!
//! The expected round trips and tokens are counted here from the stored
//! spans (`is_model`, `input_tokens`, `output_tokens`), not taken from the
//! rule: the model spans that lie between the storm's first call's end and
//! its last call's start.
//!
//! - pydantic-ai (live, `STORMWATCH_PY_FRAMEWORKS`) and the Vercel AI SDK
//!   6 and 7: `frameworks.rs` calls [`problems`] on its storm runs, live
//!   and replayed;
//! - every other framework's captured storm (`fixtures/frameworks/`:
//!   LangGraph, the OpenAI Agents SDK, ADK, Strands, smolagents, MCP runs)
//!   replayed through `import`;
//! - the code-driven run: `scripts/frameworks/pydantic_ai_mcp_retry_agent.py`
//!   live (`STORMWATCH_PY_PYDANTIC_MCP`) and as captured
//!   (`fixtures/frameworks/pydantic-ai-mcp-retry.json`): pydantic-ai calls its tool once,
//!   and the tool's retry decorator calls the MCP tool six times through
//!   FastMCP's client, each attempt an MCP client span nest.

use std::path::Path;
use std::process::Command;

use polars::prelude::*;

use crate::common::{import_files, python, repo, run, spans, Server};

const SLACK_NS: i64 = 1_000_000;

/// (model calls, input tokens, output tokens) of the stored model spans
/// between the first call of `tool` in `trace` ending and its last one
/// starting (the outermost spans of `tool`: its MCP nests count once).
fn between(df: &DataFrame, trace: &str, tool: &str) -> (u64, i64, i64) {
    let s = |c: &str| df.column(c).unwrap().str().unwrap().clone();
    let i = |c: &str| df.column(c).unwrap().i64().unwrap().clone();
    let b = |c: &str| df.column(c).unwrap().bool().unwrap().clone();
    let (traces, tools, spans_, parents) = (
        s("trace_id"),
        s("tool_name"),
        s("span_id"),
        s("parent_span_id"),
    );
    let (start, end, input, output) = (
        i("start_ns"),
        i("end_ns"),
        i("input_tokens"),
        i("output_tokens"),
    );
    let is_model = b("is_model");
    let rows: Vec<usize> = (0..df.height())
        .filter(|&r| traces.get(r) == Some(trace))
        .collect();
    let of_tool: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| tools.get(r) == Some(tool))
        .collect();
    let ids: std::collections::HashSet<&str> =
        of_tool.iter().filter_map(|&r| spans_.get(r)).collect();
    // The outermost span of each call: its parent is no span of the tool.
    let calls: Vec<usize> = of_tool
        .into_iter()
        .filter(|&r| parents.get(r).is_none_or(|p| !ids.contains(p)))
        .collect();
    let first_end = calls
        .iter()
        .map(|&r| start.get(r).unwrap())
        .min()
        .map(|first| {
            calls
                .iter()
                .filter(|&&r| start.get(r) == Some(first))
                .map(|&r| end.get(r).unwrap())
                .max()
                .unwrap()
        });
    let last_start = calls.iter().map(|&r| start.get(r).unwrap()).max();
    let (Some(from), Some(to)) = (first_end, last_start) else {
        return (0, 0, 0);
    };
    let mut out = (0, 0, 0);
    for &r in &rows {
        if is_model.get(r) == Some(true)
            && start.get(r).unwrap() + SLACK_NS >= from
            && end.get(r).unwrap() <= to + SLACK_NS
        {
            out.0 += 1;
            out.1 += input.get(r).unwrap_or(0);
            out.2 += output.get(r).unwrap_or(0);
        }
    }
    out
}

/// What the storm signal of `tool` says of its driver, against what the
/// stored spans of `trace` show; `framework` and `setting` are words the
/// model remedy must name (none for `code`).
pub(crate) fn problems(
    label: &str,
    data: &Path,
    report: &serde_json::Value,
    tool: &str,
    trace: &str,
    want: &str,
    remedy_words: &[&str],
) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(signal) = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "retry_storm" && s["tool"] == tool)
    else {
        return vec![format!("{label}: no retry_storm signal for {tool}")];
    };
    let Some(e) = signal["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["trace_id"] == trace)
    else {
        return vec![format!("{label}: no evidence of trace {trace}")];
    };
    let d = &e["driver"];
    let (calls, input, output) = between(&spans(data), trace, tool);
    let got = (
        d["driver"].as_str().unwrap_or("none"),
        d["model_calls"].as_u64().unwrap_or(u64::MAX),
        d["input_tokens"].as_i64().unwrap_or(-1),
        d["output_tokens"].as_i64().unwrap_or(-1),
    );
    if got != (want, calls, input, output) {
        problems.push(format!(
            "{label}: driver (driver, model calls, input, output tokens) {got:?}, want {:?}",
            (want, calls, input, output)
        ));
    }
    match want {
        // A model between every two rounds: as many as the gaps, or more.
        "model" if calls + 1 < e["calls"].as_u64().unwrap_or(0) => problems.push(format!(
            "{label}: {calls} model calls between {} rounds",
            e["calls"]
        )),
        "code" if calls != 0 => {
            problems.push(format!("{label}: {calls} model calls between the attempts"))
        }
        _ => {}
    }
    if want == "model" && input <= 0 {
        problems.push(format!(
            "{label}: the model spans between the attempts recorded no tokens"
        ));
    }
    let change = signal["remedy"]["change"].as_str().unwrap_or("");
    let lead = match want {
        "code" => "fix the retry wrapper",
        _ => "return an error that tells the model not to repeat the call",
    };
    for w in std::iter::once(&lead).chain(remedy_words) {
        if !change.contains(w) {
            problems.push(format!("{label}: the remedy does not say {w:?}: {change}"));
        }
    }
    problems
}

pub(crate) fn sweep_at(data: &Path, now_ns: i64) -> serde_json::Value {
    let now = chrono::DateTime::from_timestamp_nanos(now_ns + 3_600_000_000_000).to_rfc3339();
    let d = data.to_str().unwrap();
    let out = run(
        &["sweep", "--data-dir", d, "--now", &now, "--format", "json"],
        &[],
    );
    assert!(
        out.status.success(),
        "sweep: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn last_end(data: &Path) -> i64 {
    let df = spans(data);
    let ends = df.column("end_ns").unwrap().i64().unwrap().clone();
    (0..ends.len())
        .filter_map(|i| ends.get(i))
        .max()
        .unwrap_or(0)
}

/// The captured storms of every framework: (fixture, tool, framework's
/// name and setting the remedy must name).
const FIXTURES: [(&str, &str, &str, &str); 13] = [
    (
        "langgraph-storm",
        "search_flights",
        "LangGraph",
        "recursion_limit",
    ),
    (
        "langgraph-storm-toolexception",
        "search_flights",
        "LangGraph",
        "recursion_limit",
    ),
    (
        "langgraph-storm-subagents",
        "search_flights",
        "LangGraph",
        "recursion_limit",
    ),
    (
        "oai-agents-storm",
        "search_flights",
        "OpenAI Agents SDK",
        "max_turns",
    ),
    (
        "oai-agents-mcp-storm",
        "lookup_fare",
        "OpenAI Agents SDK",
        "max_turns",
    ),
    (
        "adk-storm-reflect",
        "search_flights",
        "Google ADK",
        "max_llm_calls",
    ),
    (
        "adk-storm-dict",
        "search_flights",
        "Google ADK",
        "max_llm_calls",
    ),
    (
        "adk-storm-handoff",
        "search_flights",
        "Google ADK",
        "max_llm_calls",
    ),
    (
        "strands-storm",
        "search_flights",
        "Strands Agents",
        "limits",
    ),
    (
        "strands-storm-latest",
        "search_flights",
        "Strands Agents",
        "limits",
    ),
    (
        "strands-mcp-storm",
        "lookup_fare",
        "Strands Agents",
        "limits",
    ),
    (
        "smolagents-storm",
        "search_flights",
        "smolagents",
        "max_steps",
    ),
    (
        "pydantic-ai-mcp-storm",
        "lookup_fare",
        "pydantic-ai",
        "UsageLimits",
    ),
];

#[test]
fn every_framework_s_captured_storm_is_driven_by_the_model() {
    let mut problems = Vec::new();
    for (fixture, tool, framework, setting) in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let path = repo()
            .join("fixtures/frameworks")
            .join(format!("{fixture}.json"));
        import_files(&data, &[path.as_path()]);
        let report = sweep_at(&data, last_end(&data));
        let df = spans(&data);
        let traces = df.column("trace_id").unwrap().str().unwrap().clone();
        let tools = df.column("tool_name").unwrap().str().unwrap().clone();
        let trace = (0..df.height())
            .find(|&r| tools.get(r) == Some(tool))
            .and_then(|r| traces.get(r))
            .unwrap()
            .to_string();
        problems.extend(self::problems(
            fixture,
            &data,
            &report,
            tool,
            &trace,
            "model",
            &[framework, setting],
        ));
    }
    assert!(problems.is_empty(), "\n- {}", problems.join("\n- "));
}

#[test]
fn the_captured_retry_decorator_run_is_driven_by_code() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = repo().join("fixtures/frameworks/pydantic-ai-mcp-retry.json");
    import_files(&data, &[path.as_path()]);
    let report = sweep_at(&data, last_end(&data));
    let df = spans(&data);
    let traces = df.column("trace_id").unwrap().str().unwrap().clone();
    let tools = df.column("tool_name").unwrap().str().unwrap().clone();
    let trace = (0..df.height())
        .find(|&r| tools.get(r) == Some("lookup_fare"))
        .and_then(|r| traces.get(r))
        .unwrap()
        .to_string();
    let problems = problems(
        "pydantic-ai-mcp-retry.json",
        &data,
        &report,
        "lookup_fare",
        &trace,
        "code",
        &[],
    );
    assert!(problems.is_empty(), "\n- {}", problems.join("\n- "));
}

#[test]
fn a_retry_decorator_in_a_pydantic_ai_tool_is_driven_by_code() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let mut cmd = Command::new(python("STORMWATCH_PY_PYDANTIC_MCP"));
    cmd.arg(repo().join("scripts/frameworks/pydantic_ai_mcp_retry_agent.py"));
    cmd.args(["mcp-retry", "--endpoint", &server.traces_url()]);
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    server.stop();
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The model called the wrapper once; the decorator made six attempts,
    // each failing on the server; the turn's two model calls frame them.
    assert_eq!(manifest["wrapper_calls"], 1, "{manifest}");
    assert_eq!(manifest["tool_calls"], 6);
    assert_eq!(manifest["failures"], 6);
    assert_eq!(manifest["model_calls"], 2);
    let trace = manifest["trace_ids"][0].as_str().unwrap().to_string();
    let df = spans(&data);
    let is_model = df.column("is_model").unwrap().bool().unwrap().clone();
    let models = (0..is_model.len())
        .filter(|&i| is_model.get(i) == Some(true))
        .count();
    assert_eq!(models, 2, "both chat spans stored as model spans");
    let report = sweep_at(&data, last_end(&data));
    let problems = problems(
        "pydantic-ai + MCP retry decorator",
        &data,
        &report,
        "lookup_fare",
        &trace,
        "code",
        &[],
    );
    assert!(problems.is_empty(), "\n- {}", problems.join("\n- "));
    // No finding for the wrapper the model called once.
    let wrapper: Vec<_> = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["tool"] == "fetch_fare")
        .collect();
    assert!(wrapper.is_empty(), "{wrapper:?}");
}
