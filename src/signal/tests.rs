//! Tests of signals: stable ids, grouping with evidence, and the lifecycle over sweeps.

use super::group::{key, short_id};
use super::*;
use crate::model::ErrorClass;

pub(super) fn finding(
    kind: Kind,
    tool: &str,
    class: ErrorClass,
    at_ns: i64,
    calls: usize,
    trace: &str,
) -> Finding {
    Finding {
        kind,
        tool: tool.into(),
        class,
        at_ns,
        day: crate::model::day_of_ns(at_ns),
        evidence: Some(Evidence {
            trace_id: trace.into(),
            turn_id: Some(format!("{trace}/root")),
            session_id: None,
            day: crate::model::day_to_string(crate::model::day_of_ns(at_ns)),
            calls,
            failures: calls,
            rhythm: Some("no_backoff".into()),
            outcome: Some("gave_up".into()),
            wasted_seconds: calls as f64,
            turn_duration_s: None,
            turn_spans: None,
            healthy_turn_duration_s: None,
            healthy_turn_spans: None,
            same_args: None,
            classes: Default::default(),
            parents: Vec::new(),
            daily: Vec::new(),
            waits: Vec::new(),
            driver: None,
        }),
        calls: calls as u64,
        errors: calls as u64,
        rate: 0.0,
        baseline: 0.0,
        read_only: false,
        basis: None,
        silence: None,
    }
}

pub(super) const DAY: i64 = 86_400_000_000_000;
pub(super) const HOUR: i64 = 3_600_000_000_000;

/// The defaults (2 quiet days, 24 quiet hours), data and every tool's
/// traffic reaching `horizon_ns`.
pub(super) fn q(horizon_ns: i64) -> state::Quiet {
    state::Quiet {
        horizon_ns,
        after_days: 2,
        after_hours: 24,
        traffic: ["t", "q", "search_flights", "book_flight"]
            .iter()
            .map(|t| (t.to_string(), horizon_ns))
            .collect(),
        last_ok: Default::default(),
    }
}

#[test]
fn ids_are_stable_short_and_sayable() {
    let k = key(Kind::RetryStorm, "search_flights", ErrorClass::Unavailable);
    assert_eq!(k, "v1:retry_storm:search_flights:unavailable");
    let id = short_id(&k);
    assert_eq!(id, short_id(&k));
    assert_eq!(id.len(), 7);
    assert!(
        id.starts_with("SW-") && id[3..].chars().all(|c| "BCDFGHJKLMNPQRSTVWXZ".contains(c)),
        "{id}"
    );
    assert_ne!(id, short_id("v1:retry_storm:book_flight:unavailable"));
}

#[test]
fn four_storms_of_one_tool_are_one_signal_with_evidence_worst_first() {
    let fs: Vec<Finding> = [(12, "a"), (15, "b"), (14, "c"), (12, "d")]
        .iter()
        .enumerate()
        .map(|(i, (n, t))| {
            finding(
                Kind::RetryStorm,
                "search_flights",
                ErrorClass::Unavailable,
                1000 + i as i64,
                *n,
                t,
            )
        })
        .collect();
    let drafts = group(&fs, 10);
    assert_eq!(drafts.len(), 1);
    let d = &drafts[0];
    assert_eq!(d.findings, 4);
    assert_eq!(
        d.evidence
            .iter()
            .map(|e| e.trace_id.as_str())
            .collect::<Vec<_>>(),
        ["b", "c", "a", "d"]
    );
    assert_eq!(
        d.title,
        "Retry storm: search_flights ×15 in one turn (unavailable, no backoff, 4 turns)"
    );
    let capped = group(&fs, 2);
    assert_eq!((capped[0].evidence.len(), capped[0].evidence_more), (2, 2));
}

#[test]
fn the_lifecycle_runs_new_ongoing_resolved_regressed_and_sweeps_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let f1 = vec![finding(
        Kind::RetryStorm,
        "t",
        ErrorClass::Unavailable,
        DAY,
        15,
        "a",
    )];
    let d1 = group(&f1, 10);
    let id = d1[0].id.clone();
    let out = db.apply(&d1, 2 * DAY, &q(DAY + 100)).unwrap();
    assert_eq!(out.changes, vec![(id.clone(), None, Lifecycle::New)]);
    // The same sweep again: nothing changes.
    assert!(db
        .apply(&d1, 2 * DAY, &q(DAY + 100))
        .unwrap()
        .changes
        .is_empty());
    assert!(db
        .apply(&d1, 2 * DAY + 5, &q(DAY + 100))
        .unwrap()
        .changes
        .is_empty());
    assert_eq!(db.get(&id).unwrap().state, Lifecycle::New);
    // A new finding: ongoing.
    let mut f2 = f1.clone();
    f2.push(finding(
        Kind::RetryStorm,
        "t",
        ErrorClass::Unavailable,
        DAY + 50,
        14,
        "b",
    ));
    let d2 = group(&f2, 10);
    assert_eq!(
        db.apply(&d2, 3 * DAY, &q(DAY + 200)).unwrap().changes,
        vec![(id.clone(), Some(Lifecycle::New), Lifecycle::Ongoing)]
    );
    // 23 hours of the tool's traffic without a finding: still open; 24: resolved.
    assert!(db
        .apply(&d2, 4 * DAY, &q(DAY + 50 + 23 * HOUR))
        .unwrap()
        .changes
        .is_empty());
    assert_eq!(
        db.apply(&d2, 5 * DAY, &q(DAY + 50 + 24 * HOUR))
            .unwrap()
            .changes,
        vec![(id.clone(), Some(Lifecycle::Ongoing), Lifecycle::Resolved)]
    );
    // Old findings seen again do not reopen it; a newer one regresses it.
    assert!(db
        .apply(&d2, 6 * DAY, &q(DAY + 26 * HOUR))
        .unwrap()
        .changes
        .is_empty());
    let mut f3 = f2.clone();
    f3.push(finding(
        Kind::RetryStorm,
        "t",
        ErrorClass::Unavailable,
        5 * DAY,
        9,
        "c",
    ));
    let d3 = group(&f3, 10);
    assert_eq!(
        db.apply(&d3, 6 * DAY, &q(5 * DAY + 10)).unwrap().changes,
        vec![(id.clone(), Some(Lifecycle::Resolved), Lifecycle::Regressed)]
    );
    let history = db.history(&id).unwrap();
    assert_eq!(history.len(), 4);
}

#[test]
fn muting_holds_until_it_escalates() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let f = vec![
        finding(
            Kind::WastedRetries,
            "q",
            ErrorClass::InvalidRequest,
            DAY,
            5,
            "a",
        ),
        finding(
            Kind::WastedRetries,
            "q",
            ErrorClass::InvalidRequest,
            DAY + 1,
            5,
            "a2",
        ),
    ];
    let d = group(&f, 10);
    let id = d[0].id.clone();
    db.apply(&d, 2 * DAY, &q(DAY + 1)).unwrap();
    db.mute(&id, None, true, 2 * DAY).unwrap();
    assert_eq!(db.get(&id).unwrap().state, Lifecycle::Muted);
    // Muted at 2 findings; a third: still quiet.
    let mut f2 = f.clone();
    f2.push(finding(
        Kind::WastedRetries,
        "q",
        ErrorClass::InvalidRequest,
        DAY + 5,
        5,
        "b",
    ));
    assert!(db
        .apply(&group(&f2, 10), 3 * DAY, &q(DAY + 10))
        .unwrap()
        .changes
        .is_empty());
    // Twice the findings it was muted at: it speaks again.
    f2.push(finding(
        Kind::WastedRetries,
        "q",
        ErrorClass::InvalidRequest,
        DAY + 9,
        5,
        "c",
    ));
    let out = db.apply(&group(&f2, 10), 4 * DAY, &q(DAY + 20)).unwrap();
    assert_eq!(
        out.changes,
        vec![(id.clone(), Some(Lifecycle::Muted), Lifecycle::Ongoing)]
    );
    db.resolve(&id, 5 * DAY).unwrap();
    assert_eq!(db.get(&id).unwrap().state, Lifecycle::Resolved);
    assert!(matches!(
        db.get("SW-NOPE"),
        Err(StateError::NoSuchSignal(_))
    ));
}

#[test]
fn a_shorter_window_is_not_news_and_an_expired_mute_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let all = vec![
        finding(Kind::RetryStorm, "t", ErrorClass::Unavailable, DAY, 15, "a"),
        finding(
            Kind::RetryStorm,
            "t",
            ErrorClass::Unavailable,
            3 * DAY,
            12,
            "b",
        ),
    ];
    let d = group(&all, 10);
    let id = d[0].id.clone();
    db.apply(&d, 4 * DAY, &q(3 * DAY + 1)).unwrap();
    // The same data seen through a one-day window: one finding, same last
    // finding: no change, and the stored days are kept.
    let short = group(&all[1..], 10);
    assert!(db
        .apply(&short, 4 * DAY, &q(3 * DAY + 1))
        .unwrap()
        .changes
        .is_empty());
    assert_eq!(db.get(&id).unwrap().draft.days.len(), 2);
    assert!(db
        .apply(&d, 4 * DAY, &q(3 * DAY + 1))
        .unwrap()
        .changes
        .is_empty());
    // Muted until day 5; on day 6, with nothing found, the mute has ended.
    db.mute(&id, Some(5 * DAY), false, 4 * DAY).unwrap();
    let out = db.apply(&[], 6 * DAY, &q(3 * DAY + 2)).unwrap();
    assert_eq!(
        out.changes,
        vec![(id.clone(), Some(Lifecycle::Muted), Lifecycle::Ongoing)]
    );
}

#[test]
fn an_unreadable_row_is_an_error_not_a_silent_gap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let mut db = StateDb::open(&path).unwrap();
    let d = group(
        &[finding(
            Kind::RetryStorm,
            "t",
            ErrorClass::Unavailable,
            DAY,
            5,
            "a",
        )],
        10,
    );
    db.apply(&d, 2 * DAY, &q(DAY + 1)).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE signals SET draft = '{not json'", [])
        .unwrap();
    let err = db.list().unwrap_err().to_string();
    assert!(
        err.contains(&d[0].id) && err.contains("unreadable"),
        "{err}"
    );
    // A sweep fails loudly instead of inserting the key a second time.
    assert!(db.apply(&d, 3 * DAY, &q(DAY + 2)).is_err());
}

#[test]
fn two_new_keys_with_one_short_id_get_two_ids_and_the_sweep_goes_on() {
    // Find two keys whose four-letter ids collide (160 000 ids: a few
    // hundred keys give a pair).
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0..100_000)
        .find_map(|i| {
            let k = key(
                Kind::RetryStorm,
                &format!("tool_{i}"),
                ErrorClass::Unavailable,
            );
            let id = short_id(&k);
            seen.insert(id, k.clone()).map(|prev| (prev, k))
        })
        .unwrap();
    let tool = |k: &str| k.split(':').nth(2).unwrap().to_string();
    let fs = vec![
        finding(
            Kind::RetryStorm,
            &tool(&a),
            ErrorClass::Unavailable,
            DAY,
            6,
            "a",
        ),
        finding(
            Kind::RetryStorm,
            &tool(&b),
            ErrorClass::Unavailable,
            DAY,
            7,
            "b",
        ),
    ];
    let drafts = group(&fs, 10);
    assert_eq!(drafts[0].id, drafts[1].id, "the keys collide");
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let out = db.apply(&drafts, 2 * DAY, &q(DAY + 1)).unwrap();
    assert_eq!(out.changes.len(), 2);
    let ids: Vec<String> = db.list().unwrap().into_iter().map(|s| s.draft.id).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    // The first keeps the short id; the other is one letter longer, and
    // starts with it.
    let short = drafts[0].id.clone();
    assert!(ids.contains(&short), "{ids:?}");
    let long = ids.iter().find(|i| **i != short).unwrap();
    assert_eq!(long.len(), short.len() + 1);
    assert!(long.starts_with(&short));
    // Later sweeps work and keep both ids as they are.
    let mut more = fs.clone();
    more.push(finding(
        Kind::RetryStorm,
        &tool(&b),
        ErrorClass::Unavailable,
        DAY + 9,
        8,
        "c",
    ));
    db.apply(&group(&more, 10), 3 * DAY, &q(DAY + 10)).unwrap();
    let again: Vec<String> = db.list().unwrap().into_iter().map(|s| s.draft.id).collect();
    assert_eq!(again, ids);
}

#[test]
fn a_spike_swept_every_five_minutes_stays_open_until_two_quiet_days() {
    // An error-rate spike on day 10 (its finding carries the day's start),
    // swept every 5 minutes from 18:00 that evening to day 13 noon, the data
    // keeping up with the clock.
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let mut spike = finding(
        Kind::ErrorRateSpike,
        "search_flights",
        ErrorClass::Unavailable,
        10 * DAY,
        62,
        "a",
    );
    spike.evidence = None;
    let drafts = group(&[spike], 10);
    let id = drafts[0].id.clone();
    let mut resolved_at = None;
    let mut now = 10 * DAY + 18 * HOUR;
    while now < 13 * DAY + 12 * HOUR {
        let out = db.apply(&drafts, now, &q(now - 60_000_000_000)).unwrap();
        for (sid, _, to) in out.changes {
            assert_eq!(sid, id);
            if to == Lifecycle::Resolved {
                resolved_at = Some(now);
            }
        }
        now += 300_000_000_000;
    }
    // Days 11 and 12 are the two complete quiet days: it resolves once the
    // data reaches day 13, and only then.
    let at = resolved_at.expect("resolved");
    assert!(
        (13 * DAY..13 * DAY + HOUR).contains(&at),
        "resolved at {at}"
    );
    let history = db.history(&id).unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
}

#[test]
fn a_storm_resolves_after_a_day_of_its_tools_traffic_and_not_without_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(&dir.path().join("state.sqlite")).unwrap();
    let at = 10 * DAY + 20 * HOUR;
    let drafts = group(
        &[finding(
            Kind::RetryStorm,
            "t",
            ErrorClass::Unavailable,
            at,
            15,
            "a",
        )],
        10,
    );
    let id = drafts[0].id.clone();
    db.apply(&drafts, at + HOUR, &q(at + HOUR)).unwrap();
    // Sweeps every 5 minutes for two days while nobody calls the tool: open.
    let mut idle = q(at + HOUR);
    let mut now = at + HOUR;
    while now < at + 48 * HOUR {
        idle.horizon_ns = now;
        assert!(db.apply(&drafts, now, &idle).unwrap().changes.is_empty());
        now += 300_000_000_000;
    }
    // Traffic of the tool, clean, 24 hours after the storm: resolved.
    let mut busy = q(now);
    busy.traffic.insert("t".into(), at + 24 * HOUR);
    let out = db.apply(&drafts, now, &busy).unwrap();
    assert_eq!(
        out.changes,
        vec![(id, Some(Lifecycle::New), Lifecycle::Resolved)]
    );
}

#[test]
fn a_retry_after_success_of_a_read_only_tool_is_info() {
    let mut read = finding(
        Kind::RetryAfterSuccess,
        "get_booking",
        ErrorClass::Ok,
        DAY,
        2,
        "a",
    );
    read.read_only = true;
    let write = finding(
        Kind::RetryAfterSuccess,
        "book_flight",
        ErrorClass::Ok,
        DAY,
        2,
        "b",
    );
    let drafts = group(&[read, write], 10);
    let sev = |tool: &str| drafts.iter().find(|d| d.tool == tool).unwrap().severity();
    assert_eq!(sev("get_booking"), Severity::Info);
    assert_eq!(sev("book_flight"), Severity::Critical);
}

#[test]
fn a_spike_title_names_what_its_baseline_was() {
    let mut warm = finding(
        Kind::ErrorRateSpike,
        "quote_price",
        ErrorClass::InvalidRequest,
        DAY,
        14,
        "a",
    );
    warm.rate = 0.43;
    warm.baseline = 0.05;
    warm.errors = 6;
    warm.basis = Some("warm-up floor".into());
    let d = group(&[warm], 10);
    assert_eq!(
        d[0].title,
        "Error-rate spike: quote_price 43% vs 5% warm-up floor (6/14 calls, invalid request)"
    );
}
