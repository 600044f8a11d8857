//! The charts draw the detector's numbers: the tool page's threshold is
//! `judge`'s, day by day; the overview's volume is per tool, with a legend
//! that names each tool as text.

use crate::dash::html::esc;
use crate::detect::{judge, DailyRow, SpikeParams};
use crate::model::{day_from_str, day_to_string};

fn daily(tool: &str, day: i32, calls: u64, errors: u64) -> DailyRow {
    DailyRow {
        tool: tool.into(),
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

/// The demo's search_flights days (detection.md §5, Jul 7 - Aug 5), then
/// Aug 6, no calls on Aug 7, Aug 8; beside it a tool whose normal rate is
/// 40 % (3 × its baseline is above 100 %).
fn demo_like() -> Vec<DailyRow> {
    let jul7 = day_from_str("2026-07-07").unwrap();
    let early = [5, 8, 10, 6, 7, 9, 5, 8, 6, 7, 10, 5, 9, 6, 8, 7, 5, 9, 6];
    let mut days: Vec<(u64, u64)> = early
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, u64::from(matches!(i, 3 | 7 | 11 | 15))))
        .collect();
    days.extend([
        (5, 0),
        (10, 1),
        (9, 1),
        (62, 53),
        (7, 2),
        (5, 0),
        (6, 0),
        (7, 0),
        (5, 0),
        (11, 6),
        (11, 6),
        (8, 0),
    ]);
    let mut rows: Vec<DailyRow> = days
        .iter()
        .enumerate()
        .map(|(i, (c, e))| daily("search_flights", jul7 + i as i32, *c, *e))
        .collect();
    rows.push(daily("search_flights", jul7 + days.len() as i32 + 1, 6, 0));
    rows.extend((0..33).map(|i| daily("flaky", jul7 + i, 20, 8)));
    rows.sort_by(|a, b| (&a.tool, &a.service, a.day).cmp(&(&b.tool, &b.service, b.day)));
    rows
}

fn month() -> crate::dash::pages::Range {
    let from = day_from_str("2026-07-10").unwrap();
    crate::dash::pages::Range {
        from,
        to: from + 29,
        days: 30,
    }
}

/// The tool page's threshold is `judge`'s: the sweep's call (every tool's
/// rows, nothing flagged before, the same parameters) gives the verdicts
/// drawn; each point is min(3 × that day's baseline, 100 %); the flagged
/// days are the rule's, their rate above the line; a day without calls
/// has no point.
#[test]
fn the_threshold_line_is_the_rules_baseline_day_by_day() {
    let rows = demo_like();
    let rollup = crate::read::data::Rollup {
        rows: rows.clone(),
        ..Default::default()
    };
    let p = SpikeParams::default();
    let today = day_from_str("2026-08-13").unwrap();
    let drawn = rollup.spike_verdicts("search_flights", today, &p);
    let swept: Vec<_> = judge(&rows, today, &Default::default(), &p)
        .into_iter()
        .filter(|v| v.tool == "search_flights")
        .collect();
    assert_eq!(drawn, swept, "the sweep's verdicts, not a re-derivation");
    let r = month();
    let points = crate::dash::spike::points(&drawn, &r, today);
    assert_eq!(
        points.len(),
        29,
        "every day with calls in the range, and only those"
    );
    let aug7 = day_from_str("2026-08-07").unwrap();
    assert!(points.iter().all(|d| d.day != aug7), "no calls: no point");
    for d in &points {
        let v = drawn.iter().find(|v| v.day == d.day).unwrap();
        assert_eq!(
            d.threshold,
            (3.0 * v.baseline).min(1.0) * 100.0,
            "{}",
            day_to_string(d.day)
        );
        assert_eq!(d.flagged, v.flagged);
        assert_eq!(d.rate, v.rate * 100.0);
        assert!(d.threshold <= 100.0);
        if d.flagged {
            assert!(
                d.rate > d.threshold && d.lower > d.threshold,
                "{}",
                day_to_string(d.day)
            );
        }
    }
    let flagged: Vec<String> = points
        .iter()
        .filter(|d| d.flagged)
        .map(|d| day_to_string(d.day))
        .collect();
    assert_eq!(flagged, ["2026-07-29", "2026-08-04", "2026-08-05"]);
    // Aug 4 against the week without Jul 29: 3 × 3/39.
    let aug4 = points
        .iter()
        .find(|d| day_to_string(d.day) == "2026-08-04")
        .unwrap();
    assert!(
        (aug4.threshold - 300.0 * 3.0 / 39.0).abs() < 1e-9,
        "{}",
        aug4.threshold
    );

    // A normal rate of 40 %: 3 × the baseline is 120 %, drawn at 100 %.
    let flaky = crate::dash::spike::points(&rollup.spike_verdicts("flaky", today, &p), &r, today);
    assert!(!flaky.is_empty() && flaky.iter().all(|d| d.threshold == 100.0 && !d.flagged));

    // The page marks the flagged days in the chart and says them in text.
    let html = crate::dash::spike::section(&drawn, &r, today, &p);
    assert_eq!(html.matches(r#"class="flag""#).count(), 3, "{html}");
    for day in &flagged {
        assert!(html.contains(&format!(r#"data-day="{day}""#)));
        assert!(
            html.contains(&format!("<b>{day}</b>")),
            "the flagged days in text"
        );
    }
    assert!(
        html.contains("flagged: 2026-07-29, 2026-08-04, 2026-08-05"),
        "the chart's label"
    );
    assert_eq!(
        html,
        crate::dash::spike::section(&drawn, &r, today, &p),
        "deterministic"
    );
    // A day not over yet keeps its threshold but is not marked.
    let unfinished = crate::dash::spike::points(&drawn, &r, day_from_str("2026-08-05").unwrap());
    assert!(unfinished
        .iter()
        .all(|d| day_to_string(d.day) != "2026-08-05" || !d.flagged));
}

/// (tool, calls a day, errors a day) over 2026-07-27..=07-29 as a
/// `tool_daily` frame.
fn tool_frame(tools: &[(&str, u64, u64)]) -> polars::prelude::DataFrame {
    use polars::prelude::*;
    let mut cols: (Vec<String>, Vec<String>, Vec<u64>, Vec<u64>) = Default::default();
    for (t, c, e) in tools {
        for day in ["2026-07-27", "2026-07-28", "2026-07-29"] {
            cols.0.push(day.into());
            cols.1.push(t.to_string());
            cols.2.push(*c);
            cols.3.push(if day == "2026-07-29" { *e } else { 0 });
        }
    }
    let n = cols.0.len();
    df! {
        "day" => cols.0,
        "tool_name" => cols.1,
        "service_name" => vec!["svc"; n],
        "calls" => cols.2,
        "errors" => cols.3.clone(),
        "rate_limited" => vec![0u64; n],
        "unavailable" => cols.3,
        "timeout" => vec![0u64; n],
        "invalid_request" => vec![0u64; n],
    }
    .unwrap()
}

/// The overview's volume: one band per busiest tool (in the palette's
/// order, busiest first), the other tools summed into one band, a legend
/// naming each with its totals; failed calls in the darker shade.
#[test]
fn the_overview_volume_has_a_band_per_top_tool_and_one_other() {
    let tools = [
        ("a_small", 3, 0),
        ("b_small", 2, 1),
        ("book_flight", 40, 0),
        ("geo", 10, 0),
        ("quote_price", 50, 0),
        ("search_flights", 90, 53),
        ("tiny", 1, 0),
        ("weather", 20, 2),
    ];
    let from = day_from_str("2026-07-27").unwrap();
    let panels =
        crate::dash::panels::load(std::path::Path::new("/nonexistent/overview.toml")).unwrap();
    let html = crate::dash::panels::render(&panels, &tool_frame(&tools), from, from + 2);
    assert_eq!(
        html,
        crate::dash::panels::render(&panels, &tool_frame(&tools), from, from + 2)
    );
    let legend = &html[html.find(r#"class="legend tools""#).expect("a legend")..];
    let names: Vec<&str> = legend
        .split("<b>")
        .skip(1)
        .map(|s| &s[..s.find("</b>").unwrap()])
        .collect();
    assert_eq!(
        names,
        [
            "search_flights",
            "quote_price",
            "book_flight",
            "weather",
            "geo",
            "a_small",
            "other"
        ]
    );
    assert!(legend.contains("(2 tools)"), "b_small and tiny");
    assert!(
        legend.contains("270 calls, 53 failed"),
        "search_flights' totals"
    );
    let svg = &html[..html.find("</svg>").unwrap()];
    for (ok, err) in crate::dash::chart::tools::PALETTE {
        assert!(
            svg.contains(&format!(
                "fill=\"{}\"",
                crate::dash::chart::hex(ok).to_uppercase()
            )),
            "{ok:?}"
        );
        assert!(legend.contains(&crate::dash::chart::hex(err)), "{err:?}");
    }
    let (search_err, other_err) = (
        crate::dash::chart::tools::PALETTE[0].1,
        crate::dash::chart::tools::OTHER.1,
    );
    for c in [search_err, other_err] {
        assert!(
            svg.contains(&format!(
                "fill=\"{}\"",
                crate::dash::chart::hex(c).to_uppercase()
            )),
            "{c:?}"
        );
    }
    // Every day's bands add up to the day's calls.
    let v = crate::dash::chart::ToolVolume::top(
        &tools
            .iter()
            .map(|(t, c, e)| (from + 2, t.to_string(), *c, *e))
            .collect::<Vec<_>>(),
        from,
        from + 2,
        6,
    );
    assert_eq!(v.bands.len(), 7);
    assert_eq!(v.bands.iter().map(|b| b.calls[2]).sum::<u64>(), 216);
    assert_eq!(v.bands[6].errors[2], 1);
}

/// A hostile tool name is text in the overview's legend.
#[test]
fn a_hostile_tool_name_is_escaped_in_the_legend() {
    let hostile = r#"<script>alert(1)</script>"><img src=x onerror=alert(1)>"#;
    let from = day_from_str("2026-07-27").unwrap();
    let panels =
        crate::dash::panels::load(std::path::Path::new("/nonexistent/overview.toml")).unwrap();
    let html =
        crate::dash::panels::render(&panels, &tool_frame(&[(hostile, 5, 2)]), from, from + 2);
    assert!(html.contains(&format!("<b>{}</b>", esc(hostile))), "{html}");
    assert!(
        !html.contains("<script>") && !html.contains("<img"),
        "{html}"
    );
}

/// A tool two services report is judged per service: a chart each, the
/// busiest first, each service named (as text).
#[test]
fn a_tool_of_two_services_gets_a_chart_per_series() {
    let mut rows = demo_like();
    rows.retain(|r| r.tool == "search_flights");
    let other = "<b>ops</b>";
    let quiet: Vec<DailyRow> = rows
        .iter()
        .map(|r| DailyRow {
            service: other.into(),
            calls: 3,
            errors: 0,
            ..r.clone()
        })
        .collect();
    rows.extend(quiet);
    rows.sort_by(|a, b| (&a.tool, &a.service, a.day).cmp(&(&b.tool, &b.service, b.day)));
    let rollup = crate::read::data::Rollup {
        rows,
        ..Default::default()
    };
    let p = SpikeParams::default();
    let today = day_from_str("2026-08-13").unwrap();
    let verdicts = rollup.spike_verdicts("search_flights", today, &p);
    let html = crate::dash::spike::section(&verdicts, &month(), today, &p);
    let (busy, quiet) = (
        html.find(r#"id="tool-rate""#).unwrap(),
        html.find(r#"id="tool-rate-2""#).unwrap(),
    );
    assert!(busy < quiet, "the busiest series first");
    assert!(html.contains("<code>travel-agent</code>") && html.contains(&esc(other)));
    assert!(!html.contains(other), "a service name is text");
    assert_eq!(
        html.matches(r#"class="flag""#).count(),
        3,
        "only travel-agent's days"
    );
}
