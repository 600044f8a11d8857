//! What grouping makes of a sweep's findings: a signal draft (before its
//! lifecycle) and the remedy it carries. The types only: `group` builds
//! drafts, `remedy` writes their remedies.

use serde::{Deserialize, Serialize};

use super::evidence::Evidence;
use super::kind::{Kind, Severity};

/// A signal as this sweep's findings make it (before its lifecycle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalDraft {
    pub id: String,
    pub key: String,
    pub kind: Kind,
    pub tool: String,
    pub error_class: String,
    pub title: String,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    /// UTC dates it fired on.
    pub days: Vec<String>,
    pub findings: usize,
    pub evidence: Vec<Evidence>,
    /// Evidence traces beyond the limit.
    pub evidence_more: usize,
    /// Seconds spent on attempts that could not help, over every finding
    /// (not only the evidence kept).
    #[serde(default)]
    pub wasted_seconds: f64,
    /// Set where the kind alone does not decide it (a retry after success
    /// of a read-only tool is `info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// What to do about it (see [`mod@super::remedy`]); drafts stored before
    /// remedies existed have none until the next sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
}

impl SignalDraft {
    /// How much this signal matters.
    pub fn severity(&self) -> Severity {
        self.severity.unwrap_or(Severity::of(self.kind))
    }
}

/// The three answers, and one line that sums them up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Remedy {
    /// Will waiting fix it?
    pub waiting_fixes: String,
    /// When do you cut it off?
    pub cut_off: String,
    /// What do you change before the next attempt?
    pub change: String,
    /// The remedy in one line, for alerts and tables.
    pub summary: String,
}
