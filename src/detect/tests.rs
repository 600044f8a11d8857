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
