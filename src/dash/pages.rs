//! The pages: overview, tool, signals, signal, trace (the incidents' are in
//! `incident_pages`). Each is a function of data already read; no IO here.

use std::fmt::Write;

use super::chart;
use super::html::{esc, page, pct, seg, state};
use crate::detect::outcomes::ToolDay;
use crate::model::day_to_string;
use crate::read::data::{Rollup, ToolSummary};
use crate::read::trace::TraceView;
use crate::signal::Signal;
use crate::time::rfc3339;

/// The range a page shows: its days, and how it was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub from: i32,
    pub to: i32,
    pub days: i32,
}

fn range_picker(base: &str, r: &Range) -> String {
    let mut s = String::from(r#"<div class="range">Range: "#);
    for d in [7, 30, 90] {
        let on = if d == r.days { r#" class="on""# } else { "" };
        let _ = write!(s, r#"<a{on} href="{base}?days={d}">{d} days</a>"#);
    }
    let _ = write!(
        s,
        r#"<form class="inline" method="get" action="{base}"> from <input name="from" type="date" value="{}"> to <input name="to" type="date" value="{}"> <button>Show</button></form></div>"#,
        day_to_string(r.from),
        day_to_string(r.to)
    );
    s
}

fn signal_rows(signals: &[&Signal]) -> String {
    if signals.is_empty() {
        return r#"<p class="muted">No signals.</p>"#.into();
    }
    let mut s = String::from("<table><tr><th>id</th><th>state</th><th>kind</th><th>tool</th><th>signal</th><th>first seen</th><th>last seen</th><th class=\"n\">findings</th></tr>");
    for sig in signals {
        let d = &sig.draft;
        let _ = write!(
            s,
            r#"<tr><td><a href="/signals/{}">{}</a></td><td>{}</td><td>{}</td><td><a href="/tools/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td class="n">{}</td></tr>"#,
            seg(&d.id),
            esc(&d.id),
            state(sig.state.as_str()),
            esc(d.kind.as_str()),
            seg(&d.tool),
            esc(&d.tool),
            esc(&d.title),
            esc(&rfc3339(d.first_seen_ns)[..10]),
            esc(&rfc3339(d.last_seen_ns)[..10]),
            d.findings
        );
    }
    s.push_str("</table>");
    s
}

/// The wasted-work counters: from the retry outcomes of the range (every
/// settled retry, not only those in signals), and the storms in `signals`.
fn counters(outcomes: &[ToolDay], signals: &[&Signal]) -> String {
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
    let cost = if cost > 0.0 {
        format!(
            r#"<div class="counter" id="wasted-cost"><b>${cost:.2}</b>spent on them, where spans carry a cost</div>"#
        )
    } else {
        String::new()
    };
    format!(
        r#"<div class="counters"><div class="counter" id="wasted"><b>{wasted:.0} s</b>spent on attempts that could not succeed</div>{cost}<div class="counter"><b>{after}</b>retries after success</div><div class="counter"><b>{storms}</b>retry storms</div></div>"#
    )
}

/// An evidence trace's first cells: the link to its trace (with `link_attrs`
/// on the anchor), its day, calls, failures and rhythm — with, for a retry
/// chain, who made the retries and the model round trips between them.
pub(crate) fn evidence_cells(e: &crate::signal::Evidence, link_attrs: &str) -> String {
    let driver = e.driver.as_ref().map_or(String::new(), |d| {
        let calls = if d.model_calls > 0 {
            format!(
                ", {} model calls, {} + {} tokens{}",
                d.model_calls,
                d.input_tokens,
                d.output_tokens,
                crate::signal::driver::cost_words(d.cost_usd, d.unpriced_calls, d.model_calls)
            )
        } else {
            String::new()
        };
        format!(
            r#" <span class="muted driver">· driver {}{}</span>"#,
            esc(&d.driver),
            esc(&calls)
        )
    });
    format!(
        r#"<td><a{link_attrs} href="/traces/{}?day={}">{}</a></td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td>{}{driver}</td>"#,
        seg(&e.trace_id),
        seg(&e.day),
        esc(&e.trace_id),
        esc(&e.day),
        e.calls,
        e.failures,
        esc(e.rhythm.as_deref().unwrap_or(""))
    )
}

/// Per day: retries, what they achieved, the share of blips rescued.
fn outcome_table(outcomes: &[ToolDay]) -> String {
    if outcomes.is_empty() {
        return r#"<p class="muted">No retries in this range (or no sweep yet).</p>"#.into();
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
    let mut s = String::from(
        r#"<table id="outcomes"><tr><th>day</th><th class="n">retries</th><th class="n">blips rescued</th><th class="n">wasted on deterministic errors or dead feeds</th><th class="n">after success</th><th class="n">recovery rate</th><th class="n">wasted</th></tr>"#,
    );
    for d in by_day.values() {
        let tried = d.rescued + d.wasted;
        let rate = if tried == 0 {
            "—".to_string()
        } else {
            pct(d.rescued as f64 / tried as f64)
        };
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{rate}</td><td class="n">{:.1} s</td></tr>"#,
            day_to_string(d.day),
            d.retries,
            d.rescued,
            d.wasted,
            d.after_success,
            d.wasted_seconds
        );
    }
    s.push_str("</table>");
    s
}

/// The overview; `incidents` is its incidents section
/// (`incident_pages::overview_section`).
pub fn overview(
    r: &Range,
    summaries: &[ToolSummary],
    signals: &[Signal],
    outcomes: &[ToolDay],
    panels: &str,
    incidents: &str,
) -> String {
    let mut b = String::new();
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
    let _ = write!(
        b,
        "<h1>Tool calls, {} to {}</h1>{}",
        day_to_string(r.from),
        day_to_string(r.to),
        range_picker("/", r)
    );
    let in_range: Vec<&Signal> = signals
        .iter()
        .filter(|s| {
            s.draft.days.iter().any(|d| {
                crate::model::day_from_str(d).is_some_and(|d| (r.from..=r.to).contains(&d))
            })
        })
        .collect();
    b.push_str(&counters(outcomes, &in_range));
    b.push_str(r#"<p id="coverage-link" class="muted">Found nothing where you expected something? <a href="/coverage">What stormwatch can see</a> in your spans, per framework, and the setting that fixes each gap.</p>"#);
    if let Some((d, c, e)) = peak {
        let _ = write!(
            b,
            r#"<p id="peak">Most errors: <span class="err">{}</span> — {e} of {c} calls failed ({}).</p>"#,
            day_to_string(*d),
            pct(*e as f64 / (*c).max(1) as f64)
        );
    }
    b.push_str(panels);
    b.push_str(incidents);
    let mut open: Vec<&Signal> = signals.iter().filter(|s| s.state.is_open()).collect();
    open.sort_by_key(|s| std::cmp::Reverse(s.draft.last_seen_ns));
    let _ = write!(
        b,
        r#"<h2>Open signals</h2><div id="open-signals">{}</div>"#,
        signal_rows(&open)
    );
    b.push_str(r#"<h2>Tools</h2><table id="tools"><tr><th>tool</th><th class="n">calls</th><th class="n">errors</th><th class="n">error rate</th><th class="n">trailing week</th><th class="n">p50</th><th class="n">p95</th><th>daily</th><th>top error</th><th class="n">open signals</th></tr>"#);
    for t in summaries.iter().take(200) {
        let hot = if t.error_rate > 3.0 * t.baseline.max(0.01) {
            " err"
        } else {
            ""
        };
        let _ = write!(
            b,
            r#"<tr><td><a href="/tools/{}">{}</a></td><td class="n">{}</td><td class="n">{}</td><td class="n{hot}">{}</td><td class="n">{}</td><td class="n">{:.0} ms</td><td class="n">{:.0} ms</td><td>{}</td><td>{}</td><td class="n">{}</td></tr>"#,
            seg(&t.tool),
            esc(&t.tool),
            t.calls,
            t.errors,
            pct(t.error_rate),
            pct(t.baseline),
            t.p50_ms,
            t.p95_ms,
            chart::sparkline(&t.daily_calls, &t.daily_errors),
            esc(t.top_class.as_deref().unwrap_or("")),
            t.open_signals
        );
    }
    b.push_str("</table>");
    if summaries.len() > 200 {
        let _ = write!(
            b,
            r#"<p class="muted">{} more tools (see /api/tools).</p>"#,
            summaries.len() - 200
        );
    }
    let _ = write!(
        b,
        r#"<h2>Recent retry attempts</h2><ul id="feed"><li class="muted">loading…</li></ul><script src="{}" defer></script>"#,
        super::assets::overview_js_href()
    );
    page("Overview", &b)
}

/// The raw names a class was logged under, most seen first:
/// `<code>HTTP 503</code> ×12, …`.
fn raw_names(seen: Option<&std::collections::BTreeMap<&str, u64>>) -> String {
    let mut seen: Vec<(&&str, &u64)> = seen.map(|m| m.iter().collect()).unwrap_or_default();
    seen.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    seen.iter()
        .map(|(n, k)| format!("<code>{}</code> ×{k}", esc(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tool page's calls stopped on purpose over the range — interrupted
/// (a human-in-the-loop interrupt, a hand-off) and cancelled (by their
/// user) — with the names they were logged under: counted apart, never as
/// failures. Empty when there were none.
fn control_flow(
    days: &[crate::detect::DailyRow],
    r: &Range,
    names: &std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, u64>>,
) -> String {
    let in_range = || days.iter().filter(|d| (r.from..=r.to).contains(&d.day));
    let rows = [
        (
            "interrupted",
            in_range().map(|d| d.interrupted).sum::<u64>(),
        ),
        ("cancelled", in_range().map(|d| d.cancelled).sum::<u64>()),
    ];
    if rows.iter().all(|(_, n)| *n == 0) {
        return String::new();
    }
    let mut b = String::from("<h2>Stopped on purpose (no failures)</h2><p class=\"muted\">Calls a human-in-the-loop interrupt or a hand-off stopped, or their user cancelled: counted in the calls, never in the errors, the chains or the wasted retries.</p><table id=\"control-flow\"><tr><th>class</th><th class=\"n\">calls</th><th>raw names seen</th></tr>");
    for (c, n) in rows.iter().filter(|(_, n)| *n > 0) {
        let _ = write!(
            b,
            r#"<tr><td>{c}</td><td class="n">{n}</td><td>{}</td></tr>"#,
            raw_names(names.get(c))
        );
    }
    b.push_str("</table>");
    b
}

/// A tool's page; `rate` is its error-rate section (`spike::section`).
pub fn tool(
    tool: &str,
    rollup: &Rollup,
    r: &Range,
    signals: &[Signal],
    outcomes: &[ToolDay],
    rate: &str,
) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>Tool <code>{}</code></h1>{}",
        esc(tool),
        range_picker(&format!("/tools/{}", seg(tool)), r)
    );
    let days = rollup.tools.get(tool).cloned().unwrap_or_default();
    let vol = rollup.chart_days(r.from, r.to, Some(tool));
    let _ = write!(
        b,
        r#"<h2>Daily calls</h2><div class="chart" id="tool-volume">{}</div>"#,
        chart::volume_svg(&vol, 1100, 240)
    );
    b.push_str(&super::silent::section(tool, signals));
    b.push_str(rate);
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
    let _ = write!(
        b,
        r#"<h2>Latency: p50 (bars) and p95 (line)</h2><div class="chart">{}</div>"#,
        chart::rate_svg(&lat, 1100, 200, " ms")
    );
    // Error classes over the range, with the raw names each was logged under.
    let mut classes: std::collections::BTreeMap<&str, u64> = Default::default();
    for d in days.iter().filter(|d| (r.from..=r.to).contains(&d.day)) {
        for (c, n) in &d.classes {
            *classes.entry(c.as_str()).or_insert(0) += n;
        }
    }
    let mut names: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, u64>> =
        Default::default();
    for (d, c, n, k) in rollup.names.get(tool).map(Vec::as_slice).unwrap_or(&[]) {
        if (r.from..=r.to).contains(d) {
            *names
                .entry(c.as_str())
                .or_default()
                .entry(n.as_str())
                .or_insert(0) += k;
        }
    }
    b.push_str("<h2>Error classes, and the names they were logged under</h2><table id=\"classes\"><tr><th>class</th><th class=\"n\">failed calls</th><th>raw names seen</th></tr>");
    for (c, n) in &classes {
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td class="n">{n}</td><td>{}</td></tr>"#,
            esc(c),
            raw_names(names.get(c))
        );
    }
    b.push_str("</table>");
    b.push_str(&control_flow(&days, r, &names));
    let mine: Vec<&Signal> = signals.iter().filter(|s| s.draft.tool == tool).collect();
    let _ = write!(
        b,
        "<h2>Retry outcomes</h2>{}{}",
        counters(outcomes, &mine),
        outcome_table(outcomes)
    );
    let _ = write!(b, "<h2>Signals</h2>{}", signal_rows(&mine));
    b.push_str("<h2>Worst turns</h2><table><tr><th>trace</th><th>day</th><th class=\"n\">calls</th><th class=\"n\">failed</th><th>rhythm</th><th class=\"n\">wasted</th></tr>");
    let mut ev: Vec<_> = mine.iter().flat_map(|s| s.draft.evidence.iter()).collect();
    ev.sort_by(|a, b| {
        b.wasted_seconds
            .total_cmp(&a.wasted_seconds)
            .then(b.calls.cmp(&a.calls))
    });
    for e in ev.iter().take(20) {
        let _ = write!(
            b,
            r#"<tr>{}<td class="n">{:.1} s</td></tr>"#,
            evidence_cells(e, ""),
            e.wasted_seconds
        );
    }
    b.push_str("</table>");
    let _ = write!(
        b,
        r#"<p><a href="/charts/tools/{0}/daily.svg?days={1}">SVG</a> · <a href="/charts/tools/{0}/daily.png?days={1}">PNG</a> of the daily chart, for chat messages.</p>"#,
        seg(tool),
        r.days
    );
    page(&format!("Tool {tool}"), &b)
}

pub fn signals(list: &[Signal], filter: &str) -> String {
    let refs: Vec<&Signal> = list.iter().collect();
    let mut b = String::from("<h1>Signals</h1><p>Filter: ");
    for (label, q) in [
        ("all", ""),
        ("open", "?state=open"),
        ("muted", "?state=muted"),
        ("resolved", "?state=resolved"),
        ("retry storms", "?kind=retry_storm"),
    ] {
        let _ = write!(b, r#"<a href="/signals{q}">{label}</a> · "#);
    }
    let _ = write!(
        b,
        "<span class=\"muted\">{}</span></p>{}",
        esc(filter),
        signal_rows(&refs)
    );
    page("Signals", &b)
}

/// A signal's page; `incident` is the line naming the incident it is part
/// of (`incident_pages::part_of`), empty when it is part of none.
pub fn signal(
    s: &Signal,
    history: &[(i64, Option<String>, String, String)],
    incident: &str,
) -> String {
    let d = &s.draft;
    let mut b = String::new();
    let _ = write!(
        b,
        r#"<h1>{}</h1><p><code>{}</code> · <span id="state">{}</span> · <a href="/tools/{}">{}</a> · first seen {} · last seen {} · {} finding(s) on {}</p>"#,
        esc(&d.title),
        esc(&d.id),
        state(s.state.as_str()),
        seg(&d.tool),
        esc(&d.tool),
        esc(&rfc3339(d.first_seen_ns)),
        esc(&rfc3339(d.last_seen_ns)),
        d.findings,
        esc(&d.days.join(", "))
    );
    b.push_str(incident);
    let _ = write!(
        b,
        r#"<div class="counters"><div class="counter" id="wasted"><b>{:.0} s</b>spent on attempts that could not succeed</div></div>"#,
        d.wasted_seconds.max(0.0)
    );
    if let Some(r) = &d.remedy {
        let _ = write!(
            b,
            r#"<h2>What to do</h2><dl id="remedy"><dt>Will waiting fix it?</dt><dd>{}</dd><dt>When to cut it off</dt><dd>{}</dd><dt>What to change before the next attempt</dt><dd>{}</dd></dl>"#,
            esc(&r.waiting_fixes),
            esc(&r.cut_off),
            esc(&r.change)
        );
    }
    let id = seg(&d.id);
    let _ = write!(
        b,
        r#"<p><form class="inline" method="post" action="/api/signals/{id}/mute"><button id="mute">Mute</button></form>
<form class="inline" method="post" action="/api/signals/{id}/mute?until_escalates=true"><button id="mute-esc">Mute until it escalates</button></form>
<form class="inline" method="post" action="/api/signals/{id}/unmute"><button id="unmute">Unmute</button></form>
<form class="inline" method="post" action="/api/signals/{id}/resolve"><button id="resolve">Resolve</button></form></p>"#
    );
    b.push_str(r#"<h2>Evidence</h2><table id="evidence"><tr><th>trace</th><th>day</th><th class="n">calls</th><th class="n">failed</th><th>rhythm</th><th>outcome</th><th class="n">wasted</th><th>turn vs healthy</th></tr>"#);
    for e in &d.evidence {
        let vs = match (e.turn_duration_s, e.healthy_turn_duration_s) {
            (Some(t), Some(h)) => format!("{t:.1} s vs {h:.1} s"),
            _ => String::new(),
        };
        let _ = write!(
            b,
            r#"<tr>{}<td>{}</td><td class="n">{:.1} s</td><td>{}</td></tr>"#,
            evidence_cells(e, r#" class="trace""#),
            esc(e.outcome.as_deref().unwrap_or("")),
            e.wasted_seconds,
            esc(&vs)
        );
    }
    b.push_str("</table>");
    if d.evidence_more > 0 {
        let _ = write!(
            b,
            r#"<p class="muted">+{} more traces</p>"#,
            d.evidence_more
        );
    }
    b.push_str(
        "<h2>Timeline</h2><table><tr><th>when</th><th>from</th><th>to</th><th>why</th></tr>",
    );
    for (at, from, to, why) in history {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&rfc3339(*at)),
            esc(from.as_deref().unwrap_or("—")),
            esc(to),
            esc(why)
        );
    }
    b.push_str("</table>");
    page(&d.id, &b)
}

pub const PAGE_SPANS: usize = 500;

pub fn trace(v: &TraceView, page_no: usize, day: Option<&str>) -> String {
    let mut b = String::new();
    let total = (v.end_ns - v.start_ns).max(1) as f64;
    let pages = v.spans.len().div_ceil(PAGE_SPANS).max(1);
    let _ = write!(
        b,
        r#"<h1>Trace <code>{}</code></h1><p>{} spans in {} turn(s), {:.1} s; {:.1} s of attempts that could not help.</p>
<p class="legend"><span><i class="sw rescued"></i>retry rescued a blip</span><span><i class="sw wasted"></i>retry wasted (deterministic error or dead feed)</span><span><i class="sw after_success"></i>retry after success</span><span><i class="sw failed"></i>first attempt failed</span><span><i class="sw tool"></i>tool call</span></p>"#,
        esc(&v.trace_id),
        v.spans.len(),
        v.turns,
        total / 1e9,
        v.wasted_seconds
    );
    if pages > 1 {
        b.push_str("<p>Page: ");
        for p in 1..=pages {
            let dayq = day.map(|d| format!("&day={}", seg(d))).unwrap_or_default();
            let _ = write!(
                b,
                r#"<a href="/traces/{}?page={p}{dayq}">{p}</a> "#,
                seg(&v.trace_id)
            );
        }
        let _ = write!(b, "of {pages} ({PAGE_SPANS} spans a page)</p>");
    }
    b.push_str(
        r#"<table id="waterfall"><tr><th>span</th><th>attempt</th><th class="time">time</th></tr>"#,
    );
    let mut last_turn = "";
    for s in v
        .spans
        .iter()
        .skip((page_no.max(1) - 1) * PAGE_SPANS)
        .take(PAGE_SPANS)
    {
        if s.turn != last_turn {
            let _ = write!(
                b,
                r#"<tr class="turn"><td colspan="3">turn {}</td></tr>"#,
                esc(&s.turn)
            );
            last_turn = &s.turn;
        }
        if let Some(g) = s.gap_ms {
            // A retry after a failure that said how long to wait.
            let told = match (s.retry_after_ms, s.early) {
                (Some(ms), Some(true)) => format!(
                    r#" · <strong class="early">early: Retry-After {}</strong>"#,
                    crate::detect::retry_after::words(ms)
                ),
                (Some(ms), _) => format!(
                    " · waited out Retry-After {}",
                    crate::detect::retry_after::words(ms)
                ),
                _ => String::new(),
            };
            let _ = write!(
                b,
                r#"<tr class="gap"><td></td><td colspan="2">↳ {} after {} · {}{}{told}</td></tr>"#,
                esc(s.tool.as_deref().unwrap_or("")),
                if g < 1000.0 {
                    format!("{g:.0} ms")
                } else {
                    format!("{:.1} s", g / 1000.0)
                },
                esc(s.rhythm.as_deref().unwrap_or("retry")),
                match s.driver.as_deref() {
                    Some("model") => " · the model asked again",
                    Some("code") => " · retried by code",
                    _ => "",
                }
            );
        }
        let left = (s.start_ns - v.start_ns) as f64 / total * 100.0;
        let width = ((s.end_ns - s.start_ns) as f64 / total * 100.0).max(0.3);
        let class = if s.verdict.is_empty() {
            String::new()
        } else {
            format!(" tool {}", esc(&s.verdict))
        };
        let _ = write!(
            b,
            r#"<tr class="span" data-verdict="{}"><td><details><summary>{}</summary><pre>{}</pre><p class="muted">{} · span {} · {}</p></details></td><td>{}</td><td><svg class="wf" aria-hidden="true"><rect class="bar{class}" x="{left:.3}%" y="2" width="{width:.3}%" height="14" rx="2"><title>{:.1} ms {}</title></rect></svg></td></tr>"#,
            esc(&s.verdict),
            esc(&s.name),
            esc(&s.attributes),
            esc(&s.service),
            esc(&s.span_id),
            esc(&s.error_class),
            s.attempt
                .map(|a| format!("#{a} {}", esc(&s.verdict)))
                .unwrap_or_default(),
            (s.end_ns - s.start_ns) as f64 / 1e6,
            esc(&s.error_class)
        );
    }
    b.push_str("</table>");
    page(&format!("Trace {}", v.trace_id), &b)
}
