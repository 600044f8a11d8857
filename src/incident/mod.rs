//! Incidents (alerting.md, Incidents): the layer above signals a pager
//! needs — open signals with one likely cause, in overlapping time, joined
//! into one incident: the same tool, the same dependency (the server the
//! failing calls share), or a burst of one error class across the tools of
//! one service within the hour when nothing else explains it. Every joining
//! decision names the shared attribute that made it.
//!
//! [`group`] decides the groups (pure), [`body`] writes an incident from its
//! members (title by rule, timeline, impact, merged remedies and evidence),
//! [`store`] keeps them in `state.sqlite` with their lifecycle (open while a
//! member is open, acknowledged while every open member is muted, resolved
//! when all are, reopened by a member's regression), in the sweep's
//! transaction. Sends nothing.

pub mod body;
pub mod group;
pub mod lifecycle;
pub mod store;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_lifecycle;

use serde::{Deserialize, Serialize};

use crate::signal::{Evidence, Kind, Lifecycle, Remedy, Severity};

pub use group::{Cause, Facts, Group, Reach, ToolDayFacts};
pub use store::{IncidentChange, IncidentError};

/// Where an incident stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IncidentState {
    /// A member is open.
    Open,
    /// Every member still open is muted: someone is on it.
    Acknowledged,
    /// Every member resolved.
    Resolved,
}

impl IncidentState {
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentState::Open => "open",
            IncidentState::Acknowledged => "acknowledged",
            IncidentState::Resolved => "resolved",
        }
    }

    pub fn parse(s: &str) -> Option<IncidentState> {
        [
            IncidentState::Open,
            IncidentState::Acknowledged,
            IncidentState::Resolved,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
    }

    /// The state of an incident whose members stand as `members`.
    pub fn of(members: impl IntoIterator<Item = Lifecycle>) -> IncidentState {
        let mut muted = false;
        for m in members {
            if m.is_open() {
                return IncidentState::Open;
            }
            muted |= m == Lifecycle::Muted;
        }
        if muted {
            IncidentState::Acknowledged
        } else {
            IncidentState::Resolved
        }
    }
}

/// One signal of an incident, as it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Member {
    pub signal_id: String,
    pub kind: String,
    pub tool: String,
    pub error_class: String,
    pub severity: String,
    /// The signal's lifecycle state.
    pub state: String,
    pub title: String,
    /// When it joined (the data's clock: its first finding, or the finding
    /// that brought it back).
    pub joined_ns: i64,
    /// Why it is here: the shared attribute that joined it ("same tool
    /// search_flights as SW-BCDF"), or "first finding".
    pub reason: String,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    pub findings: usize,
    /// The dependency its failing calls went to, when the spans say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
}

/// One line of an incident's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Moment {
    pub at_ns: i64,
    /// `first_finding`, `joined`, `peak`, `last_finding`, `resolved`.
    pub what: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_id: Option<String>,
}

/// What an incident cost: over its members' tools and days.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Impact {
    /// Agent turns and sessions where a member's rule found something
    /// (within the sweep's window).
    pub turns: usize,
    pub sessions: usize,
    /// Calls and failed calls of the members' tools on the days they fired.
    pub calls: u64,
    pub failed_calls: u64,
    /// Retries that could not help, and the seconds they took.
    pub wasted_calls: u64,
    pub wasted_seconds: f64,
}

/// A member's remedy, in one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemberRemedy {
    pub signal_ids: Vec<String>,
    pub kind: String,
    pub summary: String,
}

/// An evidence trace of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IncidentEvidence {
    pub signal_id: String,
    pub tool: String,
    #[serde(flatten)]
    pub evidence: Evidence,
}

/// An incident as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Incident {
    /// `INC-` and four or more consonants, from the key.
    pub id: String,
    /// What the members share: `inc1:dep:{dependency}`,
    /// `inc1:tool:{tool}`, `inc1:burst:{service}:{class}:{hour}`, or
    /// `inc1:signal:{signal key}` for a signal that is its own cause.
    pub key: String,
    pub state: IncidentState,
    pub title: String,
    /// How the members were joined, in words.
    pub cause: String,
    pub severity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub tools: Vec<String>,
    /// The members' dominant error class.
    pub error_class: String,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    /// Findings over every member.
    pub findings: usize,
    pub opened_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_ns: Option<i64>,
    pub members: Vec<Member>,
    pub timeline: Vec<Moment>,
    pub impact: Impact,
    /// The lead member's remedy (the most severe, most findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
    /// Every member's remedy, the same ones said once.
    pub remedies: Vec<MemberRemedy>,
    /// The members' evidence, worst first, each trace once.
    pub evidence: Vec<IncidentEvidence>,
    #[serde(default)]
    pub evidence_more: usize,
}

impl Incident {
    pub fn severity(&self) -> Severity {
        match self.severity.as_str() {
            "critical" => Severity::Critical,
            "warning" => Severity::Warning,
            _ => Severity::Info,
        }
    }

    /// The members' signal kinds, each once.
    pub fn kinds(&self) -> Vec<Kind> {
        let mut k: Vec<Kind> = self
            .members
            .iter()
            .filter_map(|m| serde_json::from_value(serde_json::json!(m.kind)).ok())
            .collect();
        k.sort();
        k.dedup();
        k
    }

    pub fn is_open(&self) -> bool {
        self.state != IncidentState::Resolved
    }
}

/// `INC-` and `letters` consonants from the key's hash (the same scheme as
/// signal ids: a longer id starts with the shorter one; see
/// [`store::free_id`]).
pub fn short_id_of(key: &str, letters: usize) -> String {
    let id = crate::signal::group::short_id_of(key, letters);
    format!("INC-{}", &id[3..])
}
