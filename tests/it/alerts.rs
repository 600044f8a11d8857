//! Alert delivery against real local HTTP servers that script their
//! answers (alerting.md's test cases): the sender on a paused tokio clock
//! for everything timed, and the real binary for the end-to-end and crash
//! cases.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use tokio::time::Instant;

use stormwatch::alert::{commands, outbox, Mode, Sender};
use stormwatch::alert::{AlertConfig, GroupBy, Target, TargetKind};

use crate::common::{repo, run};

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub at: Instant,
    pub headers: HeaderMap,
    pub body: String,
}

/// One scripted answer: status, headers, body.
pub type Answer = (u16, Vec<(&'static str, String)>, String);

/// A receiver that answers from a script, then with `default`.
pub struct Receiver {
    script: Mutex<VecDeque<Answer>>,
    default: (u16, String),
    pub hits: Mutex<Vec<Hit>>,
}

impl Receiver {
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

/// Start a receiver on 127.0.0.1 in the current runtime.
pub async fn receiver(script: Vec<Answer>, default: (u16, &str)) -> (Arc<Receiver>, SocketAddr) {
    let r = Arc::new(Receiver {
        script: Mutex::new(script.into()),
        default: (default.0, default.1.to_string()),
        hits: Mutex::new(Vec::new()),
    });
    let state = Arc::clone(&r);
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let r = Arc::clone(&state);
        async move {
            r.hits.lock().unwrap().push(Hit {
                at: Instant::now(),
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            let (status, hdrs, body) = r
                .script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| (r.default.0, Vec::new(), r.default.1.clone()));
            let mut h = HeaderMap::new();
            for (k, v) in hdrs {
                h.insert(k, v.parse().unwrap());
            }
            (StatusCode::from_u16(status).unwrap(), h, body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (r, addr)
}

/// A target told per signal: these tests are about delivery and the
/// signal notices (`alerts_incidents.rs` has the incidents).
fn target(kind: TargetKind, addr: SocketAddr, secret: Option<&str>) -> Target {
    Target {
        secret: secret.map(str::to_string),
        group_by: GroupBy::Signal,
        ..Target::new(
            &format!("{}-test", kind.as_str()),
            kind,
            &format!("http://{addr}/hook"),
        )
    }
}

/// No pacing, and a request timeout no paused-clock jump can reach.
fn policy() -> AlertConfig {
    AlertConfig {
        pace_ms: 0,
        request_timeout_secs: 30 * 86_400,
        ..AlertConfig::default()
    }
}

/// A sender on the paused test clock.
fn virtual_sender(db: rusqlite::Connection, cfg: &AlertConfig) -> Sender {
    Sender {
        clock: stormwatch::alert::Clock::virtual_start(),
        ..commands::sender(db, cfg)
    }
}

/// A sender on a fresh state file, with `bodies` queued for `t`.
fn sender_with(dir: &Path, cfg: &AlertConfig, t: &Target, bodies: &[&str]) -> Sender {
    let db = commands::open(&dir.join("state.sqlite")).unwrap();
    let s = virtual_sender(db, cfg);
    for b in bodies {
        let c = s.db.lock().unwrap();
        outbox::enqueue(&c, &t.name, &["SW-TEST".into()], b, s.clock.now_ns()).unwrap();
    }
    s
}

fn rows(s: &Sender) -> Vec<outbox::Row> {
    let c = s.db.lock().unwrap();
    let mut r = outbox::list(&c, 100).unwrap();
    r.reverse();
    r
}

const DRAIN: Mode = Mode::Drain {
    wait: Duration::from_secs(86_400),
};

fn gap(hits: &[Hit], i: usize) -> Duration {
    hits[i].at - hits[i - 1].at
}

/// Case 1: Slack 429 with `Retry-After: 3`: nothing before 3 s, then one delivery.
#[tokio::test(start_paused = true)]
async fn slack_429_waits_for_retry_after_then_delivers_once() {
    let dir = tempfile::tempdir().unwrap();
    let (r, addr) = receiver(
        vec![(
            429,
            vec![("retry-after", "3".into())],
            "rate_limited".into(),
        )],
        (200, "ok"),
    )
    .await;
    let t = target(TargetKind::Slack, addr, None);
    let s = sender_with(dir.path(), &policy(), &t, &[r#"{"text":"x"}"#]);
    s.run(t, DRAIN).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        gap(&hits, 1) >= Duration::from_secs(3),
        "{:?}",
        gap(&hits, 1)
    );
    let rows = rows(&s);
    assert_eq!(
        (rows[0].status.as_str(), rows[0].attempts),
        ("delivered", 2)
    );
}

/// Case 2: 500, 502, 503, then 200: four attempts, each wait inside its
/// full-jitter bound, one delivery.
#[tokio::test(start_paused = true)]
async fn server_errors_back_off_within_jitter_bounds_then_deliver() {
    let dir = tempfile::tempdir().unwrap();
    let (r, addr) = receiver(
        vec![
            (500, vec![], String::new()),
            (502, vec![], String::new()),
            (503, vec![], String::new()),
        ],
        (204, ""),
    )
    .await;
    let t = target(TargetKind::Webhook, addr, None);
    let s = sender_with(dir.path(), &policy(), &t, &["{}"]);
    s.run(t, DRAIN).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 4);
    for i in 1..4 {
        // base 1 s · 2^(attempt-1), cap 5 min; a millisecond for the request.
        let bound = Duration::from_secs(1 << (i - 1)) + Duration::from_millis(50);
        assert!(
            gap(&hits, i) <= bound,
            "wait {i}: {:?} > {bound:?}",
            gap(&hits, i)
        );
    }
    assert_eq!(rows(&s)[0].status, "delivered");
    assert_eq!(rows(&s)[0].attempts, 4);
    // Same webhook-id on every attempt.
    let ids: Vec<_> = hits
        .iter()
        .map(|h| h.headers["webhook-id"].clone())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]));
}

/// Case 3: 400 `invalid_payload`: one attempt, dead-lettered, body kept.
/// Case 4: Slack 200 with a body other than `ok` is a failure.
#[tokio::test(start_paused = true)]
async fn client_errors_and_a_slack_body_that_is_not_ok_are_dead_letters() {
    for (status, body) in [
        (400, "invalid_payload"),
        (200, "missing_text_or_fallback_or_attachments"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (r, addr) = receiver(vec![(status, vec![], body.into())], (200, "ok")).await;
        let t = target(TargetKind::Slack, addr, None);
        let s = sender_with(dir.path(), &policy(), &t, &["{}"]);
        s.run(t, DRAIN).await.unwrap();
        assert_eq!(r.hits().len(), 1, "{status} {body}");
        let row = &rows(&s)[0];
        assert_eq!(row.status, "dead");
        assert!(row.last_error.as_deref().unwrap().contains(body), "{row:?}");
    }
}

/// Case 5: Discord 429 with header 65 and body 64.57: waits at least 65 s.
#[tokio::test(start_paused = true)]
async fn discord_429_waits_the_larger_of_header_and_body() {
    let dir = tempfile::tempdir().unwrap();
    let (r, addr) = receiver(
        vec![(
            429,
            vec![("retry-after", "65".into())],
            r#"{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}"#
                .into(),
        )],
        (204, ""),
    )
    .await;
    let t = target(TargetKind::Discord, addr, None);
    let s = sender_with(dir.path(), &policy(), &t, &["{}"]);
    s.run(t, DRAIN).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        gap(&hits, 1) >= Duration::from_secs(65),
        "{:?}",
        gap(&hits, 1)
    );
}

/// Case 6: `Retry-After` as an HTTP date.
#[tokio::test(start_paused = true)]
async fn retry_after_as_an_http_date_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let when = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
    let (r, addr) = receiver(
        vec![(503, vec![("retry-after", when)], String::new())],
        (202, ""),
    )
    .await;
    let t = target(TargetKind::Teams, addr, None);
    let s = sender_with(dir.path(), &policy(), &t, &["{}"]);
    s.run(t, DRAIN).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 2);
    // Whole seconds in the date: at least 29 s.
    assert!(
        gap(&hits, 1) >= Duration::from_secs(29),
        "{:?}",
        gap(&hits, 1)
    );
}

/// Case 7: 410 anywhere, or Discord 404: the target is disabled, no more
/// requests, its messages wait until a person re-enables it.
#[tokio::test(start_paused = true)]
async fn a_gone_endpoint_disables_its_target_only() {
    for (kind, status) in [(TargetKind::Webhook, 410), (TargetKind::Discord, 404)] {
        let dir = tempfile::tempdir().unwrap();
        let (r, addr) = receiver(vec![(status, vec![], "gone".into())], (204, "")).await;
        let t = target(kind, addr, None);
        let s = sender_with(dir.path(), &policy(), &t, &["{}", "{}"]);
        s.run(t.clone(), DRAIN).await.unwrap();
        s.run(t.clone(), DRAIN).await.unwrap();
        assert_eq!(r.hits().len(), 1, "{kind:?}");
        {
            let c = s.db.lock().unwrap();
            assert!(outbox::disabled(&c, &t.name).unwrap().is_some());
        }
        assert!(rows(&s).iter().all(|r| r.status == "pending"));
        // Re-enabled by hand: both go out, in order.
        {
            let c = s.db.lock().unwrap();
            assert!(outbox::enable(&c, &t.name, s.clock.now_ns()).unwrap());
        }
        s.run(t, DRAIN).await.unwrap();
        assert_eq!(r.hits().len(), 3);
        assert!(rows(&s).iter().all(|r| r.status == "delivered"));
    }
}

/// The budget: a target that never recovers is given up on after
/// `max_attempts`, with one log line; a 429 pauses only its own target.
#[tokio::test(start_paused = true)]
async fn attempts_run_out_and_a_throttled_target_does_not_hold_up_another() {
    let dir = tempfile::tempdir().unwrap();
    let (dead, dead_addr) = receiver(vec![], (503, "down")).await;
    let (ok, ok_addr) = receiver(vec![], (200, "ok")).await;
    let cfg = AlertConfig {
        max_attempts: 4,
        ..policy()
    };
    let t1 = target(TargetKind::Webhook, dead_addr, None);
    let t2 = target(TargetKind::Slack, ok_addr, None);
    let s = sender_with(dir.path(), &cfg, &t1, &["{}"]);
    {
        let c = s.db.lock().unwrap();
        outbox::enqueue(&c, &t2.name, &["SW-TEST".into()], "{}", s.clock.now_ns()).unwrap();
    }
    let started = Instant::now();
    commands::flush(&s, &[t1, t2], Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(dead.hits().len(), 4);
    assert_eq!(ok.hits().len(), 1);
    // The healthy target was served at once, not after the other's backoff.
    assert!(ok.hits()[0].at - started < Duration::from_millis(100));
    let rows = rows(&s);
    assert_eq!(rows[0].status, "dead");
    assert!(rows[0].last_error.as_deref().unwrap().contains("gave up"));
    assert_eq!(rows[1].status, "delivered");
}

/// Pacing: three messages to one target go out at least a second apart.
#[tokio::test(start_paused = true)]
async fn one_message_per_second_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let (r, addr) = receiver(vec![], (200, "ok")).await;
    let t = target(TargetKind::Slack, addr, None);
    let cfg = AlertConfig {
        pace_ms: 1000,
        ..policy()
    };
    let s = sender_with(dir.path(), &cfg, &t, &["{}", "{}", "{}"]);
    s.run(t, DRAIN).await.unwrap();
    let hits = r.hits();
    assert_eq!(hits.len(), 3);
    assert!(gap(&hits, 1) >= Duration::from_secs(1) && gap(&hits, 2) >= Duration::from_secs(1));
}

// ---- the real binary ----

/// A receiver in its own runtime thread, for tests that run the binary.
pub fn background(
    default: (u16, &'static str),
) -> (Arc<Receiver>, SocketAddr, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (r, addr) = rt.block_on(receiver(vec![], default));
    (r, addr, rt)
}

impl Receiver {
    /// Wait up to 30 s for the first hit, failing with `server`'s log.
    pub fn wait_for_a_hit(&self, server: &crate::common::Server) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.hits().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "not delivered; log:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn config(dir: &Path, slack: Option<SocketAddr>, hook: SocketAddr) -> std::path::PathBuf {
    let path = dir.join("stormwatch.toml");
    let slack = slack
        .map(|a| {
            format!(
                "[[alert.targets]]\nname = \"oncall-slack\"\nkind = \"slack\"\nurl = \"http://{a}/services/T000/B000/XXXX\"\n\n"
            )
        })
        .unwrap_or_default();
    std::fs::write(
        &path,
        format!(
            r#"[alert]
public_url = "http://dash.example:8080"
request_timeout_secs = 2

{slack}[[alert.targets]]
name = "signed"
kind = "webhook"
url = "http://{hook}/stormwatch"
secret_env = "SW_IT_WEBHOOK_SECRET"
"#
        ),
    )
    .unwrap();
    path
}

fn cli(args: &[&str]) -> std::process::Output {
    let out = run(args, &[("SW_IT_WEBHOOK_SECRET", SECRET)]);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn import_history(data: &Path) {
    let f = repo().join("fixtures/search_flights_history.json");
    crate::common::import_files(data, &[&f]);
}

/// Case 11, 12 and the end-to-end acceptance: fixtures → sweep → one
/// message per target (the July outage is one incident: its storm and
/// spike inside it); Slack-shaped and signed generic receivers; the
/// signature verifies; the same sweep again sends nothing.
#[test]
fn sweep_then_flush_sends_one_grouped_message_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (slack, slack_addr, _rt1) = background((200, "ok"));
    let (hook, hook_addr, _rt2) = background((204, ""));
    let cfg = config(dir.path(), Some(slack_addr), hook_addr);
    import_history(&data);
    let base = [
        "--data-dir",
        data.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ];
    let sweep = |now: &str| {
        let mut a = vec!["sweep"];
        a.extend(base);
        a.extend(["--now", now, "--format", "json"]);
        serde_json::from_slice::<serde_json::Value>(&cli(&a).stdout).unwrap()
    };
    let flush = || {
        let mut a = vec!["alerts", "flush"];
        a.extend(base);
        cli(&a);
    };
    let report = sweep("2026-08-06");
    let signals = report["signals"].as_array().unwrap().len();
    assert!(signals >= 2, "{report:#}");
    assert_eq!(report["alerts_queued"].as_array().unwrap().len(), 2);
    flush();
    let s = slack.hits();
    assert_eq!(s.len(), 1, "one grouped Slack message");
    let body: serde_json::Value = serde_json::from_str(&s[0].body).unwrap();
    stormwatch::alert::check_limits(TargetKind::Slack, &body).unwrap();
    assert!(s[0].body.contains("search_flights"));
    assert!(s[0].body.contains("http://dash.example:8080/traces/"));
    let h = hook.hits();
    assert_eq!(h.len(), 1);
    let id = h[0].headers["webhook-id"].to_str().unwrap();
    let ts: i64 = h[0].headers["webhook-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let sig = h[0].headers["webhook-signature"].to_str().unwrap();
    assert!(stormwatch::alert::sign::verify(
        SECRET,
        id,
        ts,
        h[0].body.as_bytes(),
        sig
    ));
    // The default: one message per incident, its signals inside it.
    let v: serde_json::Value = serde_json::from_str(&h[0].body).unwrap();
    assert_eq!(v["type"], "stormwatch.incidents");
    assert_eq!(v["event"], "opened");
    assert_eq!(v["incident"]["members"].as_array().unwrap().len(), signals);
    assert!(s[0]
        .body
        .contains("http://dash.example:8080/incidents/INC-"));

    // The same sweep again, then flush: nothing more.
    let again = sweep("2026-08-06");
    assert_eq!(again["alerts_queued"], serde_json::json!([]));
    flush();
    assert_eq!((slack.hits().len(), hook.hits().len()), (1, 1));
    // `alerts list` shows both delivered.
    let mut a = vec!["alerts", "list", "--format", "json"];
    a.extend(base);
    let list: serde_json::Value = serde_json::from_slice(&cli(&a).stdout).unwrap();
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "delivered"));
}

/// Case 8: kill -9 after the outbox commit, before the send: one message
/// after the restart. Kill after the send, before marking it: sent again,
/// with the same `webhook-id`.
#[test]
fn a_kill_before_or_after_the_send_loses_nothing_and_keeps_the_id() {
    for (point, expected) in [("alert_kill_before_send", 1), ("alert_kill_after_send", 2)] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let (hook, hook_addr, _rt) = background((204, ""));
        let cfg = config(dir.path(), None, hook_addr);
        import_history(&data);
        let base = [
            "--data-dir",
            data.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ];
        let mut a = vec!["sweep", "--now", "2026-08-06"];
        a.extend(base);
        cli(&a);
        let mut a = vec!["alerts", "flush"];
        a.extend(base);
        let fault = format!("{point}=kill");
        let killed = run(
            &a,
            &[
                ("SW_IT_WEBHOOK_SECRET", SECRET),
                ("STORMWATCH_FAULTS", &fault),
            ],
        );
        assert!(
            !killed.status.success(),
            "{point}: the flush should have been killed"
        );
        assert_eq!(
            hook.hits().len(),
            expected - 1,
            "{point}: before the restart"
        );
        cli(&a);
        let hits = hook.hits();
        assert_eq!(hits.len(), expected, "{point}");
        let ids: Vec<&str> = hits
            .iter()
            .map(|h| h.headers["webhook-id"].to_str().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{point}: {ids:?}");
        // Delivered now, and never again.
        cli(&a);
        assert_eq!(hook.hits().len(), expected);
    }
}

fn draft(i: usize, tool: &str, last_seen_ns: i64) -> stormwatch::signal::SignalDraft {
    let key = format!("v1:retry_storm:{tool}:unavailable");
    stormwatch::signal::SignalDraft {
        id: stormwatch::signal::group::short_id(&key),
        key,
        kind: stormwatch::signal::Kind::RetryStorm,
        tool: tool.into(),
        error_class: "unavailable".into(),
        title: format!("Retry storm: {tool} ×15 in one turn (unavailable, no backoff) #{i}"),
        first_seen_ns: last_seen_ns,
        last_seen_ns,
        days: vec!["2026-07-29".into()],
        findings: 4,
        evidence: Vec::new(),
        evidence_more: 0,
        wasted_seconds: 0.0,
        severity: None,
        remedy: None,
    }
}

/// Apply one sweep's drafts with alerting on, as `sweep` does.
fn sweep_state(
    state: &mut stormwatch::signal::StateDb,
    path: &Path,
    alerting: &stormwatch::alert::Alerting,
    drafts: &[stormwatch::signal::SignalDraft],
    now_ns: i64,
    horizon_ns: i64,
) -> usize {
    let mut queued = 0;
    // Every tool's traffic reaches half a day before the data's horizon: a
    // storm last seen on day k resolves on the sweep of day k + 2 (24 quiet
    // hours of its traffic).
    let quiet = stormwatch::signal::state::Quiet {
        horizon_ns,
        after_days: 2,
        after_hours: 24,
        last_ok: Default::default(),
        traffic: state
            .list()
            .unwrap()
            .into_iter()
            .map(|s| s.draft.tool)
            .chain(drafts.iter().map(|d| d.tool.clone()))
            .map(|t| (t, horizon_ns - 12 * 3_600_000_000_000))
            .collect(),
    };
    state
        .apply_then(drafts, now_ns, &quiet, |c, out| {
            let signals = stormwatch::signal::state::signals_in(c, path)?;
            queued = alerting
                .enqueue(c, &signals, &out.changes, &[], now_ns, now_ns)
                .unwrap()
                .len();
            Ok::<_, stormwatch::signal::StateError>(())
        })
        .unwrap();
    queued
}

/// Case 11: ten signals changed in one sweep → one message per target.
/// Case 13: a quiet signal → one `resolved`; recurrence → one `regressed`.
/// Case 14: hostile tool names arrive inert at real receivers.
#[tokio::test(start_paused = true)]
async fn grouping_resolution_and_regression_reach_real_receivers_once_each() {
    const DAY: i64 = 86_400_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let (slack, slack_addr) = receiver(vec![], (200, "ok")).await;
    let (discord, discord_addr) = receiver(vec![], (204, "")).await;
    let targets = vec![
        target(TargetKind::Slack, slack_addr, None),
        target(TargetKind::Discord, discord_addr, None),
    ];
    let alerting = stormwatch::alert::Alerting {
        cfg: policy(),
        targets: targets.clone(),
        public_url: String::new(),
    };
    let path = dir.path().join("state.sqlite");
    let mut state = stormwatch::signal::StateDb::open(&path).unwrap();
    let tools = [
        "<!channel> *x*",
        "@everyone",
        "<script>alert(1)</script>",
        "search_flights",
        "book_flight",
        "quote_price",
        "get_weather",
        "fetch_page",
        "charge_card",
        "hotel_search",
    ];
    let drafts: Vec<_> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| draft(i, t, DAY))
        .collect();
    assert_eq!(
        sweep_state(&mut state, &path, &alerting, &drafts, DAY + 1, DAY + 1),
        2
    );
    let s = virtual_sender(commands::open(&path).unwrap(), &policy());
    commands::flush(&s, &targets, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!((slack.hits().len(), discord.hits().len()), (1, 1));
    let body = &slack.hits()[0].body;
    assert!(
        !body.contains("<!channel>") && !body.contains("<script>"),
        "{body}"
    );
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        v["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "section")
            .count(),
        10
    );
    let body = &discord.hits()[0].body;
    assert!(!body.contains("@everyone"), "{body}");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["embeds"].as_array().unwrap().len(), 10);

    // Only search_flights keeps firing; the other nine resolve once their
    // tools have had a day of traffic without a storm (and search_flights, open two days, gets its
    // reminder in the same message).
    let mut sent = 0;
    for k in 2..=3 {
        let one = vec![draft(3, "search_flights", k * DAY)];
        sent += sweep_state(&mut state, &path, &alerting, &one, k * DAY, k * DAY);
    }
    let one = vec![draft(3, "search_flights", 3 * DAY)];
    commands::flush(&s, &targets, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(sent, 2, "one resolved message per target");
    let last: serde_json::Value = serde_json::from_str(&slack.hits()[1].body).unwrap();
    assert!(
        last["text"].as_str().unwrap().contains("9 resolved"),
        "{last}"
    );
    // Sweeping again without change sends nothing.
    assert_eq!(
        sweep_state(&mut state, &path, &alerting, &one, 3 * DAY, 3 * DAY),
        0
    );
    // book_flight fires again a day later: one regressed message per target.
    let back = vec![
        draft(3, "search_flights", 3 * DAY),
        draft(4, "book_flight", 4 * DAY),
    ];
    assert_eq!(
        sweep_state(
            &mut state,
            &path,
            &alerting,
            &back,
            4 * DAY + 1,
            4 * DAY + 1
        ),
        2
    );
    commands::flush(&s, &targets, Duration::from_secs(60))
        .await
        .unwrap();
    let hits = slack.hits();
    assert_eq!(hits.len(), 3);
    assert!(hits[2].body.contains("1 regressed"), "{}", hits[2].body);
    assert_eq!(discord.hits().len(), 3);
}

/// `serve` works the outbox that a cron `sweep` fills, and counts the
/// delivery on `/metrics`; `alerts test` checks the wiring with a signed
/// sample; `alerts retry` puts a dead letter back in the queue.
#[test]
fn serve_delivers_what_a_sweep_queued_and_the_alerts_commands_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (hook, hook_addr, rt) = background((204, ""));
    let cfg = config(dir.path(), None, hook_addr);
    import_history(&data);
    let base = [
        "--data-dir",
        data.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ];

    // `alerts test`: a signed sample, straight away.
    let mut a = vec!["alerts", "test", "signed"];
    a.extend(base);
    let out = cli(&a);
    assert!(String::from_utf8_lossy(&out.stdout).contains("delivered"));
    let h = hook.hits();
    assert_eq!(h.len(), 1);
    let id = h[0].headers["webhook-id"].to_str().unwrap();
    let ts: i64 = h[0].headers["webhook-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let sig = h[0].headers["webhook-signature"].to_str().unwrap();
    assert!(stormwatch::alert::sign::verify(
        SECRET,
        id,
        ts,
        h[0].body.as_bytes(),
        sig
    ));
    let mut a = vec!["alerts", "test", "nope"];
    a.extend(base);
    let out = run(&a, &[("SW_IT_WEBHOOK_SECRET", SECRET)]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("signed"));

    // serve's sender delivers a sweep's message.
    let server = crate::common::Server::start(
        &data,
        &["--config", cfg.to_str().unwrap()],
        &[("SW_IT_WEBHOOK_SECRET", SECRET)],
    );
    let mut a = vec!["sweep", "--now", "2026-08-06"];
    a.extend(base);
    cli(&a);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while hook.hits().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(hook.hits().len(), 2, "log:\n{}", server.log_text());
    let metrics = reqwest_blocking::blocking::get(format!("http://{}/metrics", server.http))
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains(
            r#"stormwatch_alert_deliveries_total{target="signed",outcome="delivered"} 1"#
        ),
        "{metrics}"
    );
    let log = server.stop();
    assert!(
        !log.contains(SECRET) && !log.contains("whsec_"),
        "the secret leaked into the log"
    );

    // A 400 dead-letters; `alerts retry` queues it again and the next flush delivers.
    drop(rt);
    let dir2 = tempfile::tempdir().unwrap();
    let data2 = dir2.path().join("data");
    let (bad, bad_addr, _rt2) = background((204, ""));
    let cfg2 = config(dir2.path(), None, bad_addr);
    import_history(&data2);
    let base2 = [
        "--data-dir",
        data2.to_str().unwrap(),
        "--config",
        cfg2.to_str().unwrap(),
    ];
    bad.script_push(400, "invalid_payload");
    let mut a = vec!["sweep", "--now", "2026-08-06"];
    a.extend(base2);
    cli(&a);
    let mut a = vec!["alerts", "flush"];
    a.extend(base2);
    let out = run(&a, &[("SW_IT_WEBHOOK_SECRET", SECRET)]);
    assert!(!out.status.success(), "a dead letter makes flush exit 1");
    let mut l = vec!["alerts", "list", "--format", "json"];
    l.extend(base2);
    let list: serde_json::Value = serde_json::from_slice(&cli(&l).stdout).unwrap();
    let dead = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "dead")
        .expect("a dead letter");
    assert!(dead["last_error"]
        .as_str()
        .unwrap()
        .contains("invalid_payload"));
    let id = dead["id"].to_string();
    let mut r = vec!["alerts", "retry", &id];
    r.extend(base2);
    cli(&r);
    cli(&a);
    assert_eq!(bad.hits().len(), 2);
    let list: serde_json::Value = serde_json::from_slice(&cli(&l).stdout).unwrap();
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "delivered"));
}

impl Receiver {
    fn script_push(&self, status: u16, body: &str) {
        self.script
            .lock()
            .unwrap()
            .push_back((status, Vec::new(), body.to_string()));
    }
}

/// A 429 pauses its own target for the Retry-After; another target is
/// served at once.
#[tokio::test(start_paused = true)]
async fn a_throttled_target_pauses_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, slow_addr) = receiver(
        vec![(
            429,
            vec![("retry-after", "30".into())],
            "rate_limited".into(),
        )],
        (200, "ok"),
    )
    .await;
    let (ok, ok_addr) = receiver(vec![], (204, "")).await;
    let t1 = target(TargetKind::Slack, slow_addr, None);
    let t2 = target(TargetKind::Discord, ok_addr, None);
    let s = sender_with(dir.path(), &policy(), &t1, &["{}", "{}"]);
    {
        let c = s.db.lock().unwrap();
        outbox::enqueue(&c, &t2.name, &["SW-TEST".into()], "{}", s.clock.now_ns()).unwrap();
    }
    let started = Instant::now();
    commands::flush(&s, &[t1, t2], Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(ok.hits().len(), 1);
    assert!(ok.hits()[0].at - started < Duration::from_millis(100));
    // Both of the throttled target's messages waited out the pause, in order.
    let hits = slow.hits();
    assert_eq!(hits.len(), 3);
    assert!(hits[1].at - hits[0].at >= Duration::from_secs(30));
    assert!(rows(&s).iter().all(|r| r.status == "delivered"));
}

/// A target that cannot be reached: retried, then given up, and its URL
/// (a secret for Slack, Discord and Teams) appears in no error.
#[tokio::test(start_paused = true)]
async fn an_unreachable_target_gives_up_without_leaking_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut t = target(TargetKind::Slack, closed, None);
    t.url = format!("http://{closed}/services/T0/B0/SECRETTOKEN123");
    let cfg = AlertConfig {
        max_attempts: 3,
        ..policy()
    };
    let s = sender_with(dir.path(), &cfg, &t, &["{}"]);
    s.run(t, DRAIN).await.unwrap();
    let row = &rows(&s)[0];
    assert_eq!((row.status.as_str(), row.attempts), ("dead", 3));
    let err = row.last_error.as_deref().unwrap();
    assert!(err.contains("gave up"), "{err}");
    assert!(
        !err.contains("SECRETTOKEN") && !err.contains("/services/"),
        "{err}"
    );
}
