//! Evidence: one trace that shows a signal's problem, with the numbers its
//! title, remedy and pages name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::day_to_string;

/// One trace that shows the problem (also an MCP answer: its schema is
/// part of `list_signal_traces`' output schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    pub trace_id: String,
    pub turn_id: Option<String>,
    pub session_id: Option<String>,
    pub day: String,
    pub calls: usize,
    pub failures: usize,
    pub rhythm: Option<String>,
    pub outcome: Option<String>,
    pub wasted_seconds: f64,
    pub turn_duration_s: Option<f64>,
    pub turn_spans: Option<usize>,
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
    /// A storm's retries that repeated the previous arguments (share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_args: Option<f64>,
    /// A storm's failed calls by class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, usize>,
    /// Stacked retries: the parent spans that each retried, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    /// Silent tools (`trace_id`: the last successful call's trace): the
    /// tool's calls and successes and its service's turns, day by day for
    /// the eight days up to the latest flagged one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daily: Vec<crate::detect::silent::DayCount>,
    /// A chain's retries after a failure that stated how long to wait
    /// (Retry-After, docs/detection.md §4.9): per retry, the stated wait,
    /// the gap taken and whether it came early.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<crate::detect::RetryWait>,
    /// A retry chain's driver (storms, wasted retries): who made the
    /// retries, and the model round trips between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<super::driver::DriverEvidence>,
}

impl Evidence {
    /// Evidence of one turn with only its counts known; rules that know
    /// more (rhythm, outcome, turn comparison) fill those in.
    pub fn turn(trace_id: &str, turn: &str, day: i32, calls: usize, failures: usize) -> Evidence {
        Evidence {
            trace_id: trace_id.to_string(),
            turn_id: Some(turn.to_string()),
            session_id: None,
            day: day_to_string(day),
            calls,
            failures,
            rhythm: None,
            outcome: None,
            wasted_seconds: 0.0,
            turn_duration_s: None,
            turn_spans: None,
            healthy_turn_duration_s: None,
            healthy_turn_spans: None,
            same_args: None,
            classes: BTreeMap::new(),
            parents: Vec::new(),
            daily: Vec::new(),
            waits: Vec::new(),
            driver: None,
        }
    }
}
