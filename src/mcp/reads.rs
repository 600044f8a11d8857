//! The read tools' answers over the rollup and the incidents (`list_tools`,
//! `get_tool_daily`, `list_incidents`, `get_incident`, `get_retry_storms`):
//! what each returns (the types its `outputSchema` is generated from) and
//! how it is read. The signals' are in `signal_reads`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::page::{page, page_with, BUDGET_CHARS};
use super::{Context, McpError};
use crate::model::{day_of_ns, day_to_string};
use crate::read::incidents::{ordered, IncidentAnswer, IncidentLine, StateCounts, Which};

/// A window of days ending on the newest day with data: (from, to).
pub fn window(days: Option<u32>, last_day: Option<i32>) -> Result<(i32, i32), McpError> {
    let days = days.unwrap_or(30);
    if !(1..=366).contains(&days) {
        return Err(McpError::Argument(format!(
            "days: expected 1 to 366, got {days}"
        )));
    }
    let to = last_day.unwrap_or_else(today);
    Ok((to - days as i32 + 1, to))
}

pub(super) fn today() -> i32 {
    day_of_ns(chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0))
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolLine {
    pub tool: String,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    /// The error rate of the seven days before the window's last day.
    pub baseline: f64,
    /// The spike rule's own baseline on the window's last judged day (the
    /// pooled trailing rate, flagged days left out, floored).
    pub rule_baseline: Option<f64>,
    /// What the spike rule's lower bound had to beat on that day
    /// (multiplier × the rule's baseline).
    pub threshold: Option<f64>,
    pub p95_ms: f64,
    pub open_signals: usize,
    /// Days in the window whose error rate the spike rule flagged.
    pub flagged_days: Vec<String>,
    /// Calls a human-in-the-loop interrupt or a hand-off stopped: in
    /// `calls`, never in `errors`.
    pub interrupted: u64,
    /// Calls their user cancelled: in `calls`, never in `errors`.
    pub cancelled: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolsAnswer {
    pub from: String,
    pub to: String,
    pub tools: Vec<ToolLine>,
    /// Tools in the window, over every page.
    pub total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// The lines of `list_tools` over `from..=to`, every tool, busiest first.
pub fn tool_lines(
    ctx: &Context,
    rollup: &std::sync::Arc<crate::read::data::Rollup>,
    from: i32,
    to: i32,
) -> Result<Vec<ToolLine>, McpError> {
    let signals = ctx.signals()?;
    let verdicts = ctx.verdicts(rollup, today().max(to) + 1);
    Ok(ctx
        .reads
        .tools
        .tools(from, to, rollup, &signals)
        .iter()
        .map(|s| {
            let v = verdicts.get(&s.tool).map(Vec::as_slice).unwrap_or_default();
            let in_window = v.iter().filter(|v| (from..=to).contains(&v.day));
            let mut flagged: Vec<i32> = in_window
                .clone()
                .filter(|v| v.flagged)
                .map(|v| v.day)
                .collect();
            flagged.sort();
            flagged.dedup();
            let last = in_window.max_by_key(|v| v.day);
            ToolLine {
                rule_baseline: last.map(|v| v.baseline),
                threshold: last.map(|v| v.threshold),
                flagged_days: flagged.into_iter().map(day_to_string).collect(),
                tool: s.tool.clone(),
                calls: s.calls,
                errors: s.errors,
                error_rate: s.error_rate,
                baseline: s.baseline,
                p95_ms: s.p95_ms,
                open_signals: s.open_signals,
                interrupted: s.interrupted,
                cancelled: s.cancelled,
            }
        })
        .collect())
}

pub fn list_tools(
    ctx: &Context,
    days: Option<u32>,
    cursor: Option<&str>,
    limit: Option<usize>,
) -> Result<ToolsAnswer, McpError> {
    let rollup = ctx.rollup()?;
    let (from, to) = window(days, rollup.last_day())?;
    let lines = ctx.tool_lines(&rollup, from, to)?;
    // Fifty a page unless more are asked for: the busiest tools are where
    // an agent starts, and the next page is one call away.
    let p = page(
        &lines,
        cursor,
        Some(limit.unwrap_or(50)),
        200,
        BUDGET_CHARS,
        "tools",
    )?;
    Ok(ToolsAnswer {
        from: day_to_string(from),
        to: day_to_string(to),
        total: p.total,
        tools: p.items,
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DayLine {
    pub day: String,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    /// The spike rule's baseline for the day (pooled trailing rate, floored).
    pub baseline: Option<f64>,
    /// What the day's lower bound had to beat.
    pub threshold: Option<f64>,
    /// The Wilson lower bound of the day's rate.
    pub lower_bound: Option<f64>,
    pub flagged: bool,
    pub p95_ms: f64,
    /// Failed calls by class.
    pub classes: BTreeMap<String, u64>,
    /// Calls a human-in-the-loop interrupt or a hand-off stopped: in
    /// `calls`, never in `errors`.
    pub interrupted: u64,
    /// Calls their user cancelled: in `calls`, never in `errors`.
    pub cancelled: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DailyAnswer {
    pub tool: String,
    pub days: Vec<DayLine>,
    pub flagged_days: Vec<String>,
    /// The rule: flagged when the lower bound is above `multiplier` × the baseline.
    pub multiplier: f64,
}

pub fn tool_daily(ctx: &Context, tool: &str, days: Option<u32>) -> Result<DailyAnswer, McpError> {
    let rollup = ctx.rollup()?;
    let Some(series) = rollup.tools.get(tool) else {
        let known: Vec<&String> = rollup.tools.keys().take(20).collect();
        return Err(McpError::NotFound(format!(
            "no tool {tool:?} in the rollup; list_tools names them (some: {known:?})"
        )));
    };
    let (from, to) = window(days, rollup.last_day())?;
    let verdicts = ctx.verdicts(&rollup, today().max(to) + 1);
    // One verdict per service: the day's is its busiest service's.
    let mut by_day: BTreeMap<i32, &crate::detect::DayVerdict> = BTreeMap::new();
    for v in verdicts.get(tool).map(Vec::as_slice).unwrap_or_default() {
        let e = by_day.entry(v.day).or_insert(v);
        if v.flagged && !e.flagged || v.calls > e.calls && v.flagged == e.flagged {
            *e = v;
        }
    }
    let lines: Vec<DayLine> = series
        .iter()
        .filter(|d| (from..=to).contains(&d.day))
        .map(|d| {
            let v = by_day.get(&d.day);
            DayLine {
                day: day_to_string(d.day),
                calls: d.calls,
                errors: d.errors,
                error_rate: d.rate(),
                baseline: v.map(|v| v.baseline),
                threshold: v.map(|v| v.threshold),
                lower_bound: v.map(|v| v.lower_bound),
                flagged: v.is_some_and(|v| v.flagged),
                p95_ms: d.p95_ns / 1e6,
                interrupted: d.interrupted,
                cancelled: d.cancelled,
                classes: d
                    .classes
                    .iter()
                    .map(|(c, n)| (c.as_str().to_string(), *n))
                    .collect(),
            }
        })
        .collect();
    Ok(DailyAnswer {
        tool: tool.to_string(),
        flagged_days: lines
            .iter()
            .filter(|l| l.flagged)
            .map(|l| l.day.clone())
            .collect(),
        days: lines,
        multiplier: ctx.spike.multiplier,
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct IncidentsAnswer {
    /// Open ones first, then acknowledged, then resolved; the most severe
    /// first, then the latest finding.
    pub incidents: Vec<IncidentLine>,
    /// Incidents the filter admits, over every page.
    pub total: usize,
    /// Every stored incident by state, whatever the filter.
    pub counts: StateCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

pub fn list_incidents(
    ctx: &Context,
    state: Option<&str>,
    cursor: Option<&str>,
    limit: Option<usize>,
) -> Result<IncidentsAnswer, McpError> {
    let which = Which::parse(state).map_err(|e| McpError::Argument(e.to_string()))?;
    let all = ctx.reads.incidents.incidents()?;
    let list = ordered(&all, which);
    let p = page_with(
        &list,
        |i| IncidentLine::of(i),
        cursor,
        Some(limit.unwrap_or(50)),
        100,
        BUDGET_CHARS,
        "incidents",
    )?;
    Ok(IncidentsAnswer {
        incidents: p.items,
        total: p.total,
        counts: StateCounts::of(&all),
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}

pub fn get_incident(ctx: &Context, id: &str) -> Result<IncidentAnswer, McpError> {
    crate::read::incidents::kept(&ctx.reads, &ctx.state_path, id)?.ok_or_else(|| {
        McpError::NotFound(format!(
            "no incident {id:?}; list_incidents gives the ids (like INC-BCDF)"
        ))
    })
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StormLine {
    pub tool: String,
    pub day: String,
    pub trace_id: String,
    pub turn_id: Option<String>,
    /// Rounds of calls in the turn.
    pub calls: usize,
    pub failures: usize,
    pub class: String,
    pub rhythm: Option<String>,
    pub outcome: Option<String>,
    pub wasted_seconds: f64,
    /// Who made the retries — `code`, `model` or `mixed` — and the model
    /// round trips between them (docs/detection.md §4.2, "Driver"); absent
    /// for results kept before the rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<crate::signal::driver::DriverEvidence>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StormsAnswer {
    pub from: String,
    pub to: String,
    pub storms: Vec<StormLine>,
    pub total: usize,
    /// Days of the window no sweep has kept results for.
    pub days_not_swept: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// The storms the last sweeps found, from the per-day results they kept.
pub fn retry_storms(
    ctx: &Context,
    days: Option<u32>,
    tool: Option<&str>,
    min_rounds: Option<usize>,
    cursor: Option<&str>,
    limit: Option<usize>,
) -> Result<StormsAnswer, McpError> {
    let rollup = ctx.rollup()?;
    let (from, to) = window(days, rollup.last_day())?;
    let state = ctx.state()?;
    let kept = state.findings_between(from, to)?;
    let min = min_rounds.unwrap_or(1);
    let mut storms: Vec<StormLine> = Vec::new();
    let mut seen_days = std::collections::BTreeSet::new();
    for (day, findings) in &kept {
        seen_days.insert(*day);
        for f in findings {
            if f.kind != crate::signal::Kind::RetryStorm || tool.is_some_and(|t| t != f.tool) {
                continue;
            }
            let Some(e) = &f.evidence else { continue };
            if e.calls < min {
                continue;
            }
            storms.push(StormLine {
                tool: f.tool.clone(),
                day: day_to_string(*day),
                trace_id: e.trace_id.clone(),
                turn_id: e.turn_id.clone(),
                calls: e.calls,
                failures: e.failures,
                class: f.class.as_str().to_string(),
                rhythm: e.rhythm.clone(),
                outcome: e.outcome.clone(),
                wasted_seconds: e.wasted_seconds,
                driver: e.driver.clone(),
            });
        }
    }
    storms.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| b.day.cmp(&a.day))
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
    let data_days = ctx.reader.days()?;
    let days_not_swept = data_days
        .into_iter()
        .filter(|d| (from..=to).contains(d) && !seen_days.contains(d))
        .map(day_to_string)
        .collect();
    let p = page(&storms, cursor, limit, 100, BUDGET_CHARS, "storms")?;
    Ok(StormsAnswer {
        from: day_to_string(from),
        to: day_to_string(to),
        storms: p.items,
        total: p.total,
        days_not_swept,
        next_cursor: p.next_cursor,
        truncated: p.truncated,
    })
}
