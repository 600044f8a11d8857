//! Remedies: each kind's answer, with the numbers and names its evidence
//! carries.

use super::*;
use crate::model::ErrorClass;

fn draft(kind: Kind, class: ErrorClass, evidence: Evidence) -> SignalDraft {
    let f = Finding {
        kind,
        tool: "search_flights".into(),
        class,
        at_ns: 0,
        day: 20_663,
        evidence: Some(evidence),
        calls: 15,
        errors: 15,
        rate: 0.0,
        baseline: 0.0,
        read_only: false,
        basis: None,
        silence: None,
    };
    group(&[f], 10).remove(0)
}

fn storm_turn() -> Evidence {
    Evidence {
        rhythm: Some("no_backoff".into()),
        turn_duration_s: Some(80.0),
        healthy_turn_duration_s: Some(8.1),
        same_args: Some(1.0),
        ..Evidence::turn("t1", "t1/root", 20_663, 15, 15)
    }
}

#[test]
fn a_storm_on_a_retryable_class_gets_a_cap_backoff_and_retry_after_with_its_numbers() {
    let d = draft(Kind::RetryStorm, ErrorClass::Unavailable, storm_turn());
    let r = remedy(&d, &["HTTP 503".into(), "UpstreamUnavailable".into()]);
    // Twice the healthy turn (8.1 s), rounded up.
    assert_eq!(
        r.summary,
        "Cap at 3 attempts or 17 s, exponential backoff with jitter, honour Retry-After."
    );
    assert!(r.cut_off.contains("15 calls in 80 s"), "{}", r.cut_off);
    assert!(
        r.waiting_fixes.contains("\"HTTP 503\""),
        "{}",
        r.waiting_fixes
    );
    assert!(
        r.waiting_fixes.contains("no backoff"),
        "{}",
        r.waiting_fixes
    );
    assert!(
        r.change.contains("100 % of its retries repeated"),
        "{}",
        r.change
    );
    // The sweep's grouping already attached one (without raw names).
    assert!(d.remedy.is_some());
}

#[test]
fn retries_of_a_deterministic_error_are_told_to_fail_fast_naming_the_raw_errors() {
    let e = Evidence {
        outcome: Some("gave_up".into()),
        ..Evidence::turn("t2", "t2/root", 20_663, 4, 4)
    };
    let d = draft(Kind::WastedRetries, ErrorClass::InvalidRequest, e);
    let r = remedy(&d, &["HTTP 422".into()]);
    assert!(r.summary.starts_with("Fail fast"), "{}", r.summary);
    assert!(r.summary.contains("\"HTTP 422\""), "{}", r.summary);
    assert!(r.cut_off.contains("3 retries"), "{}", r.cut_off);
    // A storm of a deterministic class is the same advice.
    let s = draft(Kind::RetryStorm, ErrorClass::Auth, storm_turn());
    assert!(remedy(&s, &[]).summary.starts_with("Fail fast"));
}

#[test]
fn a_retry_after_success_is_told_to_check_the_side_effect() {
    let d = draft(
        Kind::RetryAfterSuccess,
        ErrorClass::Ok,
        Evidence::turn("t3", "t3/root", 20_663, 2, 0),
    );
    let r = remedy(&d, &[]);
    assert!(r.summary.contains("idempotency key"), "{}", r.summary);
    assert!(r.change.contains("search_flights"), "{}", r.change);
}

#[test]
fn stacked_retries_are_told_to_keep_one_layer_naming_the_parents() {
    let e = Evidence {
        rhythm: Some("layers 3×3".into()),
        parents: vec!["aa01".into(), "aa02".into(), "aa03".into()],
        ..Evidence::turn("t4", "t4/root", 20_663, 9, 9)
    };
    let d = draft(Kind::StackedRetries, ErrorClass::Timeout, e);
    let r = remedy(&d, &[]);
    assert!(
        r.summary.starts_with("Keep one retry layer"),
        "{}",
        r.summary
    );
    assert!(
        r.summary.contains("\"aa01\", \"aa02\", \"aa03\""),
        "{}",
        r.summary
    );
    assert!(
        r.cut_off.contains("9 calls under 3 retrying parents"),
        "{}",
        r.cut_off
    );
}

#[test]
fn drafts_stored_before_remedies_read_as_having_none() {
    let d = draft(Kind::RetryStorm, ErrorClass::Unavailable, storm_turn());
    let mut v = serde_json::to_value(&d).unwrap();
    v.as_object_mut().unwrap().remove("remedy");
    let old: SignalDraft = serde_json::from_value(v).unwrap();
    assert!(old.remedy.is_none());
}
