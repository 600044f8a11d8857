//! The silent-tool rules (§4.8) on the cases: a tool that drops to
//! nothing while its agent keeps working, one with no success for days, a
//! weekend dip shared by tool and agent, a tool too quiet to judge.

use super::silent::{no_success, poisson_cdf, silent_tools, SilentParams, Turns};
use super::DailyRow;
use crate::model::{day_from_str, ErrorClass, NANOS_PER_DAY};

const SERVICE: &str = "travel-agent";

fn d(s: &str) -> i32 {
    day_from_str(s).unwrap()
}

/// A day of `tool`: calls, successes, and the end of the last success.
fn row(tool: &str, day: i32, calls: u64, successes: u64, last_ok_ns: Option<i64>) -> DailyRow {
    let mut classes = std::collections::BTreeMap::new();
    if calls > successes {
        classes.insert(ErrorClass::Unavailable, calls - successes);
    }
    DailyRow {
        tool: tool.into(),
        service: SERVICE.into(),
        day,
        calls,
        errors: calls - successes,
        successes,
        last_ok_ns,
        classes,
        ..Default::default()
    }
}

fn ok_row(tool: &str, day: i32, calls: u64) -> DailyRow {
    let last = (calls > 0).then(|| i64::from(day) * NANOS_PER_DAY + 20 * 3_600_000_000_000);
    row(tool, day, calls, calls, last)
}

fn turns(days: impl IntoIterator<Item = (i32, u64)>) -> Turns {
    days.into_iter()
        .map(|(day, n)| ((SERVICE.to_string(), day), n))
        .collect()
}

#[test]
fn a_tool_called_200_times_a_day_that_drops_to_none_while_turns_stay_is_silent() {
    let start = d("2026-08-01");
    let mut rows: Vec<DailyRow> = (0..9)
        .map(|i| ok_row("search_flights", start + i, 200 + (i as u64 % 3) * 7))
        .collect();
    // Another tool keeps its rows; search_flights has none on Aug 10.
    rows.extend((0..10).map(|i| ok_row("book_flight", start + i, 40)));
    rows.sort_by(|a, b| (&a.tool, a.day).cmp(&(&b.tool, b.day)));
    let t = turns((0..10).map(|i| (start + i, 100 + (i as u64 % 2) * 5)));
    let found = silent_tools(&rows, &t, start, start + 10, &SilentParams::default());
    assert_eq!(found.len(), 1, "{found:?}");
    let s = &found[0];
    assert_eq!(
        (s.tool.as_str(), s.day, s.calls),
        ("search_flights", start + 9, 0)
    );
    assert!(s.expected > 190.0 && s.expected < 230.0, "{s:?}");
    assert_eq!(s.turns, 105);
    assert_eq!(
        s.last_ok_ns,
        Some(i64::from(start + 8) * NANOS_PER_DAY + 20 * 3_600_000_000_000)
    );
    // A fall to 15 % is silent too; to 30 %, not (max_ratio 0.2).
    for (calls, flagged) in [(30, true), (62, false)] {
        let mut rows = rows.clone();
        rows.push(ok_row("search_flights", start + 9, calls));
        rows.sort_by(|a, b| (&a.tool, a.day).cmp(&(&b.tool, b.day)));
        let found = silent_tools(&rows, &t, start, start + 10, &SilentParams::default());
        assert_eq!(!found.is_empty(), flagged, "{calls} calls: {found:?}");
    }
}

#[test]
fn a_day_the_agent_itself_was_quiet_is_not_judged() {
    let start = d("2026-08-01");
    let rows: Vec<DailyRow> = (0..9)
        .map(|i| ok_row("search_flights", start + i, 200))
        .collect();
    // No turn at all on Aug 10: the agent did not run, nothing to compare with.
    let t = turns((0..9).map(|i| (start + i, 100)));
    assert!(silent_tools(&rows, &t, start, start + 10, &SilentParams::default()).is_empty());
}

#[test]
fn a_weekend_dip_shared_by_the_tool_and_its_agent_is_nothing() {
    // Four weeks from Monday Aug 3: weekdays 100 turns and ~200 calls,
    // weekends 20 turns and ~40 calls.
    let start = d("2026-08-03");
    let weekend = |i: i32| i % 7 >= 5;
    let rows: Vec<DailyRow> = (0..28)
        .map(|i| {
            ok_row(
                "search_flights",
                start + i,
                if weekend(i) {
                    38 + (i as u64 % 5)
                } else {
                    195 + (i as u64 % 11)
                },
            )
        })
        .collect();
    let t = turns((0..28).map(|i| (start + i, if weekend(i) { 20 } else { 100 })));
    let found = silent_tools(&rows, &t, start, start + 28, &SilentParams::default());
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_tool_called_three_times_a_day_that_skips_a_day_is_nothing() {
    let start = d("2026-08-01");
    let rows: Vec<DailyRow> = (0..10)
        .filter(|&i| i != 7)
        .map(|i| ok_row("convert_currency", start + i, 3))
        .collect();
    let t = turns((0..10).map(|i| (start + i, 100)));
    let p = SilentParams::default();
    assert!(silent_tools(&rows, &t, start, start + 10, &p).is_empty());
}

#[test]
fn a_tool_still_called_with_no_success_for_three_days_names_its_last_success() {
    // Successes until Aug 6 09:03Z, then 14 failed calls a day.
    let aug6 = d("2026-08-06");
    let last_ok = i64::from(aug6) * NANOS_PER_DAY + (9 * 60 + 3) * 60_000_000_000;
    let mut rows: Vec<DailyRow> = (0..5)
        .map(|i| ok_row("book_flight", aug6 - 5 + i, 20))
        .collect();
    rows.push(row("book_flight", aug6, 20, 6, Some(last_ok)));
    rows.extend((1..=4).map(|i| row("book_flight", aug6 + i, 14, 0, None)));
    let p = SilentParams::default();
    // Swept on Aug 10 at 06:00: Aug 7 and 8 end under three days after the
    // last success; Aug 9 ends 3 d 14 h 57 min after it, Aug 10 (so far)
    // 3 d 20 h 57 min.
    let now = i64::from(aug6 + 4) * NANOS_PER_DAY + 6 * 3_600_000_000_000;
    let found = no_success(&rows, aug6 - 5, now, &p);
    assert_eq!(
        found.iter().map(|n| n.day).collect::<Vec<_>>(),
        vec![aug6 + 3, aug6 + 4],
        "{found:?}"
    );
    assert_eq!(found[0].calls_since, 42);
    let n = &found[1];
    assert_eq!(n.last_ok_ns, Some(last_ok));
    assert_eq!(n.calls_since, 56);
    let days = (20.0 * 60.0 + 57.0) / 1440.0 + 3.0;
    assert!((n.days - days).abs() < 1e-9, "{}", n.days);
    assert_eq!(n.class, ErrorClass::Unavailable);
    // Too few calls since: nothing.
    let few = SilentParams {
        no_success_min_calls: 57,
        ..p.clone()
    };
    // (Not three days before Aug 9.)
    assert!(no_success(&rows, aug6 - 5, now, &few).is_empty());
    // A success on Aug 10 clears the day.
    let mut healed = rows.clone();
    healed.pop();
    healed.push(row("book_flight", aug6 + 4, 14, 1, Some(now - 1)));
    let found = no_success(&healed, aug6 - 5, now, &p);
    assert_eq!(
        found.iter().map(|n| n.day).collect::<Vec<_>>(),
        vec![aug6 + 3]
    );
}

#[test]
fn today_is_not_judged_and_a_weekly_tool_is_not_days_without_success() {
    let start = d("2026-08-01");
    let mut rows: Vec<DailyRow> = (0..9)
        .map(|i| ok_row("search_flights", start + i, 200))
        .collect();
    rows.push(ok_row("search_flights", start + 9, 0));
    let t = turns((0..10).map(|i| (start + i, 100)));
    // Aug 10 is today: its rollup may lag its turns.
    assert!(silent_tools(&rows, &t, start, start + 9, &SilentParams::default()).is_empty());
    // Succeeded on Monday, 12 failures on Thursday: one failing day.
    let mon = d("2026-08-03");
    let rows = vec![
        row(
            "weekly_report",
            mon,
            12,
            12,
            Some(i64::from(mon) * NANOS_PER_DAY + 3_600_000_000_000),
        ),
        row("weekly_report", mon + 3, 12, 0, None),
    ];
    let now = i64::from(mon + 4) * NANOS_PER_DAY;
    assert!(no_success(&rows, mon, now, &SilentParams::default()).is_empty());
    // Interrupted or cancelled calls alone fail nothing.
    let mut stopped = row("approve", mon + 3, 12, 0, None);
    stopped.errors = 0;
    stopped.classes.clear();
    stopped.interrupted = 12;
    let rows = vec![
        row("approve", mon, 12, 12, None),
        row("approve", mon + 2, 12, 0, None),
        stopped,
    ];
    let found = no_success(&rows, mon, now, &SilentParams::default());
    assert!(found.iter().all(|n| n.day != mon + 3), "{found:?}");
}

#[test]
fn a_tool_that_never_succeeded_counts_from_its_first_day() {
    let start = d("2026-08-01");
    let rows: Vec<DailyRow> = (0..4).map(|i| row("pay", start + i, 5, 0, None)).collect();
    let now = i64::from(start + 4) * NANOS_PER_DAY;
    let found = no_success(&rows, start, now, &SilentParams::default());
    // Aug 3 ends 3 days after Aug 1 began, 15 calls by then.
    assert_eq!(
        found.iter().map(|n| n.day).collect::<Vec<_>>(),
        vec![start + 2, start + 3]
    );
    assert_eq!(found[0].last_ok_ns, None);
    assert_eq!(found[0].since_ns, i64::from(start) * NANOS_PER_DAY);
    assert_eq!(found[0].calls_since, 15);
}

#[test]
fn the_poisson_lower_tail() {
    assert!((poisson_cdf(0, 2.0) - (-2.0f64).exp()).abs() < 1e-12);
    assert!((poisson_cdf(2, 2.0) - 5.0 * (-2.0f64).exp()).abs() < 1e-12);
    assert!(poisson_cdf(0, 200.0) < 1e-80);
    assert!(poisson_cdf(40, 200.0) < 1e-30);
    assert!(poisson_cdf(150, 200.0) < 0.001);
    assert_eq!(poisson_cdf(5, 0.0), 1.0);
}

#[test]
fn out_of_range_silent_params_name_their_key() {
    assert_eq!(SilentParams::default().check(), Ok(()));
    type Spoil = fn(&mut SilentParams);
    let cases: [(&str, Spoil); 8] = [
        ("baseline_days", |p| p.baseline_days = 0),
        ("reach_back_days", |p| p.reach_back_days = 3),
        ("min_baseline_days", |p| p.min_baseline_days = 8),
        ("min_expected_calls", |p| p.min_expected_calls = f64::NAN),
        ("max_ratio", |p| p.max_ratio = 1.0),
        ("p_value", |p| p.p_value = 0.0),
        ("no_success_days", |p| p.no_success_days = 0),
        ("no_success_min_calls", |p| p.no_success_min_calls = 0),
    ];
    for (key, spoil) in cases {
        let mut p = SilentParams::default();
        spoil(&mut p);
        let (k, why) = p.check().unwrap_err();
        assert_eq!(k, format!("detect.silent.{key}"), "{why}");
        assert!(why.contains("must be"), "{why}");
    }
}
