//! `serve` left running: the config commands, tokens and the bind rule, the
//! sweep schedule and `POST /api/sweep`, `/metrics` in Prometheus text, and
//! alert delivery through injected webhook failures.

use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;

use crate::common::{free_addr, repo, run, Server};

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn config_default_prints_a_file_that_check_accepts_and_typos_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["config", "default"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let default = dir.path().join("default.toml");
    std::fs::write(&default, &out.stdout).unwrap();
    let check = run(
        &["config", "check", "--config", default.to_str().unwrap()],
        &[],
    );
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("ok"), "{}", text(&check));

    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[sweep]\ninterval_sec = 60\n").unwrap();
    let bad = run(
        &["config", "check", "--config", typo.to_str().unwrap()],
        &[],
    );
    assert!(!bad.status.success());
    let msg = text(&bad);
    assert!(
        msg.contains("interval_sec") && msg.contains("typo.toml"),
        "{msg}"
    );

    // A target whose url_env is not set fails the check, naming the variable.
    let target = dir.path().join("target.toml");
    std::fs::write(
        &target,
        "[[alert.targets]]\nname = \"oncall\"\nkind = \"slack\"\nurl_env = \"SW_IT_UNSET_HOOK\"\n",
    )
    .unwrap();
    let unset = run(
        &["config", "check", "--config", target.to_str().unwrap()],
        &[],
    );
    assert!(!unset.status.success());
    assert!(
        text(&unset).contains("SW_IT_UNSET_HOOK"),
        "{}",
        text(&unset)
    );

    // `serve` refuses the same typo before it listens.
    let serve = run(
        &[
            "serve",
            "--otlp-grpc-addr",
            "none",
            "--config",
            typo.to_str().unwrap(),
            "--data-dir",
            dir.path().join("d").to_str().unwrap(),
        ],
        &[],
    );
    assert!(!serve.status.success());
    assert!(text(&serve).contains("interval_sec"), "{}", text(&serve));
}

#[test]
fn a_public_address_needs_a_token_or_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let public = format!("0.0.0.0:{}", free_addr().port());
    // Refused before it listens; were the rule gone, it would serve: give
    // it a deadline rather than wait forever.
    let refused_log = dir.path().join("refused.log");
    let mut refused = std::process::Command::new(crate::common::BIN)
        .args([
            "serve",
            "--otlp-grpc-addr",
            "none",
            "--http-addr",
            &public,
            "--otlp-addr",
        ])
        .arg(free_addr().to_string())
        .arg("--data-dir")
        .arg(&data)
        .env_remove("STORMWATCH_FAULTS")
        .stderr(std::fs::File::create(&refused_log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = refused.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = refused.kill();
            panic!("serve on {public} without a token did not refuse to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let msg = std::fs::read_to_string(&refused_log).unwrap();
    assert!(
        msg.contains("--api-token") && msg.contains(&public),
        "{msg}"
    );
    // With --insecure it serves (and says so).
    let log = dir.path().join("insecure.log");
    let mut child = std::process::Command::new(crate::common::BIN)
        .args([
            "serve",
            "--insecure",
            "--otlp-grpc-addr",
            "none",
            "--http-addr",
            &public,
            "--otlp-addr",
        ])
        .arg(free_addr().to_string())
        .arg("--data-dir")
        .arg(&data)
        .env_remove("STORMWATCH_FAULTS")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let health = format!(
        "http://127.0.0.1:{}/healthz",
        public.rsplit(':').next().unwrap()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reqwest_blocking::blocking::get(&health).is_ok_and(|r| r.status() == 200) {
        assert!(
            Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("without a token (--insecure)"), "{text}");
}

#[test]
fn the_api_token_guards_the_dashboard_api_and_metrics_but_not_health() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = "api-4b1d0c7a99e1f2aa";
    let server = Server::start(&data, &["--demo", "--api-token", token], &[]);
    let no_redirect = Client::builder()
        .redirect(reqwest_blocking::redirect::Policy::none())
        .build()
        .unwrap();
    let url = |p: &str| format!("http://{}{p}", server.http);
    for p in ["/healthz", "/readyz", "/api/openapi.json"] {
        assert_eq!(no_redirect.get(url(p)).send().unwrap().status(), 200, "{p}");
    }
    for p in [
        "/api/tools",
        "/api/signals",
        "/metrics",
        "/charts/tools/search_flights/daily.svg",
    ] {
        let r = no_redirect.get(url(p)).send().unwrap();
        assert_eq!(r.status(), 401, "{p}");
        assert!(r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        let r = no_redirect.get(url(p)).bearer_auth("wrong").send().unwrap();
        assert_eq!(r.status(), 401, "{p} with a wrong token");
        let r = no_redirect.get(url(p)).bearer_auth(token).send().unwrap();
        assert_eq!(r.status(), 200, "{p} with the token");
    }
    let r = no_redirect.post(url("/api/sweep")).send().unwrap();
    assert_eq!(r.status(), 401);
    // A browser is sent to sign in, and comes back with a session cookie.
    let r = no_redirect
        .get(url("/signals?state=open"))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        "/login?next=%2Fsignals%3Fstate%3Dopen"
    );
    let page = no_redirect
        .get(url("/login?next=/signals"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains(r#"type="password""#), "{page}");
    let wrong = no_redirect
        .post(url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=guess&next=%2Fsignals")
        .send()
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    let ok = no_redirect
        .post(url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&next=%2F%2Fevil.example%2F"))
        .send()
        .unwrap();
    assert_eq!(ok.status(), 303);
    assert_eq!(ok.headers()["location"], "/", "an off-site next is ignored");
    let cookie = ok.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    assert!(!cookie.contains(token), "the cookie never holds the token");
    let session = cookie.split(';').next().unwrap().to_string();
    let r = no_redirect
        .get(url("/"))
        .header("cookie", &session)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().unwrap().contains("search_flights"));
    server.stop();
}

/// Prometheus text format 0.0.4: every family has HELP and TYPE before its
/// samples, every sample line is `name{labels} value`.
fn assert_prometheus(text: &str) -> std::collections::BTreeMap<String, f64> {
    let mut typed = std::collections::BTreeMap::new();
    let mut helped = std::collections::BTreeSet::new();
    let mut samples = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().unwrap();
            let kind = it.next().unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(helped.contains(name), "{name}: TYPE without HELP");
            if kind == "counter" {
                assert!(
                    name.ends_with("_total"),
                    "counter {name} does not end in _total"
                );
            } else {
                assert!(
                    !name.ends_with("_total") && !name.ends_with("_sum"),
                    "{kind} {name}"
                );
            }
            assert!(
                typed.insert(name.to_string(), kind).is_none(),
                "{name} typed twice"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| typed.get(*f) == Some(&"histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "{name} has no TYPE before it");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            }
        }
        samples.insert(series.to_string(), value);
    }
    // Histograms: cumulative buckets, +Inf equal to the count.
    for (name, _) in typed.iter().filter(|(_, k)| **k == "histogram") {
        let buckets: Vec<f64> = samples
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{name}_bucket{{")))
            .map(|(_, v)| *v)
            .collect();
        let inf = samples[&format!("{name}_bucket{{le=\"+Inf\"}}")];
        assert_eq!(inf, samples[&format!("{name}_count")], "{name}");
        assert!(buckets.iter().all(|b| *b <= inf), "{name}: {buckets:?}");
    }
    samples
}

fn metric(m: &std::collections::BTreeMap<String, f64>, series: &str) -> f64 {
    *m.get(series)
        .unwrap_or_else(|| panic!("no {series} in {m:#?}"))
}

#[test]
fn sweeps_run_on_schedule_and_on_demand_one_at_a_time_and_metrics_count_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Each sweep takes at least 3 s, so two can be asked for at once.
    let server = Server::start(
        &data,
        &["--demo", "--sweep-interval", "10"],
        &[("STORMWATCH_FAULTS", "sweep=delay:3000")],
    );
    let client = Client::new();
    let url = format!("http://{}/api/sweep", server.http);
    // A client that gives up does not end the sweep: it runs on, holding
    // the lock, and its result is counted.
    let gave_up = client
        .post(&url)
        .timeout(Duration::from_millis(1000))
        .send();
    assert!(gave_up.is_err(), "the sweep answered within 1 s");
    let busy = client.post(&url).send().unwrap();
    assert_eq!(busy.status(), 409, "a second sweep while one runs");
    assert!(busy.headers().contains_key("retry-after"));
    let metrics_url = format!("http://{}/metrics", server.http);
    let ok_sweeps = |m: &std::collections::BTreeMap<String, f64>| {
        metric(m, "stormwatch_sweeps_total{outcome=\"ok\"}")
    };
    let scrape = || assert_prometheus(&client.get(&metrics_url).send().unwrap().text().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while ok_sweeps(&scrape()) < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the abandoned sweep never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let a = client.post(&url).send().unwrap();
    assert_eq!(a.status(), 200);
    let summary: serde_json::Value = serde_json::from_str(&a.text().unwrap()).unwrap();
    assert_eq!(summary["trigger"], "api");
    assert_eq!(summary["outcome"], "ok");
    assert_eq!(summary["signals"], 7, "{summary}");
    // The schedule's first sweep comes 10 s after the start.
    let metrics_url = format!("http://{}/metrics", server.http);
    let deadline = Instant::now() + Duration::from_secs(30);
    let m = loop {
        let r = client.get(&metrics_url).send().unwrap();
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"));
        let m = assert_prometheus(&r.text().unwrap());
        if metric(&m, "stormwatch_sweeps_total{outcome=\"ok\"}") >= 3.0 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "no scheduled sweep; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        metric(&m, "stormwatch_sweeps_total{outcome=\"skipped_busy\"}"),
        1.0
    );
    assert_eq!(
        metric(&m, "stormwatch_sweeps_total{outcome=\"failed\"}"),
        0.0
    );
    assert!(metric(&m, "stormwatch_sweep_last_duration_seconds") >= 3.0);
    assert_eq!(metric(&m, "stormwatch_signals{state=\"new\"}"), 7.0);
    assert_eq!(metric(&m, "stormwatch_spans_stored_total"), 745.0);
    assert!(metric(&m, "stormwatch_wal_fsync_seconds_count") >= 1.0);
    assert_eq!(
        metric(&m, "stormwatch_wal_fsync_seconds_bucket{le=\"+Inf\"}"),
        metric(&m, "stormwatch_wal_fsync_seconds_count")
    );
    let log = server.stop();
    assert!(
        log.contains("trigger=\"schedule\"") || log.contains("trigger=schedule"),
        "{log}"
    );
}

#[test]
fn a_failed_sweep_is_logged_counted_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(
        &data,
        &["--demo"],
        &[("STORMWATCH_FAULTS", "sweep=fail_once")],
    );
    let client = Client::new();
    let url = format!("http://{}/api/sweep", server.http);
    let failed = client.post(&url).send().unwrap();
    assert_eq!(failed.status(), 500);
    let body: serde_json::Value = serde_json::from_str(&failed.text().unwrap()).unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("injected fault"),
        "{body}"
    );
    let ok = client.post(&url).send().unwrap();
    assert_eq!(ok.status(), 200);
    let m = assert_prometheus(
        &client
            .get(format!("http://{}/metrics", server.http))
            .send()
            .unwrap()
            .text()
            .unwrap(),
    );
    assert_eq!(
        metric(&m, "stormwatch_sweeps_total{outcome=\"failed\"}"),
        1.0
    );
    assert_eq!(metric(&m, "stormwatch_sweeps_total{outcome=\"ok\"}"), 1.0);
    let log = server.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("sweep failed")).collect();
    assert_eq!(lines.len(), 1, "one line for the failure:\n{log}");
    assert!(lines[0].contains("injected fault at sweep"), "{}", lines[0]);
}

/// The whole loop in one process: ingest, a sweep asked for over the API,
/// the alert it queues delivered by serve's sender through two injected 503s.
#[test]
fn serve_sweeps_and_delivers_its_alert_through_injected_503s() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (hook, hook_addr, _rt) = crate::alerts::background((204, ""));
    let cfg = dir.path().join("stormwatch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sweep]\nsince_days = 3650\n\n[alert]\nbackoff_base_ms = 50\nbackoff_cap_secs = 1\npace_ms = 10\n\n\
             [[alert.targets]]\nname = \"hook\"\nkind = \"webhook\"\nurl = \"http://{hook_addr}/in\"\n"
        ),
    )
    .unwrap();
    let fixture = repo().join("fixtures/search_flights_history.json");
    crate::common::import_files(&data, &[&fixture]);
    let server = Server::start(
        &data,
        &["--config", cfg.to_str().unwrap()],
        &[("STORMWATCH_FAULTS", "webhook=status:503x2")],
    );
    let client = Client::new();
    let r = client
        .post(format!("http://{}/api/sweep", server.http))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", server.log_text());
    let summary: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
    assert_eq!(summary["alerts_queued"], 1, "{summary}");
    hook.wait_for_a_hit(&server);
    let m = assert_prometheus(
        &client
            .get(format!("http://{}/metrics", server.http))
            .send()
            .unwrap()
            .text()
            .unwrap(),
    );
    server.stop();
    assert_eq!(hook.hits().len(), 1, "the injected 503s were never sent");
    assert_eq!(
        metric(
            &m,
            "stormwatch_alert_outbox{target=\"hook\",status=\"delivered\"}"
        ),
        1.0
    );
    let list = run(
        &[
            "alerts",
            "list",
            "--format",
            "json",
            "--data-dir",
            data.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows[0]["attempts"], 3, "{rows:#}");
    assert_eq!(rows[0]["status"], "delivered");
}

/// A loopback server without tokens answers only requests addressed to
/// localhost: a web page that points its own name at 127.0.0.1 (DNS
/// rebinding) gets 403 from the dashboard, the API and the receiver.
#[test]
fn a_loopback_server_without_a_token_answers_only_localhost_names() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[], &[]);
    let client = Client::new();
    let get = |host: &str| {
        client
            .get(format!("http://{}/api/signals", server.http))
            .header("host", host)
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(get("evil.example"), 403);
    assert_eq!(get(&format!("evil.example:{}", server.http.port())), 403);
    assert_eq!(get(&format!("localhost:{}", server.http.port())), 200);
    assert_eq!(get(&server.http.to_string()), 200);
    let post = client
        .post(server.traces_url())
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(post.status(), 403);
    let log = server.stop();
    assert!(
        log.contains("refused a request addressed to another host"),
        "{log}"
    );
}
