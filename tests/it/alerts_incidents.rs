//! Alerts follow incidents (alerting.md, "Incidents and notifications"):
//! the demo's outage is one Slack message, not one per signal; members
//! joining an open incident are one update, not a new page; a resolve is
//! one message; a member flapping within `cooldown` stays quiet; an MCP
//! server that dies with four tools behind it is one message per target,
//! one PagerDuty `trigger` and one `resolve` under the same `dedup_key`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use stormwatch::alert::{commands, Alerting, Queued, Sender};
use stormwatch::alert::{AlertConfig, Target, TargetKind};
use stormwatch::incident::{Facts, ToolDayFacts};
use stormwatch::signal::{Evidence, Kind, SignalDraft, StateDb};

use crate::alerts::{receiver, Receiver};
use crate::common::{repo, run};
use crate::pagerduty::KEY;

const HOUR: i64 = 3_600_000_000_000;
/// 2026-07-29 00:00 UTC.
const T: i64 = 1_785_283_200_000_000_000;
const DAY: i32 = 20_663;

// ---- the demo, with the real binary ----

/// The demo's data (`serve --demo`: the search_flights history, the fixed
/// loop, the retry gate) swept as the demo does: Slack gets one message per
/// incident, and the July outage — a retry storm and an error-rate spike of
/// search_flights — is one of them, not a message per signal; a target
/// that asks for signals gets today's grouped message of every signal.
#[test]
fn the_demos_outage_is_one_slack_message_not_one_per_signal() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (slack, slack_addr, _rt1) = crate::alerts::background((200, "ok"));
    let (hook, hook_addr, _rt2) = crate::alerts::background((204, ""));
    let cfg = dir.path().join("stormwatch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sweep]\nsince_days = 40\n\n[alert]\npublic_url = \"http://dash.example:8080\"\npace_ms = 10\n\n\
             [[alert.targets]]\nname = \"oncall-slack\"\nkind = \"slack\"\nurl = \"http://{slack_addr}/services/T0/B0/X\"\n\n\
             [[alert.targets]]\nname = \"signals\"\nkind = \"webhook\"\ngroup_by = \"signal\"\nurl = \"http://{hook_addr}/in\"\n"
        ),
    )
    .unwrap();
    let files: Vec<_> = [
        "search_flights_history.json",
        "fixed_loop.json",
        "retry_gate.json",
    ]
    .iter()
    .map(|f| repo().join("fixtures").join(f))
    .collect();
    let files: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    crate::common::import_files(&data, &files);
    let base = [
        "--data-dir",
        data.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ];
    let cli = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(base);
        let out = run(&a, &[]);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    // The demo's "now": the morning after its last day.
    let report: Value = serde_json::from_slice(
        &cli(&["sweep", "--now", "2026-08-13T06:00:00Z", "--format", "json"]).stdout,
    )
    .unwrap();
    let signals = report["signals"].as_array().unwrap();
    let outage: Vec<&str> = signals
        .iter()
        .filter(|s| s["tool"] == "search_flights")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(outage.len() >= 2, "the outage's signals: {report:#}");
    cli(&["alerts", "flush"]);
    let hits = slack.hits();
    let queued = report["alerts_queued"].as_array().unwrap();
    let to_slack = queued
        .iter()
        .filter(|q| q["target"] == "oncall-slack")
        .count();
    assert_eq!(hits.len(), to_slack, "one message per incident");
    assert!(hits.len() < signals.len(), "fewer messages than signals");
    let about_outage: Vec<&crate::alerts::Hit> = hits
        .iter()
        .filter(|h| h.body.contains("search_flights"))
        .collect();
    assert_eq!(about_outage.len(), 1, "the July outage is one message");
    let body: Value = serde_json::from_str(&about_outage[0].body).unwrap();
    stormwatch::alert::check_limits(TargetKind::Slack, &body).unwrap();
    for id in &outage {
        assert!(
            about_outage[0].body.contains(id),
            "{id} in the outage's message"
        );
    }
    assert!(about_outage[0].body.contains("OPENED · INC-"));
    assert!(about_outage[0]
        .body
        .contains("http://dash.example:8080/incidents/INC-"));
    // The signal target: one grouped message of every signal, as before.
    let h = hook.hits();
    assert_eq!(h.len(), 1);
    let v: Value = serde_json::from_str(&h[0].body).unwrap();
    assert_eq!(v["type"], "stormwatch.signals");
    assert_eq!(v["signals"].as_array().unwrap().len(), signals.len());
    // Swept again: nothing more.
    let again: Value = serde_json::from_slice(
        &cli(&["sweep", "--now", "2026-08-13T06:00:00Z", "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(again["alerts_queued"], serde_json::json!([]));
}

// ---- sweeps on a state file, delivered to local receivers ----

/// A storm (or another per-turn finding) of `tool`, last seen at `at`.
fn draft(kind: Kind, tool: &str, class: &str, at: i64) -> SignalDraft {
    let key = format!("v1:{}:{tool}:{class}", kind.as_str());
    let day = stormwatch::model::day_to_string(stormwatch::model::day_of_ns(at));
    SignalDraft {
        id: stormwatch::signal::group::short_id(&key),
        key,
        kind,
        tool: tool.into(),
        error_class: class.into(),
        title: format!("{}: {tool} ({class})", kind.as_str()),
        first_seen_ns: at,
        last_seen_ns: at,
        days: vec![day.clone()],
        findings: 4,
        evidence: vec![Evidence::turn(
            &format!("{:032x}", xxhash_rust::xxh3::xxh3_128(tool.as_bytes())),
            &format!("turn-{tool}"),
            stormwatch::model::day_of_ns(at),
            12,
            12,
        )],
        evidence_more: 0,
        wasted_seconds: 0.0,
        severity: None,
        remedy: None,
    }
}

struct World {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    state: StateDb,
    alerting: Alerting,
    facts: Facts,
    horizon: i64,
}

impl World {
    fn new(targets: Vec<Target>) -> World {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let state = StateDb::open(&path).unwrap();
        World {
            _dir: dir,
            path,
            state,
            alerting: Alerting {
                cfg: AlertConfig {
                    pace_ms: 0,
                    request_timeout_secs: 30 * 86_400,
                    ..AlertConfig::default()
                },
                targets,
                public_url: "https://sw.example".into(),
            },
            facts: Facts::default(),
            horizon: 0,
        }
    }

    /// One sweep at `now` whose data reaches `horizon`, every tool called
    /// until `traffic` (so a storm last seen a day before it resolves):
    /// signals, incidents and alerts in one transaction, as `sweep` does.
    fn sweep(&mut self, drafts: &[SignalDraft], now: i64, traffic: i64) -> Vec<Queued> {
        self.horizon = self.horizon.max(traffic) + 1;
        let quiet = stormwatch::signal::state::Quiet {
            horizon_ns: self.horizon,
            after_days: 2,
            after_hours: 24,
            last_ok: Default::default(),
            traffic: self
                .state
                .list()
                .unwrap()
                .into_iter()
                .map(|s| s.draft.tool)
                .chain(drafts.iter().map(|d| d.tool.clone()))
                .map(|t| (t, traffic))
                .collect(),
        };
        let mut queued = Vec::new();
        let (path, alerting, facts) = (&self.path, &self.alerting, &self.facts);
        self.state
            .apply_then(drafts, now, &quiet, |c, out| {
                let signals = stormwatch::signal::state::signals_in(c, path)?;
                let changes =
                    stormwatch::incident::store::apply(c, &signals, facts, now, 10).unwrap();
                queued = alerting
                    .enqueue(c, &signals, &out.changes, &changes, now, now)
                    .unwrap();
                Ok::<_, stormwatch::signal::StateError>(())
            })
            .unwrap();
        queued
    }

    fn sender(&self) -> Sender {
        Sender {
            clock: stormwatch::alert::Clock::virtual_start(),
            ..commands::sender(commands::open(&self.path).unwrap(), &self.alerting.cfg)
        }
    }

    async fn flush(&self) {
        commands::flush(
            &self.sender(),
            &self.alerting.targets,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    }
}

fn slack(addr: std::net::SocketAddr) -> Target {
    Target::new(
        "slack",
        TargetKind::Slack,
        &format!("http://{addr}/services/x"),
    )
}

fn pagerduty(url: &str) -> Target {
    Target {
        routing_key: Some(KEY.into()),
        ..Target::new("pd", TargetKind::PagerDuty, url)
    }
}

fn events(q: &[Queued], target: &str) -> Vec<String> {
    q.iter()
        .filter(|x| x.target == target)
        .map(|x| x.event.map(|e| e.as_str().to_string()).unwrap_or_default())
        .collect()
}

fn texts(r: &Receiver) -> Vec<String> {
    r.hits()
        .iter()
        .map(|h| {
            let v: Value = serde_json::from_str(&h.body).unwrap();
            v["text"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// A storm opens an incident; wasted retries of the same tool join it: one
/// update to Slack and one more `trigger` under the same `dedup_key`
/// (PagerDuty appends it to the open alert: no new page); both resolve: one
/// message and one `resolve`.
#[tokio::test(start_paused = true)]
async fn members_joining_an_open_incident_are_one_update_and_the_resolve_one_message() {
    let (chat, chat_addr) = receiver(vec![], (200, "ok")).await;
    let (pd, pd_url) = crate::pagerduty::receiver().await;
    let mut w = World::new(vec![slack(chat_addr), pagerduty(&pd_url)]);
    let storm = draft(
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        T + 19 * HOUR,
    );
    let q = w.sweep(std::slice::from_ref(&storm), T + 20 * HOUR, T + 20 * HOUR);
    assert_eq!(events(&q, "slack"), vec!["opened"]);
    assert_eq!(events(&q, "pd"), vec!["opened"]);
    w.flush().await;

    let wasted = draft(
        Kind::WastedRetries,
        "search_flights",
        "invalid_request",
        T + 19 * HOUR + HOUR / 2,
    );
    let q = w.sweep(
        &[storm.clone(), wasted.clone()],
        T + 21 * HOUR,
        T + 21 * HOUR,
    );
    assert_eq!(events(&q, "slack"), vec!["updated"], "{q:?}");
    assert_eq!(events(&q, "pd"), vec!["updated"]);
    assert_eq!(q[0].signals.len(), 2);
    w.flush().await;
    let t = texts(&chat);
    assert_eq!(t.len(), 2);
    assert!(t[1].contains("updated"), "{t:?}");
    let update = &chat.hits()[1].body;
    assert!(
        update.contains(&format!("{} joined", wasted.id)),
        "{update}"
    );
    let posts = pd.accepted();
    assert_eq!(posts.len(), 2);
    assert!(posts.iter().all(|p| p.body["event_action"] == "trigger"));
    assert_eq!(posts[0].body["dedup_key"], posts[1].body["dedup_key"]);
    assert_eq!(pd.opened(), 1, "an update, not a new page");

    // Nothing new: nothing.
    assert!(w.sweep(&[], T + 22 * HOUR, T + 22 * HOUR).is_empty());
    // A day and a half of traffic without a finding: both resolve, one message.
    let q = w.sweep(&[], T + 23 * HOUR, T + 2 * 86_400 * 1_000_000_000);
    assert_eq!(events(&q, "slack"), vec!["resolved"], "{q:?}");
    assert_eq!(events(&q, "pd"), vec!["resolved"]);
    w.flush().await;
    assert_eq!(chat.hits().len(), 3);
    assert!(texts(&chat)[2].contains("resolved"));
    let posts = pd.accepted();
    assert_eq!(posts.len(), 3);
    assert_eq!(posts[2].body["event_action"], "resolve");
    assert_eq!(posts[2].body["dedup_key"], posts[0].body["dedup_key"]);
    let alerts = pd.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts.values().next().unwrap().status, "resolved");
}

/// A member that flaps: resolved, back within `cooldown` (6 h) of the
/// incident's last firing, resolved again. The first resolve is told; the
/// reopening and its resolve are quiet, on every target.
#[tokio::test(start_paused = true)]
async fn a_member_flapping_within_the_cooldown_stays_quiet() {
    let (chat, chat_addr) = receiver(vec![], (200, "ok")).await;
    let (pd, pd_url) = crate::pagerduty::receiver().await;
    let mut w = World::new(vec![slack(chat_addr), pagerduty(&pd_url)]);
    let d = 86_400 * 1_000_000_000i64;
    let storm = |at| draft(Kind::RetryStorm, "search_flights", "unavailable", at);
    // Sweep times (the cooldown's clock) an hour apart; the data's clock
    // (what resolves a storm) days apart.
    let q = w.sweep(&[storm(T)], T + HOUR, T + HOUR);
    assert_eq!(events(&q, "slack"), vec!["opened"]);
    let q = w.sweep(&[], T + 2 * HOUR, T + 2 * d);
    assert_eq!(events(&q, "slack"), vec!["resolved"]);
    let q = w.sweep(
        &[storm(T + 2 * d + HOUR)],
        T + 3 * HOUR,
        T + 2 * d + 2 * HOUR,
    );
    assert!(q.is_empty(), "back within the cooldown: quiet {q:?}");
    let q = w.sweep(&[], T + 4 * HOUR, T + 5 * d);
    assert!(q.is_empty(), "its resolve too: {q:?}");
    w.flush().await;
    assert_eq!(chat.hits().len(), 2);
    let actions: Vec<Value> = pd
        .accepted()
        .iter()
        .map(|p| p.body["event_action"].clone())
        .collect();
    assert_eq!(actions, vec!["trigger", "resolve"]);
    // Back again once the cooldown is over: told.
    let q = w.sweep(
        &[storm(T + 5 * d + HOUR)],
        T + 12 * HOUR,
        T + 5 * d + 2 * HOUR,
    );
    assert_eq!(events(&q, "slack"), vec!["reopened"]);
    assert_eq!(events(&q, "pd"), vec!["reopened"]);
    w.flush().await;
    assert_eq!(pd.opened(), 2, "a resolved alert's key opens a new one");
}

/// An MCP server dies: four tools behind it (one dependency, `fare-mcp`)
/// storm within minutes. One incident: one message per target, one
/// PagerDuty `trigger`; when the members resolve, one `resolve` with the
/// same `dedup_key` and one message per target again.
#[tokio::test(start_paused = true)]
async fn an_mcp_server_that_dies_is_one_message_per_target_one_trigger_and_one_resolve() {
    let (chat, chat_addr) = receiver(vec![], (200, "ok")).await;
    let (hook, hook_addr) = receiver(vec![], (204, "")).await;
    let (pd, pd_url) = crate::pagerduty::receiver().await;
    let mut w = World::new(vec![
        slack(chat_addr),
        Target::new(
            "hook",
            TargetKind::Webhook,
            &format!("http://{hook_addr}/in"),
        ),
        pagerduty(&pd_url),
    ]);
    let tools = ["get_quote", "get_fx_rate", "search_fares", "book_fare"];
    for t in tools {
        w.facts.daily.insert(
            (t.to_string(), DAY),
            ToolDayFacts {
                service: "travel-agent".into(),
                calls: 40,
                errors: 30,
                dependency: Some("fare-mcp".into()),
                wasted: 20,
                wasted_seconds: 31.5,
            },
        );
    }
    let storms: Vec<SignalDraft> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            draft(
                Kind::RetryStorm,
                t,
                "unavailable",
                T + 14 * HOUR + i as i64 * 120_000_000_000,
            )
        })
        .collect();
    let q = w.sweep(&storms, T + 15 * HOUR, T + 15 * HOUR);
    for target in ["slack", "hook", "pd"] {
        assert_eq!(events(&q, target), vec!["opened"], "{target}: {q:?}");
    }
    let incident = q[0].incident.clone().unwrap();
    assert_eq!(q[0].signals.len(), 4);
    w.flush().await;
    assert_eq!((chat.hits().len(), hook.hits().len()), (1, 1));
    let v: Value = serde_json::from_str(&hook.hits()[0].body).unwrap();
    assert_eq!(v["type"], "stormwatch.incidents");
    assert_eq!(v["incident"]["id"], incident.as_str());
    assert_eq!(v["incident"]["dependency"], "fare-mcp");
    assert_eq!(v["incident"]["members"].as_array().unwrap().len(), 4);
    let slack_body = &chat.hits()[0].body;
    for t in tools {
        assert!(slack_body.contains(t), "{t} in {slack_body}");
    }
    assert!(slack_body.contains("fare-mcp"));
    let posts = pd.accepted();
    assert_eq!(posts.len(), 1);
    let key = posts[0].body["dedup_key"].clone();
    assert_eq!(key, "inc1:dep:fare-mcp");
    assert_eq!(posts[0].body["payload"]["component"], "fare-mcp");
    assert_eq!(posts[0].body["payload"]["group"], "travel-agent");
    assert_eq!(posts[0].body["payload"]["severity"], "critical");

    // The server is back: a day of traffic without a finding.
    let q = w.sweep(&[], T + 16 * HOUR, T + 2 * 86_400 * 1_000_000_000);
    for target in ["slack", "hook", "pd"] {
        assert_eq!(events(&q, target), vec!["resolved"], "{target}: {q:?}");
    }
    w.flush().await;
    assert_eq!((chat.hits().len(), hook.hits().len()), (2, 2));
    let posts = pd.accepted();
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[1].body["event_action"], "resolve");
    assert_eq!(posts[1].body["dedup_key"], key);
    assert_eq!(pd.opened(), 1);
    assert_eq!(pd.alerts()["inc1:dep:fare-mcp"].status, "resolved");
}
