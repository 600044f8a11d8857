//! Incidents in `state.sqlite`: one row per incident (its key, state and
//! body), one row per member signal (the incident it belongs to, when and
//! why it joined), and a history of state changes. [`apply`] runs in the
//! sweep's transaction, after the signals' lifecycle: it groups the open
//! signals again, gives each group its incident (the open one a member is
//! in, else the one with its key, else the resolved one a member was in,
//! reopened; else a new one), and writes what changed. The tables are
//! declared in `crate::state::schema`.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::body::{self, Joined};
use super::group::{self, Cause, Facts};
use super::lifecycle::{self, pick, Stored};
use super::{Incident, IncidentState};
use crate::signal::{Lifecycle, Signal};

#[derive(Debug, thiserror::Error)]
pub enum IncidentError {
    #[error("incident state: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("no incident {0} (see `stormwatch incidents list`)")]
    NoSuchIncident(String),
    #[error(
        "incident {id}: its stored body is unreadable ({message}); the next sweep writes it again"
    )]
    Corrupt { id: String, message: String },
}

/// What one sweep changed of one incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncidentChange {
    pub id: String,
    /// `None`: opened for the first time.
    pub from: Option<IncidentState>,
    pub to: IncidentState,
    /// Signals that joined it in this sweep (not those it opened with).
    pub joined: Vec<String>,
    /// Its severity rose.
    pub escalated: bool,
}

impl IncidentChange {
    /// Whether anything happened worth a person's attention.
    pub fn is_news(&self) -> bool {
        self.from != Some(self.to) || !self.joined.is_empty() || self.escalated
    }
}

fn rows(c: &Connection) -> rusqlite::Result<Vec<Stored>> {
    let mut stmt = c.prepare(
        "SELECT id, key, state, cause, body, opened_ns, resolved_ns FROM incidents ORDER BY opened_ns, id",
    )?;
    let rows = stmt.query_map([], |r| {
        let cause: String = r.get(3)?;
        let body: String = r.get(4)?;
        Ok(Stored {
            id: r.get(0)?,
            key: r.get(1)?,
            state: IncidentState::parse(&r.get::<_, String>(2)?).unwrap_or(IncidentState::Open),
            cause: serde_json::from_str(&cause).unwrap_or(Cause::Own(String::new())),
            body: serde_json::from_str(&body).ok(),
            opened_ns: r.get(5)?,
            resolved_ns: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// Signal id → (incident id, joined at, reason).
fn memberships(c: &Connection) -> rusqlite::Result<BTreeMap<String, (String, i64, String)>> {
    let mut stmt =
        c.prepare("SELECT signal_id, incident_id, joined_ns, reason FROM incident_members")?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
    })?;
    rows.collect()
}

/// The id a new key gets: `INC-` and four letters from its hash, one more
/// for as long as that id is taken. Existing ids never change.
pub fn free_id(c: &Connection, key: &str) -> rusqlite::Result<String> {
    crate::signal::ids::free_id_with("INC-", key, |id| {
        c.prepare_cached("SELECT 1 FROM incidents WHERE id = ?1")?
            .exists([id])
    })
}

/// Group the signals again and bring the incidents up to date, on `c` (the
/// sweep's transaction). `signals` are every stored signal as it now
/// stands; `now_ns` the sweep's clock.
pub fn apply(
    c: &Connection,
    signals: &[Signal],
    facts: &Facts,
    now_ns: i64,
    evidence_limit: usize,
) -> rusqlite::Result<Vec<IncidentChange>> {
    let by_id: BTreeMap<&str, &Signal> = signals.iter().map(|s| (s.draft.id.as_str(), s)).collect();
    let assigned = assign(c, signals, &by_id, facts, now_ns)?;
    // Every incident written again from its members as they now stand.
    let mut by_incident: BTreeMap<&str, Vec<Joined<'_>>> = BTreeMap::new();
    for (sid, (iid, at, reason)) in &assigned.members {
        if let Some(s) = by_id.get(sid.as_str()) {
            by_incident.entry(iid.as_str()).or_default().push(Joined {
                signal: s,
                joined_ns: *at,
                reason: reason.clone(),
            });
        }
    }
    let mut joined = assigned.joined;
    let mut changes = Vec::new();
    for r in &rows(c)? {
        let Some(list) = by_incident.get_mut(r.id.as_str()) else {
            // No member left (moved into another incident, or forgotten).
            if r.state != IncidentState::Resolved {
                resolve_empty(c, r, now_ns)?;
                changes.push(IncidentChange {
                    id: r.id.clone(),
                    from: Some(r.state),
                    to: IncidentState::Resolved,
                    joined: Vec::new(),
                    escalated: false,
                });
            }
            continue;
        };
        list.sort_by(|a, b| {
            a.joined_ns
                .cmp(&b.joined_ns)
                .then_with(|| a.signal.draft.id.cmp(&b.signal.draft.id))
        });
        let cause = assigned
            .causes
            .get(&r.id)
            .cloned()
            .unwrap_or(Cause::Own(r.key.clone()));
        let written = Written {
            is_new: assigned.created.contains(&r.id),
            cause: &cause,
            joined: joined.remove(&r.id).unwrap_or_default(),
        };
        let change = write(c, r, list, written, facts, now_ns, evidence_limit)?;
        if change.is_news() {
            changes.push(change);
        }
    }
    Ok(changes)
}

/// Which incident each group of this sweep landed in.
struct Assigned {
    /// Signal id → (incident id, joined at, reason): every membership.
    members: BTreeMap<String, (String, i64, String)>,
    /// Incidents this sweep opened.
    created: BTreeSet<String>,
    /// Each incident's cause as its group now has it.
    causes: BTreeMap<String, Cause>,
    /// Per incident, the signals that joined it in this sweep.
    joined: BTreeMap<String, Vec<String>>,
}

/// Group the open and muted signals and give each group its incident
/// ([`pick`], else a new one), writing new incidents and memberships.
fn assign(
    c: &Connection,
    signals: &[Signal],
    by_id: &BTreeMap<&str, &Signal>,
    facts: &Facts,
    now_ns: i64,
) -> rusqlite::Result<Assigned> {
    let stored = rows(c)?;
    let live: Vec<&Signal> = signals
        .iter()
        .filter(|s| s.state.is_open() || s.state == Lifecycle::Muted)
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut out = Assigned {
        members: memberships(c)?,
        created: BTreeSet::new(),
        causes: stored
            .iter()
            .map(|r| (r.id.clone(), r.cause.clone()))
            .collect(),
        joined: BTreeMap::new(),
    };
    for g in &group::group(&live, facts) {
        let mine: Vec<&str> = g
            .members
            .iter()
            .filter_map(|(sid, _)| out.members.get(sid).map(|m| m.0.as_str()))
            .collect();
        let key = g.cause.key();
        let id = match pick(&stored, &mine, &key, &used) {
            Some(r) => r.id.clone(),
            None => {
                let id = insert_new(c, &key, &g.cause, now_ns)?;
                out.created.insert(id.clone());
                id
            }
        };
        used.insert(id.clone());
        out.causes.insert(id.clone(), g.cause.clone());
        for (sid, reason) in &g.members {
            if out.members.get(sid).is_some_and(|m| m.0 == id) {
                continue;
            }
            let s = by_id[sid.as_str()];
            let at = if s.state == Lifecycle::Regressed {
                s.draft.last_seen_ns
            } else {
                s.draft.first_seen_ns
            };
            c.execute(
                "INSERT INTO incident_members (signal_id, incident_id, joined_ns, reason) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(signal_id) DO UPDATE SET incident_id = excluded.incident_id, joined_ns = excluded.joined_ns, reason = excluded.reason",
                params![sid, id, at, reason],
            )?;
            out.members
                .insert(sid.clone(), (id.clone(), at, reason.clone()));
            if !out.created.contains(&id) {
                out.joined.entry(id.clone()).or_default().push(sid.clone());
            }
        }
        // The cause of a group may have moved on (a dependency learnt):
        // kept for the body, the key stays.
        c.execute(
            "UPDATE incidents SET cause = ?2 WHERE id = ?1",
            params![id, serde_json::to_string(&g.cause).unwrap_or_default()],
        )?;
    }
    Ok(out)
}

/// A new incident for a group with cause key `key`: its id, and its row.
fn insert_new(c: &Connection, key: &str, cause: &Cause, now_ns: i64) -> rusqlite::Result<String> {
    let id = free_id(c, key)?;
    // Another incident may hold the key (its cause drifted, or
    // another group of this sweep — the same tool hours apart —
    // took it): the new one takes the key with its id.
    let taken = c
        .prepare_cached("SELECT 1 FROM incidents WHERE key = ?1")?
        .exists([key])?;
    let key = if taken {
        format!("{key}#{id}")
    } else {
        key.to_string()
    };
    c.execute(
        "INSERT INTO incidents (id, key, state, cause, body, opened_ns, updated_ns) VALUES (?1, ?2, 'open', ?3, '{}', ?4, ?4)",
        params![id, key, serde_json::to_string(cause).unwrap_or_default(), now_ns],
    )?;
    Ok(id)
}

/// What [`apply`] knows of one incident beyond its row and members.
struct Written<'a> {
    is_new: bool,
    cause: &'a Cause,
    joined: Vec<String>,
}

/// One incident written again from its members `list` (sorted): its body,
/// its state by [`lifecycle::transition`], its history line.
fn write(
    c: &Connection,
    r: &Stored,
    list: &[Joined<'_>],
    w: Written<'_>,
    facts: &Facts,
    now_ns: i64,
    evidence_limit: usize,
) -> rusqlite::Result<IncidentChange> {
    let step = lifecycle::transition(r, w.is_new, list, now_ns);
    let state = step.to;
    let mut inc = body::build(
        &r.id,
        w.cause,
        list,
        facts,
        r.opened_ns,
        step.resolved_ns,
        evidence_limit,
    );
    inc.key = r.key.clone();
    let before = r.body.as_ref();
    let escalated = !w.is_new
        && before
            .is_some_and(|b| inc.severity() > b.severity() && state != IncidentState::Resolved);
    if let Some(reason) = &step.reason {
        c.execute(
            "INSERT INTO incident_history (id, at_ns, from_state, to_state, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![r.id, now_ns, step.from.map(IncidentState::as_str), state.as_str(), reason],
        )?;
    }
    if before != Some(&inc) || r.state != state {
        c.execute(
            "UPDATE incidents SET state = ?2, body = ?3, updated_ns = ?4, resolved_ns = ?5 WHERE id = ?1",
            params![r.id, state.as_str(), serde_json::to_string(&inc).unwrap_or_default(), now_ns, step.resolved_ns],
        )?;
    }
    Ok(IncidentChange {
        id: r.id.clone(),
        from: step.from,
        to: state,
        joined: w.joined,
        escalated,
    })
}

fn resolve_empty(c: &Connection, r: &Stored, now_ns: i64) -> rusqlite::Result<()> {
    let mut body = r.body.clone();
    if let Some(b) = body.as_mut() {
        b.state = IncidentState::Resolved;
        b.resolved_ns = Some(now_ns);
    }
    c.execute(
        "UPDATE incidents SET state = 'resolved', resolved_ns = ?2, updated_ns = ?2, body = coalesce(?3, body) WHERE id = ?1",
        params![r.id, now_ns, body.map(|b| serde_json::to_string(&b).unwrap_or_default())],
    )?;
    c.execute(
        "INSERT INTO incident_history (id, at_ns, from_state, to_state, reason) VALUES (?1, ?2, ?3, 'resolved', 'its members joined another incident')",
        params![r.id, now_ns, r.state.as_str()],
    )?;
    Ok(())
}

/// Every incident: open ones first, then the most severe, the most failed
/// calls, the newest. A row whose body
/// cannot be read (damaged by hand, or written by a newer version) is left
/// out with a warning, not the whole list: the next sweep that groups its
/// members writes it again.
pub fn list(c: &Connection) -> Result<Vec<Incident>, IncidentError> {
    let mut out = Vec::new();
    for r in rows(c)? {
        match r.body {
            Some(b) if !b.id.is_empty() => out.push(b),
            _ => tracing::warn!(
                incident = %r.id,
                "incident state: the stored body is unreadable; left out until a sweep writes it again"
            ),
        }
    }
    out.sort_by(|a, b| {
        (a.state == IncidentState::Resolved)
            .cmp(&(b.state == IncidentState::Resolved))
            .then_with(|| b.severity().cmp(&a.severity()))
            .then_with(|| b.impact.failed_calls.cmp(&a.impact.failed_calls))
            .then_with(|| b.last_seen_ns.cmp(&a.last_seen_ns))
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(out)
}

/// One incident by id (case as given, or upper-cased).
pub fn get(c: &Connection, id: &str) -> Result<Incident, IncidentError> {
    let body: Option<String> = c
        .query_row(
            "SELECT body FROM incidents WHERE id = ?1 OR id = upper(?1)",
            params![id],
            |r| r.get(0),
        )
        .optional()?;
    let body = body.ok_or_else(|| IncidentError::NoSuchIncident(id.to_string()))?;
    serde_json::from_str(&body).map_err(|e| IncidentError::Corrupt {
        id: id.to_string(),
        message: e.to_string(),
    })
}

/// The incident signal `signal_id` belongs to, if any.
pub fn of_signal(c: &Connection, signal_id: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT incident_id FROM incident_members WHERE signal_id = ?1",
        params![signal_id],
        |r| r.get(0),
    )
    .optional()
}

/// One change of an incident's state: (at ns, from, to, reason), as a
/// signal's.
pub use crate::signal::state::HistoryEntry;

pub fn history(c: &Connection, id: &str) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt = c.prepare(
        "SELECT at_ns, from_state, to_state, reason FROM incident_history WHERE id = ?1 ORDER BY at_ns, rowid",
    )?;
    let rows = stmt.query_map(params![id], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    rows.collect()
}
