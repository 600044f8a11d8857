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
    let mut notices = Vec::new();
    let mut remember = BTreeMap::new();
    for inc in incidents {
        let change = changes.get(&inc.id);
        let before = told.get(&inc.id);
        let heard = before.map(|b| b.state);
        if change.is_none() && heard.is_none_or(|h| h == IncidentState::Resolved) && !inc.is_open()
        {
            // Nothing told, nothing to tell.
            if heard.is_none() {
                remember.insert(inc.id.clone(), untold(inc));
            }
            continue;
        }
        let case = Case {
            inc,
            change,
            before,
            now_ns,
            t,
        };
        let mut quiet = before.is_some_and(|b| b.quiet);
        let (event, why) = case.event(&mut quiet);
        let next = case.next(event, quiet);
        if let Some(event) = event {
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

/// One incident to decide about: as it stands, this sweep's change to it
/// and what was last told.
struct Case<'a> {
    inc: &'a Incident,
    change: Option<&'a IncidentChange>,
    before: Option<&'a IncidentTold>,
    now_ns: i64,
    t: Timing,
}

impl Case<'_> {
    /// The event to tell (if any) and why; `quiet` whether a reopening is
    /// held back by the cooldown, updated.
    fn event(&self, quiet: &mut bool) -> (Option<IncidentEvent>, Vec<String>) {
        use IncidentEvent as E;
        use IncidentState as S;
        let (inc, change, before) = (self.inc, self.change, self.before);
        let now = inc.state;
        let heard = before.map(|b| b.state);
        let cooling =
            before.is_some_and(|b| self.now_ns.saturating_sub(b.last_fire_ns) < self.t.cooldown_ns);
        let opened = change.is_some_and(|c| c.from.is_none()) && heard.is_none();
        if opened {
            // Born muted (its signals were muted before it): nothing to
            // page about until one is open again.
            ((now == S::Open).then_some(E::Opened), Vec::new())
        } else if now == S::Resolved {
            let event = match heard {
                // Never told (or already told resolved): nothing to take back.
                None | Some(S::Resolved) => None,
                Some(_) if *quiet => {
                    *quiet = false;
                    None
                }
                Some(_) => Some(E::Resolved),
            };
            (event, Vec::new())
        } else if heard == Some(S::Resolved) || change.is_some_and(|c| c.from == Some(S::Resolved))
        {
            *quiet = cooling;
            ((!cooling).then_some(E::Reopened), reopened_by(inc))
        } else if heard.is_none() {
            // Opened before the alerter knew it: told once, as a reminder.
            ((now == S::Open).then_some(E::Reminder), Vec::new())
        } else if *quiet {
            // A reopening the cooldown held back: told once the cooldown
            // ends, if it is still open and nobody muted it.
            if !cooling && now == S::Open {
                *quiet = false;
                (Some(E::Reopened), reopened_by(inc))
            } else {
                (None, Vec::new())
            }
        } else if now == S::Acknowledged {
            (
                (heard == Some(S::Open)).then_some(E::Acknowledged),
                Vec::new(),
            )
        } else if heard == Some(S::Acknowledged) && before.is_some_and(|b| b.last_ns == 0) {
            // Born muted, never told: a member open again is its opening.
            *quiet = false;
            (Some(E::Opened), Vec::new())
        } else {
            self.update(before.expect("told"))
        }
    }

    /// An incident told before and still open: `updated` when something
    /// changed since (`why`), else a `reminder` when one is due.
    fn update(&self, b: &IncidentTold) -> (Option<IncidentEvent>, Vec<String>) {
        let inc = self.inc;
        let mut why = Vec::new();
        if b.state == IncidentState::Acknowledged {
            why.push("a muted member is open again".to_string());
        }
        if let Some(c) = self.change {
            for sid in &c.joined {
                why.push(joined_words(inc, sid));
            }
        }
        if severity_of(&inc.severity) > b.severity || self.change.is_some_and(|c| c.escalated) {
            why.push(format!("severity rose to {}", inc.severity));
        }
        let findings = inc.findings as u64;
        if b.findings > 0 && findings >= 2 * b.findings {
            why.push(format!("findings doubled: {} → {findings}", b.findings));
        }
        let event = if !why.is_empty() {
            Some(IncidentEvent::Updated)
        } else if self.now_ns.saturating_sub(b.last_ns) >= self.t.repeat_interval_ns {
            Some(IncidentEvent::Reminder)
        } else {
            None
        };
        (event, why)
    }

    /// What to remember of the incident after telling `event` (if any).
    fn next(&self, event: Option<IncidentEvent>, quiet: bool) -> IncidentTold {
        let inc = self.inc;
        let mut next = self.before.cloned().unwrap_or_else(|| untold(inc));
        next.state = inc.state;
        next.quiet = quiet;
        if let Some(event) = event {
            next.last_ns = self.now_ns;
            next.findings = inc.findings as u64;
            next.severity = severity_of(&inc.severity);
            if matches!(event, IncidentEvent::Opened | IncidentEvent::Reopened) {
                next.last_fire_ns = self.now_ns;
            }
            if event == IncidentEvent::Resolved {
                next.quiet = false;
            }
        }
        next
    }
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
