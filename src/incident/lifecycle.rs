//! The incident lifecycle as pure functions, apart from SQL: which stored
//! incident a group of signals lands in ([`pick`]), and what one sweep
//! makes of an incident from its members as they now stand
//! ([`transition`]): open while a member is open, acknowledged while every
//! open member is muted, resolved when all are, reopened by a member's
//! regression. [`super::store`] reads the rows, asks these and writes.

use std::collections::BTreeSet;

use super::body::Joined;
use super::group::Cause;
use super::{Incident, IncidentState};
use crate::signal::Lifecycle;

/// An incident as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub id: String,
    pub key: String,
    pub state: IncidentState,
    pub cause: Cause,
    /// `None`: unreadable (written again by this sweep).
    pub body: Option<Incident>,
    pub opened_ns: i64,
    pub resolved_ns: Option<i64>,
}

/// The incident a group with cause key `key` lands in, given the
/// incidents its members are in (`mine`) and those earlier groups of this
/// sweep took (`used`): the open one a member is in, else the one with its
/// key, else the resolved one a member was in most recently (reopened).
/// `None`: a new one.
pub fn pick<'a>(
    stored: &'a [Stored],
    mine: &[&str],
    key: &str,
    used: &BTreeSet<String>,
) -> Option<&'a Stored> {
    // An open incident keeps its members: several groups of one sweep
    // may land in it (a bridge between them resolved by hand).
    let open_one = stored
        .iter()
        .filter(|r| r.state != IncidentState::Resolved)
        .find(|r| mine.contains(&r.id.as_str()));
    let by_key = || {
        stored
            .iter()
            .find(|r| r.key == key && !used.contains(&r.id))
    };
    let resolved_one = || {
        stored
            .iter()
            .filter(|r| !used.contains(&r.id) && mine.contains(&r.id.as_str()))
            .max_by_key(|r| (r.resolved_ns.unwrap_or(0), r.id.clone()))
    };
    open_one.or_else(by_key).or_else(resolved_one)
}

/// What a sweep makes of one incident.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `None`: opened by this sweep.
    pub from: Option<IncidentState>,
    pub to: IncidentState,
    pub resolved_ns: Option<i64>,
    /// Why the state changed, when it did (its history line).
    pub reason: Option<String>,
}

/// The state of `prev` after this sweep at `now_ns`, from its `members`
/// as they now stand; `is_new`: this sweep created it.
pub fn transition(prev: &Stored, is_new: bool, members: &[Joined<'_>], now_ns: i64) -> Step {
    let to = IncidentState::of(members.iter().map(|m| m.signal.state));
    let resolved_ns = match (prev.state, to) {
        (_, IncidentState::Resolved) if prev.state != IncidentState::Resolved || is_new => {
            Some(now_ns)
        }
        (IncidentState::Resolved, IncidentState::Resolved) => prev.resolved_ns,
        _ => None,
    };
    let from = if is_new { None } else { Some(prev.state) };
    let reason = (from != Some(to)).then(|| reason(from, to, members));
    Step {
        from,
        to,
        resolved_ns,
        reason,
    }
}

fn reason(from: Option<IncidentState>, to: IncidentState, members: &[Joined<'_>]) -> String {
    match (from, to) {
        (None, _) => "first member".to_string(),
        (Some(IncidentState::Resolved), _) => {
            let back: Vec<&str> = members
                .iter()
                .filter(|m| m.signal.state == Lifecycle::Regressed)
                .map(|m| m.signal.draft.id.as_str())
                .collect();
            format!(
                "reopened by {}",
                if back.is_empty() {
                    "a new member".into()
                } else {
                    back.join(", ")
                }
            )
        }
        (_, IncidentState::Resolved) => "every member resolved".to_string(),
        (_, IncidentState::Acknowledged) => "every open member muted".to_string(),
        (_, IncidentState::Open) => "a member open again".to_string(),
    }
}
