//! The tool page's error-rate section: the spike rule's own verdicts
//! (`detect::judge`, with the sweep's parameters, see
//! `Rollup::spike_verdicts`) drawn and told: per day the failed share, the
//! low end of its interval, the threshold `min(multiplier × baseline, 100 %)`
//! the rule judged it by, and whether it flagged the day; a table of the
//! same numbers with each baseline's basis. Nothing is derived again here.
//! A tool reported by several services is judged per service: one chart
//! each.

use super::chart::{self, swatch, RateDay};
use maud::{html, Markup, PreEscaped};
use std::collections::BTreeMap;

use super::html::pct;
use super::pages::Range;
use crate::detect::{Basis, DayVerdict, SpikeParams};
use crate::model::day_to_string;

/// Series shown one chart each, busiest first; the rest are named.
const MAX_SERIES: usize = 4;

/// The chart's points of `verdicts` (one series) in `r`. A day from
/// `judged_before` on is not complete: it keeps its threshold (its
/// baseline is made of earlier days) but is not marked flagged, as the
/// sweep has not judged it.
pub fn points<'a>(
    verdicts: impl IntoIterator<Item = &'a DayVerdict>,
    r: &Range,
    judged_before: i32,
) -> Vec<RateDay> {
    let mut v: Vec<&DayVerdict> = verdicts
        .into_iter()
        .filter(|v| (r.from..=r.to).contains(&v.day))
        .collect();
    v.sort_by_key(|v| v.day);
    v.iter()
        .map(|v| RateDay {
            day: v.day,
            rate: v.rate * 100.0,
            lower: v.lower_bound * 100.0,
            threshold: v.threshold.min(1.0) * 100.0,
            flagged: v.flagged && v.day < judged_before,
        })
        .collect()
}

fn basis(v: &DayVerdict, p: &SpikeParams) -> String {
    let pooled = v.baseline_days.len();
    let how = match v.basis {
        Basis::Trailing => format!("{pooled} unflagged days of the trailing week"),
        Basis::ReachBack => format!("{pooled} unflagged days reaching back"),
        Basis::AllRecent => format!("{pooled} recent days, flagged ones too"),
        Basis::Warmup => return format!("warm-up floor {}", pct(p.warmup_floor)),
    };
    if v.baseline <= p.baseline_floor {
        format!("{how}; floor {}", pct(p.baseline_floor))
    } else {
        how
    }
}

/// What the rule said of a day, when it is more than its numbers.
fn verdict(v: &DayVerdict, p: &SpikeParams, judged_before: i32) -> Markup {
    html! {
        @if v.day >= judged_before {
            "in progress"
        } @else if v.flagged {
            b class="err" { "flagged" }
        } @else if v.lower_bound > v.threshold && v.calls < p.min_calls {
            "too few calls to flag (" (v.calls) " < " (p.min_calls) ")"
        } @else if v.lower_bound > v.threshold && v.errors < p.min_errors {
            "too few failed to flag (" (v.errors) " < " (p.min_errors) ")"
        }
    }
}

fn table(verdicts: &[&DayVerdict], p: &SpikeParams, judged_before: i32) -> Markup {
    html! {
        table class="spike-days" {
            tr {
                th { "day" } th class="n" { "calls" } th class="n" { "failed" }
                th class="n" { "failed share" } th class="n" { "low end" }
                th class="n" { "baseline" } th { "baseline from" } th class="n" { "threshold" }
                th { "verdict" }
            }
            @for v in verdicts {
                tr {
                    td { (day_to_string(v.day)) }
                    td class="n" { (v.calls) }
                    td class="n" { (v.errors) }
                    td class="n" { (pct(v.rate)) }
                    td class="n" { (pct(v.lower_bound)) }
                    td class="n" { (pct(v.baseline)) }
                    td { (basis(v, p)) }
                    td class="n" { (pct(v.threshold.min(1.0))) }
                    td { (verdict(v, p, judged_before)) }
                }
            }
        }
    }
}

/// The chart's legend: the swatches are our own SVG (`chart::swatch`).
fn legend(p: &SpikeParams) -> Markup {
    html! {
        p class="legend" {
            span { (PreEscaped(swatch(chart::ERR))) "a day the rule flagged, marked ▼" }
            span { (PreEscaped(swatch(chart::threshold::CALM))) "a day it did not" }
            span {
                (PreEscaped(chart::swatch_of("sw line", chart::BASE)))
                "threshold: " (p.multiplier) " × the day's baseline, at most 100 %"
            }
            span {
                (PreEscaped(chart::swatch_of("sw line thin", chart::threshold::TICK)))
                "low end of the day's failed share at " (format!("{:.0}", p.confidence * 100.0))
                " % confidence: a day is flagged when it is above the threshold, with at least "
                (p.min_calls) " calls and " (p.min_errors) " failed"
            }
        }
    }
}

/// One series' chart, flagged days, legend and table; `n` numbers its ids.
fn series(
    verdicts: &[&DayVerdict],
    r: &Range,
    judged_before: i32,
    p: &SpikeParams,
    n: usize,
) -> Markup {
    let pts = points(verdicts.iter().copied(), r, judged_before);
    let id = if n == 0 {
        String::new()
    } else {
        format!("-{}", n + 1)
    };
    let flagged: Vec<&RateDay> = pts.iter().filter(|d| d.flagged).collect();
    let unfinished = pts.iter().find(|d| d.day >= judged_before);
    let shown: Vec<&DayVerdict> = verdicts
        .iter()
        .copied()
        .filter(|v| (r.from..=r.to).contains(&v.day))
        .collect();
    html! {
        // An SVG plotters drew from numbers.
        div class="chart" id={ "tool-rate" (id) } {
            (PreEscaped(chart::threshold_svg(&pts, r.from, r.to, 1100, 240)))
        }
        (legend(p))
        p class="flagged-days" id={ "flagged-days" (id) } {
            @if flagged.is_empty() {
                "The rule flagged no day in this range."
            } @else {
                "Flagged by the rule: "
                @for (i, d) in flagged.iter().enumerate() {
                    @if i > 0 { " · " }
                    b { (day_to_string(d.day)) }
                    (format!(
                        " ({:.1} % failed, low end {:.1} %, threshold {:.1} %)",
                        d.rate, d.lower, d.threshold
                    ))
                }
                "."
            }
        }
        @if let Some(d) = unfinished {
            p class="muted" {
                (day_to_string(d.day)) " is not over yet (UTC): the rule judges it once it is."
            }
        }
        details {
            summary { "The rule's numbers, day by day" }
            (table(&shown, p, judged_before))
        }
    }
}

/// The section: a heading, then per series (busiest of the range first)
/// its chart and numbers. Text: the tool page puts it in as it is.
pub fn section(verdicts: &[DayVerdict], r: &Range, judged_before: i32, p: &SpikeParams) -> String {
    let mut by_service: BTreeMap<&str, Vec<&DayVerdict>> = BTreeMap::new();
    for v in verdicts {
        by_service.entry(v.service.as_str()).or_default().push(v);
    }
    let calls = |vs: &[&DayVerdict]| -> u64 {
        vs.iter()
            .filter(|v| (r.from..=r.to).contains(&v.day))
            .map(|v| v.calls)
            .sum()
    };
    let mut services: Vec<(&str, Vec<&DayVerdict>)> = by_service.into_iter().collect();
    services.sort_by_key(|(_, vs)| std::cmp::Reverse(calls(vs)));
    let several = services.len() > 1;
    html! {
        h2 { "Error rate against the spike rule's threshold (" (p.multiplier) " × baseline)" }
        @if services.is_empty() {
            div class="chart" id="tool-rate" {}
            p class="muted" { "No judged days yet." }
        }
        @for (n, (service, vs)) in services.iter().take(MAX_SERIES).enumerate() {
            @if several {
                h3 { "Service " code { (service) } ": judged on its own" }
            }
            (series(vs, r, judged_before, p, n))
        }
        @if services.len() > MAX_SERIES {
            p class="muted" {
                "Also judged, not drawn: "
                @for (i, (svc, _)) in services[MAX_SERIES..].iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (svc) }
                }
                "."
            }
        }
    }
    .into_string()
}
