//! When to notify about an incident (alerting.md, "Incidents and
//! notifications"): a pure function of the incidents as they now stand,
//! this sweep's incident changes and what was last told about each, as
//! [`super::notify`] is for signals. A target told per incident gets one
//! message per incident and event:
//!
//! - `opened` — a new incident;
//! - `reopened` — a resolved one is open again (a member regressed);
//! - `updated` — a member joined, the severity rose, the findings doubled
//!   since the last notice, or a muted member is open again;
//! - `acknowledged` — every open member is muted (someone is on it);
//!   chat targets are not told, PagerDuty and webhooks are;
//! - `resolved` — every member resolved;
//! - `reminder` — every `repeat_interval` while it stays open.
//!
//! A flapping incident (reopened within `cooldown` of its last `opened` or
//! `reopened`) stays quiet, and so does the resolution of that quiet
//! reopening; still open once the cooldown ends, it is told `reopened`
//! then. An acknowledged incident gets no reminders. The members' own
//! notices are inhibited (as Alertmanager's `inhibit_rules` do): a target
//! told per incident never gets them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::notify::Timing;
use crate::incident::{Incident, IncidentChange, IncidentState};
use crate::signal::Severity;

/// What an incident notice says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IncidentEvent {
    Opened,
    Reopened,
    Updated,
    Acknowledged,
    Resolved,
    Reminder,
}

impl IncidentEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentEvent::Opened => "opened",
            IncidentEvent::Reopened => "reopened",
            IncidentEvent::Updated => "updated",
            IncidentEvent::Acknowledged => "acknowledged",
            IncidentEvent::Resolved => "resolved",
            IncidentEvent::Reminder => "reminder",
        }
    }

    /// The label a person reads first.
    pub fn label(self) -> &'static str {
        match self {
            IncidentEvent::Opened => "OPENED",
            IncidentEvent::Reopened => "REOPENED",
            IncidentEvent::Updated => "UPDATED",
            IncidentEvent::Acknowledged => "ACKNOWLEDGED",
            IncidentEvent::Resolved => "RESOLVED",
            IncidentEvent::Reminder => "STILL OPEN",
        }
    }

    /// Whether a target of `kind` is told of it: chat targets are not told
    /// `acknowledged` (the people who muted it are the ones reading).
    pub fn goes_to(self, kind: super::TargetKind) -> bool {
        match self {
            IncidentEvent::Acknowledged => !kind.is_chat(),
            // A reminder would be a `trigger`: after someone resolved the
            // alert in PagerDuty, a new page. PagerDuty keeps its own.
            IncidentEvent::Reminder => kind != super::TargetKind::PagerDuty,
            _ => true,
        }
    }
}

/// What was last told about one incident.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentTold {
    /// When the last notice of any kind went out (ns).
    pub last_ns: i64,
    /// When it last fired (`opened` or `reopened`), for the cooldown.
    pub last_fire_ns: i64,
    /// Its findings at the last notice, for "the findings doubled".
    pub findings: u64,
    /// Its severity at the last notice.
    pub severity: Severity,
    /// The state the targets know it in (a quiet reopening included).
    pub state: IncidentState,
    /// A reopening was kept quiet by the cooldown; its resolution is too.
    pub quiet: bool,
}

/// One incident to notify about.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentNotice {
    pub event: IncidentEvent,
    /// What changed, in words, for `updated` and `reopened` ("SW-BCDF
    /// joined: same tool search_flights as SW-GSNQ", "severity rose to
    /// critical").
    pub why: Vec<String>,
    pub incident: Incident,
}

fn severity_of(s: &str) -> Severity {
    match s {
        "critical" => Severity::Critical,
        "warning" => Severity::Warning,
        _ => Severity::Info,
    }
}

/// The notices of one sweep, and what to remember of each incident after
/// it. `incidents` are every stored incident as it now stands; `changes`
/// this sweep's changes by incident id; `told` what was last told.
/// Incidents with no state yet in `told` and no change are new to the
/// alerter (it was configured after they opened): open ones are told once
/// as a reminder, resolved ones not at all.
pub fn decide(
    incidents: &[Incident],
    changes: &BTreeMap<String, IncidentChange>,
    told: &BTreeMap<String, IncidentTold>,
    now_ns: i64,
    t: Timing,
) -> (Vec<IncidentNotice>, BTreeMap<String, IncidentTold>) {
    use IncidentEvent as E;
    use IncidentState as S;
    let mut notices = Vec::new();
    let mut remember = BTreeMap::new();
    for inc in incidents {
        let change = changes.get(&inc.id);
        let before = told.get(&inc.id);
        let heard = before.map(|b| b.state);
        if change.is_none() && heard.is_none_or(|h| h == S::Resolved) && !inc.is_open() {
            // Nothing told, nothing to tell.
            if heard.is_none() {
                remember.insert(inc.id.clone(), untold(inc));
            }
            continue;
        }
        let now = inc.state;
        let severity = severity_of(&inc.severity);
        let findings = inc.findings as u64;
        let cooling = before.is_some_and(|b| now_ns.saturating_sub(b.last_fire_ns) < t.cooldown_ns);
        let mut quiet = before.is_some_and(|b| b.quiet);
        let mut why = Vec::new();
        let opened = change.is_some_and(|c| c.from.is_none()) && heard.is_none();
        let event = if opened {
            // Born muted (its signals were muted before it): nothing to
            // page about until one is open again.
            (now == S::Open).then_some(E::Opened)
        } else if now == S::Resolved {
            match heard {
                // Never told (or already told resolved): nothing to take back.
                None | Some(S::Resolved) => None,
                Some(_) if quiet => {
                    quiet = false;
                    None
                }
                Some(_) => Some(E::Resolved),
            }
        } else if heard == Some(S::Resolved) || change.is_some_and(|c| c.from == Some(S::Resolved))
        {
            why = reopened_by(inc);
            if cooling {
                quiet = true;
                None
            } else {
                quiet = false;
                Some(E::Reopened)
            }
        } else if heard.is_none() {
            // Opened before the alerter knew it: told once, as a reminder.
            (now == S::Open).then_some(E::Reminder)
        } else if quiet {
            // A reopening the cooldown held back: told once the cooldown
            // ends, if it is still open and nobody muted it.
            if !cooling && now == S::Open {
                quiet = false;
                why = reopened_by(inc);
                Some(E::Reopened)
            } else {
                None
            }
        } else if now == S::Acknowledged {
            (heard == Some(S::Open)).then_some(E::Acknowledged)
        } else if heard == Some(S::Acknowledged) && before.is_some_and(|b| b.last_ns == 0) {
            // Born muted, never told: a member open again is its opening.
            quiet = false;
            Some(E::Opened)
        } else {
            let b = before.expect("told");
            if heard == Some(S::Acknowledged) {
                why.push("a muted member is open again".to_string());
            }
            if let Some(c) = change {
                for sid in &c.joined {
                    why.push(joined_words(inc, sid));
                }
            }
            if severity > b.severity || change.is_some_and(|c| c.escalated) {
                why.push(format!("severity rose to {}", inc.severity));
            }
            if b.findings > 0 && findings >= 2 * b.findings {
                why.push(format!("findings doubled: {} → {findings}", b.findings));
            }
            if !why.is_empty() {
                Some(E::Updated)
            } else if now_ns.saturating_sub(b.last_ns) >= t.repeat_interval_ns {
                Some(E::Reminder)
            } else {
                None
            }
        };
        let mut next = before.cloned().unwrap_or_else(|| untold(inc));
        next.state = now;
        next.quiet = quiet;
        if let Some(event) = event {
            next.last_ns = now_ns;
            next.findings = findings;
            next.severity = severity;
            if matches!(event, E::Opened | E::Reopened) {
                next.last_fire_ns = now_ns;
            }
            if event == E::Resolved {
                next.quiet = false;
            }
            notices.push(IncidentNotice {
                event,
                why,
                incident: inc.clone(),
            });
        }
        if Some(&next) != before {
            remember.insert(inc.id.clone(), next);
        }
    }
    (notices, remember)
}

/// What is remembered of an incident nobody was told about yet.
fn untold(inc: &Incident) -> IncidentTold {
    IncidentTold {
        last_ns: 0,
        last_fire_ns: i64::MIN / 2,
        findings: inc.findings as u64,
        severity: severity_of(&inc.severity),
        state: inc.state,
        quiet: false,
    }
}

/// "SW-BCDF joined (same tool search_flights as SW-GSNQ): <its title>".
fn joined_words(inc: &Incident, signal_id: &str) -> String {
    match inc.members.iter().find(|m| m.signal_id == signal_id) {
        Some(m) => format!("{} joined ({}): {}", m.signal_id, m.reason, m.title),
        None => format!("{signal_id} joined"),
    }
}

/// The members that brought a resolved incident back.
fn reopened_by(inc: &Incident) -> Vec<String> {
    inc.members
        .iter()
        .filter(|m| m.state == "regressed" || m.state == "new")
        .map(|m| format!("{} is back: {}", m.signal_id, m.title))
        .collect()
}
