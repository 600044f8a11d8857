use super::group::{key, short_id};
use super::*;
use crate::model::ErrorClass;

fn finding(
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
        }),
        calls: calls as u64,
        errors: calls as u64,
        rate: 0.0,
        baseline: 0.0,
    }
}

const DAY: i64 = 86_400_000_000_000;

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
    let out = db.apply(&d1, 2 * DAY, DAY + 100, 2).unwrap();
    assert_eq!(out.changes, vec![(id.clone(), None, Lifecycle::New)]);
    // The same sweep again: nothing changes.
    assert!(db
        .apply(&d1, 2 * DAY, DAY + 100, 2)
        .unwrap()
        .changes
        .is_empty());
    assert!(db
        .apply(&d1, 2 * DAY + 5, DAY + 100, 2)
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
        db.apply(&d2, 3 * DAY, DAY + 200, 2).unwrap().changes,
        vec![(id.clone(), Some(Lifecycle::New), Lifecycle::Ongoing)]
    );
    // Two sweeps over newer data without a new finding: resolved.
    assert!(db
        .apply(&d2, 4 * DAY, DAY + 300, 2)
        .unwrap()
        .changes
        .is_empty());
    assert_eq!(
        db.apply(&d2, 5 * DAY, DAY + 400, 2).unwrap().changes,
        vec![(id.clone(), Some(Lifecycle::Ongoing), Lifecycle::Resolved)]
    );
    // Old findings seen again do not reopen it; a newer one regresses it.
    assert!(db
        .apply(&d2, 6 * DAY, DAY + 500, 2)
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
        db.apply(&d3, 6 * DAY, 5 * DAY + 10, 2).unwrap().changes,
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
    db.apply(&d, 2 * DAY, DAY + 1, 2).unwrap();
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
        .apply(&group(&f2, 10), 3 * DAY, DAY + 10, 2)
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
    let out = db.apply(&group(&f2, 10), 4 * DAY, DAY + 20, 2).unwrap();
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
    db.apply(&d, 4 * DAY, 3 * DAY + 1, 2).unwrap();
    // The same data seen through a one-day window: one finding, same last
    // finding: no change, and the stored days are kept.
    let short = group(&all[1..], 10);
    assert!(db
        .apply(&short, 4 * DAY, 3 * DAY + 1, 2)
        .unwrap()
        .changes
        .is_empty());
    assert_eq!(db.get(&id).unwrap().draft.days.len(), 2);
    assert!(db
        .apply(&d, 4 * DAY, 3 * DAY + 1, 2)
        .unwrap()
        .changes
        .is_empty());
    // Muted until day 5; on day 6, with nothing found, the mute has ended.
    db.mute(&id, Some(5 * DAY), false, 4 * DAY).unwrap();
    let out = db.apply(&[], 6 * DAY, 3 * DAY + 2, 2).unwrap();
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
    db.apply(&d, 2 * DAY, DAY + 1, 2).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE signals SET draft = '{not json'", [])
        .unwrap();
    let err = db.list().unwrap_err().to_string();
    assert!(
        err.contains(&d[0].id) && err.contains("unreadable"),
        "{err}"
    );
    // A sweep fails loudly instead of inserting the key a second time.
    assert!(db.apply(&d, 3 * DAY, DAY + 2, 2).is_err());
}
