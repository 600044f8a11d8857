//! Control flow is not failure (docs/detection.md §3, issue 28): a real
//! LangGraph 1.2.24 agent, traced by openinference-instrumentation-langchain
//! 0.1.80 and run offline with a scripted model
//! (`scripts/frameworks/langgraph_interrupt_agent.py`), stops for a human
//! or is cancelled by its user, and is resumed:
//!
//! - **interrupt**: `book_flight` calls LangGraph's `interrupt()` for
//!   approval, three times, each resumed with `Command(resume=…)`;
//!   OpenInference records each `GraphInterrupt` as an exception event on a
//!   TOOL span it ends **OK**;
//! - **node-interrupt**: the same with the deprecated `NodeInterrupt`,
//!   which OpenInference ends **ERROR**, as a failure;
//! - **cancelled**: an async run cancelled while a `search_flights` call
//!   hangs (`CancelledError`, ERROR), then asked again.
//!
//! Each must come to: every such TOOL span stored with its class, no
//! failure in the daily rollup (`errors` 0, `error_rate` 0) and the stops
//! in its `interrupted` / `cancelled` columns, no finding of any kind from
//! a sweep, and `/api/tools` showing the counts. Run live against a real
//! `serve`, and replayed from the recorded bodies
//! (`fixtures/frameworks/langgraph-{interrupt,node-interrupt,cancelled}.json`)
//! through `import`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use polars::prelude::*;

use crate::common::{python, repo, rows_by_key, run, spans, Server};

/// A scenario and what it must come to, per tool: (calls, interrupted,
/// cancelled).
struct Case {
    scenario: &'static str,
    tools: &'static [(&'static str, (i64, i64, i64))],
}

const CASES: [Case; 3] = [
    Case {
        scenario: "interrupt",
        tools: &[("book_flight", (6, 3, 0)), ("search_flights", (1, 0, 0))],
    },
    Case {
        scenario: "node-interrupt",
        tools: &[("book_flight", (6, 3, 0)), ("search_flights", (1, 0, 0))],
    },
    Case {
        scenario: "cancelled",
        tools: &[("search_flights", (4, 0, 1))],
    },
];

fn run_harness(server: &Server, scenario: &str) -> serde_json::Value {
    let mut cmd = Command::new(python("STORMWATCH_PY_LANGGRAPH"));
    cmd.arg(repo().join("scripts/frameworks/langgraph_interrupt_agent.py"))
        .args([scenario, "--endpoint", &server.traces_url()]);
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{scenario}: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rollup's rows per tool: (calls, errors, interrupted, cancelled,
/// error_rate), services added up.
fn rollup(data: &Path) -> BTreeMap<String, (i64, i64, i64, i64, f64)> {
    let df = stormwatch::store::Reader::open(data)
        .unwrap()
        .tool_daily()
        .unwrap()
        .expect("a rollup")
        .collect()
        .unwrap();
    let ints = |name: &str| -> Vec<i64> {
        let c = df.column(name).unwrap().cast(&DataType::Int64).unwrap();
        c.i64().unwrap().iter().map(|v| v.unwrap_or(0)).collect()
    };
    let (calls, errors, interrupted, cancelled) = (
        ints("calls"),
        ints("errors"),
        ints("interrupted"),
        ints("cancelled"),
    );
    let rate = df.column("error_rate").unwrap().f64().unwrap().clone();
    let tool = df.column("tool_name").unwrap().str().unwrap().clone();
    let mut out: BTreeMap<String, (i64, i64, i64, i64, f64)> = BTreeMap::new();
    for i in 0..df.height() {
        let e = out.entry(tool.get(i).unwrap().to_string()).or_default();
        e.0 += calls[i];
        e.1 += errors[i];
        e.2 += interrupted[i];
        e.3 += cancelled[i];
        e.4 = e.4.max(rate.get(i).unwrap_or(0.0));
    }
    out
}

/// `stormwatch sweep --format json` an hour after the newest span ended.
fn sweep(data: &Path) -> serde_json::Value {
    let df = spans(data);
    let end = df.column("end_ns").unwrap().i64().unwrap().max().unwrap();
    let now =
        (chrono::DateTime::from_timestamp_nanos(end) + chrono::Duration::hours(1)).to_rfc3339();
    let out = run(
        &[
            "sweep",
            "--now",
            &now,
            "--format",
            "json",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rollup, the sweep and `/api/tools` of a store holding one run of `c`.
fn problems(c: &Case, data: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let got = rollup(data);
    for (tool, (calls, interrupted, cancelled)) in c.tools {
        match got.get(*tool) {
            Some(&(gc, ge, gi, gx, rate)) => {
                if (gc, ge, gi, gx) != (*calls, 0, *interrupted, *cancelled) || rate != 0.0 {
                    problems.push(format!(
                        "rollup of {tool}: (calls, errors, interrupted, cancelled, error_rate) ({gc}, {ge}, {gi}, {gx}, {rate}), want ({calls}, 0, {interrupted}, {cancelled}, 0)"
                    ));
                }
            }
            None => problems.push(format!("no rollup row for {tool}: {got:?}")),
        }
    }
    if got.len() != c.tools.len() {
        problems.push(format!("rollup tools {:?}", got.keys().collect::<Vec<_>>()));
    }
    let report = sweep(data);
    let signals = report["signals"].as_array().unwrap();
    if !signals.is_empty() {
        let keys: Vec<&serde_json::Value> = signals.iter().map(|s| &s["key"]).collect();
        problems.push(format!("no finding of any kind expected; got {keys:?}"));
    }
    let server = Server::start(data, &[], &[]);
    let text =
        reqwest_blocking::blocking::get(format!("http://{}/api/tools?days=366", server.http))
            .unwrap()
            .text()
            .unwrap();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    server.stop();
    for (tool, (calls, interrupted, cancelled)) in c.tools {
        let row = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tool"] == *tool);
        let seen = row.map(|t| {
            (
                t["calls"].as_i64().unwrap_or(-1),
                t["errors"].as_i64().unwrap_or(-1),
                t["interrupted"].as_i64().unwrap_or(-1),
                t["cancelled"].as_i64().unwrap_or(-1),
            )
        });
        if seen != Some((*calls, 0, *interrupted, *cancelled)) {
            problems.push(format!(
                "/api/tools {tool}: (calls, errors, interrupted, cancelled) {seen:?}"
            ));
        }
    }
    problems
}

#[test]
fn a_langgraph_interrupt_resume_or_cancel_is_no_failure_live() {
    for c in &CASES {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let server = Server::start(&data, &[], &[]);
        let manifest = run_harness(&server, c.scenario);
        server.stop();
        let mut problems = Vec::new();
        // What the harness saw OpenInference record on its TOOL spans.
        let (interrupted, cancelled): (i64, i64) = c
            .tools
            .iter()
            .fold((0, 0), |a, (_, t)| (a.0 + t.1, a.1 + t.2));
        let errored = match c.scenario {
            "interrupt" => 0, // GraphInterrupt: status OK, the exception recorded
            _ => interrupted + cancelled,
        };
        let did = (
            manifest["interrupted"].as_i64(),
            manifest["cancelled"].as_i64(),
            manifest["errored_spans"].as_i64(),
            manifest["failures"].as_i64(),
        );
        if did != (Some(interrupted), Some(cancelled), Some(errored), Some(0)) {
            problems.push(format!(
                "the harness recorded (interrupted, cancelled, errored, failures) {did:?}"
            ));
        }
        // Each stopped TOOL span is stored with its class.
        let stored = rows_by_key(&spans(&data), &["error_class"]);
        for s in manifest["spans"].as_array().unwrap() {
            if s["kind"] != "TOOL" {
                continue;
            }
            let want = if s["interrupted"] == true {
                "interrupted"
            } else if s["cancelled"] == true {
                "cancelled"
            } else {
                "ok"
            };
            let key = format!(
                "{}/{}",
                s["trace_id"].as_str().unwrap(),
                s["span_id"].as_str().unwrap()
            );
            let got = stored.get(&key).and_then(|r| r[0].as_deref());
            if got != Some(want) {
                problems.push(format!("{} {key}: class {got:?}, want {want}", s["name"]));
            }
        }
        problems.extend(self::problems(c, &data));
        assert!(
            problems.is_empty(),
            "{} (live):\n- {}",
            c.scenario,
            problems.join("\n- ")
        );
    }
}

#[test]
fn a_recorded_langgraph_interrupt_resume_or_cancel_replays_as_no_failure() {
    for c in &CASES {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let path = repo()
            .join("fixtures/frameworks")
            .join(format!("langgraph-{}.json", c.scenario));
        crate::common::import_files(&data, &[&path]);
        let problems = problems(c, &data);
        assert!(
            problems.is_empty(),
            "{} (replayed fixture):\n- {}",
            c.scenario,
            problems.join("\n- ")
        );
    }
}
