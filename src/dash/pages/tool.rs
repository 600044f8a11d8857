//! A tool's page: its daily calls, silent days, error rate, latency, error
//! classes with their raw names, the calls stopped on purpose, the retry
//! outcomes, its signals and its worst turns.

use std::collections::BTreeMap;

use maud::{html, Markup, PreEscaped};

use super::{counters, evidence_row, outcome_table, range_picker, seg, signal_rows, Range};
use crate::dash::chart;
use crate::dash::html::page;
use crate::detect::outcomes::ToolDay;
use crate::read::data::Rollup;
use crate::signal::Signal;

/// Raw names per class, each with how often it was seen.
type Names<'a> = BTreeMap<&'a str, BTreeMap<&'a str, u64>>;

/// The raw names a class was logged under, most seen first:
/// `<code>HTTP 503</code> ×12, …`.
fn raw_names(seen: Option<&BTreeMap<&str, u64>>) -> Markup {
    let mut seen: Vec<(&&str, &u64)> = seen.map(|m| m.iter().collect()).unwrap_or_default();
    seen.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    html! {
        @for (i, (n, k)) in seen.iter().enumerate() {
            @if i > 0 { ", " }
            code { (n) } " ×" (k)
        }
    }
}

/// The tool page's calls stopped on purpose over the range — interrupted
/// (a human-in-the-loop interrupt, a hand-off) and cancelled (by their
/// user) — with the names they were logged under: counted apart, never as
/// failures. Empty when there were none.
fn control_flow(days: &[crate::detect::DailyRow], r: &Range, names: &Names) -> Markup {
    let in_range = || days.iter().filter(|d| (r.from..=r.to).contains(&d.day));
    let rows = [
        (
            "interrupted",
            in_range().map(|d| d.interrupted).sum::<u64>(),
        ),
        ("cancelled", in_range().map(|d| d.cancelled).sum::<u64>()),
    ];
    if rows.iter().all(|(_, n)| *n == 0) {
        return html! {};
    }
    html! {
        h2 { "Stopped on purpose (no failures)" }
        p class="muted" {
            "Calls a human-in-the-loop interrupt or a hand-off stopped, or their user cancelled: counted in the calls, never in the errors, the chains or the wasted retries."
        }
        table id="control-flow" {
            tr { th { "class" } th class="n" { "calls" } th { "raw names seen" } }
            @for (c, n) in rows.iter().filter(|(_, n)| *n > 0) {
                tr { td { (c) } td class="n" { (n) } td { (raw_names(names.get(c))) } }
            }
        }
    }
}

/// Error classes over the range, and the raw names each was logged under.
fn classes<'a>(
    tool: &str,
    rollup: &'a Rollup,
    days: &'a [crate::detect::DailyRow],
    r: &Range,
) -> (BTreeMap<&'a str, u64>, Names<'a>) {
    let mut classes: BTreeMap<&str, u64> = Default::default();
    for d in days.iter().filter(|d| (r.from..=r.to).contains(&d.day)) {
        for (c, n) in &d.classes {
            *classes.entry(c.as_str()).or_insert(0) += n;
        }
    }
    let mut names: Names = Default::default();
    for (d, c, n, k) in rollup.names.get(tool).map(Vec::as_slice).unwrap_or(&[]) {
        if (r.from..=r.to).contains(d) {
            *names
                .entry(c.as_str())
                .or_default()
                .entry(n.as_str())
                .or_insert(0) += k;
        }
    }
    (classes, names)
}

/// A tool's page; `rate` is its error-rate section (`spike::section`).
pub fn tool(
    tool: &str,
    rollup: &Rollup,
    r: &Range,
    signals: &[Signal],
    outcomes: &[ToolDay],
    rate: Markup,
) -> String {
    let days = rollup.tools.get(tool).cloned().unwrap_or_default();
    let vol = rollup.chart_days(r.from, r.to, Some(tool));
    let lat: Vec<chart::Day> = (r.from..=r.to)
        .map(|d| {
            let day = days.iter().find(|x| x.day == d);
            (
                d,
                day.map_or(0.0, |x| x.p50_ns / 1e6),
                day.map_or(0.0, |x| x.p95_ns / 1e6),
            )
        })
        .collect();
    let (classes, names) = classes(tool, rollup, &days, r);
    let mine: Vec<&Signal> = signals.iter().filter(|s| s.draft.tool == tool).collect();
    let mut ev: Vec<_> = mine.iter().flat_map(|s| s.draft.evidence.iter()).collect();
    ev.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then(b.calls.cmp(&a.calls))
    });
    let b = html! {
        h1 { "Tool " code { (tool) } }
        (range_picker(&format!("/tools/{}", seg(tool)), r))
        h2 { "Daily calls" }
        // The charts are SVG plotters drew from numbers, no text of the spans.
        div class="chart" id="tool-volume" { (PreEscaped(chart::volume_svg(&vol, 1100, 240))) }
        (crate::dash::silent::section(tool, signals))
        (rate)
        h2 { "Latency: p50 (bars) and p95 (line)" }
        div class="chart" { (PreEscaped(chart::rate_svg(&lat, 1100, 200, " ms"))) }
        h2 { "Error classes, and the names they were logged under" }
        table id="classes" {
            tr { th { "class" } th class="n" { "failed calls" } th { "raw names seen" } }
            @for (c, n) in &classes {
                tr { td { (c) } td class="n" { (n) } td { (raw_names(names.get(c))) } }
            }
        }
        (control_flow(&days, r, &names))
        h2 { "Retry outcomes" }
        (counters(outcomes, &mine))
        (outcome_table(outcomes))
        h2 { "Signals" }
        (signal_rows(&mine))
        h2 { "Worst turns" }
        table {
            tr {
                th { "trace" } th { "day" } th class="n" { "calls" } th class="n" { "failed" }
                th { "rhythm" } th class="n" { "wasted" }
            }
            @for e in ev.iter().take(20) {
                tr { (evidence_row(e, "")) td class="n" { (format!("{:.1} s", e.wasted_seconds)) } }
            }
        }
        p {
            a href={ "/charts/tools/" (seg(tool)) "/daily.svg?days=" (r.days) } { "SVG" }
            " · "
            a href={ "/charts/tools/" (seg(tool)) "/daily.png?days=" (r.days) } { "PNG" }
            " of the daily chart, for chat messages."
        }
    };
    page(&format!("Tool {tool}"), b)
}
