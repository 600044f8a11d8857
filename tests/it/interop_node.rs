//! The OpenTelemetry JS SDK's OTLP/gRPC trace exporter
//! (`@opentelemetry/exporter-trace-otlp-grpc` on `@grpc/grpc-js`, from npm,
//! pinned in `scripts/interop/node-grpc/package-lock.json`) sends tool spans
//! to the gRPC receiver, plain and gzip; with the token as metadata it is let
//! in, with a wrong one refused.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::{
    assert_manifest_stored, exporter_manifest, repo, rows_by_key, sample, spans, without_otel_env,
    Server, MANIFEST_COLUMNS,
};

fn node() -> (String, PathBuf) {
    let node = std::env::var("STORMWATCH_NODE").unwrap_or_else(|_| {
        panic!("STORMWATCH_NODE is not set: run the tests through scripts/test.sh, which installs the npm packages")
    });
    let dir = repo().join("scripts/interop/node-grpc");
    assert!(
        dir.join("node_modules/.stormwatch-lock.sha256").exists(),
        "{}/node_modules is not installed; run scripts/frameworks/setup_node.sh",
        dir.display()
    );
    (node, dir)
}

fn export(server: &Server, run_id: &str, args: &[&str]) -> Output {
    let (node, dir) = node();
    let mut cmd = Command::new(node);
    cmd.current_dir(&dir)
        .arg(dir.join("export_spans.mjs"))
        .args(["--endpoint", &server.grpc_url(), "--run-id", run_id])
        .args(args);
    without_otel_env(&mut cmd);
    cmd.output().unwrap()
}

#[test]
fn js_grpc_exporter_delivers_every_span_classified_with_and_without_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let runs: Vec<(String, serde_json::Value)> = ["none", "gzip"]
        .into_iter()
        .map(|c| {
            let id = format!("js-grpc-{c}");
            let out = export(&server, &id, &["--compression", c]);
            let m = exporter_manifest(&id, &out, &server);
            (id, m)
        })
        .collect();
    let metrics = server.metrics();
    server.stop();
    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let mut total = 0;
    for (id, m) in &runs {
        total += assert_manifest_stored(id, &stored, m);
    }
    assert_eq!(total, 2 * 3 * 10, "three sessions of a root and nine calls");
    assert_eq!(df.height(), total);
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_spans_accepted_total{transport=\"grpc\"}"
        ),
        total as f64,
        "{metrics}"
    );
}

#[test]
fn js_grpc_exporter_sends_the_ingest_token_as_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = "ingest-js-77c1a90d3e";
    let server = Server::start(&data, &["--ingest-token", token], &[]);
    let wrong = export(&server, "js-wrong", &["--token", "not-the-token"]);
    assert!(!wrong.status.success(), "a wrong token must be refused");
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("UNAUTHENTICATED") || stderr.contains("16 "),
        "the exporter names the refusal: {stderr}"
    );
    let ok = export(&server, "js-token", &["--token", token]);
    let m = exporter_manifest("with the token", &ok, &server);
    let metrics = server.metrics();
    server.stop();
    assert!(
        sample(
            &metrics,
            "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"unauthorized\"}"
        ) >= 1.0,
        "{metrics}"
    );
    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let n = assert_manifest_stored("js token", &stored, &m);
    assert_eq!(df.height(), n, "only the run with the token is stored");
}
