//! When to notify (alerting.md, "When to notify"): a pure function of the
//! sweep's state changes, the signals as they now stand, and what was last
//! told about each. Only a change is news — `new`, `regressed`, `escalated`
//! (≥ 2× the findings of the last notice), `resolved` — plus a reminder
//! every `repeat_interval` while a signal stays open; a signal that flaps
//! fires at most once per `cooldown`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::signal::{Lifecycle, Signal};

/// What a notice says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    New,
    Regressed,
    Escalated,
    Resolved,
    Reminder,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::New => "new",
            Event::Regressed => "regressed",
            Event::Escalated => "escalated",
            Event::Resolved => "resolved",
            Event::Reminder => "reminder",
        }
    }

    /// The label a person reads first.
    pub fn label(self) -> &'static str {
        match self {
            Event::New => "NEW",
            Event::Regressed => "REGRESSED",
            Event::Escalated => "ESCALATED",
            Event::Resolved => "RESOLVED",
            Event::Reminder => "STILL OPEN",
        }
    }
}

/// What was last told about one signal.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Told {
    /// When the last notice of any kind went out (ns).
    pub last_ns: i64,
    /// When it last fired (`new` or `regressed`), for the cooldown.
    pub last_fire_ns: i64,
    /// Its findings at the last notice, for escalation.
    pub findings: u64,
    /// A regression was kept quiet by the cooldown; its resolution is too.
    pub quiet: bool,
}

/// One signal to notify about.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub event: Event,
    pub signal: Signal,
}

/// Timing of notices (seconds).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub repeat_interval_ns: i64,
    pub cooldown_ns: i64,
}

/// The notices of one sweep, and what to remember of each signal after it.
/// `changes` are (id, to) of this sweep's state changes; `told` what was
/// last told. Signals with no state yet in `told` and no change are new to
/// the alerter (it was configured after they opened): open ones are told
/// once as a reminder.
pub fn decide(
    signals: &[Signal],
    changes: &BTreeMap<String, Lifecycle>,
    told: &BTreeMap<String, Told>,
    now_ns: i64,
    t: Timing,
) -> (Vec<Notice>, BTreeMap<String, Told>) {
    let mut notices = Vec::new();
    let mut remember = BTreeMap::new();
    for s in signals {
        let id = &s.draft.id;
        let findings = s.draft.findings as u64;
        let before = told.get(id).copied();
        let cooling = before.is_some_and(|b| now_ns - b.last_fire_ns < t.cooldown_ns);
        let escalated = before.is_some_and(|b| b.findings > 0 && findings >= 2 * b.findings);
        let mut quiet = before.is_some_and(|b| b.quiet);
        let event = match changes.get(id) {
            Some(Lifecycle::New) => Some(Event::New),
            Some(Lifecycle::Regressed) if cooling => {
                quiet = true;
                None
            }
            Some(Lifecycle::Regressed) => Some(Event::Regressed),
            Some(Lifecycle::Resolved) if quiet || before.is_none() => {
                quiet = false;
                None
            }
            Some(Lifecycle::Resolved) => Some(Event::Resolved),
            Some(Lifecycle::Muted) => None,
            // Ongoing: a new finding, or out of a mute.
            _ if !s.state.is_open() => None,
            // A regression the cooldown held back, still open once it ends.
            _ if quiet && !cooling => {
                quiet = false;
                Some(Event::Regressed)
            }
            _ if escalated => Some(Event::Escalated),
            _ => match before {
                None => Some(Event::Reminder),
                Some(b) if now_ns - b.last_ns >= t.repeat_interval_ns => Some(Event::Reminder),
                Some(_) => None,
            },
        };
        let mut next = before.unwrap_or_default();
        next.quiet = quiet;
        if let Some(event) = event {
            next.last_ns = now_ns;
            next.findings = findings;
            if matches!(event, Event::New | Event::Regressed) {
                next.last_fire_ns = now_ns;
            }
            if event == Event::Resolved {
                next.quiet = false;
            }
            notices.push(Notice {
                event,
                signal: s.clone(),
            });
        }
        if Some(next) != before {
            remember.insert(id.clone(), next);
        }
    }
    (notices, remember)
}
