//! The real Python OpenTelemetry SDK exporters (from PyPI, pinned in
//! `scripts/py/`) send tool spans to a running `stormwatch serve`; every span
//! must then be in the store with the right tool, error class and session.

use std::process::Command;

use crate::common::{assert_manifest_stored, python, rows_by_key, spans, Server, MANIFEST_COLUMNS};

struct Run {
    python_var: &'static str,
    protocol: &'static str,
    compression: &'static str,
}

const RUNS: &[Run] = &[
    Run {
        python_var: "STORMWATCH_PY_PROTO",
        protocol: "proto",
        compression: "none",
    },
    Run {
        python_var: "STORMWATCH_PY_PROTO",
        protocol: "proto",
        compression: "gzip",
    },
    Run {
        python_var: "STORMWATCH_PY_JSON",
        protocol: "json",
        compression: "none",
    },
    Run {
        python_var: "STORMWATCH_PY_JSON",
        protocol: "json",
        compression: "gzip",
    },
];

/// Run the exporter script; its stdout is the manifest of what it sent.
fn export(server: &Server, run: &Run, run_id: &str) -> serde_json::Value {
    let out = export_with(server, run, run_id, &[]);
    assert!(
        out.status.success(),
        "{} exporter failed: {}\nserver log:\n{}",
        run.protocol,
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("manifest: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Run the exporter script with extra `OTEL_*` settings.
fn export_with(
    server: &Server,
    run: &Run,
    run_id: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let script = crate::common::repo().join("scripts/py/export_spans.py");
    let mut cmd = Command::new(python(run.python_var));
    cmd.arg(script).args([
        "--endpoint",
        &server.traces_url(),
        "--protocol",
        run.protocol,
        "--compression",
        run.compression,
        "--run-id",
        run_id,
    ]);
    // The exporters read OTEL_* from the environment; start from none.
    crate::common::without_otel_env(&mut cmd);
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

/// Ingest behind a token: the SDK sends it from `OTEL_EXPORTER_OTLP_HEADERS`
/// and is let in; without it, or with a wrong one, nothing is stored.
#[test]
fn the_sdk_sends_the_ingest_token_from_otel_exporter_otlp_headers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = "ingest-9f2c7e51a0b3d4";
    let server = Server::start(&data, &["--ingest-token", token], &[]);
    let run = &RUNS[0];
    for (id, headers) in [
        ("none", None),
        ("wrong", Some("Authorization=Bearer%20not-the-token")),
    ] {
        let env: Vec<(&str, &str)> = headers
            .map(|h| ("OTEL_EXPORTER_OTLP_HEADERS", h))
            .into_iter()
            .collect();
        let out = export_with(&server, run, id, &env);
        assert!(!out.status.success(), "{id}: the export must be refused");
    }
    let header = format!("Authorization=Bearer%20{token}");
    let out = export_with(
        &server,
        run,
        "with-token",
        &[("OTEL_EXPORTER_OTLP_HEADERS", &header)],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let metrics = reqwest_blocking::blocking::get(format!("http://{}/metrics", server.http))
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains(
            "stormwatch_ingest_requests_refused_total{transport=\"http\",reason=\"unauthorized\"}"
        ),
        "{metrics}"
    );
    server.stop();
    let stored = rows_by_key(&spans(&data), &[]);
    let sent = manifest["spans"].as_array().unwrap();
    assert_eq!(
        stored.len(),
        sent.len(),
        "only the run with the token is stored"
    );
}

#[test]
fn python_sdk_exporters_deliver_every_span_classified() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let manifests: Vec<(String, serde_json::Value)> = RUNS
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let id = format!("py{i}-{}-{}", run.protocol, run.compression);
            let m = export(&server, run, &id);
            (id, m)
        })
        .collect();
    server.stop();

    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let mut expected_total = 0;
    for (id, manifest) in &manifests {
        let list = manifest["spans"].as_array().unwrap();
        assert!(
            list.len() >= 40,
            "{id}: only {} spans in the manifest",
            list.len()
        );
        expected_total += assert_manifest_stored(id, &stored, manifest);
    }
    assert_eq!(
        df.height(),
        expected_total,
        "stored spans beyond what the exporters sent"
    );
}

#[test]
fn python_json_file_exporter_output_imports() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    let script = crate::common::repo().join("scripts/py/export_jsonl.py");
    let out = Command::new(python("STORMWATCH_PY_JSON"))
        .arg(script)
        .args(["--out", file.to_str().unwrap(), "--run-id", "jsonl"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let data = dir.path().join("data");
    crate::common::import_files(&data, &[&file]);
    let df = spans(&data);
    let stored = rows_by_key(&df, &["tool_name", "error_class", "session_id"]);
    let list = manifest["spans"].as_array().unwrap();
    assert_eq!(df.height(), list.len());
    for s in list {
        let key = format!(
            "{}/{}",
            s["trace_id"].as_str().unwrap(),
            s["span_id"].as_str().unwrap()
        );
        let row = &stored[&key];
        assert_eq!(row[0].as_deref(), s["tool_name"].as_str(), "{key}");
        assert_eq!(row[1].as_deref(), s["error_class"].as_str(), "{key}");
        assert_eq!(row[2].as_deref(), s["session_id"].as_str(), "{key}");
    }
}

/// End to end: a storm sent through the real Python exporter comes out of
/// `stormwatch sweep` as a retry-storm signal with that trace as evidence.
#[test]
fn a_storm_sent_by_the_python_sdk_is_found_by_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let script = crate::common::repo().join("scripts/py/export_spans.py");
    let out = Command::new(python("STORMWATCH_PY_PROTO"))
        .arg(script)
        .args([
            "--endpoint",
            &server.traces_url(),
            "--protocol",
            "proto",
            "--run-id",
            "e2e",
            "--storm",
            "8",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let storm_trace = manifest["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "e2e-storm" && s["is_tool_call"] == true)
        .map(|s| s["trace_id"].as_str().unwrap().to_string())
        .unwrap();
    // An hour on, so every trace has settled.
    let now = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let sweep = crate::common::run(
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
        sweep.status.success(),
        "{}",
        String::from_utf8_lossy(&sweep.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&sweep.stdout).unwrap();
    let storm = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "retry_storm")
        .unwrap_or_else(|| panic!("no retry_storm signal in {report:#}"));
    assert_eq!(storm["key"], "v1:retry_storm:search_flights:unavailable");
    // The exporter's ordinary sessions retry too; the storm turn is among the evidence.
    let evidence = storm["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["trace_id"] == storm_trace.as_str())
        .unwrap_or_else(|| panic!("the storm trace {storm_trace} is not evidence: {storm:#}"));
    assert_eq!(evidence["calls"], 8);
    assert_eq!(evidence["rhythm"], "no_backoff");
    assert_eq!(evidence["outcome"], "gave_up");
}
