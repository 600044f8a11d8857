//! Committing a sweep: the signal drafts applied to the state in one
//! transaction, with the incidents updated and alerts queued inside it and
//! the fence checked last; then the signals and incidents to report read
//! back.

use std::collections::{BTreeMap, BTreeSet};

use super::{Change, SweepError, SweepOptions};
use crate::signal::{self, Signal, StateDb, StateError};
use crate::store::Reader;

/// What the state transaction changed and queued.
pub(super) struct Committed {
    pub changes: Vec<Change>,
    pub incident_changes: Vec<crate::incident::IncidentChange>,
    pub queued: Vec<crate::alert::Queued>,
}

/// Apply `drafts` to `state` as of `opts.now_ns` with `quiet`, the
/// incidents from `facts`, alerts queued when `opts.alerting` is set;
/// `opts.fence` is checked before it commits.
pub(super) fn commit(
    reader: &Reader,
    state: &mut StateDb,
    opts: &SweepOptions,
    drafts: &[signal::SignalDraft],
    quiet: &signal::state::Quiet,
    facts: &crate::incident::Facts,
) -> Result<Committed, SweepError> {
    let now = opts.now_ns;
    let state_path = reader.layout().state_db();
    let mut queued = Vec::new();
    let mut incident_changes = Vec::new();
    let outcome = state.apply_then(drafts, now, quiet, |c, out| -> Result<(), SweepError> {
        crate::faults::kill_point("sweep_before_commit");
        if let Some(fence) = &opts.fence {
            fence.check()?;
        }
        let db = |source| StateError::Db {
            path: state_path.clone(),
            source,
        };
        let signals = crate::signal::state::signals_in(c, &state_path)?;
        incident_changes =
            crate::incident::store::apply(c, &signals, facts, now, opts.evidence_limit)
                .map_err(db)?;
        let Some(alerting) = &opts.alerting else {
            return Ok(());
        };
        let wall = crate::alert::Clock::System.now_ns();
        queued = alerting
            .enqueue(c, &signals, &out.changes, &incident_changes, now, wall)
            .map_err(db)?;
        Ok(())
    })?;
    Ok(Committed {
        changes: outcome
            .changes
            .into_iter()
            .map(|(id, from, to)| Change { id, from, to })
            .collect(),
        incident_changes,
        queued,
    })
}

/// When signals go quiet: as of `horizon_ns`, the options' limits, each
/// tool's settled traffic and its last good call in the rollup.
pub(super) fn quiet(
    opts: &SweepOptions,
    horizon_ns: i64,
    traffic: BTreeMap<String, i64>,
    settle_ns: i64,
    daily: &[crate::detect::DailyRow],
) -> signal::state::Quiet {
    let now = opts.now_ns;
    signal::state::Quiet {
        horizon_ns,
        after_days: opts.resolve_after_days,
        after_hours: opts.resolve_after_hours,
        // Only traffic whose turns had time to settle counts as quiet.
        traffic: traffic
            .into_iter()
            .map(|(t, ns)| (t, ns.min(now - settle_ns)))
            .collect(),
        last_ok: daily.iter().fold(Default::default(), |mut m, r| {
            if let Some(ns) = r.last_ok_ns {
                let e = m.entry(r.tool.clone()).or_insert(ns);
                *e = (*e).max(ns);
            }
            m
        }),
    }
}

/// The drafts' signals as stored now, newest first; and the open incidents
/// they are members of, with those the sweep changed.
pub(super) fn reported(
    state: &StateDb,
    drafts: &[signal::SignalDraft],
    incident_changes: &[crate::incident::IncidentChange],
) -> Result<(Vec<Signal>, Vec<crate::incident::Incident>), SweepError> {
    let keys: BTreeSet<&str> = drafts.iter().map(|d| d.key.as_str()).collect();
    let mut signals: Vec<Signal> = state
        .list()?
        .into_iter()
        .filter(|s| keys.contains(s.draft.key.as_str()))
        .collect();
    signals.sort_by(|a, b| {
        b.draft
            .last_seen_ns
            .cmp(&a.draft.last_seen_ns)
            .then_with(|| a.draft.id.cmp(&b.draft.id))
    });
    let ids: BTreeSet<&str> = signals.iter().map(|s| s.draft.id.as_str()).collect();
    let changed: BTreeSet<&str> = incident_changes.iter().map(|c| c.id.as_str()).collect();
    let incidents: Vec<crate::incident::Incident> = crate::incident::store::list(state.conn())?
        .into_iter()
        .filter(|i| {
            changed.contains(i.id.as_str())
                || (i.is_open() && i.members.iter().any(|m| ids.contains(m.signal_id.as_str())))
        })
        .collect();
    Ok((signals, incidents))
}
