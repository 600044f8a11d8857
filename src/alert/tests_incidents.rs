//! Incidents as the alerter sees them (alerting.md, "Incidents and
//! notifications", "PagerDuty"): the decision table, the inhibition of
//! members' notices, per-target filters, every target's incident body
//! within its limits and inert, PagerDuty's event and its classification.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use rusqlite::Connection;

use super::incidents::{decide, IncidentEvent, IncidentNotice, IncidentTold};
use super::notify::Timing;
use super::policy::{classify, Verdict};
use super::target::{GroupBy, TargetConfig, TargetKind};
use super::*;
use crate::incident::body::{build, Joined};
use crate::incident::{Cause, Facts, Incident, IncidentChange, IncidentState};
use crate::signal::{Evidence, Kind, Lifecycle, Signal, SignalDraft};

const HOUR: i64 = 3_600_000_000_000;

fn signal(id: &str, kind: Kind, tool: &str, class: &str, state: Lifecycle) -> Signal {
    let key = format!("v1:{}:{tool}:{class}", kind.as_str());
    let mut draft = SignalDraft {
        id: id.into(),
        key,
        kind,
        tool: tool.into(),
        error_class: class.into(),
        title: format!("{}: {tool} ({class})", kind.as_str()),
        first_seen_ns: HOUR,
        last_seen_ns: 2 * HOUR,
        days: vec!["1970-01-01".into()],
        findings: 4,
        evidence: (0..3)
            .map(|i| Evidence {
                rhythm: Some("no_backoff".into()),
                wasted_seconds: 12.0,
                ..Evidence::turn(
                    &format!(
                        "{:08x}{:024x}",
                        i + 1,
                        xxhash_rust::xxh3::xxh3_64(id.as_bytes()) >> 8
                    ),
                    &format!("turn-{id}-{i}"),
                    0,
                    15,
                    15,
                )
            })
            .collect(),
        evidence_more: 0,
        wasted_seconds: 0.0,
        severity: None,
        remedy: None,
    };
    draft.remedy = Some(crate::signal::remedy(&draft, &["HTTP 503".into()]));
    Signal {
        draft,
        state,
        muted_until_ns: None,
        mute_until_escalates: false,
    }
}

/// An incident of `members` (all of one tool), as the store writes it.
fn incident(id: &str, members: &[&Signal], resolved_ns: Option<i64>) -> Incident {
    let joined: Vec<Joined<'_>> = members
        .iter()
        .enumerate()
        .map(|(i, s)| Joined {
            signal: s,
            joined_ns: s.draft.first_seen_ns + i as i64,
            reason: if i == 0 {
                "first finding".into()
            } else {
                format!("same tool {} as {}", s.draft.tool, members[0].draft.id)
            },
        })
        .collect();
    build(
        id,
        &Cause::Tool(members[0].draft.tool.clone()),
        &joined,
        &Facts::default(),
        HOUR,
        resolved_ns,
        10,
    )
}

fn change(id: &str, from: Option<IncidentState>, to: IncidentState) -> IncidentChange {
    IncidentChange {
        id: id.into(),
        from,
        to,
        joined: Vec::new(),
        escalated: false,
    }
}

fn timing() -> Timing {
    Timing {
        repeat_interval_ns: 24 * HOUR,
        cooldown_ns: 6 * HOUR,
    }
}

/// One sweep: the incident as it stands, its change if any; the events
/// told, `told` brought up to date.
fn step(
    inc: &Incident,
    ch: Option<IncidentChange>,
    told: &mut BTreeMap<String, IncidentTold>,
    at: i64,
) -> Vec<IncidentEvent> {
    let changes: BTreeMap<String, IncidentChange> =
        ch.into_iter().map(|c| (c.id.clone(), c)).collect();
    let (n, remember) = decide(std::slice::from_ref(inc), &changes, told, at, timing());
    told.extend(remember);
    n.iter().map(|n| n.event).collect()
}

use IncidentEvent as E;
use IncidentState as S;

#[test]
fn an_incident_opens_once_reminds_daily_and_resolves_once() {
    let storm = signal(
        "SW-A",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let inc = incident("INC-A", &[&storm], None);
    let mut told = BTreeMap::new();
    assert_eq!(
        step(&inc, Some(change("INC-A", None, S::Open)), &mut told, HOUR),
        vec![E::Opened]
    );
    // The same sweep again: nothing.
    assert!(step(&inc, None, &mut told, HOUR).is_empty());
    assert!(step(&inc, None, &mut told, 10 * HOUR).is_empty());
    // A day later, still open: one reminder, then quiet for another day.
    assert_eq!(step(&inc, None, &mut told, 25 * HOUR), vec![E::Reminder]);
    assert!(step(&inc, None, &mut told, 26 * HOUR).is_empty());
    // Every member resolved: one `resolved`, then nothing.
    let quiet = signal(
        "SW-A",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::Resolved,
    );
    let done = incident("INC-A", &[&quiet], Some(30 * HOUR));
    assert_eq!(
        step(
            &done,
            Some(change("INC-A", Some(S::Open), S::Resolved)),
            &mut told,
            30 * HOUR
        ),
        vec![E::Resolved]
    );
    assert!(step(&done, None, &mut told, 60 * HOUR).is_empty());
}

#[test]
fn a_member_joining_an_open_incident_is_one_update_not_a_new_page() {
    let storm = signal(
        "SW-A",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let mut told = BTreeMap::new();
    step(
        &incident("INC-A", &[&storm], None),
        Some(change("INC-A", None, S::Open)),
        &mut told,
        HOUR,
    );
    let spike = signal(
        "SW-B",
        Kind::ErrorRateSpike,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let both = incident("INC-A", &[&storm, &spike], None);
    let mut ch = change("INC-A", Some(S::Open), S::Open);
    ch.joined = vec!["SW-B".into()];
    let changes = BTreeMap::from([("INC-A".to_string(), ch)]);
    let (n, remember) = decide(
        std::slice::from_ref(&both),
        &changes,
        &told,
        2 * HOUR,
        timing(),
    );
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].event, E::Updated);
    assert!(
        n[0].why[0].starts_with("SW-B joined (same tool search_flights as SW-A)"),
        "{:?}",
        n[0].why
    );
    told.extend(remember);
    // Told: the next sweep is quiet.
    assert!(step(&both, None, &mut told, 3 * HOUR).is_empty());
}

#[test]
fn a_higher_severity_or_twice_the_findings_is_an_update() {
    let spike = signal(
        "SW-A",
        Kind::ErrorRateSpike,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let mut told = BTreeMap::new();
    step(
        &incident("INC-A", &[&spike], None),
        Some(change("INC-A", None, S::Open)),
        &mut told,
        HOUR,
    );
    assert_eq!(told["INC-A"].severity, crate::signal::Severity::Warning);
    // Findings from 4 to 7: no news; to 8: doubled.
    let mut more = spike.clone();
    more.draft.findings = 7;
    assert!(step(
        &incident("INC-A", &[&more], None),
        None,
        &mut told,
        2 * HOUR
    )
    .is_empty());
    more.draft.findings = 8;
    let changes = BTreeMap::new();
    let (n, remember) = decide(
        &[incident("INC-A", &[&more], None)],
        &changes,
        &told,
        3 * HOUR,
        timing(),
    );
    assert_eq!(n[0].event, E::Updated);
    assert_eq!(n[0].why, vec!["findings doubled: 4 → 8".to_string()]);
    told.extend(remember);
    // A storm joins: critical now, one update saying both.
    let storm = signal(
        "SW-B",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let mut ch = change("INC-A", Some(S::Open), S::Open);
    ch.joined = vec!["SW-B".into()];
    ch.escalated = true;
    let (n, _) = decide(
        &[incident("INC-A", &[&more, &storm], None)],
        &BTreeMap::from([("INC-A".to_string(), ch)]),
        &told,
        4 * HOUR,
        timing(),
    );
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].event, E::Updated);
    assert!(
        n[0].why.iter().any(|w| w == "severity rose to critical"),
        "{:?}",
        n[0].why
    );
}

#[test]
fn a_flapping_incident_within_the_cooldown_stays_quiet_and_so_does_its_resolve() {
    let open = signal("SW-A", Kind::RetryStorm, "x", "unavailable", Lifecycle::New);
    let back = signal(
        "SW-A",
        Kind::RetryStorm,
        "x",
        "unavailable",
        Lifecycle::Regressed,
    );
    let gone = signal(
        "SW-A",
        Kind::RetryStorm,
        "x",
        "unavailable",
        Lifecycle::Resolved,
    );
    let (o, r, d) = (
        incident("INC-A", &[&open], None),
        incident("INC-A", &[&back], None),
        incident("INC-A", &[&gone], Some(0)),
    );
    let mut told = BTreeMap::new();
    assert_eq!(
        step(&o, Some(change("INC-A", None, S::Open)), &mut told, 0),
        vec![E::Opened]
    );
    assert_eq!(
        step(
            &d,
            Some(change("INC-A", Some(S::Open), S::Resolved)),
            &mut told,
            10 * HOUR
        ),
        vec![E::Resolved]
    );
    // Back after the cooldown (10 h after the opening): told.
    assert_eq!(
        step(
            &r,
            Some(change("INC-A", Some(S::Resolved), S::Open)),
            &mut told,
            20 * HOUR
        ),
        vec![E::Reopened]
    );
    // Clears and comes back within six hours of that: the resolution is
    // told, the reopening is not, and nor is its resolution.
    assert_eq!(
        step(
            &d,
            Some(change("INC-A", Some(S::Open), S::Resolved)),
            &mut told,
            21 * HOUR
        ),
        vec![E::Resolved]
    );
    assert!(step(
        &r,
        Some(change("INC-A", Some(S::Resolved), S::Open)),
        &mut told,
        22 * HOUR
    )
    .is_empty());
    assert!(told["INC-A"].quiet);
    assert!(
        step(
            &d,
            Some(change("INC-A", Some(S::Open), S::Resolved)),
            &mut told,
            23 * HOUR
        )
        .is_empty(),
        "the quiet reopening's resolution is quiet too"
    );
    assert!(!told["INC-A"].quiet);
}

#[test]
fn a_reopening_held_by_the_cooldown_is_told_once_the_cooldown_ends() {
    let back = signal(
        "SW-A",
        Kind::RetryStorm,
        "x",
        "unavailable",
        Lifecycle::Regressed,
    );
    let r = incident("INC-A", &[&back], None);
    let mut told = BTreeMap::from([(
        "INC-A".to_string(),
        IncidentTold {
            last_ns: 2 * HOUR,
            last_fire_ns: 0,
            findings: 4,
            severity: crate::signal::Severity::Critical,
            state: S::Resolved,
            quiet: false,
        },
    )]);
    assert!(step(
        &r,
        Some(change("INC-A", Some(S::Resolved), S::Open)),
        &mut told,
        3 * HOUR
    )
    .is_empty());
    assert!(
        step(&r, None, &mut told, 5 * HOUR).is_empty(),
        "still cooling"
    );
    assert_eq!(step(&r, None, &mut told, 7 * HOUR), vec![E::Reopened]);
    assert!(step(&r, None, &mut told, 8 * HOUR).is_empty());
}

#[test]
fn acknowledged_is_told_to_pagerduty_and_webhooks_not_to_chat_and_gets_no_reminders() {
    let open = signal("SW-A", Kind::RetryStorm, "x", "unavailable", Lifecycle::New);
    let muted = signal(
        "SW-A",
        Kind::RetryStorm,
        "x",
        "unavailable",
        Lifecycle::Muted,
    );
    let mut told = BTreeMap::new();
    step(
        &incident("INC-A", &[&open], None),
        Some(change("INC-A", None, S::Open)),
        &mut told,
        0,
    );
    let ack = incident("INC-A", &[&muted], None);
    assert_eq!(ack.state, S::Acknowledged);
    assert_eq!(
        step(
            &ack,
            Some(change("INC-A", Some(S::Open), S::Acknowledged)),
            &mut told,
            HOUR
        ),
        vec![E::Acknowledged]
    );
    assert!(
        step(&ack, None, &mut told, 48 * HOUR).is_empty(),
        "no reminder while acknowledged"
    );
    for kind in [TargetKind::Slack, TargetKind::Discord, TargetKind::Teams] {
        assert!(!E::Acknowledged.goes_to(kind), "{kind:?}");
    }
    for kind in [TargetKind::PagerDuty, TargetKind::Webhook] {
        assert!(E::Acknowledged.goes_to(kind), "{kind:?}");
    }
    // Out of the mute (it escalated): open again, one update.
    let again = incident("INC-A", &[&open], None);
    let events = step(
        &again,
        Some(change("INC-A", Some(S::Acknowledged), S::Open)),
        &mut told,
        49 * HOUR,
    );
    assert_eq!(events, vec![E::Updated]);
}

#[test]
fn an_incident_the_alerter_never_told_is_told_once_as_a_reminder_and_its_resolve_not_at_all() {
    let open = signal(
        "SW-A",
        Kind::RetryStorm,
        "x",
        "unavailable",
        Lifecycle::Ongoing,
    );
    let mut told = BTreeMap::new();
    assert_eq!(
        step(&incident("INC-A", &[&open], None), None, &mut told, HOUR),
        vec![E::Reminder]
    );
    let gone = signal(
        "SW-B",
        Kind::RetryStorm,
        "y",
        "unavailable",
        Lifecycle::Resolved,
    );
    let mut told = BTreeMap::new();
    assert!(step(
        &incident("INC-B", &[&gone], Some(HOUR)),
        Some(change("INC-B", Some(S::Open), S::Resolved)),
        &mut told,
        HOUR
    )
    .is_empty());
}

fn target(name: &str, kind: TargetKind, group_by: GroupBy) -> Target {
    Target {
        group_by,
        ..Target::new(name, kind, "https://hooks.example/x")
    }
}

fn alerting(targets: Vec<Target>) -> Alerting {
    Alerting {
        cfg: AlertConfig::default(),
        targets,
        public_url: "https://sw.example".into(),
    }
}

/// The incidents and outbox of one sweep on an in-memory state: the
/// signals as they stand, the incidents brought up to date, the queue.
fn sweep(
    c: &Connection,
    a: &Alerting,
    signals: &[Signal],
    changes: &[(String, Option<Lifecycle>, Lifecycle)],
    now: i64,
) -> Vec<Queued> {
    let ichanges = crate::incident::store::apply(c, signals, &Facts::default(), now, 10).unwrap();
    a.enqueue(c, signals, changes, &ichanges, now, now).unwrap()
}

#[test]
fn members_are_inhibited_for_incident_targets_and_signal_targets_keep_their_notices() {
    let c = crate::state::open_in_memory().unwrap();
    let a = alerting(vec![
        target("slack", TargetKind::Slack, GroupBy::Incident),
        target("pd", TargetKind::PagerDuty, GroupBy::Incident),
        target("signals", TargetKind::Webhook, GroupBy::Signal),
    ]);
    // One outage: a storm, a spike and wasted retries of one tool.
    let signals = vec![
        signal(
            "SW-A",
            Kind::RetryStorm,
            "search_flights",
            "unavailable",
            Lifecycle::New,
        ),
        signal(
            "SW-B",
            Kind::ErrorRateSpike,
            "search_flights",
            "unavailable",
            Lifecycle::New,
        ),
        signal(
            "SW-C",
            Kind::WastedRetries,
            "search_flights",
            "invalid_request",
            Lifecycle::New,
        ),
    ];
    let changes: Vec<_> = signals
        .iter()
        .map(|s| (s.draft.id.clone(), None, Lifecycle::New))
        .collect();
    let q = sweep(&c, &a, &signals, &changes, HOUR);
    let of = |t: &str| q.iter().filter(|x| x.target == t).collect::<Vec<_>>();
    assert_eq!(of("slack").len(), 1, "{q:?}");
    assert_eq!(of("pd").len(), 1);
    let slack = of("slack")[0];
    assert_eq!(slack.event, Some(E::Opened));
    assert_eq!(slack.signals.len(), 3, "the three members in one message");
    // The signal target: its one grouped message of three notices.
    assert_eq!(of("signals").len(), 1);
    assert_eq!(of("signals")[0].signals.len(), 3);
    assert_eq!(of("signals")[0].incident, None);
    let rows = outbox::list(&c, 10).unwrap();
    let body = |t: &str| -> serde_json::Value {
        serde_json::from_str(&rows.iter().find(|r| r.target == t).unwrap().body).unwrap()
    };
    assert_eq!(body("signals")["type"], "stormwatch.signals");
    assert_eq!(body("pd")["event_action"], "trigger");
    assert_eq!(body("pd")["dedup_key"], "inc1:tool:search_flights");
    assert!(rows.iter().all(|r| !r.body.contains("routing_key")));
    // Nothing new: nothing queued.
    assert!(sweep(&c, &a, &signals, &[], HOUR).is_empty());
}

#[test]
fn a_target_gets_an_incident_when_an_open_member_passes_its_filters() {
    let c = crate::state::open_in_memory().unwrap();
    let mut critical_only = target("pager", TargetKind::Webhook, GroupBy::Incident);
    critical_only.min_severity = Some(crate::signal::Severity::Critical);
    let mut other_tool = target("other", TargetKind::Slack, GroupBy::Incident);
    other_tool.tools = vec!["book_flight".into()];
    let mut storms = target("storms", TargetKind::Slack, GroupBy::Incident);
    storms.kinds = vec![Kind::RetryStorm];
    let a = alerting(vec![critical_only, other_tool, storms]);
    let spike = signal(
        "SW-B",
        Kind::ErrorRateSpike,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let q = sweep(
        &c,
        &a,
        std::slice::from_ref(&spike),
        &[("SW-B".into(), None, Lifecycle::New)],
        HOUR,
    );
    assert!(q.is_empty(), "a warning of another kind and tool: {q:?}");
    // A storm of the same tool joins: critical, a storm; the pager and the
    // storm channel hear of it (an update, as the incident was opened).
    let storm = signal(
        "SW-A",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let q = sweep(
        &c,
        &a,
        &[spike, storm],
        &[("SW-A".into(), None, Lifecycle::New)],
        2 * HOUR,
    );
    let to: Vec<(&str, Option<IncidentEvent>)> =
        q.iter().map(|x| (x.target.as_str(), x.event)).collect();
    assert_eq!(
        to,
        vec![("pager", Some(E::Updated)), ("storms", Some(E::Updated))]
    );
}

/// A notice of an incident of `members` signals with `evidence` traces
/// each, with hostile text in its tool names and titles.
fn big_notice(members: usize, evidence: usize, tool: &str, event: IncidentEvent) -> IncidentNotice {
    let signals: Vec<Signal> = (0..members)
        .map(|i| {
            let mut s = signal(
                &format!("SW-{i:04}"),
                Kind::RetryStorm,
                tool,
                "unavailable",
                Lifecycle::New,
            );
            s.draft.title = format!(
                "Retry storm: {tool} ×15 in one turn #{i} {}",
                "long ".repeat(60)
            );
            s.draft.evidence = (0..evidence)
                .map(|e| {
                    Evidence::turn(&format!("{i:08x}{e:024x}"), &format!("t{i}-{e}"), 0, 15, 15)
                })
                .collect();
            s
        })
        .collect();
    let refs: Vec<&Signal> = signals.iter().collect();
    let mut incident = incident("INC-BIG", &refs, None);
    incident.evidence_more += 7;
    IncidentNotice {
        event,
        why: (0..members.min(40))
            .map(|i| format!("SW-{i:04} joined (same tool {tool}): <!channel> @everyone"))
            .collect(),
        incident,
    }
}

const KINDS: [TargetKind; 5] = [
    TargetKind::Slack,
    TargetKind::Discord,
    TargetKind::Teams,
    TargetKind::Webhook,
    TargetKind::PagerDuty,
];

#[test]
fn an_incident_of_sixty_members_and_sixty_traces_fits_every_target() {
    for (members, evidence) in [(1, 60), (3, 12), (60, 60)] {
        let n = big_notice(members, evidence, "search_flights", E::Updated);
        for kind in KINDS {
            let body = render_incident(kind, &n, "https://sw.example", 60, 0);
            check_limits(kind, &body)
                .unwrap_or_else(|e| panic!("{kind:?} {members}x{evidence}: {e}"));
            let text = body.to_string();
            if kind != TargetKind::Webhook && kind != TargetKind::PagerDuty {
                // Teams escapes the dash of an id.
                let id = |m: &crate::incident::Member| match kind {
                    TargetKind::Teams => m.signal_id.replace('-', "\\\\-"),
                    _ => m.signal_id.clone(),
                };
                let all_members = n.incident.members.iter().all(|m| text.contains(&id(m)));
                assert!(
                    all_members || text.contains("more members"),
                    "{kind:?} {members}: says what it left out"
                );
                assert!(
                    text.contains("more traces"),
                    "{kind:?}: evidence_more counted"
                );
            }
            if kind != TargetKind::PagerDuty {
                assert!(
                    text.contains("https://sw.example/incidents/INC-BIG"),
                    "{kind:?}: {text}"
                );
            }
        }
    }
}

#[test]
fn hostile_names_in_an_incident_arrive_inert() {
    for tool in [
        "<!channel> *x*",
        "@everyone",
        "<script>alert(1)</script>",
        "\"><img onerror=alert(1)>",
    ] {
        let n = big_notice(2, 2, tool, E::Opened);
        for kind in KINDS {
            let body = render_incident(kind, &n, "https://sw.example", 5, 0);
            let text = body.to_string();
            match kind {
                TargetKind::Slack => {
                    assert!(
                        !text.contains("<!channel>") && !text.contains("<script>"),
                        "{text}"
                    );
                    assert_eq!(body["mrkdwn"], false);
                    // Span text only in plain_text; mrkdwn holds links and numbers.
                    for b in body["blocks"].as_array().unwrap() {
                        for e in b["elements"].as_array().into_iter().flatten() {
                            if e["type"] == "mrkdwn" {
                                let t = e["text"].as_str().unwrap();
                                assert!(!t.contains("everyone") && !t.contains("script"), "{t}");
                            }
                        }
                    }
                }
                TargetKind::Discord => {
                    assert!(
                        !text.contains("@everyone") && !text.contains("<script>"),
                        "{text}"
                    );
                    assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
                }
                TargetKind::Teams => {
                    assert!(
                        !text.contains("<script>") && !text.contains("*x*"),
                        "{text}"
                    )
                }
                // JSON carries the text as data; the receiver's own escaping applies.
                TargetKind::Webhook => {
                    assert_eq!(body["incident"]["members"][0]["tool"], tool)
                }
                TargetKind::PagerDuty => {
                    assert_eq!(body["payload"]["component"], tool)
                }
            }
        }
    }
}

#[test]
fn the_pagerduty_event_maps_the_incident() {
    let storm = signal(
        "SW-A",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let spike = signal(
        "SW-B",
        Kind::ErrorRateSpike,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let mut inc = incident("INC-A", &[&storm, &spike], None);
    inc.service = Some("travel-agent".into());
    let n = IncidentNotice {
        event: E::Opened,
        why: Vec::new(),
        incident: inc.clone(),
    };
    let v = render_incident(
        TargetKind::PagerDuty,
        &n,
        "https://sw.example.com:8443/x",
        2,
        0,
    );
    pagerduty::check(&v).unwrap();
    assert_eq!(v["event_action"], "trigger");
    assert_eq!(v["dedup_key"], inc.key);
    assert!(v.get("routing_key").is_none());
    let p = &v["payload"];
    assert_eq!(p["summary"], inc.title);
    assert_eq!(p["source"], "sw.example.com");
    assert_eq!(p["severity"], "critical");
    assert_eq!(p["component"], "search_flights");
    assert_eq!(p["group"], "travel-agent");
    assert_eq!(p["class"], "unavailable");
    let d = &p["custom_details"];
    assert_eq!(d["incident"], "INC-A");
    assert_eq!(d["members"].as_array().unwrap().len(), 2);
    assert_eq!(
        d["members"][1]["reason"],
        "same tool search_flights as SW-A"
    );
    assert_eq!(d["evidence"].as_array().unwrap().len(), 2);
    assert!(d["evidence"][0]["url"]
        .as_str()
        .unwrap()
        .starts_with("https://sw.example.com:8443/x/traces/"));
    assert!(d["remedies"][0]
        .as_str()
        .unwrap()
        .starts_with("What to do: "));
    assert_eq!(
        v["links"][0]["href"],
        "https://sw.example.com:8443/x/incidents/INC-A"
    );
    assert_eq!(
        v["links"].as_array().unwrap().len(),
        3,
        "the page and two traces"
    );
    assert_eq!(v["client"], "stormwatch");
    // Without a public URL: source stormwatch, no links.
    let bare = render_incident(TargetKind::PagerDuty, &n, "", 2, 0);
    assert_eq!(bare["payload"]["source"], "stormwatch");
    assert_eq!(bare["links"], serde_json::json!([]));
    // Resolve and acknowledge: the key and the action only.
    for (event, action) in [(E::Resolved, "resolve"), (E::Acknowledged, "acknowledge")] {
        let n = IncidentNotice { event, ..n.clone() };
        let v = render_incident(TargetKind::PagerDuty, &n, "https://sw.example.com", 2, 0);
        assert_eq!(
            v,
            serde_json::json!({"event_action": action, "dedup_key": inc.key})
        );
    }
    // The key is added only as it is sent.
    let sent =
        pagerduty::with_routing_key(&v.to_string(), "R0UTINGKEY0123456789abcdefABCDEF").unwrap();
    let sent: serde_json::Value = serde_json::from_str(&sent).unwrap();
    assert_eq!(sent["routing_key"], "R0UTINGKEY0123456789abcdefABCDEF");
    assert_eq!(sent["dedup_key"], inc.key);
}

#[test]
fn pagerduty_severity_summary_and_dedup_key_keep_to_the_contract() {
    let sev = |members: &[&Signal]| pagerduty::severity(&incident("INC-A", members, None));
    let storm = signal("SW-A", Kind::RetryStorm, "t", "unavailable", Lifecycle::New);
    let spike = signal(
        "SW-B",
        Kind::ErrorRateSpike,
        "t",
        "unavailable",
        Lifecycle::New,
    );
    let mut lp = signal("SW-C", Kind::ToolLoop, "t", "ok", Lifecycle::New);
    for e in &mut lp.draft.evidence {
        e.failures = 0;
    }
    let slow = signal("SW-D", Kind::LatencySpike, "t", "ok", Lifecycle::New);
    assert_eq!(sev(&[&spike, &storm]), "critical");
    assert_eq!(sev(&[&spike]), "error", "a warning with failed calls");
    assert_eq!(sev(&[&lp]), "warning");
    assert_eq!(sev(&[&slow]), "info");
    // A title past 1024 characters is cut; a key past 255 is cut and hashed.
    let mut n = big_notice(1, 1, "t", E::Opened);
    n.incident.title = "é".repeat(3000);
    n.incident.key = format!("inc1:tool:{}", "k".repeat(400));
    let v = render_incident(TargetKind::PagerDuty, &n, "", 1, 0);
    pagerduty::check(&v).unwrap();
    let summary = v["payload"]["summary"].as_str().unwrap();
    assert_eq!(summary.chars().count(), 1024);
    assert!(summary.ends_with('…'));
    let key = v["dedup_key"].as_str().unwrap();
    assert_eq!(key.chars().count(), 255);
    let other = {
        let mut n = n.clone();
        n.incident.key.push('x');
        render_incident(TargetKind::PagerDuty, &n, "", 1, 0)["dedup_key"].clone()
    };
    assert_ne!(other, key, "two long keys stay apart");
}

#[test]
fn pagerduty_answers_are_classified() {
    let now = SystemTime::now();
    let pd = TargetKind::PagerDuty;
    let ok = r#"{"status":"success","message":"Event processed","dedup_key":"inc1:tool:x"}"#;
    assert_eq!(classify(pd, 202, None, ok, now), Verdict::Delivered);
    assert_eq!(classify(pd, 200, None, "", now), Verdict::Delivered);
    let bad = r#"{"status":"invalid event","message":"Event object is invalid","errors":["'payload.summary' is missing or blank","'payload.severity' is invalid"]}"#;
    match classify(pd, 400, None, bad, now) {
        Verdict::Dead { reason } => {
            assert!(
                reason.starts_with("HTTP 400 invalid event: Event object is invalid"),
                "{reason}"
            );
            assert!(
                reason.contains(
                    "'payload.summary' is missing or blank; 'payload.severity' is invalid"
                ),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    match classify(pd, 429, None, "", now) {
        Verdict::Retry {
            after: Some(a),
            throttled: true,
            ..
        } => assert_eq!(a, policy::PAGERDUTY_THROTTLE),
        other => panic!("{other:?}"),
    }
    match classify(pd, 429, Some("3"), "", now) {
        Verdict::Retry { after: Some(a), .. } => assert_eq!(a, Duration::from_secs(3)),
        other => panic!("{other:?}"),
    }
    for s in [500, 502, 503, 504, 408] {
        assert!(
            matches!(
                classify(pd, s, None, "", now),
                Verdict::Retry {
                    throttled: false,
                    ..
                }
            ),
            "{s}"
        );
    }
    for s in [401, 403, 404, 413] {
        assert!(
            matches!(classify(pd, s, None, "", now), Verdict::Dead { .. }),
            "{s}"
        );
    }
    // A reason never quotes the key.
    let mut v = classify(
        pd,
        400,
        None,
        r#"{"status":"invalid event","errors":["routing_key SECRETKEY unknown"]}"#,
        now,
    );
    v.redact("SECRETKEY", "<routing key>");
    assert!(
        !v.to_string().contains("SECRETKEY") && v.to_string().contains("<routing key>"),
        "{v}"
    );
}

#[test]
fn a_pagerduty_target_needs_exactly_one_routing_key_and_never_shows_it() {
    let parse = |s: &str| toml::from_str::<TargetConfig>(s);
    let key = "R0UTINGKEY0123456789abcdefABCDEF";
    let t = parse(&format!(
        "name = \"pd\"\nkind = \"pagerduty\"\nrouting_key = \"{key}\"\n"
    ))
    .unwrap();
    let r = t.resolve(|_| None).unwrap();
    assert_eq!(r.url, super::target::PAGERDUTY_URL);
    assert_eq!(r.routing_key.as_deref(), Some(key));
    assert_eq!(r.group_by, GroupBy::Incident);
    for shown in [format!("{t:?}"), format!("{r:?}")] {
        assert!(!shown.contains(key), "{shown}");
    }
    // From the environment, at send time only.
    let t = parse("name = \"pd\"\nkind = \"pagerduty\"\nrouting_key_env = \"SW_PD_KEY\"\nurl = \"http://127.0.0.1:9/v2/enqueue\"\n").unwrap();
    let r = t
        .resolve(|k| (k == "SW_PD_KEY").then(|| key.to_string()))
        .unwrap();
    assert_eq!(r.routing_key.as_deref(), Some(key));
    let err = t.resolve(|_| None).unwrap_err().to_string();
    assert!(err.contains("SW_PD_KEY") && err.contains("\"pd\""), "{err}");
    let cfg = AlertConfig {
        targets: vec![t],
        ..AlertConfig::default()
    };
    cfg.validate().unwrap();
    assert_eq!(
        cfg.routing().unwrap()[0].routing_key,
        None,
        "the sweep routes without it"
    );
    for (text, says) in [
        (
            "name = \"pd\"\nkind = \"pagerduty\"\n",
            "needs routing_key or routing_key_env",
        ),
        (
            "name = \"pd\"\nkind = \"pagerduty\"\nrouting_key = \"a\"\nrouting_key_env = \"B\"\n",
            "set routing_key or routing_key_env, not both",
        ),
        (
            "name = \"s\"\nkind = \"slack\"\nurl = \"https://x\"\nrouting_key = \"abc\"\n",
            "routing_key applies only to kind = \"pagerduty\"",
        ),
        (
            "name = \"pd\"\nkind = \"pagerduty\"\nrouting_key = \"abc\"\ngroup_by = \"signal\"\n",
            "follows incidents",
        ),
        (
            "name = \"pd\"\nkind = \"pagerduty\"\nrouting_key = \"has a space\"\n",
            "routing_key: must not hold spaces",
        ),
        ("name = \"s\"\nkind = \"slack\"\n", "needs url or url_env"),
    ] {
        let err = parse(text)
            .unwrap()
            .resolve(|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{text}: {err}");
        assert!(!err.contains("has a space"), "{err}");
    }
    let err = parse("name = \"pd\"\nkind = \"pagerduty\"\nrouting_keys = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown field `routing_keys`") && err.contains("routing_key_env"),
        "{err}"
    );
    let err = parse("name = \"s\"\nkind = \"slack\"\nurl = \"https://x\"\ngroup_by = \"tool\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("incident") && err.contains("signal"), "{err}");
}

/// The messages each target gets for one incident update (three members,
/// one with a hostile tool name, more evidence than fits), as golden files
/// in `fixtures/alerts/incident-*.json`, each within its target's limits.
/// `STORMWATCH_UPDATE_GOLDEN=1` rewrites them.
#[test]
fn golden_incident_payloads_match_and_fit_their_targets() {
    let storm = signal(
        "SW-ZTPG",
        Kind::RetryStorm,
        "search_flights",
        "unavailable",
        Lifecycle::Ongoing,
    );
    let spike = signal(
        "SW-GSNQ",
        Kind::ErrorRateSpike,
        "search_flights",
        "unavailable",
        Lifecycle::New,
    );
    let mut wasted = signal(
        "SW-LWJM",
        Kind::WastedRetries,
        "<!channel> @everyone *x*",
        "invalid_request",
        Lifecycle::New,
    );
    wasted.draft.evidence_more = 40;
    let mut inc = incident("INC-XHPQ", &[&storm, &spike, &wasted], None);
    // Every field the renderers read set here, so the files change only
    // when a renderer does (not when the incident's own wording does).
    const T0: i64 = 1_785_351_800_000_000_000;
    inc.key = "inc1:dep:flights-api".into();
    inc.title = "flights-api down: search_flights, <!channel> @everyone *x* failing since 2026-07-29 19:43Z (unavailable)".into();
    inc.cause = "failing calls to one dependency, flights-api".into();
    inc.severity = "critical".into();
    inc.dependency = Some("flights-api".into());
    inc.service = Some("travel-agent".into());
    inc.tools = vec!["search_flights".into(), "<!channel> @everyone *x*".into()];
    inc.error_class = "unavailable".into();
    (inc.first_seen_ns, inc.last_seen_ns, inc.opened_ns) = (T0, T0 + 4 * HOUR, T0);
    inc.findings = 12;
    for (i, m) in inc.members.iter_mut().enumerate() {
        m.joined_ns = T0 + i as i64 * HOUR;
        m.first_seen_ns = T0 + i as i64 * HOUR;
        m.last_seen_ns = T0 + 4 * HOUR;
        m.dependency = Some("flights-api".into());
        if i > 0 {
            m.reason = "same dependency flights-api as SW-ZTPG".into();
        }
    }
    inc.timeline = vec![
        crate::incident::Moment {
            at_ns: T0,
            what: "first_finding".into(),
            text: "first finding: Retry storm: search_flights ×15 in one turn".into(),
            signal_id: Some("SW-ZTPG".into()),
        },
        crate::incident::Moment {
            at_ns: T0 + 2 * HOUR,
            what: "joined".into(),
            text:
                "SW-LWJM joined (same dependency flights-api as SW-ZTPG): <!channel> @everyone *x*"
                    .into(),
            signal_id: Some("SW-LWJM".into()),
        },
    ];
    inc.impact = crate::incident::Impact {
        turns: 6,
        sessions: 4,
        calls: 62,
        failed_calls: 53,
        wasted_calls: 41,
        wasted_seconds: 180.5,
    };
    for (i, e) in inc.evidence.iter_mut().enumerate() {
        e.evidence.trace_id = format!("{:08x}{:024x}", i + 1, 0x29);
    }
    let n = IncidentNotice {
        event: E::Updated,
        why: vec!["SW-LWJM joined (same dependency flights-api as SW-ZTPG): wasted retries".into()],
        incident: inc,
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/alerts");
    let update = std::env::var("STORMWATCH_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    for kind in KINDS {
        let body = render_incident(
            kind,
            &n,
            "https://stormwatch.example.com",
            5,
            1_785_974_400_000_000_000,
        );
        let text = format!("{body:#}\n");
        let path = dir.join(format!("incident-{}.json", kind.as_str()));
        if update {
            std::fs::write(&path, &text).unwrap();
        }
        let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (STORMWATCH_UPDATE_GOLDEN=1 writes it)",
                path.display()
            )
        });
        assert_eq!(
            text,
            golden,
            "{} differs from the rendering",
            path.display()
        );
        let parsed: serde_json::Value = serde_json::from_str(&golden).unwrap();
        check_limits(kind, &parsed).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
