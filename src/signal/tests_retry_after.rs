//! The Retry-After kinds' words: `ignored_retry_after`'s title, severity
//! and remedy, and the storm of a rate limit whose gaps do not grow
//! ("unpaced"; not when it honoured every stated wait).

use super::{group, Evidence, Finding, Kind, Severity};
use crate::detect::RetryWait;
use crate::model::ErrorClass;

fn evidence(rounds: usize, rhythm: &str, waits: Vec<RetryWait>) -> Evidence {
    Evidence {
        rhythm: Some(rhythm.to_string()),
        outcome: Some("gave_up".to_string()),
        waits,
        ..Evidence::turn("aa", "aa/root", 20_667, rounds, rounds)
    }
}

fn finding(kind: Kind, class: ErrorClass, rounds: usize, e: Evidence, stated_ms: f64) -> Finding {
    Finding {
        kind,
        tool: "fare_search".into(),
        class,
        at_ns: 1_785_679_320_000_000_000,
        day: 20_667,
        evidence: Some(e),
        calls: rounds as u64,
        errors: rounds as u64,
        rate: 0.0,
        baseline: stated_ms,
        read_only: false,
        basis: None,
        silence: None,
    }
}

fn early_waits(n: usize) -> Vec<RetryWait> {
    (1..=n)
        .map(|retry| RetryWait {
            retry,
            stated_ms: 30_000,
            gap_ms: 400.0,
            early: retry > 1,
        })
        .collect()
}

#[test]
fn ignored_retry_after_is_critical_and_says_the_wait() {
    let f = finding(
        Kind::IgnoredRetryAfter,
        ErrorClass::RateLimited,
        18,
        evidence(18, "16 of 17 retries early", early_waits(17)),
        30_000.0,
    );
    let d = &group(&[f], 10)[0];
    assert_eq!(d.key, "v1:ignored_retry_after:fare_search:rate_limited");
    assert_eq!(
        d.title,
        "Ignored Retry-After: fare_search retried 17× ignoring Retry-After: 30 s (16 of 17 retries early, rate limited)"
    );
    assert_eq!(d.severity(), Severity::Critical);
    assert_eq!(d.evidence[0].waits.len(), 17);
    let r = d.remedy.as_ref().unwrap();
    assert!(r.waiting_fixes.contains("Retry-After 30 s"), "{r:?}");
    assert!(r.waiting_fixes.contains("16 of 17 retries"), "{r:?}");
    assert!(r.cut_off.contains("latch"), "{r:?}");
    assert!(r.change.contains("Honour Retry-After"), "{r:?}");
    assert!(r.change.contains("jitter"), "{r:?}");
    // The waits go out in the JSON, and come back.
    let json = serde_json::to_value(&d.evidence[0]).unwrap();
    assert_eq!(json["waits"][1]["early"], true);
    assert_eq!(json["waits"][1]["stated_ms"], 30_000);
    let back: Evidence = serde_json::from_value(json).unwrap();
    assert_eq!(back, d.evidence[0]);
}

#[test]
fn a_rate_limited_storm_whose_gaps_do_not_grow_is_unpaced() {
    let storm = |class, rhythm: &str| {
        let f = finding(
            Kind::RetryStorm,
            class,
            17,
            evidence(17, rhythm, vec![]),
            0.0,
        );
        group(&[f], 10)[0].title.clone()
    };
    assert_eq!(
        storm(ErrorClass::RateLimited, "no_backoff"),
        "Retry storm: fare_search ×17 in one turn (rate limited, unpaced, no backoff)"
    );
    assert_eq!(
        storm(ErrorClass::RateLimited, "fixed"),
        "Retry storm: fare_search ×17 in one turn (rate limited, unpaced, fixed)"
    );
    // Growing gaps are paced; other classes never say it.
    assert_eq!(
        storm(ErrorClass::RateLimited, "exponential"),
        "Retry storm: fare_search ×17 in one turn (rate limited, exponential)"
    );
    assert_eq!(
        storm(ErrorClass::Unavailable, "no_backoff"),
        "Retry storm: fare_search ×17 in one turn (unavailable, no backoff)"
    );
}

/// B4: "unpaced" only for a rhythm that does not change (no backoff,
/// fixed) whose stated waits were not all honoured: six 429s honoured at
/// 31 s are paced; an irregular rhythm is not "unpaced".
#[test]
fn a_storm_that_honoured_every_stated_wait_is_not_unpaced() {
    let honoured: Vec<RetryWait> = (1..=5)
        .map(|retry| RetryWait {
            retry,
            stated_ms: 30_000,
            gap_ms: 31_000.0,
            early: false,
        })
        .collect();
    let storm = |rhythm: &str, waits: Vec<RetryWait>| {
        let f = finding(
            Kind::RetryStorm,
            ErrorClass::RateLimited,
            6,
            evidence(6, rhythm, waits),
            0.0,
        );
        group(&[f], 10)[0].title.clone()
    };
    assert_eq!(
        storm("fixed", honoured.clone()),
        "Retry storm: fare_search ×6 in one turn (rate limited, fixed)"
    );
    assert_eq!(
        storm("no_backoff", honoured),
        "Retry storm: fare_search ×6 in one turn (rate limited, no backoff)"
    );
    assert_eq!(
        storm("irregular", vec![]),
        "Retry storm: fare_search ×6 in one turn (rate limited, irregular)"
    );
    // One early retry among them: unpaced.
    assert_eq!(
        storm("fixed", early_waits(5)),
        "Retry storm: fare_search ×6 in one turn (rate limited, unpaced, fixed)"
    );
}

/// B5: the title and the remedy name the same wait, one that was stated
/// (30 s and 60 s: 30 s, never "45 s"), from the same evidence turn.
#[test]
fn the_title_and_the_remedy_name_the_same_stated_wait() {
    let waits = |ms: [i64; 4]| -> Vec<RetryWait> {
        ms.iter()
            .enumerate()
            .map(|(i, &stated_ms)| RetryWait {
                retry: i + 1,
                stated_ms,
                gap_ms: 200.0,
                early: true,
            })
            .collect()
    };
    // Two turns of 5 rounds; the second has a different wait and fewer
    // early retries: the first is the worst.
    let a = finding(
        Kind::IgnoredRetryAfter,
        ErrorClass::RateLimited,
        5,
        evidence(
            5,
            "4 of 4 retries early",
            waits([30_000, 60_000, 30_000, 60_000]),
        ),
        45_000.0,
    );
    let mut eb = evidence(5, "3 of 4 retries early", waits([120_000; 4]));
    eb.trace_id = "00".into();
    eb.waits[0].early = false;
    let b = finding(
        Kind::IgnoredRetryAfter,
        ErrorClass::RateLimited,
        5,
        eb,
        120_000.0,
    );
    for fs in [vec![a.clone(), b.clone()], vec![b, a]] {
        let d = &group(&fs, 1)[0];
        assert!(
            d.title
                .contains("ignoring Retry-After: 30 s (4 of 4 retries early"),
            "{}",
            d.title
        );
        let r = d.remedy.as_ref().unwrap();
        assert!(r.waiting_fixes.contains("Retry-After 30 s"), "{r:?}");
        assert!(r.waiting_fixes.contains("4 of 4 retries"), "{r:?}");
    }
}
