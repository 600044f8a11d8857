//! Real agent frameworks, run offline, send their own OpenTelemetry spans to a
//! running `stormwatch serve`; `stormwatch sweep` must then tell a retry storm
//! from a healthy turn that merely calls one tool many times.
//!
//! The frameworks and their instrumentation are the real packages, pinned
//! (`scripts/py/requirements-frameworks.txt`,
//! `scripts/frameworks/vercel-ai/package-lock.json`) and installed by
//! `scripts/test.sh`; only the model is scripted (pydantic-ai's
//! `FunctionModel`, the AI SDK's `MockLanguageModelV3`/`V4` from `ai/test`),
//! so nothing leaves the machine and no key is needed. The tool spans are
//! exactly what the frameworks emit:
//!
//! - **pydantic-ai** (`scripts/frameworks/pydantic_ai_agent.py`): its
//!   `Instrumentation` capability, GenAI conventions (`invoke_agent` >
//!   `chat` / `execute_tool {tool}`), the session as `gen_ai.conversation.id`.
//!   A tool failure the model sees is `ModelRetry`: status ERROR without a
//!   message, an `exception` event (`pydantic_ai.exceptions.ToolRetryError`,
//!   the message) and the message again as `gen_ai.tool.call.result`.
//! - **Vercel AI SDK 6** (`scripts/frameworks/vercel-ai/agent.mjs --sdk 6`):
//!   `experimental_telemetry`, its own `ai.*` spans (`ai.generateText` >
//!   `ai.generateText.doGenerate` / `ai.toolCall`, tool in `ai.toolCall.name`,
//!   no agent span: the trace's root is the turn). A throwing tool gives status
//!   ERROR with the message and an `exception` event. Its session
//!   (`metadata.sessionId`) lands in `ai.telemetry.metadata.sessionId`, a key
//!   stormwatch does not read, so sessions are not checked for it.
//! - **Vercel AI SDK 7** (`--sdk 7`): `@ai-sdk/otel`'s `OpenTelemetry`
//!   integration, GenAI conventions (`invoke_agent` > `step N` > `chat` /
//!   `execute_tool {tool}`), the session set as `session.id` by `enrichSpan`.
//!   AI SDK 7 declares node >= 22; it runs on the node 20 the machines have.
//!
//! Two scenarios per framework, each one agent run (one turn, one trace):
//!
//! - **storm**: the model calls one tool with the *same* arguments over and
//!   over (pydantic-ai `search_flights` ×12, the AI SDK `fetch_page` ×10),
//!   and every call fails like a dead upstream, with nothing but the message
//!   "upstream 503 Service Unavailable" to say why; then the model gives up.
//!   This is the incident stormwatch exists for: exactly one `retry_storm`
//!   signal for that tool, class `unavailable` (decided from the message),
//!   with this trace as its one evidence and every failing round counted.
//! - **healthy**: the model calls one tool 10 times with 10 *different*
//!   arguments, the way a research agent runs different searches
//!   (pydantic-ai `web_search`, two calls failing with the same 503 message)
//!   or a coding agent runs different commands (the AI SDK `run_command`,
//!   two calls failing with "command timed out after 30s"); the failures are
//!   not adjacent and each is followed by a success. Many calls of one tool
//!   in a turn are normal agent work, not retries: no signal of any kind
//!   for that tool (no `retry_storm`, `wasted_retries`, `retry_after_success`,
//!   `tool_loop`, nor a spike: two errors are under the spike rule's minimum).
//!
//! Every span the framework exported must be stored, tool calls recognised
//! with the tool's name, class and arguments (one hash for the storm, ten for
//! the healthy turn) and, where the framework carries it in a key stormwatch
//! reads, the session. The same checks run on `fixtures/frameworks/`, captured
//! from these scripts, through `import` (no framework needed). All problems are
//! collected and reported together, with the sweep's signals, so one failing
//! run shows everything. The storm's driver must be the model, with the
//! model spans' round trips and tokens and the framework's cap in its
//! remedy (`driver.rs`).

use std::path::Path;
use std::process::Command;

use polars::prelude::*;

use crate::common::{python, repo, rows_by_key, run, spans, Server};

#[derive(Clone, Copy)]
enum Runner {
    PydanticAi,
    VercelAi(&'static str),
}

struct Scenario {
    name: &'static str,
    tool: &'static str,
    calls: usize,
    failures: usize,
    /// Every call with the same arguments (the storm), or each its own.
    same_args: bool,
    /// The class every failed call of the scenario must be stored with.
    failure_class: &'static str,
}

struct Framework {
    label: &'static str,
    runner: Runner,
    /// The fixtures' name: `fixtures/frameworks/{fixture}-{scenario}.json`,
    /// and the scripts' default session, `{fixture}-{scenario}`.
    fixture: &'static str,
    /// Whether the framework puts the session under a key stormwatch reads.
    session: bool,
    storm: Scenario,
    healthy: Scenario,
    /// What the storm's model remedy must name: the framework and its cap
    /// (the storm is driven by the model, `driver.rs`).
    remedy: [&'static str; 2],
}

impl Framework {
    fn fixture_session(&self, scenario: &Scenario) -> String {
        format!("{}-{}", self.fixture, scenario.name)
    }
}

fn node() -> String {
    let node = std::env::var("STORMWATCH_NODE").unwrap_or_else(|_| {
        panic!("STORMWATCH_NODE is not set: run the tests through scripts/test.sh, which installs the npm packages")
    });
    let modules = repo().join("scripts/frameworks/vercel-ai/node_modules");
    assert!(
        modules.join(".stormwatch-lock.sha256").exists(),
        "{} is not installed; run scripts/frameworks/setup_node.sh",
        modules.display()
    );
    node
}

/// Run one scenario against the server; its stdout is the manifest.
fn run_scenario(server: &Server, runner: Runner, scenario: &str) -> serde_json::Value {
    let endpoint = server.traces_url();
    let mut cmd = match runner {
        Runner::PydanticAi => {
            let mut c = Command::new(python("STORMWATCH_PY_FRAMEWORKS"));
            c.arg(repo().join("scripts/frameworks/pydantic_ai_agent.py"));
            c.args([scenario, "--endpoint", &endpoint]);
            c
        }
        Runner::VercelAi(sdk) => {
            let mut c = Command::new(node());
            c.arg(repo().join("scripts/frameworks/vercel-ai/agent.mjs"));
            c.args(["--sdk", sdk, scenario, "--endpoint", &endpoint]);
            c
        }
    };
    // The exporters read OTEL_* from the environment; start from none.
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{scenario}: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("manifest: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `stormwatch sweep --format json` an hour after `end`, so every turn has settled.
fn sweep(data: &Path, end: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
    let now = (end + chrono::Duration::hours(1)).to_rfc3339();
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            &now,
            "--format",
            "json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "sweep: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One line per signal, for the failure message.
pub(crate) fn summary(report: &serde_json::Value) -> String {
    report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let evidence: Vec<String> = s["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{} calls={} failures={} rhythm={}",
                        e["trace_id"], e["calls"], e["failures"], e["rhythm"]
                    )
                })
                .collect();
            format!("  {} {}: {}", s["key"], s["title"], evidence.join("; "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One scenario's turn as it was sent: its trace and session.
struct Turn<'a> {
    scenario: &'a Scenario,
    trace_id: String,
    session: Option<String>,
}

/// The stored tool calls of each turn: count, tool, failures, classes,
/// arguments (one hash for the storm, one per call for the healthy turn) and,
/// where the framework carries it under a key stormwatch reads, the session.
fn stored_problems(fw: &Framework, df: &DataFrame, turns: &[Turn]) -> Vec<String> {
    let mut problems = Vec::new();
    let col = |name: &str| df.column(name).unwrap().cast(&DataType::String).unwrap();
    let (trace, is_tool, tool, status, class, args, session) = (
        col("trace_id"),
        col("is_tool_call"),
        col("tool_name"),
        col("status_code"),
        col("error_class"),
        col("tool_args_hash"),
        col("session_id"),
    );
    let get = |c: &Column, i: usize| c.str().unwrap().get(i).map(str::to_string);
    for turn in turns {
        let label = format!("{} {}", fw.label, turn.scenario.name);
        let rows: Vec<usize> = (0..df.height())
            .filter(|&i| {
                get(&trace, i).as_deref() == Some(&turn.trace_id)
                    && get(&is_tool, i).as_deref() == Some("true")
            })
            .collect();
        if rows.len() != turn.scenario.calls {
            problems.push(format!(
                "{label}: {} tool calls stored, want {}",
                rows.len(),
                turn.scenario.calls
            ));
        }
        let mut failed = 0;
        let mut hashes = std::collections::BTreeSet::new();
        for &i in &rows {
            let name = get(&tool, i);
            if name.as_deref() != Some(turn.scenario.tool) {
                problems.push(format!("{label}: a tool call stored as {name:?}"));
            }
            let is_failed = get(&status, i).as_deref() == Some("error");
            failed += usize::from(is_failed);
            let want = if is_failed {
                turn.scenario.failure_class
            } else {
                "ok"
            };
            let got = get(&class, i);
            if got.as_deref() != Some(want) {
                let what = if is_failed { "failed" } else { "ok" };
                problems.push(format!(
                    "{label}: {what} call stored with error_class {got:?}, want {want}"
                ));
            }
            hashes.insert(get(&args, i));
            if let (true, Some(want)) = (fw.session, &turn.session) {
                let got = get(&session, i);
                if got.as_deref() != Some(want.as_str()) {
                    problems.push(format!("{label}: session {got:?}, want {want}"));
                }
            }
        }
        if failed != turn.scenario.failures {
            problems.push(format!(
                "{label}: {failed} failed calls stored, want {}",
                turn.scenario.failures
            ));
        }
        let distinct = if turn.scenario.same_args {
            1
        } else {
            turn.scenario.calls
        };
        if hashes.len() != distinct || hashes.contains(&None) {
            problems.push(format!(
                "{label}: {} distinct argument hashes {hashes:?}, want {distinct}",
                hashes.len()
            ));
        }
    }
    // The same message for every call of a turn would be noise: once is enough.
    problems.dedup();
    problems
}

/// What the sweep must say: one retry storm for the storm's tool with its
/// trace as the one evidence, nothing at all for the healthy turn's tool.
fn detection_problems(fw: &Framework, report: &serde_json::Value, storm: &Turn) -> Vec<String> {
    let mut problems = Vec::new();
    let signals = report["signals"].as_array().unwrap();
    let of_tool = |tool: &str| -> Vec<&serde_json::Value> {
        signals.iter().filter(|s| s["tool"] == tool).collect()
    };
    let storms: Vec<_> = of_tool(fw.storm.tool)
        .into_iter()
        .filter(|s| s["kind"] == "retry_storm")
        .collect();
    if storms.len() != 1 {
        problems.push(format!(
            "{} storm: {} retry_storm signals for {}, want 1",
            fw.label,
            storms.len(),
            fw.storm.tool
        ));
    }
    if let [signal] = storms[..] {
        let want_key = format!("v1:retry_storm:{}:unavailable", fw.storm.tool);
        if signal["key"] != want_key.as_str() || signal["error_class"] != "unavailable" {
            problems.push(format!(
                "{} storm: key {}, want {want_key}",
                fw.label, signal["key"]
            ));
        }
        let evidence = signal["evidence"].as_array().unwrap();
        if evidence.len() != 1 || evidence[0]["trace_id"] != storm.trace_id.as_str() {
            problems.push(format!(
                "{} storm: evidence {:?}, want the one trace {}",
                fw.label,
                evidence.iter().map(|e| &e["trace_id"]).collect::<Vec<_>>(),
                storm.trace_id
            ));
        }
        if let Some(e) = evidence.first() {
            let calls = e["calls"].as_u64().unwrap_or(0);
            if calls < fw.storm.failures as u64 {
                problems.push(format!(
                    "{} storm: evidence counts {calls} calls, want >= {} failing rounds",
                    fw.label, fw.storm.failures
                ));
            }
            if let (true, Some(want)) = (fw.session, &storm.session) {
                if e["session_id"] != want.as_str() {
                    problems.push(format!(
                        "{} storm: evidence session {}, want {want}",
                        fw.label, e["session_id"]
                    ));
                }
            }
        }
    }
    let healthy = of_tool(fw.healthy.tool);
    if !healthy.is_empty() {
        problems.push(format!(
            "{} healthy: want no signal for {}, got {:?}",
            fw.label,
            fw.healthy.tool,
            healthy
                .iter()
                .map(|s| s["key"].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
        ));
    }
    problems
}

fn report_problems(fw: &Framework, problems: &[String], report: &serde_json::Value) {
    assert!(
        problems.is_empty(),
        "{}:\n- {}\nsweep signals:\n{}",
        fw.label,
        problems.join("\n- "),
        summary(report)
    );
}

/// Live: run both scenarios against a real `serve`, stop it (flush), check
/// the store and the sweep.
fn check_live(fw: &Framework) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let storm = run_scenario(&server, fw.runner, fw.storm.name);
    let healthy = run_scenario(&server, fw.runner, fw.healthy.name);
    server.stop();

    let mut turns = Vec::new();
    for (scenario, manifest) in [(&fw.storm, &storm), (&fw.healthy, &healthy)] {
        let label = format!("{} {}", fw.label, scenario.name);
        assert_eq!(manifest["tool"], scenario.tool, "{label}");
        let traces = manifest["trace_ids"].as_array().unwrap();
        assert_eq!(
            traces.len(),
            1,
            "{label}: one turn is one trace: {traces:?}"
        );
        assert_eq!(
            manifest["tool_calls"], scenario.calls,
            "{label}: tool calls"
        );
        assert_eq!(manifest["failures"], scenario.failures, "{label}: failures");
        turns.push(Turn {
            scenario,
            trace_id: traces[0].as_str().unwrap().to_string(),
            session: manifest["session_id"].as_str().map(str::to_string),
        });
    }

    // Every exported span stored once, tool calls and others told apart.
    let df = spans(&data);
    let stored = rows_by_key(&df, &["tool_name", "is_tool_call"]);
    let mut problems = Vec::new();
    let mut sent = 0;
    for manifest in [&storm, &healthy] {
        for s in manifest["spans"].as_array().unwrap() {
            sent += 1;
            let key = format!(
                "{}/{}",
                s["trace_id"].as_str().unwrap(),
                s["span_id"].as_str().unwrap()
            );
            match stored.get(&key) {
                None => problems.push(format!("span {key} ({}) not stored", s["name"])),
                Some(row) if row[0].as_deref() != s["tool_name"].as_str() => problems.push(
                    format!("span {key} ({}) stored as tool {:?}", s["name"], row[0]),
                ),
                Some(_) => {}
            }
        }
    }
    if df.height() != sent {
        problems.push(format!("{} spans stored, {sent} sent", df.height()));
    }
    problems.extend(stored_problems(fw, &df, &turns));
    let report = sweep(&data, chrono::Utc::now());
    problems.extend(detection_problems(fw, &report, &turns[0]));
    problems.extend(crate::driver::problems(
        fw.label,
        &data,
        &report,
        fw.storm.tool,
        &turns[0].trace_id,
        "model",
        &fw.remedy,
    ));
    report_problems(fw, &problems, &report);
}

/// The fixtures captured from the same scripts (fixtures/frameworks/) must
/// say the same through `import`, with no framework installed.
fn check_fixtures(fw: &Framework) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut turns = Vec::new();
    let mut end_ns = 0u64;
    let mut paths = Vec::new();
    for scenario in [&fw.storm, &fw.healthy] {
        let path = repo()
            .join("fixtures/frameworks")
            .join(format!("{}-{}.json", fw.fixture, scenario.name));
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let spans: Vec<&serde_json::Value> = doc["resourceSpans"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|rs| rs["scopeSpans"].as_array().unwrap())
            .flat_map(|ss| ss["spans"].as_array().unwrap())
            .collect();
        let traces: std::collections::BTreeSet<&str> = spans
            .iter()
            .map(|s| s["traceId"].as_str().unwrap())
            .collect();
        assert_eq!(traces.len(), 1, "{}: one trace", path.display());
        for s in &spans {
            end_ns = end_ns.max(s["endTimeUnixNano"].as_str().unwrap().parse().unwrap());
        }
        turns.push(Turn {
            scenario,
            trace_id: traces.first().unwrap().to_string(),
            session: Some(fw.fixture_session(scenario)),
        });
        paths.push(path);
    }
    let paths: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    crate::common::import_files(&data, &paths);
    let mut problems = stored_problems(fw, &spans(&data), &turns);
    let end = chrono::DateTime::from_timestamp_nanos(end_ns as i64);
    let report = sweep(&data, end);
    problems.extend(detection_problems(fw, &report, &turns[0]));
    problems.extend(crate::driver::problems(
        fw.label,
        &data,
        &report,
        fw.storm.tool,
        &turns[0].trace_id,
        "model",
        &fw.remedy,
    ));
    report_problems(fw, &problems, &report);
}

fn pydantic_ai() -> Framework {
    Framework {
        label: "pydantic-ai",
        runner: Runner::PydanticAi,
        fixture: "pydantic-ai",
        session: true,
        storm: Scenario {
            name: "storm",
            tool: "search_flights",
            calls: 12,
            failures: 12,
            same_args: true,
            failure_class: "unavailable",
        },
        healthy: Scenario {
            name: "healthy",
            tool: "web_search",
            calls: 10,
            failures: 2,
            same_args: false,
            failure_class: "unavailable",
        },
        remedy: ["pydantic-ai", "UsageLimits"],
    }
}

fn vercel_ai(sdk: &'static str) -> Framework {
    let (label, fixture) = match sdk {
        "6" => ("vercel-ai 6", "vercel-ai-6"),
        _ => ("vercel-ai 7", "vercel-ai-7"),
    };
    Framework {
        label,
        runner: Runner::VercelAi(sdk),
        fixture,
        // AI SDK 6 keeps `metadata.sessionId` as `ai.telemetry.metadata.sessionId`.
        session: sdk != "6",
        storm: Scenario {
            name: "storm",
            tool: "fetch_page",
            calls: 10,
            failures: 10,
            same_args: true,
            failure_class: "unavailable",
        },
        healthy: Scenario {
            name: "healthy",
            tool: "run_command",
            calls: 10,
            failures: 2,
            same_args: false,
            failure_class: "timeout",
        },
        remedy: ["Vercel AI SDK", "stopWhen"],
    }
}

#[test]
fn pydantic_ai_storm_is_one_retry_storm_and_healthy_turn_is_nothing() {
    check_live(&pydantic_ai());
}

#[test]
fn vercel_ai_6_storm_is_one_retry_storm_and_healthy_turn_is_nothing() {
    check_live(&vercel_ai("6"));
}

#[test]
fn vercel_ai_7_storm_is_one_retry_storm_and_healthy_turn_is_nothing() {
    check_live(&vercel_ai("7"));
}

#[test]
fn pydantic_ai_fixtures_import_and_sweep_the_same() {
    check_fixtures(&pydantic_ai());
}

#[test]
fn vercel_ai_6_fixtures_import_and_sweep_the_same() {
    check_fixtures(&vercel_ai("6"));
}

#[test]
fn vercel_ai_7_fixtures_import_and_sweep_the_same() {
    check_fixtures(&vercel_ai("7"));
}
