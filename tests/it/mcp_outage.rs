//! An MCP server that dies, end to end (alerting.md, "Incidents"): real
//! spans of a real framework, an MCP client and server on the MCP Python
//! SDK 2.x, four tools behind one server failing within the same hour →
//! one incident naming the server and its four tools → one message per
//! target, PagerDuty one `trigger` → the tools recover, the members resolve
//! → one `resolve` with the same `dedup_key`.
//!
//! The run: `scripts/frameworks/pydantic_ai_mcp_outage_agent.py`
//! (pydantic-ai 2.68 with `MCPToolset` over stdio, a scripted model,
//! venv-pydantic-mcp) against `scripts/frameworks/mcp_quote_server.py`
//! (service `quote-mcp`: `get_quote`, `get_fx_rate`, `convert_amount`,
//! `list_rates`), every layer traced (pydantic-ai's `execute_tool`,
//! FastMCP's and the MCP SDK's client spans, the server's own SERVER
//! spans, exported by the server process under its own service name):
//!
//! - **mcp-outage**: the server down; four turns of `quote-agent`, one per
//!   tool, each calling its tool 6 times with the same arguments, every
//!   call an `isError` "HTTP 503 Service Unavailable" → four retry storms
//!   of 6, class `unavailable`, and one incident `inc1:dep:quote-mcp`
//!   whose members are those storms, each joined by "same dependency
//!   quote-mcp" (the server's `service.name`, the tools' `dependency`);
//! - **mcp-recovered**: the server back; the same four turns, each tool 3
//!   times with 3 different arguments, all succeeding → nothing of its own.
//!
//! Replayed (always: `fixtures/frameworks/pydantic-ai-mcp-{outage,
//! recovered}.json` through `import`, no framework needed), the outage is
//! moved to 2026-08-02 14:02Z and the recovery to 26 hours after the
//! outage's last span, past `resolve_after_hours` (24) of the tools' own
//! traffic without a finding; two targets (a signed generic webhook on
//! alerts.rs's local receiver, and PagerDuty's Events API v2 with `url`
//! pointed at pagerduty.rs's local receiver, which checks each event as
//! PagerDuty does and answers 202 `{"status": "success", "message": "Event
//! processed", "dedup_key": …}`) see the incident open and resolve.
//! Live (`STORMWATCH_PY_PYDANTIC_MCP`, set by scripts/test.sh): both
//! scenarios against a running `serve`, every exported span stored as the
//! call it is a part of, and the outage's sweep the same incident.

use crate::common::{python, repo, rows_by_key, run, spans, Server};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

const OUTAGE: &str = "pydantic-ai-mcp-outage";
const RECOVERED: &str = "pydantic-ai-mcp-recovered";
/// The server's `service.name`: the tools' dependency.
const DEPENDENCY: &str = "quote-mcp";
const INCIDENT_KEY: &str = "inc1:dep:quote-mcp";
/// In the order the agent's turns call them.
const TOOLS: [&str; 4] = ["get_quote", "get_fx_rate", "convert_amount", "list_rates"];
/// Calls of each tool in its outage turn; all fail.
const STORM_CALLS: u64 = 6;
/// Where the replayed outage begins (its first span's start).
const OUTAGE_AT: &str = "2026-08-02T14:02:00Z";
/// The recovery's first span, after the outage's last.
const RECOVERY_AFTER_HOURS: i64 = 26;
/// The integration key the Events API v2 receiver (tests/it/pagerduty.rs) takes.
const ROUTING_KEY: &str = crate::pagerduty::KEY;
const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

const NS_PER_HOUR: i64 = 3_600_000_000_000;

fn ns_of(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap()
}

fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339()
}

// ---- the OTLP bodies ----

fn fixture(name: &str) -> PathBuf {
    repo()
        .join("fixtures/frameworks")
        .join(format!("{name}.json"))
}

/// Every `*TimeUnixNano` of an OTLP JSON body (spans' start and end, events).
fn times(node: &mut serde_json::Value, f: &mut dyn FnMut(&mut serde_json::Value, i64)) {
    match node {
        serde_json::Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k.ends_with("TimeUnixNano") || k == "timeUnixNano" {
                    let ns = match v {
                        serde_json::Value::String(s) => s.parse::<i64>().ok(),
                        serde_json::Value::Number(n) => n.as_i64(),
                        _ => None,
                    };
                    if let Some(ns) = ns {
                        f(v, ns);
                    }
                } else {
                    times(v, f);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| times(v, f)),
        _ => {}
    }
}

/// The first start and last end of a body.
fn extent(body: &serde_json::Value) -> (i64, i64) {
    let mut body = body.clone();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    times(&mut body, &mut |_, ns| {
        first = first.min(ns);
        last = last.max(ns);
    });
    (first, last)
}

/// `name`'s fixture with every time moved so that it begins at `start_ns`,
/// written into `dir`; its (first start, last end) there.
fn moved(name: &str, dir: &Path, start_ns: i64) -> (PathBuf, i64, i64) {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let mut body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (first, _) = extent(&body);
    let delta = start_ns - first;
    times(&mut body, &mut |v, ns| {
        *v = serde_json::Value::String((ns + delta).to_string());
    });
    let (first, last) = extent(&body);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec(&body).unwrap()).unwrap();
    (path, first, last)
}

// ---- the targets ----

/// Whether a webhook hit carries a valid Standard Webhooks signature.
fn signed(h: &crate::alerts::Hit) -> bool {
    let header = |k: &str| h.headers.get(k).and_then(|v| v.to_str().ok());
    let (Some(id), Some(ts), Some(sig)) = (
        header("webhook-id"),
        header("webhook-timestamp").and_then(|t| t.parse::<i64>().ok()),
        header("webhook-signature"),
    ) else {
        return false;
    };
    stormwatch::alert::sign::verify(SECRET, id, ts, h.body.as_bytes(), sig)
}

/// A webhook hit's body as JSON.
fn json(h: &crate::alerts::Hit) -> serde_json::Value {
    serde_json::from_str(&h.body).unwrap_or(serde_json::Value::Null)
}

/// A signed generic webhook and a PagerDuty target (its `url` the local
/// Events API v2 receiver's); everything else as by default.
fn config(dir: &Path, hook: SocketAddr, pagerduty: &str) -> PathBuf {
    let path = dir.join("stormwatch.toml");
    std::fs::write(
        &path,
        format!(
            r#"[alert]
public_url = "http://dash.example:8080"
request_timeout_secs = 5

[[alert.targets]]
name = "oncall-hook"
kind = "webhook"
url = "http://{hook}/stormwatch"
secret_env = "SW_IT_OUTAGE_SECRET"

[[alert.targets]]
name = "oncall-pagerduty"
kind = "pagerduty"
url = "{pagerduty}"
routing_key_env = "SW_IT_OUTAGE_ROUTING_KEY"
"#
        ),
    )
    .unwrap();
    path
}

/// `stormwatch <args>` with the targets' secrets, which must succeed.
fn cli(args: &[&str]) -> std::process::Output {
    let out = run(
        args,
        &[
            ("SW_IT_OUTAGE_SECRET", SECRET),
            ("SW_IT_OUTAGE_ROUTING_KEY", ROUTING_KEY),
        ],
    );
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `stormwatch sweep --now <now> --format json` over `data` (with `cfg`).
fn sweep(data: &Path, cfg: Option<&Path>, now_ns: i64) -> serde_json::Value {
    let now = rfc3339(now_ns);
    let mut args = vec!["sweep", "--data-dir", data.to_str().unwrap()];
    if let Some(cfg) = cfg {
        args.extend(["--config", cfg.to_str().unwrap()]);
    }
    args.extend(["--now", &now, "--format", "json"]);
    serde_json::from_slice(&cli(&args).stdout).unwrap()
}

// ---- what the sweep must say ----

/// One line per signal and per incident, for failure messages.
fn summary(report: &serde_json::Value) -> String {
    let mut lines = vec![crate::frameworks::summary(report)];
    for i in report["incidents"].as_array().into_iter().flatten() {
        lines.push(format!(
            "  incident {} {} {} dependency={} tools={} title={}",
            i["id"], i["key"], i["state"], i["dependency"], i["tools"], i["title"]
        ));
        for m in i["members"].as_array().into_iter().flatten() {
            lines.push(format!(
                "    member {} {} {} dependency={} reason={}",
                m["signal_id"], m["tool"], m["state"], m["dependency"], m["reason"]
            ));
        }
    }
    lines.join("\n")
}

fn str_list(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The outage's sweep: four storms, unchanged by the grouping, and one
/// incident by the shared dependency; its (id, key).
fn outage_problems(report: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let signals = report["signals"].as_array().unwrap();
    // The signals themselves: one storm of 6 calls, 6 failed, per tool.
    let mut storms: Vec<(String, Vec<(u64, u64)>)> = signals
        .iter()
        .filter(|s| s["kind"] == "retry_storm")
        .map(|s| {
            let counts = s["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["calls"].as_u64().unwrap_or(0),
                        e["failures"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            (s["key"].as_str().unwrap().to_string(), counts)
        })
        .collect();
    storms.sort();
    let mut want: Vec<(String, Vec<(u64, u64)>)> = TOOLS
        .iter()
        .map(|t| {
            (
                format!("v1:retry_storm:{t}:unavailable"),
                vec![(STORM_CALLS, STORM_CALLS)],
            )
        })
        .collect();
    want.sort();
    if storms != want {
        problems.push(format!(
            "four storms of {STORM_CALLS} calls, all failed (unavailable), one per tool, expected; got (key, evidence (calls, failures)) {storms:?}"
        ));
    }
    let others: Vec<&serde_json::Value> = signals
        .iter()
        .filter(|s| !TOOLS.contains(&s["tool"].as_str().unwrap_or("")))
        .map(|s| &s["key"])
        .collect();
    if !others.is_empty() {
        problems.push(format!("signals of other tools: {others:?}"));
    }

    let incidents = report["incidents"].as_array().unwrap();
    let [incident] = &incidents[..] else {
        problems.push(format!(
            "exactly one incident expected; got {}",
            incidents.len()
        ));
        return problems;
    };
    if incident["key"] != INCIDENT_KEY || incident["dependency"] != DEPENDENCY {
        problems.push(format!(
            "the incident's key {} and dependency {}: {INCIDENT_KEY} and {DEPENDENCY} expected (cause: {})",
            incident["key"], incident["dependency"], incident["cause"]
        ));
    }
    if incident["state"] != "open" {
        problems.push(format!("the incident is {}, not open", incident["state"]));
    }
    let mut tools = str_list(&incident["tools"]);
    tools.sort();
    let mut want_tools: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
    want_tools.sort();
    if tools != want_tools {
        problems.push(format!(
            "the incident's tools {tools:?}, not the four {want_tools:?}"
        ));
    }
    let title = incident["title"].as_str().unwrap_or("");
    for name in std::iter::once(DEPENDENCY).chain(TOOLS) {
        if !title.contains(name) {
            problems.push(format!(
                "the incident's title {title:?} does not name {name}"
            ));
        }
    }
    // Members: every signal of the sweep (the four storms and whatever else
    // those tools' failures made), each joined by the shared dependency.
    let members = incident["members"].as_array().unwrap();
    let member_ids: Vec<&str> = members
        .iter()
        .map(|m| m["signal_id"].as_str().unwrap_or(""))
        .collect();
    let mut got: Vec<&str> = member_ids.clone();
    got.sort();
    let mut want_ids: Vec<&str> = signals.iter().map(|s| s["id"].as_str().unwrap()).collect();
    want_ids.sort();
    if got != want_ids {
        problems.push(format!(
            "the incident's members {got:?} are not the sweep's signals {want_ids:?}"
        ));
    }
    for (k, m) in members.iter().enumerate() {
        let reason = m["reason"].as_str().unwrap_or("");
        let fine = if k == 0 {
            reason == "first finding"
        } else {
            reason
                .strip_prefix(&format!("same dependency {DEPENDENCY} as "))
                .is_some_and(|id| member_ids[..k].contains(&id))
        };
        if !fine {
            problems.push(format!(
                "member {} ({}) joined by {reason:?}; want {}",
                m["signal_id"],
                m["tool"],
                if k == 0 {
                    "\"first finding\"".to_string()
                } else {
                    format!("\"same dependency {DEPENDENCY} as <an earlier member>\"")
                }
            ));
        }
        if m["dependency"] != DEPENDENCY {
            problems.push(format!(
                "member {} ({}) names the dependency {}, not {DEPENDENCY}",
                m["signal_id"], m["tool"], m["dependency"]
            ));
        }
    }
    problems
}

fn assert_none(what: &str, problems: &[String], report: &serde_json::Value) {
    assert!(
        problems.is_empty(),
        "{what}:\n- {}\nsweep:\n{}",
        problems.join("\n- "),
        summary(report)
    );
}

/// (a), (b), (c): the recorded outage replayed → one incident by the
/// dependency, one message per target (PagerDuty one `trigger`, its
/// `dedup_key` the incident key); the recorded recovery replayed a day
/// later → the incident resolved, one `resolve` with the same key and one
/// resolved message on the webhook; sweeping again sends nothing.
#[test]
fn mcp_outage_replayed_is_one_incident_paged_once_and_resolved_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (hook, hook_addr, _rt1) = crate::alerts::background((204, ""));
    let (pagerduty, pagerduty_url, _rt2) = crate::pagerduty::background();
    let cfg = config(dir.path(), hook_addr, &pagerduty_url);
    let flush = || {
        cli(&[
            "alerts",
            "flush",
            "--data-dir",
            data.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ]);
    };

    // (a) The outage.
    let (outage, _, outage_end) = moved(OUTAGE, dir.path(), ns_of(OUTAGE_AT));
    crate::common::import_files(&data, &[&outage]);
    let report = sweep(&data, Some(&cfg), outage_end + NS_PER_HOUR);
    assert_none("the outage, replayed", &outage_problems(&report), &report);
    let incident = &report["incidents"][0];
    let (id, key) = (
        incident["id"].as_str().unwrap().to_string(),
        incident["key"].as_str().unwrap().to_string(),
    );
    let queued = report["alerts_queued"].as_array().unwrap();
    assert_eq!(
        queued.len(),
        2,
        "one message per target queued: {queued:#?}"
    );

    // (b) One message per target: the webhook's about the incident, and
    // one PagerDuty alert, triggered, keyed by the incident.
    flush();
    let hooks = hook.hits();
    assert_eq!(hooks.len(), 1, "one webhook message: {hooks:#?}");
    assert!(signed(&hooks[0]), "the webhook's signature verifies");
    let h = json(&hooks[0]);
    assert_eq!(h["type"], "stormwatch.incidents", "{h:#}");
    assert_eq!(h["event"], "opened", "{h:#}");
    assert_eq!(h["incident"]["id"], id.as_str());
    assert_eq!(h["incident"]["key"], key.as_str());
    assert_eq!(h["incident"]["dependency"], DEPENDENCY);
    assert_eq!(h["incident"]["members"].as_array().unwrap().len(), 4);
    let pages = pagerduty.posts();
    assert_eq!(pages.len(), 1, "one PagerDuty event: {pages:#?}");
    assert_eq!(pages[0].status, 202, "{pages:#?}");
    let p = &pages[0].body;
    assert_eq!(p["event_action"], "trigger", "{p:#}");
    assert_eq!(p["dedup_key"], key.as_str(), "{p:#}");
    assert_eq!(p["payload"]["severity"], "critical", "{p:#}");
    let page_summary = p["payload"]["summary"].as_str().unwrap_or("");
    for name in std::iter::once(DEPENDENCY).chain(TOOLS) {
        assert!(
            page_summary.contains(name),
            "the page's summary {page_summary:?} names {name}"
        );
    }
    let alerts = pagerduty.alerts();
    assert_eq!(
        alerts.keys().collect::<Vec<_>>(),
        [&key],
        "one PagerDuty alert, keyed by the incident"
    );
    assert_eq!(alerts[&key].status, "triggered");

    // (c) The recovery, a day and more later: the tools' own traffic for
    // longer than resolve_after_hours (24) without a finding.
    let (recovered, recovery_start, recovery_end) = moved(
        RECOVERED,
        dir.path(),
        outage_end + RECOVERY_AFTER_HOURS * NS_PER_HOUR,
    );
    assert!(recovery_start > outage_end + 24 * NS_PER_HOUR);
    crate::common::import_files(&data, &[&recovered]);
    let later = recovery_end + NS_PER_HOUR;
    let report = sweep(&data, Some(&cfg), later);
    let incidents = report["incidents"].as_array().unwrap();
    assert!(
        incidents.len() == 1 && incidents[0]["id"] == id.as_str(),
        "only the incident {id}:\n{}",
        summary(&report)
    );
    assert_eq!(
        incidents[0]["state"],
        "resolved",
        "the incident {id} resolved after the recovery:\n{}\n{:#}",
        summary(&report),
        report["incident_changes"]
    );
    let members = incidents[0]["members"].as_array().unwrap();
    assert!(
        members.len() == 4 && members.iter().all(|m| m["state"] == "resolved"),
        "its four members resolved:\n{}",
        summary(&report)
    );
    flush();
    let hooks = hook.hits();
    assert_eq!(hooks.len(), 2, "one more webhook message: {hooks:#?}");
    assert!(signed(&hooks[1]), "the webhook's signature verifies");
    let h = json(&hooks[1]);
    assert_eq!(h["event"], "resolved", "{h:#}");
    assert_eq!(h["incident"]["key"], key.as_str());
    assert_eq!(h["incident"]["state"], "resolved");
    let pages = pagerduty.posts();
    assert_eq!(pages.len(), 2, "one more PagerDuty event: {pages:#?}");
    assert_eq!(pages[1].status, 202, "{pages:#?}");
    let p = &pages[1].body;
    assert_eq!(p["event_action"], "resolve", "{p:#}");
    assert_eq!(p["dedup_key"], key.as_str(), "{p:#}");
    let alerts = pagerduty.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[&key].status, alerts[&key].log.clone()),
        (
            "resolved",
            vec!["trigger".to_string(), "resolve".to_string()]
        ),
        "the one PagerDuty alert triggered, then resolved"
    );
    assert_eq!(pagerduty.opened(), 1);

    // The same sweep again: nothing more to tell.
    let again = sweep(&data, Some(&cfg), later);
    assert_eq!(again["alerts_queued"], serde_json::json!([]), "{again:#}");
    flush();
    assert_eq!((hook.hits().len(), pagerduty.posts().len()), (2, 2));
}

// ---- live ----

/// Run a scenario of the outage harness against `server`; its manifest.
fn run_scenario(server: &Server, scenario: &str) -> serde_json::Value {
    let mut cmd = Command::new(python("STORMWATCH_PY_PYDANTIC_MCP"));
    cmd.arg(repo().join("scripts/frameworks/pydantic_ai_mcp_outage_agent.py"));
    cmd.args([scenario, "--endpoint", &server.traces_url()]);
    // The exporters read OTEL_* from the environment; start from none.
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    crate::common::exporter_manifest(scenario, &out, server)
}

/// Every span the manifest lists is stored once, as a call of the tool the
/// manifest names (or of none), and nothing else is stored.
fn stored_problems(data: &Path, manifest: &serde_json::Value) -> Vec<String> {
    let df = spans(data);
    let stored = rows_by_key(&df, &["tool_name", "is_tool_call"]);
    let list = manifest["spans"].as_array().unwrap();
    let mut problems: Vec<String> = list
        .iter()
        .filter_map(|s| {
            let key = format!(
                "{}/{}",
                s["trace_id"].as_str().unwrap(),
                s["span_id"].as_str().unwrap()
            );
            let want = s["tool_name"].as_str();
            let Some(row) = stored.get(&key) else {
                return Some(format!("span {key} ({}) not stored", s["name"]));
            };
            let got = (row[1].as_deref() == Some("true"))
                .then(|| row[0].as_deref())
                .flatten();
            (got != want).then(|| {
                format!(
                    "span {key} ({}) stored as a call of {got:?}, want {want:?}",
                    s["name"]
                )
            })
        })
        .collect();
    if df.height() != list.len() {
        problems.push(format!("{} spans stored, {} sent", df.height(), list.len()));
    }
    problems
}

/// What the harness says it did, against the scenario.
fn manifest_problems(manifest: &serde_json::Value, calls: u64, failed: bool) -> Vec<String> {
    let mut problems = Vec::new();
    if manifest["mcp_service"] != DEPENDENCY {
        problems.push(format!(
            "the server exported as {}, not {DEPENDENCY}",
            manifest["mcp_service"]
        ));
    }
    for t in TOOLS {
        let got = &manifest["tools"][t];
        let did = (
            got["tool_calls"].as_u64().unwrap_or(0),
            got["failures"].as_u64().unwrap_or(0),
        );
        let want = (calls, if failed { calls } else { 0 });
        if did != want {
            problems.push(format!(
                "{t}: the harness made (calls, failures) {did:?}, the scenario is {want:?}"
            ));
        }
    }
    let turns: Vec<(&str, u64)> = manifest["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tool"].as_str().unwrap_or(""),
                t["tool_calls"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want: Vec<(&str, u64)> = TOOLS.iter().map(|t| (*t, calls)).collect();
    if turns != want {
        problems.push(format!(
            "one turn per tool, {calls} calls each, expected; got {turns:?}"
        ));
    }
    problems
}

/// The newest span end in the store.
fn last_end_ns(data: &Path) -> i64 {
    let df = spans(data);
    let ends = df.column("end_ns").unwrap().i64().unwrap().clone();
    ends.iter().flatten().max().unwrap_or(0)
}

/// Live: the outage through pydantic-ai and the MCP SDK into a running
/// `serve` → stored as sent, one incident by the dependency; the recovery
/// into another → stored as sent, nothing found.
#[test]
fn mcp_outage_live_through_pydantic_ai_is_one_incident() {
    let dir = tempfile::tempdir().unwrap();

    let data = dir.path().join("outage");
    let server = Server::start(&data, &[], &[]);
    let manifest = run_scenario(&server, "mcp-outage");
    server.stop();
    let mut problems = manifest_problems(&manifest, STORM_CALLS, true);
    problems.extend(stored_problems(&data, &manifest));
    let report = sweep(&data, None, last_end_ns(&data) + NS_PER_HOUR);
    problems.extend(outage_problems(&report));
    assert_none("the outage, live", &problems, &report);

    let data = dir.path().join("recovered");
    let server = Server::start(&data, &[], &[]);
    let manifest = run_scenario(&server, "mcp-recovered");
    server.stop();
    let mut problems = manifest_problems(&manifest, 3, false);
    problems.extend(stored_problems(&data, &manifest));
    let report = sweep(&data, None, last_end_ns(&data) + NS_PER_HOUR);
    let signals = report["signals"].as_array().unwrap();
    if !signals.is_empty() {
        problems.push("the recovered run: no signal expected".into());
    }
    assert_none("the recovery, live", &problems, &report);
}
