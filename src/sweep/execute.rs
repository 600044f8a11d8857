//! Executing a sweep's plan: the summarized days read from their summaries on a
//! thread of their own, beside the days read from their spans in order
//! (each shares partitions with its neighbours); a summary that went stale
//! in between, its day from its spans. Then every day's result folded into
//! the sweep's findings and what the later steps need of them.

use std::collections::{BTreeMap, HashMap};

use super::day;
use super::plan::Plan;
use super::SweepError;
use crate::config::DetectConfig;
use crate::model::day_to_string;
use crate::signal::{self, DayResult, Finding};
use crate::store::Reader;

/// Every planned day's result, with the fingerprint to store it under
/// (`None`: a stored result reused), and how each was come by.
pub(super) struct Executed {
    pub results: BTreeMap<i32, (DayResult, Option<String>)>,
    pub spans_scanned: usize,
    pub days_scanned: usize,
    pub days_reused: usize,
    pub days_from_summary: usize,
    pub days_summarized: usize,
}

/// A day read from its spans: its result, fingerprint, and whether its
/// summary was written.
type Read = (i32, DayResult, String, bool);

/// Run `plan` as of `now`.
pub(super) fn execute(
    reader: &Reader,
    cfg: &DetectConfig,
    now: i64,
    plan: Plan,
    mut live: Option<&mut super::Live>,
) -> Result<Executed, SweepError> {
    let mut done = Executed {
        days_reused: plan.reused.len(),
        results: plan
            .reused
            .into_iter()
            .map(|(day, r)| (day, (r, None)))
            .collect(),
        spans_scanned: 0,
        days_scanned: 0,
        days_from_summary: 0,
        days_summarized: 0,
    };
    let summarized = plan.summarized;
    let mut per_day = day::Days::new(reader, cfg, now);
    let (summaries, spans_read) = std::thread::scope(|scope| {
        let summaries = scope.spawn(|| day::from_summaries(reader, cfg, now, &summarized));
        let spans_read = read_days(&plan.from_spans, &mut per_day, live.as_deref_mut());
        let summaries = summaries
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (summaries, spans_read)
    });
    let mut read = spans_read?;
    for (day, (result, fingerprint)) in summaries? {
        done.days_from_summary += 1;
        done.results.insert(day, (result, Some(fingerprint)));
    }
    // A summary that went stale in between: its day from its spans.
    let stale: Vec<i32> = summarized
        .into_iter()
        .filter(|d| !done.results.contains_key(d))
        .collect();
    read.extend(read_days(
        &stale,
        &mut day::Days::new(reader, cfg, now),
        live,
    )?);
    for (day, result, fingerprint, summary_written) in read {
        done.spans_scanned += result.spans;
        done.days_scanned += 1;
        done.days_summarized += usize::from(summary_written);
        done.results.insert(day, (result, Some(fingerprint)));
    }
    Ok(done)
}

/// `days` read from their spans, in order; today from what `live` kept
/// of it, when there is a `live`.
fn read_days(
    days: &[i32],
    per_day: &mut day::Days<'_>,
    mut live: Option<&mut super::Live>,
) -> Result<Vec<Read>, SweepError> {
    let mut out = Vec::new();
    per_day.plan(days);
    for &day in days {
        let t0 = std::time::Instant::now();
        let (result, fingerprint, summary_written) = match live.as_deref_mut() {
            Some(live) if day == per_day.today() => {
                let (result, fingerprint) =
                    live.result(per_day.reader(), per_day.cfg(), per_day.now(), day)?;
                (result, fingerprint, false)
            }
            _ => per_day.result(day)?,
        };
        tracing::debug!(
            day = %day_to_string(day),
            spans = result.spans,
            through = %day_to_string(result.read_through),
            summarized = summary_written,
            ms = t0.elapsed().as_millis() as u64,
            "per-turn rules"
        );
        out.push((day, result, fingerprint, summary_written));
    }
    Ok(out)
}

/// The days' results folded together.
#[derive(Default)]
pub(super) struct Tally {
    /// The newest span end seen (never past now).
    pub horizon_ns: i64,
    pub outcomes: Vec<crate::detect::outcomes::ToolDay>,
    /// Per tool, the latest start of a call.
    pub traffic: BTreeMap<String, i64>,
    pub turns: crate::detect::silent::Turns,
    /// Per tool and day, the turns where it failed most.
    pub worst: HashMap<(String, i32), Vec<signal::Evidence>>,
}

impl Tally {
    /// Take `day`'s `result`: its findings into `findings`, the rest here.
    pub fn take(&mut self, result: DayResult, day: i32, now: i64, findings: &mut Vec<Finding>) {
        self.horizon_ns = self.horizon_ns.max(result.horizon_ns.min(now));
        findings.extend(result.findings);
        self.outcomes.extend(result.outcomes);
        for (tool, ns) in result.traffic {
            let t = self.traffic.entry(tool).or_insert(i64::MIN);
            *t = (*t).max(ns);
        }
        for (service, n) in result.turns {
            *self.turns.entry((service, day)).or_insert(0) += n;
        }
        self.worst
            .extend(result.worst.into_iter().map(|(t, e)| ((t, day), e)));
    }

    /// A spike's evidence: the turn where the tool failed most that day.
    pub fn attach_worst(&self, findings: &mut [Finding]) {
        for f in findings
            .iter_mut()
            .filter(|f| f.kind == signal::Kind::ErrorRateSpike)
        {
            if let Some(e) = self
                .worst
                .get(&(f.tool.clone(), f.day))
                .and_then(|v| v.first())
            {
                f.evidence = Some(e.clone());
            }
        }
    }
}
