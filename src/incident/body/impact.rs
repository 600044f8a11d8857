//! An incident's impact: the calls, failures, wasted attempts and reach of
//! its members' tools on the days they fired, and the failures per day the
//! timeline's peak is read from.

use std::collections::{BTreeMap, BTreeSet};

use crate::incident::{Facts, Impact};
use crate::model::day_from_str;
use crate::signal::Signal;

/// Errors and calls of the members' tools, by day.
pub type PerDay = BTreeMap<i32, (u64, u64)>;

/// Impact over the members' tools and days (and the repeated calls of
/// members that do not join by tool), with the failures per day.
pub fn impact(signals: &[&Signal], facts: &Facts) -> (Impact, PerDay) {
    let mut tool_days: BTreeSet<(String, i32)> = BTreeSet::new();
    let mut reach_turns: BTreeSet<&str> = BTreeSet::new();
    let mut reach_sessions: BTreeSet<&str> = BTreeSet::new();
    let mut own = Impact::default();
    for s in signals {
        if crate::incident::group::joins(s.draft.kind) {
            for day in s.draft.days.iter().filter_map(|d| day_from_str(d)) {
                tool_days.insert((s.draft.tool.clone(), day));
            }
        } else {
            // A retry after success or a loop: its own repeated calls, not
            // the tool's day (whose failures are another cause's).
            for e in &s.draft.evidence {
                own.calls += e.calls as u64;
                own.failed_calls += e.failures as u64;
                own.wasted_calls += e.calls.saturating_sub(1) as u64;
                own.wasted_seconds += e.wasted_seconds;
            }
        }
        if let Some(r) = facts.reach.get(&s.draft.key) {
            reach_turns.extend(r.turns.iter().map(String::as_str));
            reach_sessions.extend(r.sessions.iter().map(String::as_str));
        }
        for e in &s.draft.evidence {
            reach_turns.extend(e.turn_id.as_deref());
            reach_sessions.extend(e.session_id.as_deref());
        }
    }
    let mut impact = Impact {
        turns: reach_turns.len(),
        sessions: reach_sessions.len(),
        ..own
    };
    let mut per_day: PerDay = BTreeMap::new();
    for key in &tool_days {
        if let Some(f) = facts.daily.get(key) {
            impact.calls += f.calls;
            impact.failed_calls += f.errors;
            impact.wasted_calls += f.wasted;
            impact.wasted_seconds += f.wasted_seconds;
            let e = per_day.entry(key.1).or_default();
            e.0 += f.errors;
            e.1 += f.calls;
        }
    }
    impact.wasted_seconds = (impact.wasted_seconds * 10.0).round() / 10.0;
    (impact, per_day)
}
