//! `/metrics` read back whole by a real parser: the Python
//! `prometheus_client` package's OpenMetrics parser (strict) and its text
//! format parser (scripts/py/parse_metrics.py, in venv-proto), against the
//! real binary after real ingest, a sweep and a delivered alert.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;
use serde_json::Value;

use crate::common::{import_files, python, repo, Server};

/// What Prometheus 2.x sends.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A target name that needs every escape the formats have.
const HOSTILE: &str = "ho\"ok \\ line\nnext";

/// The families `format` (`openmetrics` or `text`) parses `exposition` to.
fn parse(format: &str, exposition: &str) -> Vec<Value> {
    let mut child = std::process::Command::new(python("STORMWATCH_PY_PROTO"))
        .arg(repo().join("scripts/py/parse_metrics.py"))
        .arg(format)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the {format} exposition: {}\n{exposition}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The exposition and its `Content-Type`, scraped with `accept` (if any).
fn scrape(client: &Client, server: &Server, accept: Option<&str>) -> (String, String) {
    let mut req = client.get(format!("http://{}/metrics", server.http));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let r = req.send().unwrap();
    assert_eq!(r.status(), 200);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    (ct, r.text().unwrap())
}

fn samples(families: &[Value]) -> impl Iterator<Item = &Value> {
    families
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap().iter())
}

/// The value of the one sample `name` with exactly `labels`.
fn value(families: &[Value], name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let found: Vec<f64> = samples(families)
        .filter(|s| s["name"] == name)
        .filter(|s| {
            let have: BTreeMap<&str, &str> = s["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
                .collect();
            have == want
        })
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(found.len(), 1, "{name} {want:?}: {found:?}");
    found[0]
}

/// (sample name, labels) of every sample; `le` as a number (OpenMetrics
/// writes `1.0` where the text format may write `1`).
fn series(families: &[Value]) -> BTreeSet<String> {
    samples(families)
        .map(|s| {
            let mut labels = s["labels"].clone();
            if let Some(le) = labels.get_mut("le") {
                *le = Value::from(le.as_str().unwrap().parse::<f64>().unwrap().to_string());
            }
            format!("{}{labels}", s["name"].as_str().unwrap())
        })
        .collect()
}

/// Every metric name README.md's `/metrics` table documents, and
/// `stormwatch_build_info` (said just before it).
fn documented() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.contains("`/metrics` also has `stormwatch_build_info{version}`"));
    let start = readme
        .find("| metric | what |")
        .expect("README's metrics table");
    let end = start + readme[start..].find("\n\n").expect("the end of it");
    let mut names: BTreeSet<String> = readme[start..end]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("stormwatch_"))
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 30, "{names:?}");
    names.insert("stormwatch_build_info".to_string());
    names
}

/// Each documented name is a family there (as parsed: counters without
/// `_total`, OpenMetrics's info without `_info`).
fn assert_documented(format: &str, families: &[Value]) {
    let have: BTreeSet<String> = families
        .iter()
        .flat_map(|f| {
            let n = f["name"].as_str().unwrap();
            [n.to_string(), format!("{n}_total"), format!("{n}_info")]
        })
        .collect();
    let missing: Vec<_> = documented()
        .into_iter()
        .filter(|n| !have.contains(n))
        .collect();
    assert!(missing.is_empty(), "{format}: not exposed: {missing:?}");
}

/// The WAL histogram: the store's bounds and `+Inf`, cumulative, `+Inf`
/// equal to `_count`, at least one write.
fn assert_histogram(format: &str, families: &[Value]) {
    let name = "stormwatch_wal_fsync_seconds";
    let f = families
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{format}: no {name}"));
    assert_eq!(f["type"], "histogram", "{format}");
    let buckets: Vec<(String, f64)> = f["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == format!("{name}_bucket"))
        .map(|s| {
            (
                s["labels"]["le"].as_str().unwrap().to_string(),
                s["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let bounds: Vec<f64> = buckets.iter().map(|(le, _)| le.parse().unwrap()).collect();
    let mut want: Vec<f64> = stormwatch::store::WAL_SYNC_BUCKETS.to_vec();
    want.push(f64::INFINITY);
    assert_eq!(bounds, want, "{format}: {buckets:?}");
    assert_eq!(buckets.last().unwrap().0, "+Inf", "{format}");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "{format}: not cumulative: {buckets:?}"
    );
    let count = value(families, &format!("{name}_count"), &[]);
    assert!(count >= 1.0, "{format}: {count}");
    assert_eq!(buckets.last().unwrap().1, count, "{format}");
    let sum = value(families, &format!("{name}_sum"), &[]);
    assert!(sum > 0.0, "{format}: {sum}");
}

#[test]
fn metrics_parse_whole_in_openmetrics_and_text_with_escaped_labels_and_a_cumulative_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (hook, hook_addr, _rt) = crate::alerts::background((204, ""));
    let toml_name = HOSTILE
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let cfg = dir.path().join("stormwatch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sweep]\nsince_days = 3650\n\n[alert]\npace_ms = 10\n\n\
             [[alert.targets]]\nname = \"{toml_name}\"\nkind = \"webhook\"\nurl = \"http://{hook_addr}/in\"\n"
        ),
    )
    .unwrap();
    let fixture = repo().join("fixtures/search_flights_history.json");
    import_files(&data, &[&fixture]);
    let server = Server::start(&data, &["--config", cfg.to_str().unwrap()], &[]);
    let client = Client::new();
    // The same spans again over OTLP/HTTP: WAL writes (redeliveries, so the
    // sweep sees what was imported).
    let r = client
        .post(server.traces_url())
        .header("content-type", "application/json")
        .body(std::fs::read(&fixture).unwrap())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", server.log_text());
    let r = client
        .post(format!("http://{}/api/sweep", server.http))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", server.log_text());
    hook.wait_for_a_hit(&server);
    // The outbox row turns `delivered` just after the hook answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (om, om_text) = loop {
        let (ct, text) = scrape(&client, &server, Some(PROMETHEUS_ACCEPT));
        assert_eq!(
            ct, "application/openmetrics-text; version=1.0.0; charset=utf-8",
            "what Prometheus asks for"
        );
        let families = parse("openmetrics", &text);
        let delivered = samples(&families).any(|s| {
            s["name"] == "stormwatch_alert_outbox" && s["labels"]["status"] == "delivered"
        });
        if delivered {
            break (families, text);
        }
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let (ct, text) = scrape(&client, &server, None);
    assert_eq!(
        ct, "text/plain; version=0.0.4; charset=utf-8",
        "without Accept"
    );
    let classic = parse("text", &text);
    server.stop();

    assert!(om_text.ends_with("# EOF\n"));
    for (format, families) in [("openmetrics", &om), ("text", &classic)] {
        assert_documented(format, families);
        assert_histogram(format, families);
        // The hostile name comes back as it was configured.
        let deliveries = value(
            families,
            "stormwatch_alert_deliveries_total",
            &[("target", HOSTILE), ("outcome", "delivered")],
        );
        assert_eq!(deliveries, 1.0, "{format}");
        let outbox = value(
            families,
            "stormwatch_alert_outbox",
            &[("target", HOSTILE), ("status", "delivered")],
        );
        assert_eq!(outbox, 1.0, "{format}");
        assert!(
            value(families, "stormwatch_spans_duplicate_total", &[]) > 0.0,
            "{format}: the redelivery"
        );
        assert_eq!(
            value(families, "stormwatch_sweeps_total", &[("outcome", "ok")]),
            1.0,
            "{format}"
        );
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            value(families, "stormwatch_build_info", &[("version", version)]),
            1.0
        );
    }
    // Each format's own metadata.
    let kind = |families: &[Value], name: &str| {
        families
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| (f["type"].clone(), f["unit"].clone()))
            .unwrap_or_else(|| panic!("no family {name}"))
    };
    assert_eq!(kind(&om, "stormwatch_build"), ("info".into(), "".into()));
    assert_eq!(
        kind(&om, "stormwatch_sweep_seconds"),
        ("counter".into(), "seconds".into())
    );
    assert_eq!(
        kind(&om, "stormwatch_wal_written_bytes"),
        ("counter".into(), "bytes".into())
    );
    assert_eq!(
        kind(&classic, "stormwatch_build_info"),
        ("gauge".into(), "".into())
    );
    assert_eq!(
        kind(&classic, "stormwatch_alert_deliveries"),
        ("counter".into(), "".into())
    );
    // The same series in both (the values move between the two scrapes).
    assert_eq!(series(&om), series(&classic));
}
