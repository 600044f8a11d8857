//! The PagerDuty target against a local receiver that keeps the Events API
//! v2 contract (alerting.md, "PagerDuty"): 202 with the `dedup_key` for a
//! valid event, 400 `invalid event` with `errors` for one that is not, 429
//! and 5xx when told to; one PagerDuty alert per `dedup_key` while it is
//! open. The real binary sweeps and flushes; the routing key never reaches
//! a log line, an output or `state.sqlite`.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::common::{repo, run};

/// The key the tests' receiver takes: 32 characters, as PagerDuty's are.
pub const KEY: &str = "R0ut1ngK3yForTheTestsOnly0123456";

/// One event the receiver got.
#[derive(Debug, Clone)]
pub struct Post {
    pub at: Instant,
    pub body: Value,
    pub raw: String,
    /// What it answered.
    pub status: u16,
}

/// One PagerDuty alert, by `dedup_key`.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// `triggered`, `acknowledged` or `resolved`.
    pub status: &'static str,
    /// Events applied to it (its log).
    pub log: Vec<String>,
}

/// A receiver keeping the Events API v2 contract.
#[derive(Default)]
pub struct PagerDuty {
    /// Statuses to answer before looking at the event (429, 500, 503…).
    script: Mutex<VecDeque<u16>>,
    pub posts: Mutex<Vec<Post>>,
    /// Open and past alerts by `dedup_key`: a trigger for a resolved key
    /// opens a new one (the old one is kept in `past`).
    pub alerts: Mutex<BTreeMap<String, Alert>>,
    pub past: Mutex<Vec<(String, Alert)>>,
}

impl PagerDuty {
    pub fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// The events that were accepted (202).
    pub fn accepted(&self) -> Vec<Post> {
        self.posts()
            .into_iter()
            .filter(|p| p.status == 202)
            .collect()
    }

    pub fn alerts(&self) -> BTreeMap<String, Alert> {
        self.alerts.lock().unwrap().clone()
    }

    /// How many PagerDuty alerts were ever opened.
    pub fn opened(&self) -> usize {
        self.alerts.lock().unwrap().len() + self.past.lock().unwrap().len()
    }

    pub fn answer_next(&self, statuses: &[u16]) {
        self.script.lock().unwrap().extend(statuses);
    }

    /// What PagerDuty checks of an event: `errors` when it is invalid.
    fn invalid(v: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        match v["routing_key"].as_str() {
            None => errors.push("'routing_key' is missing".to_string()),
            Some(k) if k.len() != 32 => errors
                .push("Length of 'routing_key' is incorrect (should be 32 characters)".to_string()),
            Some(k) if k != KEY => errors.push("'routing_key' is not a known integration".into()),
            _ => {}
        }
        let action = v["event_action"].as_str().unwrap_or("");
        if !["trigger", "acknowledge", "resolve"].contains(&action) {
            errors.push(
                "'event_action' is invalid (must be one of: trigger, acknowledge, resolve)".into(),
            );
        }
        match v["dedup_key"].as_str() {
            Some(k) if !k.is_empty() && k.chars().count() <= 255 => {}
            Some(_) => errors.push("'dedup_key' must be 1 to 255 characters".into()),
            None if action == "trigger" => {}
            None => errors.push("'dedup_key' is missing".into()),
        }
        if action == "trigger" {
            let p = &v["payload"];
            match p["summary"].as_str() {
                Some(s) if !s.trim().is_empty() && s.chars().count() <= 1024 => {}
                _ => errors.push(
                    "'payload.summary' is missing, blank or longer than 1024 characters".into(),
                ),
            }
            if p["source"].as_str().is_none_or(|s| s.trim().is_empty()) {
                errors.push("'payload.source' is missing or blank".into());
            }
            if !["critical", "error", "warning", "info"]
                .contains(&p["severity"].as_str().unwrap_or(""))
            {
                errors.push("'payload.severity' is invalid (must be one of: critical, error, warning, info)".into());
            }
            if let Some(t) = p["timestamp"].as_str() {
                if httpdate::parse_http_date(t).is_ok() || !t.contains('T') {
                    errors.push("'payload.timestamp' is not ISO 8601".into());
                }
            }
            for l in v["links"].as_array().into_iter().flatten() {
                if l["href"].as_str().is_none_or(str::is_empty) {
                    errors.push("'links[].href' is missing".into());
                }
            }
        }
        errors
    }

    fn handle(&self, raw: &str) -> (u16, Vec<(&'static str, String)>, Value) {
        if let Some(status) = self.script.lock().unwrap().pop_front() {
            return match status {
                429 => (
                    429,
                    vec![("retry-after", "1".to_string())],
                    json!({"status": "throttle event", "message": "Requests for this service are arriving too quickly.  Please retry later."}),
                ),
                s => (
                    s,
                    Vec::new(),
                    json!({"status": "error", "message": "internal error"}),
                ),
            };
        }
        let invalid = |errors: Vec<String>| {
            (
                400,
                Vec::new(),
                json!({"status": "invalid event", "message": "Event object is invalid", "errors": errors}),
            )
        };
        if raw.len() > 512 * 1024 {
            return invalid(vec!["the event is larger than 512 KB".into()]);
        }
        let Ok(v) = serde_json::from_str::<Value>(raw) else {
            return invalid(vec!["the body is not JSON".into()]);
        };
        let errors = PagerDuty::invalid(&v);
        if !errors.is_empty() {
            return invalid(errors);
        }
        let action = v["event_action"].as_str().unwrap().to_string();
        let key = v["dedup_key"].as_str().unwrap().to_string();
        let mut alerts = self.alerts.lock().unwrap();
        let open = alerts.get(&key).is_some_and(|a| a.status != "resolved");
        match action.as_str() {
            "trigger" if !open => {
                if let Some(old) = alerts.remove(&key) {
                    self.past.lock().unwrap().push((key.clone(), old));
                }
                alerts.insert(
                    key.clone(),
                    Alert {
                        status: "triggered",
                        log: vec![action],
                    },
                );
            }
            // Dropped when no alert is open, as PagerDuty does.
            _ if !open => {}
            _ => {
                let a = alerts.get_mut(&key).unwrap();
                a.log.push(action.clone());
                match action.as_str() {
                    "acknowledge" => a.status = "acknowledged",
                    "resolve" => a.status = "resolved",
                    _ => {}
                }
            }
        }
        (
            202,
            Vec::new(),
            json!({"status": "success", "message": "Event processed", "dedup_key": key}),
        )
    }
}

/// Start a receiver on 127.0.0.1 in the current runtime; its enqueue URL.
pub async fn receiver() -> (Arc<PagerDuty>, String) {
    let pd = Arc::new(PagerDuty::default());
    let state = Arc::clone(&pd);
    let app = axum::Router::new().route(
        "/v2/enqueue",
        axum::routing::post(move |_headers: HeaderMap, body: Bytes| {
            let pd = Arc::clone(&state);
            async move {
                let raw = String::from_utf8_lossy(&body).into_owned();
                let (status, headers, answer) = pd.handle(&raw);
                pd.posts.lock().unwrap().push(Post {
                    at: Instant::now(),
                    body: serde_json::from_str(&raw).unwrap_or(Value::Null),
                    raw,
                    status,
                });
                let mut h = HeaderMap::new();
                for (k, v) in headers {
                    h.insert(k, v.parse().unwrap());
                }
                (StatusCode::from_u16(status).unwrap(), h, axum::Json(answer)).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (pd, format!("http://{addr}/v2/enqueue"))
}

/// A receiver in its own runtime thread, for tests that run the binary.
pub fn background() -> (Arc<PagerDuty>, String, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (pd, url) = rt.block_on(receiver());
    (pd, url, rt)
}

// ---- the real binary ----

/// A data directory with the July outage (the search_flights history) and
/// a config with one PagerDuty target whose key is in `SW_IT_PD_KEY`.
struct Setup {
    _dir: tempfile::TempDir,
    data: PathBuf,
    cfg: PathBuf,
    /// Every stdout and stderr the binary wrote.
    said: Mutex<String>,
}

impl Setup {
    fn new(url: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let cfg = dir.path().join("stormwatch.toml");
        std::fs::write(
            &cfg,
            format!(
                "[alert]\npublic_url = \"http://dash.example:8080\"\nbackoff_base_ms = 50\nbackoff_cap_secs = 1\npace_ms = 10\nrequest_timeout_secs = 5\n\n\
                 [[alert.targets]]\nname = \"oncall-pd\"\nkind = \"pagerduty\"\nurl = \"{url}\"\nrouting_key_env = \"SW_IT_PD_KEY\"\n"
            ),
        )
        .unwrap();
        crate::common::import_files(
            &data,
            &[&repo().join("fixtures/search_flights_history.json")],
        );
        Setup {
            _dir: dir,
            data,
            cfg,
            said: Mutex::new(String::new()),
        }
    }

    /// Run `args` (with the data dir and config) with `key` in the
    /// environment, JSON logs at debug; its output, kept for the leak check.
    fn run(&self, args: &[&str], key: &str, faults: Option<&str>) -> std::process::Output {
        let mut a: Vec<&str> = args.to_vec();
        a.extend([
            "--data-dir",
            self.data.to_str().unwrap(),
            "--config",
            self.cfg.to_str().unwrap(),
            "--log-format",
            "json",
        ]);
        let mut env = vec![("SW_IT_PD_KEY", key), ("RUST_LOG", "debug")];
        if let Some(f) = faults {
            env.push(("STORMWATCH_FAULTS", f));
        }
        let out = run(&a, &env);
        let mut said = self.said.lock().unwrap();
        said.push_str(&String::from_utf8_lossy(&out.stdout));
        said.push_str(&String::from_utf8_lossy(&out.stderr));
        out
    }

    fn ok(&self, args: &[&str]) -> std::process::Output {
        let out = self.run(args, KEY, None);
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn sweep(&self, now: &str) -> Value {
        serde_json::from_slice(&self.ok(&["sweep", "--now", now, "--format", "json"]).stdout)
            .unwrap()
    }

    fn list(&self) -> Vec<Value> {
        let out = self.ok(&["alerts", "list", "--format", "json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// The key is in no output and nowhere in the state files.
    fn assert_key_never_leaked(&self, key: &str) {
        let said = self.said.lock().unwrap();
        assert!(!said.is_empty());
        assert!(
            !said.contains(key),
            "the routing key is in an output:\n{said}"
        );
        for entry in std::fs::read_dir(&self.data).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.starts_with("state.sqlite") {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                    "the routing key is in {name}"
                );
            }
        }
        let c = rusqlite::Connection::open(self.data.join("state.sqlite")).unwrap();
        let bodies: Vec<String> = c
            .prepare("SELECT body FROM outbox")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!bodies.is_empty());
        assert!(bodies
            .iter()
            .all(|b| !b.contains(key) && !b.contains("routing_key")));
    }
}

fn flush_args() -> [&'static str; 4] {
    ["alerts", "flush", "--wait", "30"]
}

/// The July outage: one `trigger` (its storm and spike in one PagerDuty
/// alert, `dedup_key` the incident key); the same sweep again sends
/// nothing; once the members resolve, one `resolve` with the same key.
/// `serve` delivers a sweep's events too, and no log line, output or state
/// file holds the key.
#[test]
fn one_trigger_then_one_resolve_with_the_same_dedup_key_and_the_key_never_leaks() {
    let (pd, url, _rt) = background();
    let s = Setup::new(&url);
    let report = s.sweep("2026-08-06");
    let queued = report["alerts_queued"].as_array().unwrap();
    assert_eq!(queued.len(), 1, "{report:#}");
    assert_eq!(queued[0]["event"], "opened");
    assert_eq!(queued[0]["signals"].as_array().unwrap().len(), 2);
    s.ok(&flush_args());
    let posts = pd.posts();
    assert_eq!(posts.len(), 1);
    let e = &posts[0].body;
    assert_eq!(posts[0].status, 202, "{:?}", posts[0]);
    assert_eq!(e["event_action"], "trigger");
    assert_eq!(e["routing_key"], KEY, "added as it is sent");
    assert_eq!(e["dedup_key"], "inc1:tool:search_flights");
    let p = &e["payload"];
    assert!(
        p["summary"]
            .as_str()
            .unwrap()
            .starts_with("search_flights failing since 2026-07-29"),
        "{p}"
    );
    assert_eq!(p["severity"], "critical");
    assert_eq!(p["source"], "dash.example");
    assert_eq!(p["component"], "search_flights");
    assert_eq!(p["class"], "unavailable");
    assert_eq!(p["custom_details"]["members"].as_array().unwrap().len(), 2);
    assert!(e["links"][0]["href"]
        .as_str()
        .unwrap()
        .starts_with("http://dash.example:8080/incidents/INC-"));
    assert!(e["links"][1]["href"]
        .as_str()
        .unwrap()
        .starts_with("http://dash.example:8080/traces/"));
    // Nothing new: nothing sent.
    assert_eq!(s.sweep("2026-08-06")["alerts_queued"], json!([]));
    s.ok(&flush_args());
    assert_eq!(pd.posts().len(), 1);

    // The fix ships (Aug 10: healthy calls, no storm): both members
    // resolve, and `serve` sends the one resolve.
    crate::common::import_files(&s.data, &[&repo().join("fixtures/fixed_loop.json")]);
    let server = crate::common::Server::start(
        &s.data,
        &[
            "--config",
            s.cfg.to_str().unwrap(),
            "--sweep-interval",
            "0",
            "--log-format",
            "json",
        ],
        &[("SW_IT_PD_KEY", KEY), ("RUST_LOG", "debug")],
    );
    let report = s.sweep("2026-08-11");
    let queued = report["alerts_queued"].as_array().unwrap();
    assert_eq!(queued.len(), 1, "{report:#}");
    assert_eq!(queued[0]["event"], "resolved");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pd.posts().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "not delivered; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = server.stop();
    s.said.lock().unwrap().push_str(&log);
    let posts = pd.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(
        posts[1].body,
        json!({"routing_key": KEY, "event_action": "resolve", "dedup_key": "inc1:tool:search_flights"})
    );
    assert_eq!(pd.opened(), 1, "one PagerDuty alert");
    assert_eq!(pd.alerts()["inc1:tool:search_flights"].status, "resolved");
    assert!(s.list().iter().all(|r| r["status"] == "delivered"));
    s.ok(&["config", "check"]);
    s.ok(&["alerts", "test", "oncall-pd"]);
    assert_eq!(pd.posts()[2].body["dedup_key"], "inc1:test:oncall-pd");
    s.assert_key_never_leaked(KEY);
}

/// A 400 is an invalid event: one attempt, dead-lettered with the body's
/// `errors` in `alerts list`; `flush` exits 1.
#[test]
fn a_400_is_dead_lettered_with_its_errors() {
    let (pd, url, _rt) = background();
    let s = Setup::new(&url);
    s.sweep("2026-08-06");
    // A key of the wrong length: PagerDuty refuses the event.
    let short = &KEY[..31];
    let out = s.run(&flush_args(), short, None);
    assert!(!out.status.success(), "a dead letter makes flush exit 1");
    assert_eq!(pd.posts().len(), 1);
    assert_eq!(pd.posts()[0].status, 400);
    let rows = s.list();
    assert_eq!(rows[0]["status"], "dead");
    let err = rows[0]["last_error"].as_str().unwrap();
    assert!(
        err.starts_with("HTTP 400 invalid event: Event object is invalid (errors: Length of 'routing_key' is incorrect"),
        "{err}"
    );
    assert_eq!(rows[0]["attempts"], 1);
    // Never retried.
    s.run(&flush_args(), short, None);
    assert_eq!(pd.posts().len(), 1);
    s.assert_key_never_leaked(short);
}

/// 429 (with `Retry-After`), then 503 and 500: each retried, then one 202;
/// one PagerDuty alert.
#[test]
fn a_429_and_5xx_are_retried_until_202() {
    let (pd, url, _rt) = background();
    let s = Setup::new(&url);
    s.sweep("2026-08-06");
    pd.answer_next(&[429, 503, 500]);
    let out = s.ok(&flush_args());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("oncall-pd: 1 delivered"), "{said}");
    let posts = pd.posts();
    let statuses: Vec<u16> = posts.iter().map(|p| p.status).collect();
    assert_eq!(statuses, vec![429, 503, 500, 202]);
    assert!(
        posts[1].at - posts[0].at >= Duration::from_secs(1),
        "the 429's Retry-After: 1 was honoured"
    );
    let keys: Vec<&Value> = posts.iter().map(|p| &p.body["dedup_key"]).collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "{keys:?}");
    assert_eq!(pd.opened(), 1);
    let rows = s.list();
    assert_eq!(
        (rows[0]["status"].as_str(), rows[0]["attempts"].as_u64()),
        (Some("delivered"), Some(4))
    );
    s.assert_key_never_leaked(KEY);
}

/// kill -9 between the send and the mark: the next flush sends the event
/// again with the same `dedup_key`, which PagerDuty deduplicates: two
/// posts, one alert. Then it is marked and never sent again.
#[test]
fn a_kill_between_send_and_mark_repeats_the_same_dedup_key() {
    let (pd, url, _rt) = background();
    let s = Setup::new(&url);
    s.sweep("2026-08-06");
    let killed = s.run(&flush_args(), KEY, Some("alert_kill_after_send=kill"));
    assert!(
        !killed.status.success(),
        "the flush should have been killed"
    );
    assert_eq!(pd.posts().len(), 1, "sent before the kill");
    assert_eq!(s.list()[0]["status"], "pending", "not marked");
    s.ok(&flush_args());
    let posts = pd.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].raw, posts[1].raw, "the same event, byte for byte");
    assert_eq!(posts[1].body["dedup_key"], "inc1:tool:search_flights");
    assert_eq!(pd.opened(), 1, "PagerDuty deduplicated the repeat");
    assert_eq!(
        pd.alerts()["inc1:tool:search_flights"].log,
        vec!["trigger", "trigger"]
    );
    s.ok(&flush_args());
    assert_eq!(pd.posts().len(), 2, "delivered now, and never again");
    s.assert_key_never_leaked(KEY);
}

/// A 429 without `Retry-After` waits PagerDuty's "few minutes" floor (30 s)
/// at least, on the paused clock; the target is told per incident only.
#[tokio::test(start_paused = true)]
async fn a_429_without_retry_after_waits_at_least_thirty_seconds() {
    use stormwatch::alert::{commands, outbox, Mode};
    use stormwatch::alert::{AlertConfig, Target, TargetKind};
    let (r, addr) =
        crate::alerts::receiver(vec![(429, Vec::new(), String::new())], (202, "{}")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = AlertConfig {
        pace_ms: 0,
        request_timeout_secs: 30 * 86_400,
        ..AlertConfig::default()
    };
    let t = Target {
        routing_key: Some(KEY.into()),
        ..Target::new(
            "pd",
            TargetKind::PagerDuty,
            &format!("http://{addr}/v2/enqueue"),
        )
    };
    let s = stormwatch::alert::Sender {
        clock: stormwatch::alert::Clock::virtual_start(),
        ..commands::sender(
            commands::open(&dir.path().join("state.sqlite")).unwrap(),
            &cfg,
        )
    };
    {
        let c = s.db.lock().unwrap();
        let body = json!({"event_action": "resolve", "dedup_key": "inc1:tool:x"}).to_string();
        outbox::enqueue(
            &c,
            "pd",
            &["INC-X:resolved".into()],
            &body,
            s.clock.now_ns(),
        )
        .unwrap();
    }
    s.run(
        t,
        Mode::Drain {
            wait: Duration::from_secs(3600),
        },
    )
    .await
    .unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        hits[1].at - hits[0].at >= Duration::from_secs(30),
        "{:?}",
        hits[1].at - hits[0].at
    );
    // No Standard Webhooks headers: PagerDuty deduplicates by dedup_key.
    assert!(hits[0].headers.get("webhook-id").is_none());
    let sent: Value = serde_json::from_str(&hits[0].body).unwrap();
    assert_eq!(sent["routing_key"], KEY);
}
