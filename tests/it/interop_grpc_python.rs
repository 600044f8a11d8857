//! The real Python OpenTelemetry SDK over OTLP/gRPC (from PyPI, pinned in
//! `scripts/py/requirements-grpc.txt`): `OTLPSpanExporter` of
//! opentelemetry-exporter-otlp-proto-grpc with gzip on and off, and an app
//! run by `opentelemetry-instrument` with no exporter in its code and no
//! protocol set (the distro's default, grpc). Every span is stored with the
//! right tool, error class and session; the ingest token goes as metadata;
//! overload is `RESOURCE_EXHAUSTED` with `RetryInfo` and the exporter retries.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    assert_manifest_stored, exporter_manifest, python, rows_by_key, sample, spans, wait_for_sample,
    without_otel_env, BudgetHold, Server, MANIFEST_COLUMNS,
};

const VENV: &str = "STORMWATCH_PY_GRPC";

/// `export_spans_grpc.py` against the server's gRPC port, with `args` and
/// `env` (OTEL_* from the test's own environment removed first).
fn exporter(server: &Server, run_id: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let script = crate::common::repo().join("scripts/py/export_spans_grpc.py");
    let mut cmd = Command::new(python(VENV));
    cmd.arg(script)
        .args(["--endpoint", &server.grpc_url(), "--run-id", run_id])
        .args(args);
    without_otel_env(&mut cmd);
    cmd.envs(env.iter().copied());
    cmd
}

fn grpc_accepted(metrics: &str) -> f64 {
    sample(
        metrics,
        "stormwatch_spans_accepted_total{transport=\"grpc\"}",
    )
}

#[test]
fn python_grpc_exporter_delivers_every_span_classified_with_and_without_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let manifests: Vec<(String, serde_json::Value)> = ["none", "gzip"]
        .into_iter()
        .map(|compression| {
            let id = format!("pygrpc-{compression}");
            let out = exporter(&server, &id, &["--compression", compression], &[])
                .output()
                .unwrap();
            let m = exporter_manifest(&id, &out, &server);
            (id, m)
        })
        .collect();
    let metrics = server.metrics();
    server.stop();

    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let mut total = 0;
    for (id, m) in &manifests {
        let n = assert_manifest_stored(id, &stored, m);
        assert!(n >= 50, "{id}: only {n} spans in the manifest");
        let classes: std::collections::BTreeSet<&str> = m["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["error_class"].as_str())
            .collect();
        for class in ["ok", "unavailable", "rate_limited", "not_found"] {
            assert!(classes.contains(class), "{id}: no {class} span sent");
        }
        total += n;
    }
    assert_eq!(df.height(), total, "stored spans beyond what was sent");
    assert_eq!(grpc_accepted(&metrics), total as f64, "{metrics}");
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_spans_accepted_total{transport=\"http\"}"
        ),
        0.0
    );
}

/// `opentelemetry-instrument python app.py` with only the endpoint and
/// `OTEL_TRACES_EXPORTER=otlp`: no protocol variable, no exporter in the
/// app. The distro picks OTLP/gRPC, and the spans land through the gRPC
/// receiver.
#[test]
fn opentelemetry_instrument_defaults_to_grpc_and_its_spans_land() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let py = python(VENV);
    let instrument: PathBuf = py.parent().unwrap().join("opentelemetry-instrument");
    assert!(
        instrument.exists(),
        "{} is missing: run scripts/py/setup_venvs.sh",
        instrument.display()
    );
    let app = crate::common::repo().join("scripts/py/instrumented_app.py");
    let mut cmd = Command::new(&instrument);
    cmd.arg(&py).arg(app).args(["--run-id", "instrumented"]);
    without_otel_env(&mut cmd);
    let out = cmd
        .env("OTEL_SERVICE_NAME", "py-instrumented")
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", server.grpc_url())
        // Metrics and logs stay as the distro sets them (otlp): the receiver
        // answers their services UNIMPLEMENTED, which must not hurt the traces.
        .output()
        .unwrap();
    let m = exporter_manifest("opentelemetry-instrument", &out, &server);
    let metrics = server.metrics();
    server.stop();
    assert_eq!(
        m["exporters"],
        serde_json::json!([
            "opentelemetry.exporter.otlp.proto.grpc.trace_exporter.OTLPSpanExporter"
        ]),
        "the distro's default exporter"
    );
    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let n = assert_manifest_stored("opentelemetry-instrument", &stored, &m);
    assert!(n >= 50);
    assert_eq!(df.height(), n);
    assert_eq!(grpc_accepted(&metrics), n as f64, "{metrics}");
}

/// Behind `--ingest-token`: the metadata `authorization: Bearer <token>`
/// (from OTEL_EXPORTER_OTLP_HEADERS, or the exporter's `headers`) is let in;
/// none, or a wrong one, is refused UNAUTHENTICATED (which the exporter does
/// not retry) and nothing of it is stored.
#[test]
fn python_grpc_exporter_sends_the_ingest_token_as_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = "ingest-grpc-4b7d0e29c1";
    let server = Server::start(&data, &["--ingest-token", token], &[]);
    for (id, env) in [
        ("none", vec![]),
        (
            "wrong",
            vec![(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20not-the-token",
            )],
        ),
    ] {
        let out = exporter(&server, id, &[], &env).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{id}: the export must be refused");
        assert!(
            stderr.contains("StatusCode.UNAUTHENTICATED"),
            "{id}: the exporter says why: {stderr}"
        );
    }
    let header = format!("authorization=Bearer%20{token}");
    let from_env = exporter(
        &server,
        "env-token",
        &[],
        &[("OTEL_EXPORTER_OTLP_HEADERS", &header)],
    )
    .output()
    .unwrap();
    let from_env = exporter_manifest("token from OTEL_EXPORTER_OTLP_HEADERS", &from_env, &server);
    let param = format!("authorization=Bearer {token}");
    let from_param = exporter(
        &server,
        "param-token",
        &["--headers", &param, "--compression", "gzip"],
        &[],
    )
    .output()
    .unwrap();
    let from_param = exporter_manifest("token in headers=", &from_param, &server);
    let metrics = server.metrics();
    server.stop();
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"unauthorized\"}"
        ),
        2.0,
        "one refused request per run without the token, not retried: {metrics}"
    );
    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let n = assert_manifest_stored("env token", &stored, &from_env)
        + assert_manifest_stored("headers token", &stored, &from_param);
    assert_eq!(df.height(), n, "only the runs with the token are stored");
}

/// Overload over gRPC: with the in-flight budget held, every export is
/// refused `RESOURCE_EXHAUSTED` with `RetryInfo`; the exporter retries, and
/// once the budget is free every batch goes through, each stored once.
#[test]
fn overload_is_resource_exhausted_with_retry_info_and_the_python_exporter_retries() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 1 << 20;
    let (data, server) = crate::common::server_with_budget(dir.path(), budget);
    let hold = BudgetHold::take(&server, budget);
    let child = exporter(&server, "overload", &["--timeout", "30"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let overloaded =
        "stormwatch_ingest_requests_refused_total{transport=\"grpc\",reason=\"overloaded\"}";
    // Two refusals of the first batch, then the budget frees up.
    wait_for_sample(&server, overloaded, 2.0, Duration::from_secs(20));
    drop(hold);
    let out = child.wait_with_output().unwrap();
    let m = exporter_manifest("overloaded", &out, &server);
    let metrics = server.metrics();
    server.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let retries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Transient error StatusCode.RESOURCE_EXHAUSTED"))
        .collect();
    let refused = sample(&metrics, overloaded);
    assert!(refused >= 2.0, "{metrics}");
    // The exporter's logger drops repeats of a message (DuplicateFilter):
    // one line however many retries.
    assert!(
        !retries.is_empty(),
        "the exporter says it retries RESOURCE_EXHAUSTED: {stderr}"
    );
    // Every request refused came back: one answered request per batch, and
    // the refusals on top; nothing refused for another reason.
    let batches = m["batches"].as_f64().unwrap();
    assert_eq!(
        sample(
            &metrics,
            "stormwatch_ingest_requests_total{transport=\"grpc\"}"
        ),
        batches + refused,
        "{metrics}"
    );
    assert!(
        !metrics.contains("transport=\"grpc\",reason=\"too_large\"")
            && !metrics.contains("transport=\"grpc\",reason=\"store_unavailable\""),
        "{metrics}"
    );
    let df = spans(&data);
    let stored = rows_by_key(&df, MANIFEST_COLUMNS);
    let n = assert_manifest_stored("overloaded", &stored, &m);
    assert_eq!(df.height(), n);
    eprintln!(
        "grpc overload: {refused} refusals retried by the Python exporter: {}",
        retries.join(" | ")
    );
}
