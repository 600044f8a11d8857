//! Incidents as every surface shows them: which ones a `state` filter
//! admits and in what order ([`Which`], [`ordered`]), an incident in one
//! line ([`IncidentLine`]) and whole with its state changes
//! ([`IncidentAnswer`]): the types `/api/incidents`, `/api/incidents/{id}`,
//! MCP `list_incidents` / `get_incident` and `stormwatch incidents … --format
//! json` answer with (their schemas in the OpenAPI document and the tools'
//! output schemas), and one incident read from the kept ones ([`kept`]).

use schemars::JsonSchema;
use serde::Serialize;

use crate::incident::{Impact, Incident, IncidentState};
use crate::signal::StateDb;
use crate::time::rfc3339;

/// Which incidents a list shows: `state=open|acknowledged|resolved|all`;
/// without it, the open and the acknowledged ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Which {
    #[default]
    Unresolved,
    Only(IncidentState),
    All,
}

/// A `state` filter that names no state.
#[derive(Debug, thiserror::Error)]
#[error("state: expected open, acknowledged, resolved or all, got {0:?}")]
pub struct UnknownState(pub String);

impl Which {
    /// `state` as given (`None`: the default); the error says what was expected.
    pub fn parse(state: Option<&str>) -> Result<Which, UnknownState> {
        match state {
            None => Ok(Which::Unresolved),
            Some("all") => Ok(Which::All),
            Some(s) => IncidentState::parse(s)
                .map(Which::Only)
                .ok_or_else(|| UnknownState(s.to_string())),
        }
    }

    pub fn admits(self, i: &Incident) -> bool {
        match self {
            Which::Unresolved => i.state != IncidentState::Resolved,
            Which::Only(s) => i.state == s,
            Which::All => true,
        }
    }

    /// How a page names what it lists.
    pub fn words(self) -> &'static str {
        match self {
            Which::Unresolved => "open and acknowledged",
            Which::Only(s) => s.as_str(),
            Which::All => "all",
        }
    }
}

fn rank(s: IncidentState) -> u8 {
    match s {
        IncidentState::Open => 0,
        IncidentState::Acknowledged => 1,
        IncidentState::Resolved => 2,
    }
}

/// The incidents `which` admits: open ones first, then acknowledged, then
/// resolved; within each the most severe first, then the latest finding.
pub fn ordered(all: &[Incident], which: Which) -> Vec<&Incident> {
    let mut v: Vec<&Incident> = all.iter().filter(|i| which.admits(i)).collect();
    v.sort_by(|a, b| {
        rank(a.state)
            .cmp(&rank(b.state))
            .then_with(|| b.severity().cmp(&a.severity()))
            .then_with(|| b.last_seen_ns.cmp(&a.last_seen_ns))
            .then_with(|| a.id.cmp(&b.id))
    });
    v
}

/// How many incidents are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StateCounts {
    pub open: usize,
    pub acknowledged: usize,
    pub resolved: usize,
}

impl StateCounts {
    pub fn of(all: &[Incident]) -> StateCounts {
        let mut c = StateCounts::default();
        for i in all {
            match i.state {
                IncidentState::Open => c.open += 1,
                IncidentState::Acknowledged => c.acknowledged += 1,
                IncidentState::Resolved => c.resolved += 1,
            }
        }
        c
    }
}

/// An incident in one line: what a list shows.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct IncidentLine {
    /// `INC-` and four or more letters.
    pub id: String,
    pub state: IncidentState,
    /// `critical`, `warning` or `info`: its most severe open member's.
    pub severity: String,
    /// What is broken, since when, how.
    pub title: String,
    /// Why its signals are one incident, in words.
    pub cause: String,
    /// The dependency its failing calls went to, when the spans say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub tools: Vec<String>,
    pub error_class: String,
    /// Its member signals' ids (the whole incident says why each joined).
    pub members: Vec<String>,
    /// RFC 3339: its first and latest finding, when it opened, when it resolved.
    pub first_seen: String,
    pub last_seen: String,
    pub opened: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    pub impact: Impact,
    /// The lead member's remedy in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

impl IncidentLine {
    pub fn of(i: &Incident) -> IncidentLine {
        IncidentLine {
            id: i.id.clone(),
            state: i.state,
            severity: i.severity.clone(),
            title: i.title.clone(),
            cause: i.cause.clone(),
            dependency: i.dependency.clone(),
            service: i.service.clone(),
            tools: i.tools.clone(),
            error_class: i.error_class.clone(),
            members: i.members.iter().map(|m| m.signal_id.clone()).collect(),
            first_seen: rfc3339(i.first_seen_ns),
            last_seen: rfc3339(i.last_seen_ns),
            opened: rfc3339(i.opened_ns),
            resolved: i.resolved_ns.map(rfc3339),
            impact: i.impact.clone(),
            remedy: i.remedy.as_ref().map(|r| r.summary.clone()),
        }
    }
}

/// One change of an incident's state.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StateChange {
    /// RFC 3339.
    pub at: String,
    pub from: Option<String>,
    pub to: String,
    pub reason: String,
}

/// A whole incident: as the sweep stored it (times in ns since the epoch),
/// its main times again in RFC 3339, and its state changes.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct IncidentAnswer {
    #[serde(flatten)]
    pub incident: Incident,
    pub first_seen: String,
    pub last_seen: String,
    pub opened: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// Its state changes, oldest first.
    pub history: Vec<StateChange>,
}

impl IncidentAnswer {
    pub fn of(i: Incident, history: Vec<crate::incident::store::HistoryEntry>) -> IncidentAnswer {
        IncidentAnswer {
            first_seen: rfc3339(i.first_seen_ns),
            last_seen: rfc3339(i.last_seen_ns),
            opened: rfc3339(i.opened_ns),
            resolved: i.resolved_ns.map(rfc3339),
            history: history
                .into_iter()
                .map(|(at, from, to, reason)| StateChange {
                    at: rfc3339(at),
                    from,
                    to,
                    reason,
                })
                .collect(),
            incident: i,
        }
    }
}

/// The incident `id` with its history, read on `db`; `None` when there is
/// no such incident.
pub fn answer(
    db: &StateDb,
    id: &str,
) -> Result<Option<IncidentAnswer>, crate::incident::IncidentError> {
    use crate::incident::{store, IncidentError};
    let i = match store::get(db.conn(), id) {
        Ok(i) => i,
        Err(IncidentError::NoSuchIncident(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let h = store::history(db.conn(), &i.id)?;
    Ok(Some(IncidentAnswer::of(i, h)))
}

/// One page of `/api/incidents`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IncidentsPage {
    pub page: usize,
    pub page_size: usize,
    /// Pages of the list (an empty list has one).
    pub pages: usize,
    /// Incidents the filter admits, over every page.
    pub total: usize,
    /// Every stored incident by state, whatever the filter.
    pub counts: StateCounts,
    pub incidents: Vec<IncidentLine>,
}

/// The incident `id` (as given, or upper-cased) from the kept incidents,
/// with its history; `None` when there is none. (The dashboard and MCP.)
pub fn kept(
    reads: &super::cache::Reads,
    state_path: &std::path::Path,
    id: &str,
) -> Result<Option<IncidentAnswer>, super::cache::IncidentsError> {
    let Some(i) = reads.incidents.incident(id)? else {
        return Ok(None);
    };
    let db = StateDb::open(state_path)?;
    let h = crate::incident::store::history(db.conn(), &i.id).map_err(|source| {
        crate::signal::StateError::Db {
            path: state_path.to_path_buf(),
            source,
        }
    })?;
    Ok(Some(IncidentAnswer::of(i, h)))
}
