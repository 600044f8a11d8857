//! The tool page's error-rate section: the spike rule's own verdicts
//! (`detect::judge`, with the sweep's parameters, see
//! `Rollup::spike_verdicts`) drawn and told: per day the failed share, the
//! low end of its interval, the threshold `min(multiplier × baseline, 100 %)`
//! the rule judged it by, and whether it flagged the day; a table of the
//! same numbers with each baseline's basis. Nothing is derived again here.
//! A tool reported by several services is judged per service: one chart
//! each.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::chart::{self, swatch, RateDay};
use super::html::{esc, pct};
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

fn table(verdicts: &[&DayVerdict], p: &SpikeParams, judged_before: i32) -> String {
    let mut s = String::from(
        r#"<table class="spike-days"><tr><th>day</th><th class="n">calls</th><th class="n">failed</th><th class="n">failed share</th><th class="n">low end</th><th class="n">baseline</th><th>baseline from</th><th class="n">threshold</th><th>verdict</th></tr>"#,
    );
    for v in verdicts {
        let verdict = if v.day >= judged_before {
            "in progress".to_string()
        } else if v.flagged {
            r#"<b class="err">flagged</b>"#.to_string()
        } else if v.lower_bound > v.threshold && v.calls < p.min_calls {
            format!("too few calls to flag ({} &lt; {})", v.calls, p.min_calls)
        } else if v.lower_bound > v.threshold && v.errors < p.min_errors {
            format!(
                "too few failed to flag ({} &lt; {})",
                v.errors, p.min_errors
            )
        } else {
            String::new()
        };
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td class="n">{}</td><td>{verdict}</td></tr>"#,
            day_to_string(v.day),
            v.calls,
            v.errors,
            pct(v.rate),
            pct(v.lower_bound),
            pct(v.baseline),
            basis(v, p),
            pct(v.threshold.min(1.0)),
        );
    }
    s.push_str("</table>");
    s
}

/// One series' chart, flagged days, legend and table; `n` numbers its ids.
fn series(
    verdicts: &[&DayVerdict],
    r: &Range,
    judged_before: i32,
    p: &SpikeParams,
    n: usize,
) -> String {
    let pts = points(verdicts.iter().copied(), r, judged_before);
    let id = if n == 0 {
        String::new()
    } else {
        format!("-{}", n + 1)
    };
    let mut s = format!(
        r#"<div class="chart" id="tool-rate{id}">{}</div>"#,
        chart::threshold_svg(&pts, r.from, r.to, 1100, 240)
    );
    let _ = write!(
        s,
        r#"<p class="legend"><span>{}a day the rule flagged, marked ▼</span><span>{}a day it did not</span><span>{}threshold: {} × the day's baseline, at most 100 %</span><span>{}low end of the day's failed share at {:.0} % confidence: a day is flagged when it is above the threshold, with at least {} calls and {} failed</span></p>"#,
        swatch(chart::ERR),
        swatch(chart::threshold::CALM),
        chart::swatch_of("sw line", chart::BASE),
        p.multiplier,
        chart::swatch_of("sw line thin", chart::threshold::TICK),
        p.confidence * 100.0,
        p.min_calls,
        p.min_errors
    );
    let flagged: Vec<String> = pts
        .iter()
        .filter(|d| d.flagged)
        .map(|d| {
            format!(
                "<b>{}</b> ({:.1} % failed, low end {:.1} %, threshold {:.1} %)",
                day_to_string(d.day),
                d.rate,
                d.lower,
                d.threshold
            )
        })
        .collect();
    if flagged.is_empty() {
        let _ = write!(
            s,
            r#"<p class="flagged-days" id="flagged-days{id}">The rule flagged no day in this range.</p>"#
        );
    } else {
        let _ = write!(
            s,
            r#"<p class="flagged-days" id="flagged-days{id}">Flagged by the rule: {}.</p>"#,
            flagged.join(" · ")
        );
    }
    if let Some(d) = pts.iter().find(|d| d.day >= judged_before) {
        let _ = write!(
            s,
            r#"<p class="muted">{} is not over yet (UTC): the rule judges it once it is.</p>"#,
            day_to_string(d.day)
        );
    }
    let shown: Vec<&DayVerdict> = verdicts
        .iter()
        .copied()
        .filter(|v| (r.from..=r.to).contains(&v.day))
        .collect();
    let _ = write!(
        s,
        "<details><summary>The rule's numbers, day by day</summary>{}</details>",
        table(&shown, p, judged_before)
    );
    s
}

/// The section: a heading, then per series (busiest of the range first)
/// its chart and numbers.
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
    let mut s = format!(
        "<h2>Error rate against the spike rule's threshold ({} × baseline)</h2>",
        p.multiplier
    );
    if services.is_empty() {
        s.push_str(
            r#"<div class="chart" id="tool-rate"></div><p class="muted">No judged days yet.</p>"#,
        );
        return s;
    }
    let several = services.len() > 1;
    for (n, (service, vs)) in services.iter().take(MAX_SERIES).enumerate() {
        if several {
            let _ = write!(
                s,
                "<h3>Service <code>{}</code>: judged on its own</h3>",
                esc(service)
            );
        }
        s.push_str(&series(vs, r, judged_before, p, n));
    }
    if services.len() > MAX_SERIES {
        let rest: Vec<String> = services[MAX_SERIES..]
            .iter()
            .map(|(svc, _)| format!("<code>{}</code>", esc(svc)))
            .collect();
        let _ = write!(
            s,
            r#"<p class="muted">Also judged, not drawn: {}.</p>"#,
            rest.join(", ")
        );
    }
    s
}
