//! Ignored Retry-After (docs/detection.md §4.9): the pure rule — early,
//! honoured, the tolerance, `min_early`, `share` — and the stated wait
//! taken from a tool span's own column or from the failed HTTP client span
//! inside it; the storm's evidence carries the waits.

use polars::prelude::*;

use super::calls;
use super::chains::{rounds, Attempt};
use super::retry_after::{
    ignored_retry_after, stated_wait, waits, words, RetryAfterParams, RetryWait,
};
use super::storm::{retry_storms_with, StormParams};
use super::tests::{synthetic, Syn, FAR_FUTURE};
use crate::model::ErrorClass as C;

/// Attempts of 100 ms each, `gaps` ms apart; `wait` the stated wait of
/// every failure (ms).
fn attempts(classes: &[C], gaps: &[i64], wait: Option<i64>) -> Vec<Attempt<'static>> {
    let mut at = 0i64;
    let mut out = Vec::new();
    for (i, &class) in classes.iter().enumerate() {
        out.push(Attempt {
            class,
            args: Some("a"),
            result: None,
            start_ns: at * 1_000_000,
            end_ns: (at + 100) * 1_000_000,
            retry_after_ms: wait.filter(|_| class.is_failure()),
            wait_from_ns: None,
        });
        at += 100 + gaps.get(i).or(gaps.last()).copied().unwrap_or(0);
    }
    out
}

fn waits_of(a: &[Attempt<'_>], tolerance_ms: f64) -> Vec<RetryWait> {
    let rs = rounds(a);
    let chain = &super::chains::chains(&rs)[0];
    waits(a, &rs, chain.rounds.clone(), tolerance_ms)
}

#[test]
fn a_retry_200_ms_after_a_429_that_said_30_s_is_early() {
    let a = attempts(&[C::RateLimited; 4], &[200], Some(30_000));
    let w = waits_of(&a, 1000.0);
    assert_eq!(w.len(), 3);
    assert!(w
        .iter()
        .all(|w| w.early && w.stated_ms == 30_000 && w.gap_ms == 200.0));
    assert_eq!(w.iter().map(|w| w.retry).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(RetryAfterParams::default().ignored(&w));
}

#[test]
fn waits_of_30_then_60_s_honour_it() {
    let a = attempts(
        &[C::RateLimited, C::RateLimited, C::Ok],
        &[30_000, 60_000],
        Some(30_000),
    );
    let w = waits_of(&a, 1000.0);
    assert_eq!(w.len(), 2);
    assert!(w.iter().all(|w| !w.early), "{w:?}");
    assert!(!RetryAfterParams::default().ignored(&w));
}

#[test]
fn the_tolerance_forgives_a_retry_just_short_of_the_wait() {
    // 29.5 s after a 30 s wait: within a second.
    let a = attempts(&[C::RateLimited; 3], &[29_500], Some(30_000));
    assert!(waits_of(&a, 1000.0).iter().all(|w| !w.early));
    // With no tolerance it is early.
    assert!(waits_of(&a, 0.0).iter().all(|w| w.early));
    // 28 s is early either way.
    let a = attempts(&[C::RateLimited; 3], &[28_000], Some(30_000));
    assert!(waits_of(&a, 1000.0).iter().all(|w| w.early));
}

#[test]
fn min_early_and_share() {
    let p = RetryAfterParams::default();
    let w = |early: &[bool]| -> Vec<RetryWait> {
        early
            .iter()
            .enumerate()
            .map(|(i, &early)| RetryWait {
                retry: i + 1,
                stated_ms: 30_000,
                gap_ms: if early { 200.0 } else { 30_000.0 },
                early,
            })
            .collect()
    };
    // One early retry is not enough (min_early 2).
    assert!(!p.ignored(&w(&[true])));
    assert!(!p.ignored(&w(&[true, false])));
    // Two of three: more than half.
    assert!(p.ignored(&w(&[true, true, false])));
    // Two of four: not more than half.
    assert!(!p.ignored(&w(&[true, true, false, false])));
    assert!(!p.ignored(&[]));
    let strict = RetryAfterParams {
        min_early: 3,
        share: 0.0,
        ..Default::default()
    };
    assert!(!strict.ignored(&w(&[true, true])));
    assert!(strict.ignored(&w(&[true, true, true, false, false, false])));
}

#[test]
fn no_stated_wait_no_waits_and_a_success_states_none() {
    let a = attempts(&[C::RateLimited; 5], &[200], None);
    assert!(waits_of(&a, 1000.0).is_empty());
    // A parallel round: a failed call that states nothing beside a call
    // that succeeded with a wait set; the round failed, but only failed
    // calls state a wait: none.
    let mut a = attempts(&[C::RateLimited, C::Ok, C::RateLimited], &[200], None);
    a[1].start_ns = a[0].start_ns;
    a[1].end_ns = a[0].end_ns;
    a[1].retry_after_ms = Some(30_000);
    let rs = rounds(&a);
    assert_eq!(rs.len(), 2, "{rs:?}");
    assert!(rs[0].failed());
    assert!(waits_of(&a, 1000.0).is_empty());
}

/// B1: the wait counts from the end of the span that stated it. Calls of
/// 5 s whose HTTP child said 3 s in their first 100 ms: the wait was over
/// (at 3.1 s) long before the call ended, so a retry 200 ms after the call
/// honours it — and the gap is from the child's end.
#[test]
fn a_wait_counts_from_the_end_of_the_span_that_stated_it() {
    let mut a = attempts(&[C::Timeout; 4], &[200], Some(3_000));
    for x in a.iter_mut() {
        x.end_ns = x.start_ns + 5_000_000_000;
        x.wait_from_ns = Some(x.start_ns + 100_000_000);
    }
    // Re-space: each retry 200 ms after the previous call's end.
    for k in 1..a.len() {
        let s = a[k - 1].end_ns + 200_000_000;
        a[k].start_ns = s;
        a[k].end_ns = s + 5_000_000_000;
        a[k].wait_from_ns = Some(s + 100_000_000);
    }
    let w = waits_of(&a, 1000.0);
    assert_eq!(w.len(), 3);
    assert!(w.iter().all(|w| !w.early && w.gap_ms == 5_100.0), "{w:?}");
    // The call's own wait (no stating child) counts from its own end.
    for x in a.iter_mut() {
        x.wait_from_ns = None;
    }
    let w = waits_of(&a, 1000.0);
    assert!(w.iter().all(|w| w.early && w.gap_ms == 200.0), "{w:?}");
}

/// B1: a round's deadline is the latest of its failed calls'.
#[test]
fn a_rounds_deadline_is_its_latest() {
    let mut a = attempts(
        &[C::RateLimited, C::RateLimited, C::RateLimited],
        &[2_000],
        None,
    );
    // Round 0: two parallel calls; one said 10 s from its end (0.1 s), the
    // other 1 s from a child that ended at 0.05 s.
    a[1].start_ns = a[0].start_ns;
    a[1].end_ns = a[0].end_ns;
    a[0].retry_after_ms = Some(10_000);
    a[1].retry_after_ms = Some(1_000);
    a[1].wait_from_ns = Some(50_000_000);
    a[2].start_ns = 3_000_000_000;
    a[2].end_ns = 3_100_000_000;
    let w = waits_of(&a, 1000.0);
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].stated_ms, w[0].gap_ms, w[0].early),
        (10_000, 2_900.0, true)
    );
}

#[test]
fn the_stated_wait_is_one_that_was_stated() {
    let w = |ms: &[i64]| -> Vec<RetryWait> {
        ms.iter()
            .enumerate()
            .map(|(i, &m)| RetryWait {
                retry: i + 1,
                stated_ms: m,
                gap_ms: 0.0,
                early: true,
            })
            .collect()
    };
    assert_eq!(stated_wait(&w(&[60_000, 30_000])), Some(30_000));
    assert_eq!(stated_wait(&w(&[30_000, 60_000, 60_000])), Some(60_000));
    assert_eq!(stated_wait(&[]), None);
}

#[test]
fn the_parameters_are_range_checked() {
    assert_eq!(RetryAfterParams::default().problem(), None);
    let bad = |p: RetryAfterParams| p.problem().map(|(k, _)| k);
    let d = RetryAfterParams::default;
    assert_eq!(
        bad(RetryAfterParams {
            min_early: 0,
            ..d()
        }),
        Some("min_early")
    );
    assert_eq!(bad(RetryAfterParams { share: 1.0, ..d() }), Some("share"));
    assert_eq!(bad(RetryAfterParams { share: -0.1, ..d() }), Some("share"));
    assert_eq!(
        bad(RetryAfterParams {
            share: f64::NAN,
            ..d()
        }),
        Some("share")
    );
    assert_eq!(
        bad(RetryAfterParams {
            tolerance_ms: -1.0,
            ..d()
        }),
        Some("tolerance_ms")
    );
    assert_eq!(
        bad(RetryAfterParams {
            tolerance_ms: 1e9,
            ..d()
        }),
        Some("tolerance_ms")
    );
}

#[test]
fn waits_in_words() {
    assert_eq!(words(250), "250 ms");
    assert_eq!(words(1500), "1.5 s");
    assert_eq!(words(30_000), "30 s");
    assert_eq!(words(120_000), "2 min");
    assert_eq!(words(5_400_000), "90 min");
    assert_eq!(words(86_400_000), "24 h");
    assert_eq!(words(9_000_000), "2.5 h");
}

/// A frame of `spans` with a `retry_after_ms` per span.
fn frame(spans: &[Syn], waits: &[Option<i64>]) -> DataFrame {
    let mut df = synthetic(spans);
    df.with_column(Column::new("retry_after_ms".into(), waits.to_vec()))
        .unwrap();
    df
}

/// An agent turn: `fare_search` called `n` times, each 100 ms, `gap` ms
/// apart, each failing with 429 on an HTTP client span inside it that
/// says Retry-After 30 s (the tool span itself states nothing).
fn fare_turn(n: u8, gap: i64) -> (Vec<Syn>, Vec<Option<i64>>) {
    let mut spans: Vec<Syn> = vec![(1, 1, 0, true, "", 0, 3_600_000, "ok")];
    let mut waits = vec![None];
    let mut at = 0;
    for i in 0..n {
        let id = 10 + 2 * i;
        spans.push((1, id, 1, false, "fare_search", at, at + 100, "rate_limited"));
        waits.push(None);
        spans.push((1, id + 1, id, false, "", at + 10, at + 90, "rate_limited"));
        waits.push(Some(30_000));
        at += 100 + gap;
    }
    (spans, waits)
}

#[test]
fn the_wait_of_the_http_child_inside_the_call_is_the_calls() {
    let (spans, w) = fare_turn(17, 400);
    let tc = calls::collect(&frame(&spans, &w)).unwrap();
    assert_eq!(tc.calls.len(), 17);
    assert!(tc.calls.iter().all(|c| c.retry_after_ms == Some(30_000)));
    let found = ignored_retry_after(&tc, FAR_FUTURE, 90, &RetryAfterParams::default());
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!((f.rounds, f.early(), f.waits.len()), (17, 16, 16));
    assert_eq!((f.class, f.stated_ms), (C::RateLimited, 30_000));
    // The storm the same chain is carries the waits as evidence.
    let storms = retry_storms_with(
        &tc,
        FAR_FUTURE,
        &StormParams::default(),
        1000.0,
        &Default::default(),
    );
    assert_eq!(storms.len(), 1);
    assert_eq!(storms[0].waits, f.waits);
    // Honoured (31 s apart): nothing.
    let (spans, w) = fare_turn(5, 31_000);
    let tc = calls::collect(&frame(&spans, &w)).unwrap();
    assert!(ignored_retry_after(&tc, FAR_FUTURE, 90, &RetryAfterParams::default()).is_empty());
}

#[test]
fn a_child_outside_the_call_or_that_did_not_fail_states_nothing() {
    let (mut spans, mut w) = fare_turn(3, 400);
    // The first call's child ends after its call; the second's succeeded.
    spans[2].6 += 50;
    spans[4].7 = "ok";
    // The third call's own span states 5 s: its own wins over its child's.
    w[5] = Some(5_000);
    let tc = calls::collect(&frame(&spans, &w)).unwrap();
    let got: Vec<Option<i64>> = tc.calls.iter().map(|c| c.retry_after_ms).collect();
    assert_eq!(got, vec![None, None, Some(5_000)]);
    // A frame without the column (parts written before it): none.
    let tc = calls::collect(&synthetic(&spans)).unwrap();
    assert!(tc.calls.iter().all(|c| c.retry_after_ms.is_none()));
}

#[test]
fn an_unsettled_turn_is_not_judged() {
    let (spans, w) = fare_turn(5, 200);
    let tc = calls::collect(&frame(&spans, &w)).unwrap();
    let last_end = tc.turns.values().map(|t| t.last_end_ns).max().unwrap();
    assert!(ignored_retry_after(&tc, last_end + 1, 90, &RetryAfterParams::default()).is_empty());
    assert_eq!(
        ignored_retry_after(
            &tc,
            last_end + 91_000_000_000,
            90,
            &RetryAfterParams::default()
        )
        .len(),
        1
    );
}

/// B1: a tool that sleeps the 3 s Retry-After of its HTTP child out
/// inside itself, then fails otherwise (a timeout after 5 s): a retry
/// 200 ms after it is not early — the wait was over at 3.1 s.
#[test]
fn a_tool_that_slept_out_the_wait_inside_itself_is_not_early() {
    let mut spans: Vec<Syn> = vec![(1, 1, 0, true, "", 0, 3_600_000, "ok")];
    let mut waits = vec![None];
    let mut at = 0;
    for i in 0..5u8 {
        let id = 10 + 2 * i;
        spans.push((1, id, 1, false, "fare_search", at, at + 5_000, "timeout"));
        waits.push(None);
        spans.push((1, id + 1, id, false, "", at + 10, at + 100, "rate_limited"));
        waits.push(Some(3_000));
        at += 5_000 + 200;
    }
    let tc = calls::collect(&frame(&spans, &waits)).unwrap();
    assert!(tc.calls.iter().all(|c| c.retry_after_ms == Some(3_000)));
    assert!(tc
        .calls
        .iter()
        .all(|c| c.wait_from_ns == Some(c.start_ns + 100_000_000)));
    assert!(ignored_retry_after(&tc, FAR_FUTURE, 90, &RetryAfterParams::default()).is_empty());
}

/// B3: a wait stated on a failure no wait fixes (a `retry_after` echoed in
/// a 400's body, a 401) is no wait, on the call's own span or its child.
#[test]
fn a_wait_on_a_failure_waiting_cannot_fix_is_none() {
    let (mut spans, mut w) = fare_turn(3, 400);
    spans[2].7 = "invalid_request";
    spans[3].7 = "auth";
    w[3] = Some(30_000);
    spans[4].7 = "client_error";
    spans[5].7 = "server_error";
    let tc = calls::collect(&frame(&spans, &w)).unwrap();
    let got: Vec<Option<i64>> = tc.calls.iter().map(|c| c.retry_after_ms).collect();
    assert_eq!(got, vec![None, None, Some(30_000)]);
}

/// A client that waits out every stated wait is paced by the server: when
/// it ends ok that is no storm (like growing backoff that recovers); when
/// it never succeeds it still is one (it gave up), and not early anywhere.
#[test]
fn honouring_every_stated_wait_and_recovering_is_no_storm() {
    let storms_of = |spans: &[Syn], w: &[Option<i64>]| {
        let tc = calls::collect(&frame(spans, w)).unwrap();
        retry_storms_with(
            &tc,
            FAR_FUTURE,
            &StormParams::default(),
            1000.0,
            &Default::default(),
        )
    };
    // Six 429s saying 30 s, each retried 31 s later, then a success.
    let (mut spans, mut w) = fare_turn(6, 31_000);
    let at = 6 * (100 + 31_000);
    spans.push((1, 99, 1, false, "fare_search", at, at + 100, "ok"));
    w.push(None);
    assert!(storms_of(&spans, &w).is_empty());
    // The same, never a success: a storm that gave up, every wait honoured.
    let (spans, w) = fare_turn(6, 31_000);
    let storms = storms_of(&spans, &w);
    assert_eq!(storms.len(), 1, "{storms:?}");
    assert_eq!(storms[0].outcome, super::storm::Outcome::GaveUp);
    assert_eq!(storms[0].waits.len(), 5);
    assert!(storms[0].waits.iter().all(|w| !w.early));
    // One retry early (200 ms) among them, then a success: a storm.
    let (mut spans, mut w) = fare_turn(6, 31_000);
    let shift = 31_000 - 200;
    for s in spans.iter_mut().filter(|s| s.5 >= 31_100) {
        s.5 -= shift;
        s.6 -= shift;
    }
    let at = 6 * (100 + 31_000) - shift;
    spans.push((1, 99, 1, false, "fare_search", at, at + 100, "ok"));
    w.push(None);
    assert_eq!(storms_of(&spans, &w).len(), 1);
}
