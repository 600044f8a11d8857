//! Incidents: grouping, bodies and their lifecycle in a real SQLite file.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::group::{group, Cause, Facts, ToolDayFacts};
use super::*;
use crate::model::{day_from_str, day_to_string, NANOS_PER_DAY};
use crate::signal::{Kind, Lifecycle, Signal, SignalDraft};

pub(super) const H: i64 = 3_600_000_000_000;

fn day0() -> i32 {
    day_from_str("2026-08-02").unwrap()
}

/// A signal of `kind` on `tool`, first and last seen `at` hours into day0.
pub(super) fn sig(
    id: &str,
    kind: Kind,
    tool: &str,
    class: &str,
    first_h: i64,
    last_h: i64,
) -> Signal {
    let base = i64::from(day0()) * NANOS_PER_DAY;
    let (first, last) = if matches!(kind, Kind::ErrorRateSpike | Kind::LatencySpike) {
        (base, base)
    } else {
        (base + first_h * H, base + last_h * H)
    };
    Signal {
        draft: SignalDraft {
            id: id.into(),
            key: format!("v1:{}:{tool}:{class}", kind.as_str()),
            kind,
            tool: tool.into(),
            error_class: class.into(),
            title: format!("{} on {tool}", kind.as_str()),
            first_seen_ns: first,
            last_seen_ns: last,
            days: vec![day_to_string(day0())],
            findings: 2,
            evidence: Vec::new(),
            evidence_more: 0,
            wasted_seconds: 0.0,
            severity: None,
            remedy: None,
        },
        state: Lifecycle::New,
        muted_until_ns: None,
        mute_until_escalates: false,
    }
}

fn facts(rows: &[(&str, &str, Option<&str>)]) -> Facts {
    let mut daily = BTreeMap::new();
    for (tool, service, dep) in rows {
        daily.insert(
            (tool.to_string(), day0()),
            ToolDayFacts {
                service: service.to_string(),
                calls: 100,
                errors: 40,
                dependency: dep.map(str::to_string),
                wasted: 10,
                wasted_seconds: 12.5,
            },
        );
    }
    Facts {
        daily,
        reach: BTreeMap::new(),
    }
}

fn ids(g: &group::Group) -> Vec<&str> {
    g.members.iter().map(|(id, _)| id.as_str()).collect()
}

#[test]
fn a_storm_its_spike_and_its_wasted_retries_are_one_incident_of_the_tool() {
    let s = [
        sig(
            "SW-STRM",
            Kind::RetryStorm,
            "search_flights",
            "unavailable",
            14,
            15,
        ),
        sig(
            "SW-SPKE",
            Kind::ErrorRateSpike,
            "search_flights",
            "unavailable",
            0,
            0,
        ),
        sig(
            "SW-WSTD",
            Kind::WastedRetries,
            "search_flights",
            "unavailable",
            14,
            14,
        ),
        sig(
            "SW-BOOK",
            Kind::RetryAfterSuccess,
            "book_flight",
            "ok",
            14,
            14,
        ),
    ];
    let f = facts(&[
        ("search_flights", "travel", None),
        ("book_flight", "travel", None),
    ]);
    let refs: Vec<&Signal> = s.iter().collect();
    let groups = group(&refs, &f);
    assert_eq!(groups.len(), 2, "{groups:?}");
    let outage = groups.iter().find(|g| g.members.len() == 3).unwrap();
    assert_eq!(outage.cause, Cause::Tool("search_flights".into()));
    assert_eq!(outage.cause.key(), "inc1:tool:search_flights");
    assert_eq!(
        ids(outage)[0],
        "SW-SPKE",
        "the day's spike is the first finding"
    );
    for (id, reason) in &outage.members[1..] {
        assert!(
            reason.starts_with("same tool search_flights as SW-"),
            "{id}: {reason}"
        );
    }
    let own = groups.iter().find(|g| g.members.len() == 1).unwrap();
    assert_eq!(
        own.cause,
        Cause::Own("v1:retry_after_success:book_flight:ok".into())
    );
}

#[test]
fn four_tools_behind_one_server_are_one_incident_named_by_it() {
    let s = [
        sig(
            "SW-AAAA",
            Kind::RetryStorm,
            "get_quote",
            "unavailable",
            14,
            15,
        ),
        sig(
            "SW-BBBB",
            Kind::RetryStorm,
            "get_fx_rate",
            "unavailable",
            14,
            14,
        ),
        sig(
            "SW-CCCC",
            Kind::WastedRetries,
            "convert",
            "unavailable",
            15,
            15,
        ),
        sig(
            "SW-DDDD",
            Kind::ErrorRateSpike,
            "list_currencies",
            "unavailable",
            0,
            0,
        ),
    ];
    let f = facts(&[
        ("get_quote", "agent", Some("quote-mcp")),
        ("get_fx_rate", "agent", Some("quote-mcp")),
        ("convert", "agent", Some("quote-mcp")),
        ("list_currencies", "agent", Some("quote-mcp")),
    ]);
    let refs: Vec<&Signal> = s.iter().collect();
    let groups = group(&refs, &f);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].cause, Cause::Dependency("quote-mcp".into()));
    assert!(groups[0].members[1..]
        .iter()
        .all(|(_, r)| r.starts_with("same dependency quote-mcp as ")));
}

#[test]
fn two_unrelated_failures_in_one_hour_stay_two_incidents() {
    let s = [
        sig(
            "SW-AAAA",
            Kind::RetryStorm,
            "get_quote",
            "unavailable",
            14,
            14,
        ),
        sig("SW-BBBB", Kind::RetryStorm, "send_email", "auth", 14, 14),
    ];
    let f = facts(&[
        ("get_quote", "agent", Some("quote-mcp")),
        ("send_email", "agent", Some("smtp.example.com")),
    ]);
    let refs: Vec<&Signal> = s.iter().collect();
    assert_eq!(group(&refs, &f).len(), 2);
    // Without dependencies, different classes are no burst either.
    let f = facts(&[("get_quote", "agent", None), ("send_email", "agent", None)]);
    assert_eq!(group(&refs, &f).len(), 2);
}

#[test]
fn one_class_across_tools_of_one_service_within_the_hour_is_a_burst() {
    let s = [
        sig(
            "SW-AAAA",
            Kind::RetryStorm,
            "get_quote",
            "rate_limited",
            14,
            14,
        ),
        sig(
            "SW-BBBB",
            Kind::RetryStorm,
            "search",
            "rate_limited",
            14,
            15,
        ),
        sig("SW-CCCC", Kind::RetryStorm, "fetch", "rate_limited", 17, 17),
    ];
    let f = facts(&[
        ("get_quote", "agent", None),
        ("search", "agent", None),
        ("fetch", "agent", None),
    ]);
    let refs: Vec<&Signal> = s.iter().collect();
    let groups = group(&refs, &f);
    assert_eq!(
        groups.len(),
        2,
        "the 17:00 storm is another hour: {groups:?}"
    );
    let burst = groups.iter().find(|g| g.members.len() == 2).unwrap();
    assert!(
        matches!(&burst.cause, Cause::Burst { service, class, .. } if service == "agent" && class == "rate_limited")
    );
    assert!(burst.members[1]
        .1
        .starts_with("a burst of rate limited in service agent within the hour"));
    // A dependency explains a failure: no burst with a tool that has one.
    let f = facts(&[
        ("get_quote", "agent", Some("quote-mcp")),
        ("search", "agent", None),
        ("fetch", "agent", None),
    ]);
    assert_eq!(group(&refs, &f).len(), 3);
}

#[test]
fn signals_far_apart_in_time_do_not_join() {
    let a = sig(
        "SW-AAAA",
        Kind::RetryStorm,
        "get_quote",
        "unavailable",
        1,
        1,
    );
    let mut b = sig(
        "SW-BBBB",
        Kind::RetryStorm,
        "get_fx_rate",
        "unavailable",
        1,
        1,
    );
    b.draft.first_seen_ns += 5 * NANOS_PER_DAY;
    b.draft.last_seen_ns += 5 * NANOS_PER_DAY;
    let mut f = facts(&[("get_quote", "agent", Some("quote-mcp"))]);
    f.daily.insert(
        ("get_fx_rate".into(), day0()),
        ToolDayFacts {
            dependency: Some("quote-mcp".into()),
            ..Default::default()
        },
    );
    assert_eq!(group(&[&a, &b], &f).len(), 2);
}

fn db() -> Connection {
    crate::state::open_in_memory().unwrap()
}

#[test]
fn the_lifecycle_opens_grows_resolves_and_reopens_one_incident() {
    let c = db();
    let f = facts(&[
        ("get_quote", "agent", Some("quote-mcp")),
        ("get_fx_rate", "agent", Some("quote-mcp")),
    ]);
    let mut a = sig(
        "SW-AAAA",
        Kind::RetryStorm,
        "get_quote",
        "unavailable",
        14,
        14,
    );
    let changes = store::apply(&c, std::slice::from_ref(&a), &f, 1, 5).unwrap();
    assert_eq!(changes.len(), 1);
    let id = changes[0].id.clone();
    assert!(id.starts_with("INC-") && id.len() == 8, "{id}");
    assert_eq!(changes[0].from, None);
    let inc = store::get(&c, &id).unwrap();
    assert_eq!(inc.key, "inc1:dep:quote-mcp");
    assert_eq!(
        inc.title,
        "quote-mcp down: get_quote failing since 2026-08-02 14:00Z (unavailable)"
    );
    // Nothing new: nothing to say.
    assert!(store::apply(&c, std::slice::from_ref(&a), &f, 2, 5)
        .unwrap()
        .is_empty());
    // A second tool behind the server joins: one update of the same incident.
    a.state = Lifecycle::Ongoing;
    let b = sig(
        "SW-BBBB",
        Kind::RetryStorm,
        "get_fx_rate",
        "unavailable",
        14,
        15,
    );
    let changes = store::apply(&c, &[a.clone(), b.clone()], &f, 3, 5).unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].id, id);
    assert_eq!(changes[0].joined, vec!["SW-BBBB".to_string()]);
    assert_eq!(changes[0].from, Some(IncidentState::Open));
    let inc = store::get(&c, &id).unwrap();
    assert_eq!(inc.tools, vec!["get_quote", "get_fx_rate"]);
    assert!(inc.members[1]
        .reason
        .starts_with("same dependency quote-mcp as SW-AAAA"));
    assert!(inc.timeline.iter().any(|m| m.what == "joined"));
    assert_eq!(inc.impact.failed_calls, 80);
    // All members resolved: the incident resolves.
    let (mut a2, mut b2) = (a.clone(), b.clone());
    a2.state = Lifecycle::Resolved;
    b2.state = Lifecycle::Resolved;
    let changes = store::apply(&c, &[a2.clone(), b2.clone()], &f, 4, 5).unwrap();
    assert_eq!(changes[0].to, IncidentState::Resolved);
    assert_eq!(store::get(&c, &id).unwrap().resolved_ns, Some(4));
    // A member regresses: the same incident reopens.
    b2.state = Lifecycle::Regressed;
    let changes = store::apply(&c, &[a2, b2], &f, 5, 5).unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].id.as_str(), changes[0].from, changes[0].to),
        (
            id.as_str(),
            Some(IncidentState::Resolved),
            IncidentState::Open
        )
    );
    let h = store::history(&c, &id).unwrap();
    assert_eq!(h.last().unwrap().3, "reopened by SW-BBBB");
}

#[test]
fn muted_members_acknowledge_the_incident() {
    let c = db();
    let f = facts(&[("get_quote", "agent", None)]);
    let mut a = sig(
        "SW-AAAA",
        Kind::RetryStorm,
        "get_quote",
        "unavailable",
        14,
        14,
    );
    let id = store::apply(&c, std::slice::from_ref(&a), &f, 1, 5).unwrap()[0]
        .id
        .clone();
    a.state = Lifecycle::Muted;
    let changes = store::apply(&c, std::slice::from_ref(&a), &f, 2, 5).unwrap();
    assert_eq!(
        (changes[0].id.as_str(), changes[0].to),
        (id.as_str(), IncidentState::Acknowledged)
    );
}

#[test]
fn ids_never_collide_and_never_change() {
    let c = db();
    let key = "inc1:tool:x";
    let taken = short_id_of(key, 4);
    c.execute(
        "INSERT INTO incidents (id, key, state, cause, body, opened_ns, updated_ns) VALUES (?1, 'other', 'open', '{}', '{}', 0, 0)",
        [&taken],
    )
    .unwrap();
    let id = store::free_id(&c, key).unwrap();
    assert_ne!(id, taken);
    assert!(id.starts_with(&taken), "{id} extends {taken}");
}

#[test]
fn an_unreadable_incident_is_left_out_of_the_list_not_the_others() {
    let c = db();
    let f = facts(&[
        ("get_quote", "agent", None),
        ("search", "agent", Some("api.example")),
    ]);
    let a = sig(
        "SW-AAAA",
        Kind::RetryStorm,
        "get_quote",
        "unavailable",
        14,
        14,
    );
    let b = sig("SW-BBBB", Kind::RetryStorm, "search", "auth", 2, 2);
    let changes = store::apply(&c, &[a, b], &f, 1, 5).unwrap();
    assert_eq!(changes.len(), 2);
    c.execute(
        "UPDATE incidents SET body = 'not json' WHERE id = ?1",
        [&changes[0].id],
    )
    .unwrap();
    let list = store::list(&c).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, changes[1].id);
    assert!(matches!(
        store::get(&c, &changes[0].id),
        Err(IncidentError::Corrupt { .. })
    ));
}

#[test]
fn one_tool_failing_twice_hours_apart_is_two_incidents_in_one_sweep_and_the_next() {
    let c = db();
    let f = facts(&[("get_quote", "agent", None)]);
    let a = sig(
        "SW-AAAA",
        Kind::RetryStorm,
        "get_quote",
        "unavailable",
        1,
        1,
    );
    let b = sig("SW-BBBB", Kind::WastedRetries, "get_quote", "auth", 12, 12);
    let changes = store::apply(&c, &[a.clone(), b.clone()], &f, 1, 5).unwrap();
    assert_eq!(changes.len(), 2, "{changes:?}");
    let keys: Vec<String> = store::list(&c)
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert!(
        keys.contains(&"inc1:tool:get_quote".to_string()),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k.starts_with("inc1:tool:get_quote#INC-")),
        "{keys:?}"
    );
    // The next sweep keeps both, changes nothing.
    assert!(store::apply(&c, &[a, b], &f, 2, 5).unwrap().is_empty());
}
