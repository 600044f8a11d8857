//! An incident's timeline: first finding, each member joining, the peak
//! day, the last finding, the resolution — in time order.

use super::impact::PerDay;
use crate::incident::{Member, Moment};
use crate::model::{day_to_string, NANOS_PER_DAY};
use crate::signal::Signal;

/// The timeline: first finding, each member joining, the peak day, the
/// last finding, the resolution; `span` the incident's first and last
/// seen.
pub fn timeline(
    signals: &[&Signal],
    member_rows: &[Member],
    per_day: &PerDay,
    (first_seen_ns, last_seen_ns): (i64, i64),
    resolved_ns: Option<i64>,
) -> Vec<Moment> {
    let mut timeline = Vec::new();
    if let Some(first) = signals
        .iter()
        .min_by_key(|s| (s.draft.first_seen_ns, &s.draft.id))
    {
        timeline.push(Moment {
            at_ns: first.draft.first_seen_ns.max(first_seen_ns),
            what: "first_finding".into(),
            text: format!("first finding: {}", first.draft.title),
            signal_id: Some(first.draft.id.clone()),
        });
    }
    for m in member_rows.iter().filter(|m| m.reason != "first finding") {
        timeline.push(Moment {
            at_ns: m.joined_ns,
            what: "joined".into(),
            text: format!("{} joined ({}): {}", m.signal_id, m.reason, m.title),
            signal_id: Some(m.signal_id.clone()),
        });
    }
    if let Some((day, (errors, calls))) = per_day
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then_with(|| b.0.cmp(a.0)))
        .filter(|(_, (errors, _))| *errors > 0)
    {
        // Within the incident's span, so it sorts after its first finding.
        let at =
            (i64::from(*day) * NANOS_PER_DAY).clamp(first_seen_ns, last_seen_ns.max(first_seen_ns));
        timeline.push(Moment {
            at_ns: at,
            what: "peak".into(),
            text: format!(
                "peak: {errors} of {calls} calls failed on {}",
                day_to_string(*day)
            ),
            signal_id: None,
        });
    }
    if let Some(last) = signals
        .iter()
        .max_by_key(|s| (s.draft.last_seen_ns, &s.draft.id))
    {
        timeline.push(Moment {
            at_ns: last.draft.last_seen_ns,
            what: "last_finding".into(),
            text: format!("last finding: {}", last.draft.title),
            signal_id: Some(last.draft.id.clone()),
        });
    }
    if let Some(at) = resolved_ns {
        timeline.push(Moment {
            at_ns: at,
            what: "resolved".into(),
            text: "resolved: every member is quiet".into(),
            signal_id: None,
        });
    }
    // Stable: at one instant, the order written (first finding, joins, peak, last).
    timeline.sort_by_key(|m| m.at_ns);
    timeline
}
