//! The pages: overview, tool, signals, signal, trace (the incidents' are in
//! `incident_pages`). Each is a function of data already read; no IO here.
//! Each is a maud template: every value escapes as it is put in.
//! Here: the overview and the pieces pages share; `tool`, `signal` and
//! `trace` hold the other pages.

mod signal;
mod tool;
mod trace;

pub use signal::{signal, signals};
pub use tool::tool;
pub use trace::{trace, PAGE_SPANS};

use maud::{html, Markup, PreEscaped};

use super::chart;
use super::html::{page, pct, seg, state};
use crate::detect::outcomes::ToolDay;
use crate::model::day_to_string;
use crate::read::data::ToolSummary;
use crate::signal::Signal;
use crate::time::rfc3339;

/// The range a page shows: its days, and how it was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub from: i32,
    pub to: i32,
    pub days: i32,
}

fn range_picker(base: &str, r: &Range) -> Markup {
    html! {
        div class="range" {
            "Range: "
            @for d in [7, 30, 90] {
                a class=[(d == r.days).then_some("on")] href={ (base) "?days=" (d) } { (d) " days" }
            }
            form class="inline" method="get" action=(base) {
                " from "
                input name="from" type="date" value=(day_to_string(r.from));
                " to "
                input name="to" type="date" value=(day_to_string(r.to));
                " "
                button { "Show" }
            }
        }
    }
}

fn signal_rows(signals: &[&Signal]) -> Markup {
    if signals.is_empty() {
        return html! { p class="muted" { "No signals." } };
    }
    html! {
        table {
            tr {
                th { "id" } th { "state" } th { "kind" } th { "tool" } th { "signal" }
                th { "first seen" } th { "last seen" } th class="n" { "findings" }
            }
            @for sig in signals {
                @let d = &sig.draft;
                tr {
                    td { a href={ "/signals/" (seg(&d.id)) } { (d.id) } }
                    td { (state(sig.state.as_str())) }
                    td { (d.kind.as_str()) }
                    td { a href={ "/tools/" (seg(&d.tool)) } { (d.tool) } }
                    td { (d.title) }
                    td { (rfc3339(d.first_seen_ns)[..10]) }
                    td { (rfc3339(d.last_seen_ns)[..10]) }
                    td class="n" { (d.findings) }
                }
            }
        }
    }
}

/// The wasted-work counters: from the retry outcomes of the range (every
/// settled retry, not only those in signals), and the storms in `signals`.
fn counters(outcomes: &[ToolDay], signals: &[&Signal]) -> Markup {
    // `.max(0.0)`: a sum of zeros can be -0, which would print as "-0 s".
    let wasted: f64 = outcomes
        .iter()
        .map(|o| o.wasted_seconds)
        .sum::<f64>()
        .max(0.0);
    let cost: f64 = outcomes.iter().map(|o| o.wasted_cost_usd).sum();
    let after: u64 = outcomes.iter().map(|o| o.after_success).sum();
    let storms: usize = signals
        .iter()
        .filter(|s| s.draft.kind == crate::signal::Kind::RetryStorm)
        .map(|s| s.draft.findings)
        .sum();
    html! {
        div class="counters" {
            div class="counter" id="wasted" {
                b { (format!("{wasted:.0} s")) } "spent on attempts that could not succeed"
            }
            @if cost > 0.0 {
                div class="counter" id="wasted-cost" {
                    b { (format!("${cost:.2}")) } "spent on them, where spans carry a cost"
                }
            }
            div class="counter" { b { (after) } "retries after success" }
            div class="counter" { b { (storms) } "retry storms" }
        }
    }
}

/// An evidence trace's first cells: the link to its trace (with `class`
/// on the anchor, when not empty), its day, calls, failures and rhythm —
/// with, for a retry chain, who made the retries and the model round trips
/// between them.
pub(crate) fn evidence_row(e: &crate::signal::Evidence, class: &str) -> Markup {
    let calls = e.driver.as_ref().filter(|d| d.model_calls > 0).map(|d| {
        format!(
            ", {} model calls, {} + {} tokens{}",
            d.model_calls,
            d.input_tokens,
            d.output_tokens,
            crate::signal::driver::cost_words(d.cost_usd, d.unpriced_calls, d.model_calls)
        )
    });
    html! {
        td {
            a class=[(!class.is_empty()).then_some(class)]
                href={ "/traces/" (seg(&e.trace_id)) "?day=" (seg(&e.day)) } { (e.trace_id) }
        }
        td { (e.day) }
        td class="n" { (e.calls) }
        td class="n" { (e.failures) }
        td {
            (e.rhythm.as_deref().unwrap_or(""))
            @if let Some(d) = &e.driver {
                " "
                span class="muted driver" { "· driver " (d.driver) (calls.as_deref().unwrap_or("")) }
            }
        }
    }
}

/// [`evidence_row`] as text.
#[cfg(test)]
pub(crate) fn evidence_cells(e: &crate::signal::Evidence, class: &str) -> String {
    evidence_row(e, class).into_string()
}

/// Per day: retries, what they achieved, the share of blips rescued.
fn outcome_table(outcomes: &[ToolDay]) -> Markup {
    if outcomes.is_empty() {
        return html! { p class="muted" { "No retries in this range (or no sweep yet)." } };
    }
    let mut by_day: std::collections::BTreeMap<i32, ToolDay> = Default::default();
    for o in outcomes {
        let d = by_day.entry(o.day).or_default();
        d.day = o.day;
        d.retries += o.retries;
        d.rescued += o.rescued;
        d.wasted += o.wasted;
        d.after_success += o.after_success;
        d.wasted_seconds += o.wasted_seconds;
        d.wasted_cost_usd += o.wasted_cost_usd;
    }
    html! {
        table id="outcomes" {
            tr {
                th { "day" } th class="n" { "retries" } th class="n" { "blips rescued" }
                th class="n" { "wasted on deterministic errors or dead feeds" }
                th class="n" { "after success" } th class="n" { "recovery rate" }
                th class="n" { "wasted" }
            }
            @for d in by_day.values() {
                @let tried = d.rescued + d.wasted;
                tr {
                    td { (day_to_string(d.day)) }
                    td class="n" { (d.retries) }
                    td class="n" { (d.rescued) }
                    td class="n" { (d.wasted) }
                    td class="n" { (d.after_success) }
                    td class="n" {
                        @if tried == 0 { "—" } @else { (pct(d.rescued as f64 / tried as f64)) }
                    }
                    td class="n" { (format!("{:.1} s", d.wasted_seconds)) }
                }
            }
        }
    }
}

/// The overview; `panels` is its panels (`panels::render`), `incidents`
/// its incidents section (`incident_pages::overview_section`).
pub fn overview(
    r: &Range,
    summaries: &[ToolSummary],
    signals: &[Signal],
    outcomes: &[ToolDay],
    panels: Markup,
    incidents: Markup,
) -> String {
    // Per day, over every tool (the table's daily columns add up).
    let mut totals: Vec<(i32, u64, u64)> = (r.from..=r.to).map(|d| (d, 0, 0)).collect();
    for t in summaries {
        for (i, (c, e)) in t.daily_calls.iter().zip(&t.daily_errors).enumerate() {
            totals[i].1 += c;
            totals[i].2 += e;
        }
    }
    let peak = totals
        .iter()
        .max_by_key(|t| (t.2, -t.0))
        .filter(|t| t.2 > 0);
    let in_range: Vec<&Signal> = signals
        .iter()
        .filter(|s| {
            s.draft.days.iter().any(|d| {
                crate::model::day_from_str(d).is_some_and(|d| (r.from..=r.to).contains(&d))
            })
        })
        .collect();
    let mut open: Vec<&Signal> = signals.iter().filter(|s| s.state.is_open()).collect();
    open.sort_by_key(|s| std::cmp::Reverse(s.draft.last_seen_ns));
    let b = html! {
        h1 { "Tool calls, " (day_to_string(r.from)) " to " (day_to_string(r.to)) }
        (range_picker("/", r))
        (counters(outcomes, &in_range))
        p id="coverage-link" class="muted" {
            "Found nothing where you expected something? "
            a href="/coverage" { "What stormwatch can see" }
            " in your spans, per framework, and the setting that fixes each gap."
        }
        @if let Some((d, c, e)) = peak {
            p id="peak" {
                "Most errors: " span class="err" { (day_to_string(*d)) }
                " — " (e) " of " (c) " calls failed (" (pct(*e as f64 / (*c).max(1) as f64)) ")."
            }
        }
        (panels)
        (incidents)
        h2 { "Open signals" }
        div id="open-signals" { (signal_rows(&open)) }
        h2 { "Tools" }
        (tools_table(summaries))
        h2 { "Recent retry attempts" }
        ul id="feed" { li class="muted" { "loading…" } }
        script src=(super::assets::overview_js_href()) defer {}
    };
    page("Overview", b)
}

/// The overview's tools table: the 200 busiest, and how many more.
fn tools_table(summaries: &[ToolSummary]) -> Markup {
    html! {
        table id="tools" {
            tr {
                th { "tool" } th class="n" { "calls" } th class="n" { "errors" }
                th class="n" { "error rate" } th class="n" { "trailing week" }
                th class="n" { "p50" } th class="n" { "p95" } th { "daily" }
                th { "top error" } th class="n" { "open signals" }
            }
            @for t in summaries.iter().take(200) {
                @let hot = if t.error_rate > 3.0 * t.baseline.max(0.01) { "n err" } else { "n" };
                tr {
                    td { a href={ "/tools/" (seg(&t.tool)) } { (t.tool) } }
                    td class="n" { (t.calls) }
                    td class="n" { (t.errors) }
                    td class=(hot) { (pct(t.error_rate)) }
                    td class="n" { (pct(t.baseline)) }
                    td class="n" { (format!("{:.0} ms", t.p50_ms)) }
                    td class="n" { (format!("{:.0} ms", t.p95_ms)) }
                    // An SVG plotters drew from numbers: no text of the spans.
                    td { (PreEscaped(chart::sparkline(&t.daily_calls, &t.daily_errors))) }
                    td { (t.top_class.as_deref().unwrap_or("")) }
                    td class="n" { (t.open_signals) }
                }
            }
        }
        @if summaries.len() > 200 {
            p class="muted" { (summaries.len() - 200) " more tools (see /api/tools)." }
        }
    }
}
