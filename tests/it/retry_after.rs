//! Ignored Retry-After end to end (docs/detection.md §4.9), exporter side:
//! `scripts/py/retry_after_client.py` runs a tool (`execute_tool
//! fare_search` spans) against a local HTTP server answering 429 with
//! `Retry-After: 30`, through the real OpenTelemetry SDK and the real
//! `requests` instrumentation recording the header
//! (`OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE=retry-after`:
//! `http.response.header.retry_after = ["30"]` on its HTTP client span),
//! exported over OTLP/HTTP to a running `serve`. The client's waits are
//! virtual (the SDK's span clock runs ahead by each wait; the script says
//! how). Retrying 200 ms after each 429 is `ignored_retry_after` (and an
//! unpaced storm); waiting 30 s, then 60 s, is nothing.

use std::process::Command;

use serde_json::Value;

use crate::common::{python, run, spans, Server};
use crate::sweep::by_kind;

/// Run the client's `scenario` against `server`; its manifest.
fn client(server: &Server, scenario: &str) -> Value {
    let script = crate::common::repo().join("scripts/py/retry_after_client.py");
    let mut cmd = Command::new(python("STORMWATCH_PY_PROTO"));
    crate::common::without_otel_env(&mut cmd);
    cmd.arg(script)
        .args(["--endpoint", &server.traces_url(), "--scenario", scenario])
        .env(
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE",
            "retry-after",
        );
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "client: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Serve, run `scenario`, stop (flush); the sweep an hour after its end.
fn run_and_sweep(scenario: &str) -> (tempfile::TempDir, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let manifest = client(&server, scenario);
    server.stop();
    let end = chrono::DateTime::from_timestamp_nanos(manifest["end_ns"].as_i64().unwrap());
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
    (dir, manifest, serde_json::from_slice(&out.stdout).unwrap())
}

/// (name, tool, error_class, retry_after_ms) of every stored span of `trace`.
fn stored(
    data: &std::path::Path,
    trace: &str,
) -> Vec<(String, Option<String>, String, Option<i64>)> {
    let df = spans(data);
    let col = |n: &str| df.column(n).unwrap().clone();
    let (ids, names, tools, classes, waits) = (
        col("trace_id"),
        col("name"),
        col("tool_name"),
        col("error_class"),
        col("retry_after_ms"),
    );
    let s = |c: &polars::prelude::Column, i: usize| c.str().unwrap().get(i).map(str::to_string);
    (0..df.height())
        .filter(|&i| s(&ids, i).as_deref() == Some(trace))
        .map(|i| {
            (
                s(&names, i).unwrap_or_default(),
                s(&tools, i),
                s(&classes, i).unwrap_or_default(),
                waits.i64().unwrap().get(i),
            )
        })
        .collect()
}

#[test]
fn a_client_retrying_200_ms_after_a_429_that_said_30_s_ignores_retry_after() {
    let (dir, manifest, report) = run_and_sweep("ignore");
    assert_eq!(manifest["attempts"], 6);
    let trace = manifest["trace_id"].as_str().unwrap();

    // The instrumentor's HTTP client spans carry the header's 30 s; the
    // tool spans (a requests.HTTPError's words) none.
    let rows = stored(&dir.path().join("data"), trace);
    let http: Vec<_> = rows.iter().filter(|r| r.0 == "GET").collect();
    assert_eq!(http.len(), 6, "{rows:?}");
    assert!(
        http.iter()
            .all(|r| r.2 == "rate_limited" && r.3 == Some(30_000)),
        "{rows:?}"
    );
    let tools: Vec<_> = rows
        .iter()
        .filter(|r| r.1.as_deref() == Some("fare_search"))
        .collect();
    assert_eq!(tools.len(), 6, "{rows:?}");
    assert!(
        tools.iter().all(|r| r.2 == "rate_limited" && r.3.is_none()),
        "{rows:?}"
    );

    let found = by_kind(&report, "ignored_retry_after");
    assert_eq!(found.len(), 1, "{:#}", report["signals"]);
    let s = found[0];
    assert_eq!(s["tool"], "fare_search");
    assert_eq!(s["error_class"], "rate_limited");
    assert_eq!(s["severity"], "critical");
    assert_eq!(
        s["title"],
        "Ignored Retry-After: fare_search retried 5× ignoring Retry-After: 30 s (5 of 5 retries early, rate limited)"
    );
    let e = &s["evidence"][0];
    assert_eq!(e["trace_id"], trace);
    assert_eq!(e["session_id"], "retry-after-ignore");
    let waits = e["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 5, "{e:#}");
    for (k, w) in waits.iter().enumerate() {
        assert_eq!(w["retry"], k + 1);
        assert_eq!(w["stated_ms"], 30_000);
        assert_eq!(w["early"], true);
        let gap = w["gap_ms"].as_f64().unwrap();
        assert!((200.0..5_000.0).contains(&gap), "{w}");
    }
    let remedy = s["remedy"]["summary"].as_str().unwrap();
    assert!(remedy.contains("Honour Retry-After"), "{remedy}");

    // Six rounds of 429s whose gaps do not grow: an unpaced storm, its
    // evidence marking the same early retries.
    let storms = by_kind(&report, "retry_storm");
    assert_eq!(storms.len(), 1, "{:#}", report["signals"]);
    let title = storms[0]["title"].as_str().unwrap();
    assert!(
        title.starts_with("Retry storm: fare_search ×6 in one turn (rate limited, unpaced, "),
        "{title}"
    );
    assert_eq!(storms[0]["evidence"][0]["waits"], e["waits"]);
}

#[test]
fn a_client_waiting_30_then_60_s_honours_retry_after() {
    let (dir, manifest, report) = run_and_sweep("honour");
    assert_eq!(manifest["statuses"], serde_json::json!([429, 429, 200]));
    let trace = manifest["trace_id"].as_str().unwrap();
    let rows = stored(&dir.path().join("data"), trace);
    let waits: Vec<_> = rows.iter().filter_map(|r| r.3).collect();
    assert_eq!(waits, vec![30_000, 30_000], "{rows:?}");
    assert!(
        by_kind(&report, "ignored_retry_after").is_empty(),
        "{:#}",
        report["signals"]
    );
    assert!(
        report["signals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["tool"] != "fare_search"),
        "{:#}",
        report["signals"]
    );
}
