//! Control flow is not failure (docs/detection.md §3): a call a
//! human-in-the-loop interrupt stopped, or its user cancelled, is no
//! attempt of the per-turn rules — neither a failure that starts or
//! extends a chain, nor the success that ends one or that a repeat comes
//! after. It stays a span of its turn.

use super::calls;
use super::loops::{tool_loops, LoopParams};
use super::outcomes::per_tool_day;
use super::storm::{retry_storms, Outcome, StormParams};
use super::tests::{synthetic_with, Syn, FAR_FUTURE};
use super::{retries_after_success, wasted_retries};

/// One agent turn (trace `t`) calling `tool` once per class, each call
/// 100 ms, 50 ms apart, all with the same arguments.
fn turn(t: u8, tool: &'static str, classes: &[&'static str]) -> calls::TurnCalls {
    let mut spans: Vec<Syn> = vec![(t, 1, 0, true, "", 0, 600_000, "ok")];
    for (i, class) in classes.iter().enumerate() {
        let at = i as i64 * 150;
        spans.push((t, 10 + i as u8, 1, false, tool, at, at + 100, class));
    }
    let args: Vec<Option<&str>> = std::iter::once(None)
        .chain(classes.iter().map(|_| Some("same")))
        .collect();
    calls::collect(&synthetic_with(&spans, &args, &vec![None; spans.len()])).unwrap()
}

#[test]
fn an_interrupted_call_between_failures_neither_makes_nor_extends_a_chain() {
    // Four failures with three interrupts between them: four calls in the
    // rules, a chain of four, short of a storm (5). Were the interrupts
    // failures, it would be one chain of seven: a storm.
    let classes = [
        "unavailable",
        "interrupted",
        "unavailable",
        "cancelled",
        "unavailable",
        "interrupted",
        "unavailable",
    ];
    let tc = turn(1, "book_flight", &classes);
    assert_eq!(tc.calls.len(), 4, "{:?}", tc.calls);
    assert!(tc.calls.iter().all(|c| c.failed()));
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    // The turn still holds every span.
    assert_eq!(tc.turns.values().next().unwrap().spans, 8);
    // With a fifth failure the chain is a storm of five failures, the
    // interrupts in none of its counts.
    let tc = turn(
        2,
        "book_flight",
        &[&classes[..], &["interrupted", "unavailable"]].concat(),
    );
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms.len(), 1, "{storms:?}");
    assert_eq!((storms[0].calls, storms[0].failures), (5, 5));
    assert_eq!(storms[0].outcome, Outcome::GaveUp);
    assert!(!storms[0].classes.keys().any(|c| c.is_control_flow()));
}

#[test]
fn an_interrupt_neither_rescues_a_chain_nor_makes_a_repeat_after_success() {
    // Failures, then an interrupt: the chain gave up, it was not rescued.
    let tc = turn(
        3,
        "book_flight",
        &["unavailable", "unavailable", "interrupted"],
    );
    let day = crate::model::day_of_ns(tc.turns.values().next().unwrap().began_ns);
    let o = per_tool_day(&tc.calls, day, 1.5, |_| true);
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].retries, o[0].rescued, o[0].wasted), (1, 0, 1));
    // LangGraph's resume: the interrupted call, then the same call run
    // again and answered. Neither a retry nor a repeat after success.
    for classes in [
        &["interrupted", "ok"][..],
        &["cancelled", "ok"],
        &["interrupted", "interrupted", "ok"],
    ] {
        let tc = turn(4, "book_flight", classes);
        assert!(tc.calls.len() <= 1, "{classes:?}: {:?}", tc.calls);
        assert!(per_tool_day(&tc.calls, day, 1.5, |_| true).is_empty());
        assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
        assert!(wasted_retries(&tc.calls).is_empty());
        assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
        assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    }
    // A deterministic failure repeated around an interrupt is wasted once.
    let tc = turn(5, "book_flight", &["not_found", "interrupted", "not_found"]);
    let wasted = wasted_retries(&tc.calls);
    assert_eq!(wasted.len(), 1);
    assert_eq!(wasted[0].attempts, 2);
}

#[test]
fn a_tool_only_interrupted_in_a_turn_is_no_failing_turn() {
    let tc = turn(
        6,
        "book_flight",
        &["interrupted", "cancelled", "interrupted"],
    );
    assert!(tc.calls.is_empty());
    assert!(tc.failing.is_empty(), "{:?}", tc.failing);
}
