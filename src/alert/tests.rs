//! The pure parts of alerting: when to notify, how answers are classified,
//! how long to wait, and what each target's message looks like.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::notify::{decide, Event, Timing, Told};
use super::policy::{classify, next_wait, parse_retry_after, Budget, Verdict};
use super::target::{TargetConfig, TargetKind};
use super::*;
use crate::signal::Severity;
use crate::signal::{Evidence, Kind, Lifecycle, Signal, SignalDraft};

const HOUR: i64 = 3_600_000_000_000;

fn signal(id: &str, tool: &str, findings: usize, state: Lifecycle, evidence: usize) -> Signal {
    let mut draft = SignalDraft {
        id: id.into(),
        key: format!("v1:retry_storm:{tool}:unavailable"),
        kind: Kind::RetryStorm,
        tool: tool.into(),
        error_class: "unavailable".into(),
        title: format!("Retry storm: {tool} ×15 in one turn (unavailable, no backoff)"),
        first_seen_ns: 0,
        last_seen_ns: HOUR,
        days: vec!["2026-07-29".into(), "2026-08-04".into()],
        findings,
        evidence: (0..evidence)
            .map(|i| Evidence {
                rhythm: Some("no_backoff".into()),
                wasted_seconds: 80.0,
                ..Evidence::turn(&format!("{:08x}{:024x}", i + 1, 7), "t", 20_663, 15, 15)
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

fn timing() -> Timing {
    Timing {
        repeat_interval_ns: 24 * HOUR,
        cooldown_ns: 6 * HOUR,
    }
}

fn changes(list: &[(&str, Lifecycle)]) -> BTreeMap<String, Lifecycle> {
    list.iter().map(|(i, l)| (i.to_string(), *l)).collect()
}

#[test]
fn a_change_is_news_and_the_same_sweep_again_is_not() {
    let s = vec![signal("SW-A", "search_flights", 4, Lifecycle::New, 4)];
    let (n, told) = decide(
        &s,
        &changes(&[("SW-A", Lifecycle::New)]),
        &BTreeMap::new(),
        HOUR,
        timing(),
    );
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].event, Event::New);
    // The same sweep again: no change, told an instant ago.
    let (n, _) = decide(&s, &BTreeMap::new(), &told, HOUR, timing());
    assert!(n.is_empty());
    // A day later, still open: one reminder.
    let (n, _) = decide(&s, &BTreeMap::new(), &told, 25 * HOUR, timing());
    assert_eq!(
        n.iter().map(|n| n.event).collect::<Vec<_>>(),
        vec![Event::Reminder]
    );
}

#[test]
fn twice_the_findings_escalates() {
    let told = BTreeMap::from([(
        "SW-A".to_string(),
        Told {
            last_ns: HOUR,
            last_fire_ns: HOUR,
            findings: 4,
            quiet: false,
        },
    )]);
    let more = vec![signal("SW-A", "x", 7, Lifecycle::Ongoing, 4)];
    assert!(decide(
        &more,
        &changes(&[("SW-A", Lifecycle::Ongoing)]),
        &told,
        2 * HOUR,
        timing()
    )
    .0
    .is_empty());
    let double = vec![signal("SW-A", "x", 8, Lifecycle::Ongoing, 4)];
    let (n, _) = decide(
        &double,
        &changes(&[("SW-A", Lifecycle::Ongoing)]),
        &told,
        2 * HOUR,
        timing(),
    );
    assert_eq!(n[0].event, Event::Escalated);
}

#[test]
fn resolved_then_regressed_each_once_and_flapping_is_held_by_the_cooldown() {
    // One sweep in which SW-A changed to `state`, at `hours`.
    let step = |state, told: &BTreeMap<String, Told>, hours: i64| {
        decide(
            &[signal("SW-A", "x", 4, state, 1)],
            &changes(&[("SW-A", state)]),
            told,
            hours * HOUR,
            timing(),
        )
    };
    let (_, told) = step(Lifecycle::New, &BTreeMap::new(), 0);
    let (n, told) = step(Lifecycle::Resolved, &told, 10);
    assert_eq!(n[0].event, Event::Resolved);
    let (n, told) = step(Lifecycle::Regressed, &told, 20);
    assert_eq!(n[0].event, Event::Regressed);
    // Clears and fires again within six hours: both kept quiet.
    let (n, told) = step(Lifecycle::Resolved, &told, 21);
    assert_eq!(n[0].event, Event::Resolved);
    let (n, told) = step(Lifecycle::Regressed, &told, 22);
    assert!(n.is_empty(), "{n:?}");
    let (n, _) = step(Lifecycle::Resolved, &told, 23);
    assert!(
        n.is_empty(),
        "the quiet regression's resolution is quiet too: {n:?}"
    );
}

#[test]
fn muted_signals_stay_quiet() {
    let s = vec![signal("SW-A", "x", 40, Lifecycle::Muted, 1)];
    let told = BTreeMap::from([(
        "SW-A".to_string(),
        Told {
            last_ns: 0,
            last_fire_ns: 0,
            findings: 4,
            quiet: false,
        },
    )]);
    assert!(decide(
        &s,
        &changes(&[("SW-A", Lifecycle::Muted)]),
        &told,
        48 * HOUR,
        timing()
    )
    .0
    .is_empty());
    assert!(decide(&s, &BTreeMap::new(), &told, 48 * HOUR, timing())
        .0
        .is_empty());
}

#[test]
fn answers_are_classified_before_any_retry() {
    let now = SystemTime::now();
    use TargetKind::*;
    assert_eq!(classify(Slack, 200, None, "ok", now), Verdict::Delivered);
    assert!(matches!(
        classify(Slack, 200, None, "invalid_token", now),
        Verdict::Dead { .. }
    ));
    assert!(
        matches!(classify(Slack, 400, None, "invalid_payload", now), Verdict::Dead { reason } if reason.contains("invalid_payload"))
    );
    assert!(matches!(
        classify(Slack, 404, None, "channel_not_found", now),
        Verdict::Disable { .. }
    ));
    assert!(matches!(
        classify(Slack, 410, None, "channel_is_archived", now),
        Verdict::Disable { .. }
    ));
    assert!(matches!(
        classify(Discord, 404, None, "", now),
        Verdict::Disable { .. }
    ));
    assert!(matches!(
        classify(Webhook, 404, None, "", now),
        Verdict::Dead { .. }
    ));
    assert!(matches!(
        classify(Webhook, 301, None, "", now),
        Verdict::Dead { .. }
    ));
    assert!(matches!(
        classify(Webhook, 410, None, "", now),
        Verdict::Disable { .. }
    ));
    assert_eq!(classify(Discord, 204, None, "", now), Verdict::Delivered);
    assert_eq!(classify(Teams, 202, None, "", now), Verdict::Delivered);
    for s in [408, 429, 500, 502, 503, 504] {
        assert!(
            matches!(classify(Webhook, s, None, "", now), Verdict::Retry { .. }),
            "{s}"
        );
    }
    // Discord: the larger of the header and the body.
    match classify(
        Discord,
        429,
        Some("65"),
        r#"{"retry_after": 64.57, "global": false}"#,
        now,
    ) {
        Verdict::Retry {
            after: Some(a),
            throttled: true,
            ..
        } => assert_eq!(a, Duration::from_secs(65)),
        other => panic!("{other:?}"),
    }
    match classify(Discord, 429, Some("1"), r#"{"retry_after": 64.57}"#, now) {
        Verdict::Retry { after: Some(a), .. } => assert_eq!(a, Duration::from_secs_f64(64.57)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn retry_after_as_seconds_or_an_http_date() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_785_300_000);
    assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
    let later = httpdate::fmt_http_date(now + Duration::from_secs(120));
    assert_eq!(
        parse_retry_after(&later, now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
}

#[test]
fn the_budget_counts_attempts_and_age_and_retry_after_wins_over_jitter() {
    let b = Budget {
        max_attempts: 10,
        max_age: Duration::from_secs(86_400),
        base: Duration::from_secs(1),
        cap: Duration::from_secs(300),
    };
    let j = Duration::from_millis(700);
    assert_eq!(next_wait(&b, 1, Duration::ZERO, j, None), Some(j));
    assert_eq!(
        next_wait(&b, 1, Duration::ZERO, j, Some(Duration::from_secs(3))),
        Some(Duration::from_secs(3))
    );
    assert_eq!(next_wait(&b, 10, Duration::ZERO, j, None), None);
    assert_eq!(
        next_wait(&b, 2, Duration::from_millis(86_399_500), j, None),
        None
    );
    // A Retry-After past the age budget is a give-up, not a day's wait.
    assert_eq!(
        next_wait(&b, 2, Duration::ZERO, j, Some(Duration::from_secs(90_000))),
        None
    );
}

fn notices(n: usize, evidence: usize, tool: &str) -> Vec<Notice> {
    (0..n)
        .map(|i| Notice {
            event: Event::New,
            signal: signal(&format!("SW-{i:04}"), tool, 60, Lifecycle::New, evidence),
        })
        .collect()
}

#[test]
fn sixty_evidence_traces_and_forty_signals_fit_every_target() {
    for kind in [
        TargetKind::Slack,
        TargetKind::Discord,
        TargetKind::Teams,
        TargetKind::Webhook,
    ] {
        for (signals, evidence) in [(1, 60), (10, 60), (40, 60)] {
            let n = notices(signals, evidence, "search_flights");
            let body = render(kind, &n, "https://sw.example", 60, 0);
            check_limits(kind, &body)
                .unwrap_or_else(|e| panic!("{kind:?} {signals}x{evidence}: {e}"));
            let text = body.to_string();
            let all_shown = n.iter().all(|s| {
                s.signal
                    .draft
                    .evidence
                    .iter()
                    .all(|e| text.contains(&e.trace_id[..12]))
            });
            assert!(
                all_shown || text.contains("more"),
                "{kind:?} says what it left out"
            );
        }
    }
}

#[test]
fn hostile_tool_names_arrive_inert() {
    for tool in [
        "<!channel> *x*",
        "@everyone",
        "<script>alert(1)</script>",
        "\"><img onerror=alert(1)>",
    ] {
        let n = notices(1, 1, tool);
        for kind in [
            TargetKind::Slack,
            TargetKind::Discord,
            TargetKind::Teams,
            TargetKind::Webhook,
        ] {
            let body = render(kind, &n, "https://sw.example", 5, 0);
            let text = body.to_string();
            match kind {
                TargetKind::Slack => {
                    assert!(
                        !text.contains("<!channel>") && !text.contains("<script>"),
                        "{text}"
                    );
                    assert_eq!(body["mrkdwn"], false);
                    assert!(text.contains("&lt;!channel&gt;") || !tool.contains("channel"));
                }
                TargetKind::Discord => {
                    assert!(!text.contains("@everyone"), "{text}");
                    assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
                    assert!(!text.contains("<script>"), "{text}");
                }
                TargetKind::Teams => assert!(
                    !text.contains("<script>") && !text.contains("*x*"),
                    "{text}"
                ),
                // JSON carries the text as data; the receiver's own escaping applies.
                TargetKind::Webhook => assert_eq!(body["signals"][0]["tool"], tool),
                TargetKind::PagerDuty => unreachable!("not among the kinds tried"),
            }
        }
    }
}

#[test]
fn targets_filter_by_kind_tool_and_severity_and_never_show_their_secrets() {
    let cfg: TargetConfig = toml::from_str(
        "name = \"pager\"\nkind = \"webhook\"\nurl = \"https://hooks.example/x\"\nsecret_env = \"SW_TEST_SECRET\"\nmin_severity = \"critical\"\ntools = [\"search_flights\"]\n",
    )
    .unwrap();
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".to_string();
    let t = cfg
        .resolve(|k| (k == "SW_TEST_SECRET").then(|| secret.clone()))
        .unwrap();
    assert!(t.wants(Kind::RetryStorm, "search_flights", Severity::Critical));
    assert!(!t.wants(Kind::RetryStorm, "book_flight", Severity::Critical));
    assert!(!t.wants(
        Kind::LatencySpike,
        "search_flights",
        Severity::of(Kind::LatencySpike)
    ));
    assert_eq!(Severity::of(Kind::LatencySpike), Severity::Info);
    let shown = format!("{t:?}");
    assert!(
        !shown.contains("whsec") && !shown.contains("hooks.example"),
        "{shown}"
    );
    let err = cfg.resolve(|_| None).unwrap_err().to_string();
    assert!(
        err.contains("SW_TEST_SECRET") && err.contains("pager"),
        "{err}"
    );
    let bad: Result<TargetConfig, _> =
        toml::from_str("name = \"x\"\nkind = \"opsgenie\"\nurl = \"https://x\"\n");
    let err = bad.unwrap_err().to_string();
    assert!(
        err.contains("opsgenie") && err.contains("pagerduty"),
        "{err}"
    );
}

/// The messages each target gets for one sweep with three signals (one of
/// them with a hostile tool name, one with more evidence than fits), as
/// golden files in `fixtures/alerts/`; and each golden file within its
/// target's documented limits. `STORMWATCH_UPDATE_GOLDEN=1` rewrites them.
#[test]
fn golden_payloads_match_and_fit_their_targets() {
    let mut n = notices(3, 12, "search_flights");
    n[1].signal.draft.tool = "<!channel> @everyone *x*".into();
    n[1].signal.draft.title =
        "Wasted retries: <!channel> @everyone *x* retried 8 times on invalid request".into();
    n[1].event = Event::Regressed;
    n[2].event = Event::Resolved;
    n[2].signal.state = Lifecycle::Resolved;
    n[2].signal.draft.evidence_more = 40;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/alerts");
    let update = std::env::var("STORMWATCH_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    for kind in [
        TargetKind::Slack,
        TargetKind::Discord,
        TargetKind::Teams,
        TargetKind::Webhook,
    ] {
        let body = render(
            kind,
            &n,
            "https://stormwatch.example.com",
            5,
            1_785_974_400_000_000_000,
        );
        let text = format!("{body:#}\n");
        let path = dir.join(format!("{}.json", kind.as_str()));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
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

#[test]
fn a_long_title_full_of_markdown_stays_within_discord_limits() {
    let mut n = notices(1, 3, &"a_b*c_".repeat(80));
    n[0].signal.draft.title = format!("Retry storm: {} ×15", "a_b*c_".repeat(80));
    let body = render(TargetKind::Discord, &n, "", 5, 0);
    super::discord::check(&body).unwrap();
    let title = body["embeds"][0]["title"].as_str().unwrap();
    assert!(title.ends_with('…') && !title.ends_with("\\…"), "{title}");
}

#[test]
fn a_regression_held_by_the_cooldown_is_told_once_the_cooldown_ends() {
    let s = |state| vec![signal("SW-A", "x", 4, state, 1)];
    let mut told = BTreeMap::from([(
        "SW-A".to_string(),
        Told {
            last_ns: 2 * HOUR,
            last_fire_ns: 0,
            findings: 4,
            quiet: false,
        },
    )]);
    // `decide` returns what changed; the outbox keeps the rest.
    let mut step = |change: Option<Lifecycle>, at: i64| {
        let ch = change.map(|c| changes(&[("SW-A", c)])).unwrap_or_default();
        let (n, remember) = decide(&s(Lifecycle::Regressed), &ch, &told, at, timing());
        told.extend(remember);
        n.iter().map(|n| n.event).collect::<Vec<_>>()
    };
    assert!(step(Some(Lifecycle::Regressed), 3 * HOUR).is_empty());
    assert!(step(None, 5 * HOUR).is_empty(), "still cooling");
    assert_eq!(step(None, 7 * HOUR), vec![Event::Regressed]);
    assert!(step(None, 8 * HOUR).is_empty());
}

#[test]
fn pruning_the_outbox_keeps_pending_and_recent_rows() {
    let dir = tempfile::tempdir().unwrap();
    let c = commands::open(&dir.path().join("state.sqlite")).unwrap();
    let day = 86_400_000_000_000i64;
    for (i, status) in ["delivered", "dead", "pending", "delivered"]
        .iter()
        .enumerate()
    {
        outbox::enqueue(&c, "t", &[format!("SW-{i}")], "{}", i as i64).unwrap();
        let id = c.last_insert_rowid();
        if *status != "pending" {
            // The last one finished recently, the others 40 days ago.
            let done = if i == 3 { 40 * day } else { day };
            outbox::finish(&c, id, 1, status, None, done).unwrap();
        }
    }
    assert_eq!(outbox::prune(&c, 10 * day).unwrap(), 2);
    let left: Vec<String> = outbox::list(&c, 10)
        .unwrap()
        .into_iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"pending".to_string()) && left.contains(&"delivered".to_string()));
}
