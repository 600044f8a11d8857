//! The Retry-After kinds' words: `ignored_retry_after`'s title, severity
//! and remedy, and the storm of a rate limit whose gaps do not grow
//! ("unpaced").

use super::group::{group, Evidence, Finding, Kind, Severity};
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
