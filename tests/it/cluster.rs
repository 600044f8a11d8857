//! Nodes over a shared store: moto's S3 server on 127.0.0.1 (conditional
//! writes and all), two ingest nodes, detect nodes that share a lease, and
//! the real binary throughout. The incident's spans are split between the
//! ingesters by trace and within traces; the findings must equal one
//! process's on the same spans; a redelivery to the other ingester is
//! stored once once its day is sealed; an ingester killed before its flush
//! loses and doubles nothing; a detect node killed mid-sweep is replaced
//! within the lease time and no alert goes out twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{free_addr, python, repo, run, Server};

const BUCKET: &str = "stormwatch";
const NOW: &str = "2026-08-13T00:00:00Z";

/// moto's S3 server, on a free port, with the bucket made.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let py = python("STORMWATCH_PY_S3");
        for _ in 0..3 {
            let port = free_addr().port();
            let child = Command::new(&py)
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start moto's S3 server");
            let mut moto = Moto { child, port };
            let client = reqwest_blocking::blocking::Client::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if moto.child.try_wait().unwrap().is_some() {
                    break;
                }
                let made = client
                    .put(format!("http://127.0.0.1:{port}/{BUCKET}"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .is_ok_and(|r| r.status().is_success());
                if made {
                    return moto;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = moto.child.kill();
        }
        panic!("moto's S3 server did not start");
    }

    fn env(&self) -> Vec<(String, String)> {
        [
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A cluster under one prefix of the bucket: its config file and nodes.
pub(crate) struct Cluster {
    moto: Moto,
    pub(crate) dir: tempfile::TempDir,
    store: String,
}

impl Cluster {
    /// `extra` is appended to the nodes' config file.
    pub(crate) fn new(extra: &str) -> Cluster {
        let moto = Moto::start();
        let dir = tempfile::tempdir().unwrap();
        let cfg = format!(
            "[store]\nretention_days = 0\nflush_interval_secs = 1\nseal_after_secs = 1\nretired_grace_secs = 2\n\
             [cluster]\nlease_secs = 3\npull_interval_secs = 1\nstate_sync_secs = 1\n\
             [sweep]\ninterval_secs = 0\n{extra}"
        );
        std::fs::write(dir.path().join("node.toml"), cfg).unwrap();
        Cluster {
            moto,
            store: format!("s3://{BUCKET}/cluster"),
            dir,
        }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("node.toml")
    }

    pub(crate) fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.path().join(node)
    }

    fn env<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(String, String)> {
        let mut env = self.moto.env();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }

    /// A `serve` node in `role`, named `node`.
    pub(crate) fn serve(
        &self,
        role: &str,
        node: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut args = vec![
            "--role",
            role,
            "--store",
            &self.store,
            "--node-id",
            node,
            "--config",
        ];
        let cfg = self.config();
        let cfg = cfg.to_str().unwrap();
        args.push(cfg);
        args.extend_from_slice(extra);
        let env = self.env(env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Server::start(&self.node_dir(node), &args, &env)
    }

    /// Run a one-shot command against the shared store.
    pub(crate) fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["--store", &self.store];
        let cfg = self.config();
        all.extend(["--config", cfg.to_str().unwrap()]);
        all.extend_from_slice(args);
        let env = self.env(&[]);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run(&all, &env)
    }

    /// `sweep --format json` over a fresh local copy of the shared store.
    fn sweep_copy(&self, name: &str) -> Value {
        let copy = self.dir.path().join(name);
        let mut args = vec!["sweep", "--data-dir", copy.to_str().unwrap()];
        args.extend(SWEEP_JSON);
        json_of(self.run(&args), "sweep over the shared store")
    }

    /// `import` of a fixture through the shared store, as the ingest node
    /// `importer` (one run: ship, then stop).
    fn import(&self, fixture: &str) {
        let file = repo().join("fixtures").join(fixture);
        let dir = self.node_dir("importer");
        let out = self.run(&[
            "import",
            "--node-id",
            "importer",
            "--data-dir",
            dir.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "import {fixture}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `scripts/py/duckdb_s3.py`: the README's DuckDB query (httpfs) over
    /// the shared store, tool -> [calls, errors] on `day`.
    fn duckdb(&self, day: &str) -> Value {
        let mut cmd = Command::new(python("STORMWATCH_PY_S3"));
        cmd.arg(repo().join("scripts/py/duckdb_s3.py"))
            .args([&self.store, day])
            .envs(self.moto.env());
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "DuckDB over {}: {}",
            self.store,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Every stored span over a fresh copy, by `trace/span`, with how
    /// often it is there.
    pub(crate) fn stored(&self, name: &str) -> BTreeMap<String, usize> {
        let copy = self.dir.path().join(name);
        let out = self.run(&["sweep", "--data-dir", copy.to_str().unwrap(), "--now", NOW]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            assert!(stderr.contains("holds no spans yet"), "{stderr}");
            return BTreeMap::new();
        }
        let df = crate::common::spans(&copy);
        let t = df.column("trace_id").unwrap().str().unwrap().clone();
        let s = df.column("span_id").unwrap().str().unwrap().clone();
        let mut out = BTreeMap::new();
        for i in 0..df.height() {
            *out.entry(format!("{}/{}", t.get(i).unwrap(), s.get(i).unwrap()))
                .or_insert(0) += 1;
        }
        out
    }
}

/// The flags of a sweep whose findings are compared: the incident's day,
/// its whole history, JSON.
const SWEEP_JSON: [&str; 6] = ["--now", NOW, "--since", "60d", "--format", "json"];

/// The JSON a command printed, which must have succeeded.
fn json_of(out: std::process::Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The spans of a fixture file as one OTLP/JSON request each, split in two
/// by `side` (a span's trace and its index in the file).
fn split(file: &str, side: impl Fn(&str, usize) -> bool) -> [Value; 2] {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("fixtures").join(file)).unwrap())
            .unwrap();
    let mut halves = [doc.clone(), doc];
    for (h, half) in halves.iter_mut().enumerate() {
        let mut i = 0;
        for rs in half["resourceSpans"].as_array_mut().unwrap() {
            for ss in rs["scopeSpans"].as_array_mut().unwrap() {
                let spans = ss["spans"].as_array_mut().unwrap();
                spans.retain(|s| {
                    let keep = side(s["traceId"].as_str().unwrap(), i) == (h == 1);
                    i += 1;
                    keep
                });
            }
        }
    }
    halves
}

/// Most traces whole on one side; every third trace's spans alternate.
fn by_trace_and_within(trace: &str, i: usize) -> bool {
    let n = u64::from_str_radix(&trace[..8], 16).unwrap();
    if n.is_multiple_of(3) {
        i % 2 == 1
    } else {
        n % 2 == 1
    }
}

fn send(server: &Server, body: &Value) {
    let resp = reqwest_blocking::blocking::Client::new()
        .post(server.traces_url())
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The signals of a sweep's JSON, without the ids a state file gives them.
fn signals(report: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.as_object_mut().unwrap().remove("id");
            s
        })
        .collect();
    out.sort_by_key(|s| s["key"].as_str().unwrap().to_string());
    out
}

/// Whether every day of a detect node's copy is sealed (only seal outputs).
fn all_sealed(copy: &Path) -> bool {
    let layout = stormwatch::store::Layout::new(copy);
    let days = layout.days().unwrap_or_default();
    !days.is_empty()
        && days.iter().all(|&d| {
            let parts = layout.parts(d).unwrap_or_default();
            !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| stormwatch::store::layout::is_seal_output(p))
        })
}

#[test]
fn two_ingesters_and_a_sealing_detect_node_find_what_one_process_finds() {
    let c = Cluster::new("");
    let a = c.serve("ingest", "ing-a", &[], &[]);
    let b = c.serve("ingest", "ing-b", &[], &[]);
    // The history split by trace and within traces; the July 29 storms
    // again (the same span ids) to the other side, as a redelivery; the
    // rest whole to one node each.
    let [h0, h1] = split("search_flights_history.json", by_trace_and_within);
    let [s0, s1] = split("storms_jul29.json", |t, i| !by_trace_and_within(t, i));
    for (server, body) in [(&a, &h0), (&b, &h1), (&a, &s0), (&b, &s1)] {
        send(server, body);
    }
    let [g0, g1] = split("retry_gate.json", |_, _| false);
    send(&a, &g0);
    send(&a, &g1);
    let [f0, f1] = split("fixed_loop.json", |_, i| i % 2 == 0);
    send(&b, &f0);
    send(&a, &f1);
    // Each ingester's flushes reach the shared store before it stops.
    let log_a = a.stop();
    b.stop();
    assert!(!log_a.contains("ERROR"), "{log_a}");

    // One process on the same spans.
    let embedded = c.dir.path().join("embedded");
    let files: Vec<PathBuf> = [
        "search_flights_history.json",
        "storms_jul29.json",
        "retry_gate.json",
        "fixed_loop.json",
    ]
    .iter()
    .map(|f| repo().join("fixtures").join(f))
    .collect();
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    crate::common::import_files(&embedded, &paths);
    let mut args = vec!["sweep", "--data-dir", embedded.to_str().unwrap()];
    args.extend(SWEEP_JSON);
    let expected = json_of(run(&args, &[]), "sweep of one process");
    assert!(
        signals(&expected).len() >= 5,
        "the incident has its signals: {expected:#}"
    );

    // Before any seal the redelivered storm spans are there twice (once
    // per node): dedup across nodes happens when a day is sealed.
    let twice = c.stored("copy-before");
    assert!(
        twice.values().any(|&n| n == 2),
        "a redelivery on the other node is kept until its day is sealed"
    );

    // The detect node seals every day (uploads, then _sealed.json).
    let detect = c.serve("detect", "det-a", &["--now", NOW], &[]);
    let copy = c.node_dir("det-a");
    wait_until("every day sealed", Duration::from_secs(120), || {
        all_sealed(&copy)
    });
    let stored = c.stored("copy-after");
    let doubled: Vec<&String> = stored
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(
        doubled.is_empty(),
        "stored twice after the seal: {doubled:?}"
    );
    let emb = crate::common::spans(&embedded);
    assert_eq!(
        stored.len(),
        emb.height(),
        "every span once, as one process stores them"
    );

    // The shared store's findings, by a one-shot sweep over a copy of it
    // and by the detect node's own sweep, equal one process's.
    let got = c.sweep_copy("copy-sweep");
    assert_eq!(signals(&got), signals(&expected));
    let summary: Value = serde_json::from_str(
        &reqwest_blocking::blocking::Client::new()
            .post(format!("http://{}/api/sweep", detect.http))
            .timeout(Duration::from_secs(120))
            .send()
            .unwrap()
            .text()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["signals"].as_u64().unwrap() as usize,
        signals(&expected).len(),
        "{summary}"
    );

    // The README's DuckDB query over the shared store counts July 29's
    // calls as one process stores them, once the holder has deleted what
    // its seals replaced (retired_grace_secs = 2).
    let day = "2026-07-29";
    let want = calls_by_tool(&embedded, day);
    assert!(want.contains_key("search_flights"), "{want:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = c.duckdb(day);
        if serde_json::from_value::<BTreeMap<String, [u64; 2]>>(seen.clone()).ok()
            == Some(want.clone())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "DuckDB over the shared store: {seen}; one process: {want:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    detect.stop();
}

/// Tool calls and failed tool calls on `day` by tool, from a local store.
fn calls_by_tool(data: &Path, day: &str) -> BTreeMap<String, [u64; 2]> {
    let d = stormwatch::model::day_from_str(day).unwrap();
    let df = stormwatch::store::Reader::open(data)
        .unwrap()
        .collect_spans(d..=d, |lf| lf)
        .unwrap();
    let tool = df.column("tool_name").unwrap().str().unwrap().clone();
    let call = df.column("is_tool_call").unwrap().bool().unwrap().clone();
    let class = df.column("error_class").unwrap().str().unwrap().clone();
    let mut out = BTreeMap::new();
    for i in 0..df.height() {
        if call.get(i) == Some(true) {
            let n: &mut [u64; 2] = out.entry(tool.get(i).unwrap().to_string()).or_default();
            n[0] += 1;
            n[1] += u64::from(class.get(i) != Some("ok"));
        }
    }
    out
}

#[test]
fn an_ingester_killed_before_its_flush_loses_and_doubles_nothing() {
    // Flushes only at shutdown: what was acknowledged is in the WAL alone.
    let c = Cluster::new("");
    std::fs::write(
        c.config(),
        std::fs::read_to_string(c.config())
            .unwrap()
            .replace("flush_interval_secs = 1", "flush_interval_secs = 3600"),
    )
    .unwrap();
    let a = c.serve("ingest", "ing-a", &[], &[]);
    let [h0, h1] = split("search_flights_history.json", |_, i| i % 2 == 0);
    send(&a, &h0);
    send(&a, &h1);
    a.kill();
    assert!(
        c.stored("copy-empty").is_empty(),
        "nothing was flushed before the kill"
    );
    // Restarted, it replays its WAL; killed again once a flush shipped its
    // parts but before the WAL was trimmed, it ships nothing twice.
    let a = c.serve(
        "ingest",
        "ing-a",
        &[],
        &[("STORMWATCH_FAULTS", "ship_before_wal_delete=kill")],
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &a.child.id().to_string()])
        .status();
    let mut a = a;
    wait_until("the kill at the WAL trim", Duration::from_secs(60), || {
        a.child.try_wait().unwrap().is_some()
    });
    assert!(
        a.log_text().contains("injected fault: killing the process"),
        "{}",
        a.log_text()
    );
    let a = c.serve("ingest", "ing-a", &[], &[]);
    a.stop();
    every_history_span_once(&c.stored("copy-after"));
}

#[test]
fn an_upload_that_fails_is_finished_by_the_retry_not_written_again() {
    // The shared store refuses the first three uploads (the local commit is
    // done by then): the flusher retries the commit, it does not write the
    // table again as new parts.
    let c = Cluster::new("");
    let a = c.serve(
        "ingest",
        "ing-a",
        &[],
        &[("STORMWATCH_FAULTS", "ship=fail:3")],
    );
    let [h0, h1] = split("search_flights_history.json", |_, i| i % 2 == 0);
    send(&a, &h0);
    send(&a, &h1);
    wait_until(
        "the failed uploads retried",
        Duration::from_secs(60),
        || a.log_text().matches("flush to Parquet failed").count() >= 3,
    );
    let log = a.stop();
    assert!(log.contains("shipping"), "{log}");
    every_history_span_once(&c.stored("copy"));
    let node = stormwatch::store::Layout::new(c.node_dir("ing-a"));
    for day in node.days().unwrap() {
        let left: Vec<_> = std::fs::read_dir(node.day_dir(day))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "temporary parts left: {left:?}");
    }
}

/// The history fixture's 684 spans, each stored once.
fn every_history_span_once(stored: &BTreeMap<String, usize>) {
    assert_eq!(stored.len(), 684, "every acknowledged span of the history");
    let doubled: Vec<_> = stored.iter().filter(|(_, &n)| n > 1).collect();
    assert!(
        doubled.is_empty(),
        "{} span(s) stored twice, e.g. {:?}",
        doubled.len(),
        &doubled[..doubled.len().min(3)]
    );
}

/// The webhook deliveries by signal and event: the distinct `webhook-id`s
/// seen for each.
fn deliveries(hits: &[crate::alerts::Hit]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for h in hits {
        let id = h.headers["webhook-id"].to_str().unwrap().to_string();
        let body: Value = serde_json::from_str(&h.body).unwrap();
        for n in body["signals"].as_array().into_iter().flatten() {
            let key = format!("{}:{}", n["key"], n["event"]);
            out.entry(key).or_default().insert(id.clone());
        }
    }
    out
}

#[test]
fn a_standby_takes_over_a_killed_detect_node_and_no_alert_goes_out_twice() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (receiver, addr) = rt.block_on(crate::alerts::receiver(Vec::new(), (200, "ok")));
    let c = Cluster::new(&format!(
        "[alert]\npace_ms = 10\n[[alert.targets]]\nname = \"hook\"\nkind = \"webhook\"\ngroup_by = \"signal\"\nurl = \"http://{addr}/hook\"\n"
    ));
    // The July incident through `import --store`: an ingest node of one run.
    c.import("search_flights_history.json");
    // det-a holds the lease and alerts, and dies inside its second
    // sweep's state transaction; det-b stands by.
    let a = c.serve(
        "detect",
        "det-a",
        &["--now", NOW],
        &[("STORMWATCH_FAULTS", "sweep_before_commit=kill@2")],
    );
    let acting = |s: &Server| s.log_text().contains("acting as the detect role");
    wait_until("det-a acting", Duration::from_secs(30), || acting(&a));
    let b = c.serve("detect", "det-b", &["--now", NOW], &[]);
    let sweep = |s: &Server| {
        reqwest_blocking::blocking::Client::new()
            .post(format!("http://{}/api/sweep", s.http))
            .timeout(Duration::from_secs(120))
            .send()
    };
    let standby = sweep(&b).unwrap();
    assert_eq!(standby.status(), 503, "a standby does not sweep");
    assert!(sweep(&a).unwrap().status().is_success());
    wait_until("det-a's alerts delivered", Duration::from_secs(60), || {
        !receiver.hits().is_empty()
    });
    // Its deliveries reach the shipped state (state_sync_secs = 1).
    std::thread::sleep(Duration::from_secs(3));
    let first = deliveries(&receiver.hits());
    assert!(!first.is_empty());
    // The standby shows the holder's signals, and refuses to change them.
    let listed = |s: &Server| -> Vec<Value> {
        let body = reqwest_blocking::blocking::get(format!("http://{}/api/signals", s.http))
            .unwrap()
            .text()
            .unwrap();
        serde_json::from_str::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let on_a = listed(&a);
    assert!(!on_a.is_empty());
    wait_until(
        "det-b reading det-a's state",
        Duration::from_secs(20),
        || listed(&b).len() == on_a.len(),
    );
    let id = on_a[0]["id"].as_str().unwrap();
    let refused = reqwest_blocking::blocking::Client::new()
        .post(format!("http://{}/api/signals/{id}/resolve", b.http))
        .send()
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.text().unwrap().contains("standby"));

    // More of the incident arrives (the retry-gate cases: new signals).
    c.import("retry_gate.json");
    assert!(sweep(&a).is_err(), "det-a dies in its second sweep");
    let killed_at = Instant::now();
    let mut a = a;
    wait_until("det-a gone", Duration::from_secs(10), || {
        a.child.try_wait().unwrap().is_some()
    });
    assert!(a.log_text().contains("injected fault: killing the process"));
    wait_until("det-b acting", Duration::from_secs(30), || acting(&b));
    let took_over = killed_at.elapsed();
    // A lease of 3 s, renewed every second; the standby acts once the
    // version it saw stood 3 s and it read the shipped state in.
    assert!(
        took_over < Duration::from_secs(8),
        "the standby acted {took_over:?} after the kill (lease 3 s)"
    );
    eprintln!("takeover after {took_over:?}");
    assert!(sweep(&b).unwrap().status().is_success());
    wait_until("det-b's alerts delivered", Duration::from_secs(60), || {
        deliveries(&receiver.hits()).len() > first.len()
    });
    std::thread::sleep(Duration::from_secs(3));
    let all = deliveries(&receiver.hits());
    let twice: Vec<_> = all.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "a signal's change sent under two webhook-ids: {twice:?}"
    );
    for (k, ids) in &first {
        assert_eq!(&all[k], ids, "det-b sent {k} again");
    }
    drop(b);
}
