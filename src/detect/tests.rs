//! Tests of the daily rules: the spike judgement over daily rows.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::error_spike::{baseline, is_spike};
use super::*;
use crate::model::{day_from_str, day_to_string};

fn row(day: i32, calls: u64, errors: u64) -> DailyRow {
    DailyRow {
        tool: "search_flights".into(),
        service: "travel-agent".into(),
        day,
        calls,
        errors,
        p50_ns: 900e6,
        p95_ns: 2e9,
        classes: Default::default(),
        ..Default::default()
    }
}

/// Consecutive days from `start` with (calls, errors).
fn series(start: &str, days: &[(u64, u64)]) -> Vec<DailyRow> {
    let d0 = day_from_str(start).unwrap();
    days.iter()
        .enumerate()
        .map(|(i, (c, e))| row(d0 + i as i32, *c, *e))
        .collect()
}

fn flagged_days(rows: &[DailyRow]) -> Vec<String> {
    let today = rows.iter().map(|r| r.day).max().unwrap_or(0) + 1;
    judge(rows, today, &BTreeSet::new(), &SpikeParams::default())
        .into_iter()
        .filter(|v| v.flagged)
        .map(|v| day_to_string(v.day))
        .collect()
}

/// detection.md §5: the search_flights history, Jul 7 - Aug 5.
pub fn seed_history() -> Vec<DailyRow> {
    let early = [5, 8, 10, 6, 7, 9, 5, 8, 6, 7, 10, 5, 9, 6, 8, 7, 5, 9, 6];
    let mut days: Vec<(u64, u64)> = early
        .iter()
        .enumerate()
        // One error on every fourth day: Jul 10, 14, 18, 22.
        .map(|(i, c)| (*c, u64::from(matches!(i, 3 | 7 | 11 | 15))))
        .collect();
    days.extend([
        (5, 0),   // Jul 26
        (10, 1),  // Jul 27
        (9, 1),   // Jul 28
        (62, 53), // Jul 29
        (7, 2),   // Jul 30
        (5, 0),   // Jul 31
        (6, 0),   // Aug 1
        (7, 0),   // Aug 2
        (5, 0),   // Aug 3
        (11, 6),  // Aug 4
        (11, 6),  // Aug 5
    ]);
    series("2026-07-07", &days)
}

#[test]
fn the_seed_history_flags_jul_29_and_aug_4_and_5_only() {
    assert_eq!(
        flagged_days(&seed_history()),
        vec!["2026-07-29", "2026-08-04", "2026-08-05"]
    );
}

#[test]
fn aug_4_is_judged_against_the_week_without_jul_29() {
    let rows = seed_history();
    let aug4 = day_from_str("2026-08-04").unwrap();
    let v = judge(&rows, aug4 + 2, &BTreeSet::new(), &SpikeParams::default())
        .into_iter()
        .find(|v| v.day == aug4)
        .unwrap();
    assert_eq!(v.basis, Basis::Trailing);
    assert!(!v
        .baseline_days
        .contains(&day_from_str("2026-07-29").unwrap()));
    assert!(
        (v.baseline - 3.0 / 39.0).abs() < 1e-9,
        "baseline {}",
        v.baseline
    );
    assert!(
        (v.lower_bound - 0.315).abs() < 0.0015,
        "lower bound {}",
        v.lower_bound
    );
    assert!((v.threshold - 0.231).abs() < 0.001);
    assert!(v.flagged);
}

#[test]
fn jul_29_carries_volume_and_latency_context() {
    let mut rows = seed_history();
    let jul29 = day_from_str("2026-07-29").unwrap();
    for r in rows.iter_mut().filter(|r| r.day == jul29) {
        r.p50_ns = 5.12e9;
    }
    let v = judge(&rows, jul29 + 1, &BTreeSet::new(), &SpikeParams::default())
        .into_iter()
        .find(|v| v.day == jul29)
        .unwrap();
    assert!(v.flagged);
    assert!(v.volume_ratio.unwrap() > 6.0, "{:?}", v.volume_ratio);
    assert!(v.p50_ratio.unwrap() > 5.0, "{:?}", v.p50_ratio);
}

#[test]
fn only_complete_days_are_judged() {
    let rows = seed_history();
    let aug5 = day_from_str("2026-08-05").unwrap();
    let verdicts = judge(&rows, aug5, &BTreeSet::new(), &SpikeParams::default());
    assert!(verdicts.iter().all(|v| v.day < aug5));
}

#[test]
fn baseline_edge_cases_from_detection_md() {
    // A tool whose normal rate is 5 % every day is not flagged after warm-up.
    let steady: Vec<(u64, u64)> = (0..30).map(|_| (100, 5)).collect();
    assert!(flagged_days(&series("2026-06-01", &steady)).is_empty());
    // A rarely used tool at a steady 2 %: 8 errors in 170 calls on a bad-looking day.
    let mut rare: Vec<(u64, u64)> = (0..14).map(|_| (50, 1)).collect();
    rare.push((170, 8));
    assert!(flagged_days(&series("2026-06-01", &rare)).is_empty());
    // A new tool failing 50 % on its first day is flagged.
    assert_eq!(
        flagged_days(&series("2026-06-01", &[(20, 10)])),
        vec!["2026-06-01"]
    );
    // 5 errors in 10 calls against a 7 % baseline still pages.
    let mut seven: Vec<(u64, u64)> = (0..7).map(|_| (100, 7)).collect();
    seven.push((10, 5));
    assert_eq!(
        flagged_days(&series("2026-06-01", &seven)),
        vec!["2026-06-08"]
    );
}

#[test]
fn negative_cases_are_not_flagged() {
    // One error in two calls.
    let mut tiny: Vec<(u64, u64)> = (0..7).map(|_| (20, 0)).collect();
    tiny.push((2, 1));
    assert!(flagged_days(&series("2026-06-01", &tiny)).is_empty());
    // A busy tool whose volume triples at a flat error rate.
    let mut busy: Vec<(u64, u64)> = (0..7).map(|_| (1000, 20)).collect();
    busy.push((3000, 60));
    assert!(flagged_days(&series("2026-06-01", &busy)).is_empty());
}

#[test]
fn a_normal_rate_above_the_threshold_is_not_flagged_forever() {
    // A tool failing 30 % from its first day: flagged in warm-up, then its
    // own (flagged) days become the baseline and it stops paging.
    let high: Vec<(u64, u64)> = (0..40).map(|_| (100, 30)).collect();
    assert_eq!(
        flagged_days(&series("2026-01-01", &high)),
        vec!["2026-01-01", "2026-01-02", "2026-01-03"]
    );
    // A tool that drops from 1 % to a permanent 30 %: flagged while unflagged
    // days remain within reach (28 days), then the new rate is the normal.
    let mut shift: Vec<(u64, u64)> = (0..3).map(|_| (100, 1)).collect();
    shift.extend((0..60).map(|_| (100, 30)));
    let flagged = flagged_days(&series("2026-01-01", &shift));
    assert_eq!(flagged.first().map(String::as_str), Some("2026-01-04"));
    assert_eq!(flagged.last().map(String::as_str), Some("2026-01-29"));
    assert_eq!(flagged.len(), 26);
}

#[test]
fn wilson_lower_bound_matches_known_values() {
    let z = wilson::z_one_sided(0.95);
    assert!((z - 1.644_853_6).abs() < 1e-6);
    assert!((wilson::lower_bound(6, 11, z) - 0.3148).abs() < 5e-4);
    assert!((wilson::lower_bound(5, 10, z) - 0.2693).abs() < 5e-4);
    assert_eq!(wilson::lower_bound(0, 0, z), 0.0);
    assert!(wilson::lower_bound(10, 10, z) < 1.0);
}

fn arb_series() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..200, 0u64..200), 0..20)
        .prop_map(|v| v.into_iter().map(|(c, e)| (c, e.min(c))).collect())
}

proptest! {
    /// The baseline is never below the floor, and a tool with fewer than
    /// three days of history is judged against the warm-up floor.
    #[test]
    fn baseline_floor_and_warmup(days in arb_series(), flags in prop::collection::btree_set(0i32..25, 0..6)) {
        let rows = series("2026-01-01", &days);
        let refs: Vec<&DailyRow> = rows.iter().collect();
        let p = SpikeParams::default();
        let d0 = day_from_str("2026-01-01").unwrap();
        let flags: BTreeSet<i32> = flags.into_iter().map(|f| d0 + f).collect();
        for d in d0..d0 + 22 {
            let (b, basis, pool) = baseline(&refs, d, &flags, &p);
            prop_assert!(b >= p.baseline_floor);
            let history = rows.iter().filter(|r| r.day < d && r.calls > 0).count();
            if history < 3 {
                prop_assert_eq!(basis, Basis::Warmup);
                prop_assert_eq!(b, p.warmup_floor);
            }
            if basis == Basis::Trailing || basis == Basis::ReachBack {
                // Flagged days never feed a trailing or reach-back baseline.
                prop_assert!(pool.iter().all(|d| !flags.contains(d)));
                prop_assert!(pool.len() >= 3);
            }
            prop_assert!(pool.iter().all(|p| *p < d));
        }
    }

    /// A flagged day's errors do not move the next day's baseline when
    /// enough unflagged days remain.
    #[test]
    fn flagged_days_are_left_out(normal in prop::collection::vec((10u64..100, 0u64..3), 7), spike_errors in 0u64..1000) {
        let mut days = normal.clone();
        days.push((1000, spike_errors));
        let rows = series("2026-01-01", &days);
        let refs: Vec<&DailyRow> = rows.iter().collect();
        let d0 = day_from_str("2026-01-01").unwrap();
        let spike_day = d0 + 7;
        let p = SpikeParams::default();
        let flags: BTreeSet<i32> = [spike_day].into();
        let (with_spike, basis, _) = baseline(&refs, spike_day + 1, &flags, &p);
        let (without, _, _) = baseline(&refs[..7], spike_day + 1, &BTreeSet::new(), &p);
        prop_assert_eq!(basis, Basis::Trailing);
        prop_assert!((with_spike - without).abs() < 1e-12);
    }

    /// The multiplier is strict: a lower bound exactly at the threshold does
    /// not flag (multiplier 2, so the threshold is exact in binary).
    #[test]
    fn the_multiplier_is_strict(calls in 10u64..500, errors in 3u64..500) {
        let errors = errors.min(calls);
        let p = SpikeParams { multiplier: 2.0, ..SpikeParams::default() };
        let z = wilson::z_one_sided(p.confidence);
        let lower = wilson::lower_bound(errors, calls, z);
        let at = lower / p.multiplier;
        prop_assert!(!is_spike(errors, calls, at, &p).0);
        prop_assert_eq!(is_spike(errors, calls, at * 0.999, &p).0, lower > 0.0);
    }
}

// ---- turns, storms and retries, on the seeds' fixtures and small cases ----

use super::calls::{self, TurnCalls};
use super::storm::{retry_storms, rhythm, Outcome, Rhythm, StormParams};
use super::{retries_after_success, wasted_retries};
use polars::prelude::*;

/// A fixture file, through the real decoder and normalizer, as a frame.
pub(super) fn fixture_frame(name: &str) -> DataFrame {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let req = crate::ingest::json::decode(&std::fs::read(path).unwrap()).unwrap();
    crate::store::frame::batch_to_frame(&crate::ingest::normalize(&req).batch).unwrap()
}

pub(super) fn fixture_calls(name: &str) -> TurnCalls {
    calls::collect(&fixture_frame(name)).unwrap()
}

pub(super) const FAR_FUTURE: i64 = i64::MAX / 2;

#[test]
fn the_four_jul_29_storms_are_no_backoff_and_gave_up() {
    let tc = fixture_calls("storms_jul29.json");
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms.len(), 4, "{storms:#?}");
    assert_eq!(storms.iter().map(|s| s.calls).sum::<usize>(), 53);
    for s in &storms {
        assert_eq!(s.tool, "search_flights");
        assert_eq!(s.rhythm, Rhythm::NoBackoff, "{s:?}");
        assert_eq!(s.outcome, Outcome::GaveUp);
        assert_eq!(s.failures, s.calls);
        assert_eq!(
            s.classes.get(&crate::model::ErrorClass::Unavailable),
            Some(&s.calls)
        );
        assert!(s.median_gap_ms < 100.0);
        assert!(s.wasted_seconds > 40.0, "{s:?}");
    }
    let bruno = storms
        .iter()
        .find(|s| s.session_id.as_deref() == Some("sess-bruno-0729-b"))
        .unwrap();
    assert_eq!(bruno.calls, 15);
    assert_eq!(bruno.rounds, 15);
    assert!(
        (bruno.turn_duration_s - 98.0).abs() < 1.0,
        "{}",
        bruno.turn_duration_s
    );
    // Fourteen retries after the first 503, and the gaps before them, all wasted.
    let expected: f64 = [
        5.6, 3.7, 6.4, 8.4, 6.5, 3.5, 5.6, 8.6, 5.7, 4.6, 3.6, 9.0, 2.5, 7.9,
    ]
    .iter()
    .sum();
    assert!(
        (bruno.wasted_seconds - expected).abs() < 1.0,
        "{} vs {expected}",
        bruno.wasted_seconds
    );
}

#[test]
fn storm_evidence_compares_with_the_median_healthy_turn() {
    let tc = fixture_calls("search_flights_history.json");
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    // The four of Jul 29, and the recovered bursts of Aug 4 and Aug 5.
    let days: Vec<String> = storms.iter().map(|s| day_to_string(s.day)).collect();
    assert_eq!(
        days.iter().filter(|d| *d == "2026-07-29").count(),
        4,
        "{days:?}"
    );
    assert_eq!(storms.len(), 6, "{days:?}");
    let recovered: Vec<_> = storms
        .iter()
        .filter(|s| s.outcome == Outcome::Recovered)
        .collect();
    assert_eq!(recovered.len(), 2);
    let bruno = storms
        .iter()
        .find(|s| s.session_id.as_deref() == Some("sess-bruno-0729-b"))
        .unwrap();
    let healthy_s = bruno.healthy_turn_duration_s.unwrap();
    let healthy_spans = bruno.healthy_turn_spans.unwrap();
    assert!((healthy_s - 8.1).abs() < 1.0, "healthy turn {healthy_s} s");
    assert_eq!(healthy_spans, 3.0);
    assert!(bruno.turn_duration_s / healthy_s > 10.0);
    assert!(bruno.turn_spans >= 16);
}

#[test]
fn the_fixed_retry_loop_produces_nothing() {
    let tc = fixture_calls("fixed_loop.json");
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    assert!(wasted_retries(&tc.calls).is_empty());
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
}

#[test]
fn the_retry_gate_cases() {
    let tc = fixture_calls("retry_gate.json");
    // 429 / 503 retries that recover, and retries of 400 / 410 only (wasted
    // retries, §4.3): no storm.
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    let wasted = wasted_retries(&tc.calls);
    let mut found: Vec<(String, &str, usize)> = wasted
        .iter()
        .map(|w| (w.tool.clone(), w.class.as_str(), w.attempts))
        .collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            ("book_flight".to_string(), "not_found", 5),
            ("quote_price".to_string(), "invalid_request", 5)
        ]
    );
    // Backoff of 1 + 2 + 4 + 8 s is wasted on top of the four retries' durations.
    assert!(wasted.iter().all(|w| w.wasted_seconds > 15.0), "{wasted:?}");
    let doubles = retries_after_success(&tc.calls, 1.5, |_| false);
    assert_eq!(doubles.len(), 1, "{doubles:?}");
    assert_eq!(doubles[0].tool, "book_flight");
    assert_eq!(doubles[0].repeats, 1);
}

/// A synthetic span: (trace byte, span byte, parent byte or 0, is agent,
/// tool or "", start ms, end ms, class).
pub(super) type Syn = (u8, u8, u8, bool, &'static str, i64, i64, &'static str);

pub(super) fn synthetic(spans: &[Syn]) -> DataFrame {
    synthetic_with(
        spans,
        &vec![Some("same"); spans.len()],
        &vec![None; spans.len()],
    )
}

/// [`synthetic`] with each span's arguments and result hash given.
pub(super) fn synthetic_with(
    spans: &[Syn],
    args: &[Option<&str>],
    results: &[Option<&str>],
) -> DataFrame {
    let hex = |b: u8, n: usize| format!("{b:02x}").repeat(n);
    let base = 1_785_000_000_000i64;
    df! {
        "trace_id" => spans.iter().map(|s| hex(s.0, 16)).collect::<Vec<_>>(),
        "span_id" => spans.iter().map(|s| hex(s.1, 8)).collect::<Vec<_>>(),
        "parent_span_id" => spans.iter().map(|s| (s.2 != 0).then(|| hex(s.2, 8))).collect::<Vec<_>>(),
        "is_agent" => spans.iter().map(|s| s.3).collect::<Vec<_>>(),
        "agent_call_id" => spans.iter().map(|_| None::<String>).collect::<Vec<_>>(),
        "start_ns" => spans.iter().map(|s| (base + s.5) * 1_000_000).collect::<Vec<_>>(),
        "end_ns" => spans.iter().map(|s| (base + s.6) * 1_000_000).collect::<Vec<_>>(),
        "is_tool_call" => spans.iter().map(|s| !s.4.is_empty()).collect::<Vec<_>>(),
        "tool_name" => spans.iter().map(|s| (!s.4.is_empty()).then_some(s.4)).collect::<Vec<_>>(),
        "service_name" => spans.iter().map(|_| "svc").collect::<Vec<_>>(),
        "error_class" => spans.iter().map(|s| s.7).collect::<Vec<_>>(),
        "tool_args_hash" => args.to_vec(),
        "tool_result_hash" => results.to_vec(),
        "session_id" => spans.iter().map(|_| Some("s")).collect::<Vec<_>>(),
    }
    .unwrap()
}

pub(super) fn storms_of(spans: &[Syn]) -> Vec<super::Storm> {
    let tc = calls::collect(&synthetic(spans)).unwrap();
    retry_storms(&tc, FAR_FUTURE, &StormParams::default())
}

#[test]
fn two_turns_in_one_trace_do_not_add_up_to_a_storm() {
    let mut spans: Vec<Syn> = vec![(1, 1, 0, false, "", 0, 20_000, "ok")];
    spans.push((1, 2, 1, true, "", 0, 9_000, "ok"));
    spans.push((1, 3, 1, true, "", 10_000, 19_000, "ok"));
    for (i, parent) in [2u8, 2, 2, 3, 3, 3].iter().enumerate() {
        let t = if *parent == 2 {
            i as i64 * 1000
        } else {
            10_000 + i as i64 * 1000
        };
        spans.push((
            1,
            10 + i as u8,
            *parent,
            false,
            "fetch",
            t,
            t + 500,
            "unavailable",
        ));
    }
    assert!(storms_of(&spans).is_empty());
    // The same six calls in one turn are a storm.
    let one: Vec<Syn> = spans
        .iter()
        .map(|s| {
            if s.2 == 3 {
                (s.0, s.1, 2, s.3, s.4, s.5, s.6, s.7)
            } else {
                *s
            }
        })
        .collect();
    assert_eq!(storms_of(&one).len(), 1);
}

#[test]
fn parallel_fan_out_is_one_round() {
    let mut spans: Vec<Syn> = vec![(2, 1, 0, true, "", 0, 10_000, "ok")];
    for i in 0..6u8 {
        spans.push((
            2,
            10 + i,
            1,
            false,
            "weather",
            100 + i64::from(i),
            900,
            if i < 3 { "timeout" } else { "ok" },
        ));
    }
    assert!(storms_of(&spans).is_empty());
}

#[test]
fn healthy_backoff_and_polling_that_end_ok_are_not_storms() {
    // Polling with growing gaps (1, 2, 4, 8, 16 s) that ends ok.
    let mut spans: Vec<Syn> = vec![(3, 1, 0, true, "", 0, 60_000, "ok")];
    let mut t = 0;
    for (i, gap) in [1000, 2000, 4000, 8000, 16000].iter().enumerate() {
        spans.push((
            3,
            10 + i as u8,
            1,
            false,
            "job_status",
            t,
            t + 100,
            "unavailable",
        ));
        t += 100 + gap;
    }
    spans.push((3, 20, 1, false, "job_status", t, t + 100, "ok"));
    assert!(storms_of(&spans).is_empty());
    // The same calls with no gaps at all: a storm, and it recovered.
    let mut tight: Vec<Syn> = vec![(4, 1, 0, true, "", 0, 60_000, "ok")];
    for i in 0..6 {
        tight.push((
            4,
            10 + i as u8,
            1,
            false,
            "job_status",
            i * 110,
            i * 110 + 100,
            if i < 5 { "unavailable" } else { "ok" },
        ));
    }
    let storms = storms_of(&tight);
    assert_eq!(storms.len(), 1);
    assert_eq!(
        (storms[0].rhythm, storms[0].outcome),
        (Rhythm::NoBackoff, Outcome::Recovered)
    );
    // Retries that recovered from a retryable error waste nothing.
    assert_eq!(storms[0].wasted_seconds, 0.0);
}

#[test]
fn an_unsettled_trace_is_not_judged_yet() {
    let mut spans: Vec<Syn> = vec![(5, 1, 0, true, "", 0, 10_000, "ok")];
    for i in 0..6 {
        spans.push((
            5,
            10 + i as u8,
            1,
            false,
            "fetch",
            i * 110,
            i * 110 + 100,
            "unavailable",
        ));
    }
    let tc = calls::collect(&synthetic(&spans)).unwrap();
    let end_ns = (1_785_000_000_000i64 + 10_000) * 1_000_000;
    let p = StormParams::default();
    assert!(retry_storms(&tc, end_ns + 89_000_000_000, &p).is_empty());
    assert_eq!(retry_storms(&tc, end_ns + 90_000_000_000, &p).len(), 1);
}

#[test]
fn rhythms_are_named() {
    let p = StormParams::default();
    assert_eq!(rhythm(&[10.0, 20.0, 5.0, 50.0], &p), Rhythm::NoBackoff);
    assert_eq!(
        rhythm(&[250.0, 500.0, 1000.0, 2000.0], &p),
        Rhythm::Exponential
    );
    assert_eq!(rhythm(&[1000.0, 1050.0, 980.0, 1010.0], &p), Rhythm::Fixed);
    assert_eq!(
        rhythm(&[1000.0, 300.0, 2500.0, 400.0], &p),
        Rhythm::Irregular
    );
}

#[test]
fn turns_resolve_to_the_outermost_agent_else_the_call_id_else_the_root() {
    let hex = |b: u8| format!("{b:02x}").repeat(8);
    let t = "aa".repeat(16);
    let df = df! {
        "trace_id" => vec![t.clone(); 6],
        "span_id" => [hex(1), hex(2), hex(3), hex(4), hex(5), hex(6)],
        // 1 root; 2 agent under 1; 3 under 2; 4 agent under 3 (a sub-agent:
        // part of 2's turn); 5 under 4; 6's parent never arrived.
        "parent_span_id" => [None, Some(hex(1)), Some(hex(2)), Some(hex(3)), Some(hex(4)), Some(hex(9))],
        "is_agent" => [false, true, false, true, false, false],
        "agent_call_id" => [None, None, None, None, None, Some("run-7")],
    }
    .unwrap();
    let turns = super::turns::resolve(&df).unwrap();
    let id = |b: u8| format!("{t}/{}", hex(b));
    assert_eq!(
        turns,
        vec![id(1), id(2), id(2), id(2), id(2), "agent:run-7".to_string()]
    );
}

#[test]
fn a_slow_feed_that_still_answers_is_a_latency_spike() {
    let mut rows = series("2026-06-01", &(0..8).map(|_| (100, 1)).collect::<Vec<_>>());
    let p = SpikeParams::default();
    let last = rows.last().unwrap().day;
    let judge_last = |rows: &[DailyRow]| {
        judge(rows, last + 1, &BTreeSet::new(), &p)
            .into_iter()
            .find(|v| v.day == last)
            .unwrap()
    };
    rows.last_mut().unwrap().p95_ns = 7e9; // 3.5x the usual 2 s
    let v = judge_last(&rows);
    assert!(v.latency_flagged && !v.flagged, "{v:?}");
    assert!((v.baseline_p95_ns.unwrap() - 2e9).abs() < 1.0);
    rows.last_mut().unwrap().p95_ns = 5e9; // 2.5x: not yet
    assert!(!judge_last(&rows).latency_flagged);
    // When the errors spike too, it is context on that finding, not its own.
    rows.last_mut().unwrap().p95_ns = 9e9;
    rows.last_mut().unwrap().errors = 60;
    let v = judge_last(&rows);
    assert!(v.flagged && !v.latency_flagged);
    assert!(v.p95_ratio.unwrap() > 4.0);
}

#[test]
fn retry_loops_inside_retry_loops_are_reported_with_their_layers() {
    // agent 1 → wrappers 2 and 3 (the outer loop's two attempts) → three
    // failed calls each (the inner loop).
    let mut spans: Vec<Syn> = vec![(6, 1, 0, true, "", 0, 30_000, "ok")];
    spans.push((6, 2, 1, false, "", 0, 10_000, "unavailable"));
    spans.push((6, 3, 1, false, "", 12_000, 22_000, "unavailable"));
    for i in 0..3u8 {
        let t = i64::from(i) * 3000;
        spans.push((
            6,
            10 + i,
            2,
            false,
            "charge_card",
            t,
            t + 500,
            "unavailable",
        ));
        spans.push((
            6,
            20 + i,
            3,
            false,
            "charge_card",
            12_000 + t,
            12_500 + t,
            "unavailable",
        ));
    }
    let calls = calls::collect(&synthetic(&spans)).unwrap().calls;
    let stacked = super::stacked_retries(&calls);
    assert_eq!(stacked.len(), 1, "{stacked:?}");
    assert_eq!(
        stacked[0].layers.iter().map(|l| l.1).collect::<Vec<_>>(),
        vec![3, 3]
    );
    assert_eq!((stacked[0].attempts, stacked[0].failures), (6, 6));
    // The same six attempts under one parent are one loop, not stacked.
    let flat: Vec<Syn> = spans
        .iter()
        .map(|s| {
            if s.2 == 3 && !s.4.is_empty() {
                (s.0, s.1, 2, s.3, s.4, s.5, s.6, s.7)
            } else {
                *s
            }
        })
        .collect();
    let calls = calls::collect(&synthetic(&flat)).unwrap().calls;
    assert!(super::stacked_retries(&calls).is_empty());
}

#[test]
fn an_mcp_span_of_the_same_call_is_not_a_retry() {
    // A GenAI book_flight call answered 404, and the MCP client span inside it
    // (same tool, same arguments) answered 404 too: one call, not a retry.
    let t = "cd".repeat(16);
    let id = |b: u8| format!("{b:02x}").repeat(8);
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    let frame = |child_convention: &str| {
        df! {
            "trace_id" => vec![t.clone(); 3],
            "span_id" => [id(1), id(2), id(3)],
            "parent_span_id" => [None, Some(id(1)), Some(id(2))],
            "is_agent" => [true, false, false],
            "agent_call_id" => [None::<String>, None, None],
            "start_ns" => [ms(0), ms(10), ms(11)],
            "end_ns" => [ms(1000), ms(500), ms(499)],
            "is_tool_call" => [false, true, true],
            "tool_name" => [None, Some("book_flight"), Some("book_flight")],
            "service_name" => ["svc", "svc", "svc"],
            "error_class" => ["ok", "not_found", "not_found"],
            "tool_args_hash" => [None, Some("same"), Some("same")],
            "session_id" => [None::<String>, None, None],
            "tool_convention" => [None, Some("gen_ai"), Some(child_convention)],
        }
        .unwrap()
    };
    // One call is not a repeated call: nothing for the per-turn rules.
    let calls = calls::collect(&frame("mcp")).unwrap().calls;
    assert!(calls.is_empty());
    assert!(wasted_retries(&calls).is_empty());
    // Two nested spans of one convention are not looked at as one call
    // (docs/detection.md §1: only MCP spans or two conventions are).
    assert_eq!(calls::collect(&frame("gen_ai")).unwrap().calls.len(), 2);
    // Two GenAI calls of the same request one after the other are a retry.
    let mut siblings = frame("gen_ai");
    siblings
        .with_column(Column::new(
            "parent_span_id".into(),
            [None, Some(id(1)), Some(id(1))],
        ))
        .unwrap();
    siblings
        .with_column(Column::new("start_ns".into(), [ms(0), ms(10), ms(600)]))
        .unwrap();
    siblings
        .with_column(Column::new("end_ns".into(), [ms(1000), ms(500), ms(900)]))
        .unwrap();
    let calls = calls::collect(&siblings).unwrap().calls;
    assert_eq!(wasted_retries(&calls).len(), 1);
}

#[test]
fn exponential_backoff_that_gives_up_on_a_retryable_error_is_a_storm() {
    let mut spans: Vec<Syn> = vec![(7, 1, 0, true, "", 0, 90_000, "ok")];
    let mut t = 0;
    for (i, gap) in [1000, 2000, 4000, 8000, 16000, 32000].iter().enumerate() {
        spans.push((
            7,
            10 + i as u8,
            1,
            false,
            "search",
            t,
            t + 100,
            "rate_limited",
        ));
        t += 100 + gap;
    }
    let storms = storms_of(&spans);
    assert_eq!(storms.len(), 1);
    assert_eq!(
        (storms[0].rhythm, storms[0].outcome),
        (Rhythm::Exponential, Outcome::GaveUp)
    );
}

#[test]
fn each_retry_is_judged_by_what_it_achieved() {
    use super::chains::{judge, Attempt, Verdict as V};
    use crate::model::ErrorClass as C;
    // One attempt a second, each 100 ms long.
    let run = |calls: &[(C, Option<&'static str>)]| {
        let attempts: Vec<Attempt<'_>> = calls
            .iter()
            .enumerate()
            .map(|(i, &(class, args))| Attempt {
                class,
                args,
                result: None,
                start_ns: i as i64 * 1_000_000_000,
                end_ns: i as i64 * 1_000_000_000 + 100_000_000,
                retry_after_ms: None,
                wait_from_ns: None,
            })
            .collect();
        judge(&attempts, 1.5)
    };
    let a = Some("a");
    assert_eq!(
        run(&[(C::Unavailable, a), (C::Ok, a)]),
        vec![V::Failed, V::Rescued]
    );
    assert_eq!(
        run(&[(C::InvalidRequest, a), (C::InvalidRequest, a)]),
        vec![V::Failed, V::Wasted]
    );
    // A feed that never answers: every retry wasted.
    assert_eq!(
        run(&[
            (C::Unavailable, a),
            (C::Unavailable, a),
            (C::Unavailable, a)
        ]),
        vec![V::Failed, V::Wasted, V::Wasted]
    );
    // A blip rescued after two tries: both retries belong to the rescue.
    assert_eq!(
        run(&[(C::RateLimited, a), (C::RateLimited, a), (C::Ok, a)]),
        vec![V::Failed, V::Rescued, V::Rescued]
    );
    assert_eq!(run(&[(C::Ok, a), (C::Ok, a)]), vec![V::Ok, V::AfterSuccess]);
    // After a failure waiting cannot fix, other arguments are another
    // request (a corrected call), not a retry; after a blip they are one.
    assert_eq!(
        run(&[(C::InvalidRequest, a), (C::Ok, Some("b"))]),
        vec![V::Failed, V::Ok]
    );
    assert_eq!(
        run(&[(C::Unavailable, a), (C::Ok, Some("b"))]),
        vec![V::Failed, V::Rescued]
    );
    // After a success, other arguments are another request; unknown
    // arguments are never taken for a repeat of a success.
    assert_eq!(run(&[(C::Ok, a), (C::Ok, Some("b"))]), vec![V::Ok, V::Ok]);
    assert_eq!(run(&[(C::Ok, None), (C::Ok, None)]), vec![V::Ok, V::Ok]);
    assert_eq!(
        run(&[(C::Timeout, None), (C::Ok, None)]),
        vec![V::Failed, V::Rescued]
    );
    // A success in between ends the chain: the next failure is fresh.
    assert_eq!(
        run(&[
            (C::Unavailable, a),
            (C::Ok, Some("b")),
            (C::Unavailable, Some("c")),
            (C::Unavailable, Some("c"))
        ]),
        vec![V::Failed, V::Rescued, V::Failed, V::Wasted]
    );
}

#[test]
fn retry_outcomes_per_tool_and_day_from_the_seed_storms() {
    let tc = fixture_calls("storms_jul29.json");
    let jul29 = day_from_str("2026-07-29").unwrap();
    let out = super::outcomes::per_tool_day(&tc.calls, jul29, 1.5, |_| true);
    let sf: Vec<_> = out.iter().filter(|o| o.tool == "search_flights").collect();
    assert_eq!(sf.len(), 1);
    // Four dead-feed loops of 15, 14, 12 and 12 attempts: 49 wasted retries.
    assert_eq!((sf[0].retries, sf[0].wasted, sf[0].rescued), (49, 49, 0));
    assert!(sf[0].wasted_seconds > 250.0, "{}", sf[0].wasted_seconds);
}
