//! The store's flusher under panics, with the real binary: a panic in a
//! maintenance task (compaction, rollup, retention) is logged, counted and
//! survived; a flusher that is gone makes the store refuse writes (503),
//! `/readyz` say why and `/metrics` show it, and a restart loses nothing
//! acknowledged.

use std::time::{Duration, Instant};

use crate::common::Server;
use crate::crash::{batch, stored_batches, SPANS_PER_BATCH};

type Client = reqwest_blocking::blocking::Client;

fn post(client: &Client, server: &Server, id: u64) -> reqwest_blocking::blocking::Response {
    client
        .post(server.traces_url())
        .header("content-type", "application/x-protobuf")
        .body(batch(id))
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap()
}

/// One sample of `/metrics`, by its name with labels as written.
fn metric(client: &Client, server: &Server, sample: &str) -> f64 {
    let text = client
        .get(format!("http://{}/metrics", server.http))
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {sample} in\n{text}"))
}

fn wait_for(what: &str, server: &Server, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn readyz(client: &Client, server: &Server) -> (u16, serde_json::Value) {
    let r = client
        .get(format!("http://{}/readyz", server.http))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.text().unwrap()).unwrap())
}

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("stormwatch.toml");
    std::fs::write(
        &config,
        "[store]\nflush_interval_secs = 1\ncompact_parts = 2\nrollup_interval_secs = 1\n",
    )
    .unwrap();
    config
}

#[test]
fn a_panic_in_compaction_rollup_or_retention_is_counted_and_the_flusher_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path());
    let server = Server::start(
        &data,
        &["--config", config.to_str().unwrap()],
        &[(
            "STORMWATCH_FAULTS",
            "compact=panic,rollup=panic:1,retention=panic",
        )],
    );
    let client = Client::new();
    let panics = |task: &str| {
        metric(
            &client,
            &server,
            &format!("stormwatch_store_maintenance_panics_total{{task=\"{task}\"}}"),
        )
    };
    // Each batch is flushed on its own (1 s interval): compaction is due
    // from the second flush on, and panics every time.
    let mut id = 0;
    wait_for("no compaction was tried", &server, || {
        assert_eq!(post(&client, &server, id).status(), 200);
        id += 1;
        std::thread::sleep(Duration::from_millis(1100));
        panics("compact") >= 2.0
    });
    wait_for("no rollup was tried", &server, || panics("rollup") >= 1.0);
    assert_eq!(panics("retention"), 1.0, "the pass at start");
    assert_eq!(
        metric(&client, &server, "stormwatch_store_flusher_alive"),
        1.0
    );
    // Flushes go on, and so do the rollups once the fault is spent.
    let flushed = metric(&client, &server, "stormwatch_flushes_total");
    assert_eq!(post(&client, &server, id).status(), 200);
    wait_for("no flush after the panics", &server, || {
        metric(&client, &server, "stormwatch_flushes_total") > flushed
    });
    let (status, body) = readyz(&client, &server);
    assert_eq!(status, 200, "{body}");
    let log = server.stop();
    let lines = log
        .lines()
        .filter(|l| l.contains("a store maintenance task panicked"))
        .filter(|l| l.contains("ERROR"))
        .count();
    assert!(lines >= 4, "one ERROR line per panic:\n{log}");
    assert_eq!(
        stored_batches(&data),
        (0..=id).map(|id| (id, SPANS_PER_BATCH)).collect()
    );
    assert!(data.join("rollups/tool_daily.parquet").exists());
}

#[test]
fn with_the_flusher_gone_writes_are_refused_and_readyz_and_metrics_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path());
    let cfg = ["--config", config.to_str().unwrap()];
    // The flusher's loop itself panics on its 8th turn (about 4 s in).
    let server = Server::start(&data, &cfg, &[("STORMWATCH_FAULTS", "flusher=panic@8")]);
    let client = Client::new();
    // Acknowledged before the flusher went (if the start was quick enough).
    let early = post(&client, &server, 1).status() == 200;
    let alive = || metric(&client, &server, "stormwatch_store_flusher_alive");
    wait_for("the flusher did not stop", &server, || alive() == 0.0);
    let refused = post(&client, &server, 2);
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let text = refused.text().unwrap();
    assert!(text.contains("flusher thread panicked"), "{text}");
    let (status, body) = readyz(&client, &server);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    let why = body["store_accepting_writes"].as_str().unwrap();
    assert!(
        why.contains("flusher thread panicked") && why.contains("restart"),
        "{body}"
    );
    let log = server.log_text();
    assert!(log.contains("injected panic at flusher"), "{log}");
    server.kill();
    // Restarted without the fault: everything acknowledged is there.
    let server = Server::start(&data, &cfg, &[]);
    assert_eq!(post(&client, &server, 3).status(), 200);
    assert_eq!(readyz(&client, &server).0, 200);
    server.stop();
    let mut want: std::collections::BTreeMap<u64, usize> = [(3, SPANS_PER_BATCH)].into();
    if early {
        want.insert(1, SPANS_PER_BATCH);
    }
    assert_eq!(stored_batches(&data), want);
}
