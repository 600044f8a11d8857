//! Alerts (alerting.md): decide which incident and signal changes are news,
//! render one message per incident and target (Slack, Discord, Teams, a
//! signed generic webhook, PagerDuty's Events API v2) — or, for a target
//! that asks for signals (`group_by = "signal"`), one grouped message of
//! signal notices per sweep — queue it in the outbox in the sweep's own
//! transaction, and deliver it with a retry policy that classifies before
//! it retries. A target told per incident never gets the members' own
//! notices (they are inhibited).
//!
//! The rule for SQLite here as everywhere: never on an async thread. The
//! sweep's enqueue runs in the sweep's own blocking task; the sender runs
//! each outbox call on the blocking pool ([`Sender::with_db`]); the
//! `alerts` commands are synchronous.

pub mod answer;
pub mod commands;
pub mod config;
pub mod discord;
pub mod hosts;
pub mod incidents;
pub mod message;
pub mod notify;
pub mod outbox;
pub mod pagerduty;
pub mod policy;
pub mod sender;
pub mod sign;
pub mod slack;
pub mod stats;
pub mod target;
pub mod teams;
pub mod webhook;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_incidents;

use std::collections::BTreeMap;

use rusqlite::Connection;

pub use config::AlertConfig;
pub use incidents::{IncidentEvent, IncidentNotice};
pub use notify::{Event, Notice};
pub use sender::{Clock, Mode, Sender, SenderError};
pub use target::{GroupBy, Target, TargetKind};

use crate::signal::{Lifecycle, Signal};

/// Alerting as a sweep sees it: the policy, the resolved targets and the
/// public URL for links.
#[derive(Debug, Clone)]
pub struct Alerting {
    pub cfg: AlertConfig,
    pub targets: Vec<Target>,
    pub public_url: String,
}

/// What one sweep queued: one message for `target`, about `signals` — or
/// about `incident` (its members in `signals`), telling `event`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Queued {
    pub target: String,
    pub webhook_id: String,
    pub signals: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<IncidentEvent>,
}

/// The body a target gets for `notices`.
pub fn render(
    kind: TargetKind,
    notices: &[Notice],
    public_url: &str,
    evidence: usize,
    now_ns: i64,
) -> serde_json::Value {
    let m = message::Message {
        notices,
        public_url,
        evidence,
    };
    match kind {
        TargetKind::Slack => slack::render(&m),
        TargetKind::Discord => discord::render(&m),
        TargetKind::Teams => teams::render(&m),
        TargetKind::Webhook => webhook::render(&m, now_ns),
        TargetKind::PagerDuty => pagerduty::render_signals(&m),
    }
}

/// The body a target gets for one incident notice (a PagerDuty event
/// without its `routing_key`, which the sender adds).
pub fn render_incident(
    kind: TargetKind,
    notice: &IncidentNotice,
    public_url: &str,
    evidence: usize,
    now_ns: i64,
) -> serde_json::Value {
    let m = message::IncidentMessage {
        notice,
        public_url,
        evidence,
    };
    match kind {
        TargetKind::Slack => slack::render_incident(&m),
        TargetKind::Discord => discord::render_incident(&m),
        TargetKind::Teams => teams::render_incident(&m),
        TargetKind::Webhook => webhook::render_incident(&m, now_ns),
        TargetKind::PagerDuty => pagerduty::render(&m),
    }
}

/// A rendered body that breaks its target's documented limits.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// The body does not serialize.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("{bytes} bytes > {max}")]
    Bytes { bytes: usize, max: usize },
    /// A required part missing ("no blocks", "no source").
    #[error("no {0}")]
    Missing(&'static str),
    /// A rule of the target's broken, in its words ("too many fields").
    #[error("{0}")]
    Rule(&'static str),
    /// A text over its length ("summary of 1100 chars").
    #[error("{what} of {chars} chars")]
    Chars { what: String, chars: usize },
    /// A field holding a value the target does not take (`severity "bad"`).
    #[error("{field} {value:?}")]
    Value { field: &'static str, value: String },
    /// Slack: more blocks than it takes.
    #[error("{count} blocks > {max}")]
    Blocks { count: usize, max: usize },
    /// Slack: a context block with more than 10 elements.
    #[error("context with {0} elements")]
    Elements(usize),
    /// Discord: more embeds than it takes.
    #[error("{0} embeds")]
    Embeds(usize),
    /// Discord: the embeds' texts together over its limit.
    #[error("embeds total {total} chars > {max}")]
    EmbedsTotal { total: usize, max: usize },
}

/// The documented limits of `kind`, checked on a rendered body.
pub fn check_limits(kind: TargetKind, body: &serde_json::Value) -> Result<(), LimitError> {
    match kind {
        TargetKind::Slack => slack::check(body),
        TargetKind::Discord => discord::check(body),
        TargetKind::Teams => teams::check(body),
        TargetKind::Webhook => Ok(()),
        TargetKind::PagerDuty => pagerduty::check(body),
    }
}

impl Alerting {
    /// Decide this sweep's notices and queue them, on `c` (the sweep's
    /// transaction, after the incidents were brought up to date on it):
    /// for a target told per incident (the default) one message per
    /// incident notice it wants, and none of the signals' own notices
    /// (inhibited); for a target told per signal one grouped message of
    /// the signal notices it wants. `sweep_now_ns` times reminders and
    /// cooldowns (so a replayed sweep behaves as it would have); `wall_ns`
    /// stamps the outbox rows.
    pub fn enqueue(
        &self,
        c: &Connection,
        signals: &[Signal],
        changes: &[(String, Option<Lifecycle>, Lifecycle)],
        incident_changes: &[crate::incident::IncidentChange],
        sweep_now_ns: i64,
        wall_ns: i64,
    ) -> rusqlite::Result<Vec<Queued>> {
        let timing = notify::Timing {
            repeat_interval_ns: (self.cfg.repeat_interval_secs as i64)
                .saturating_mul(1_000_000_000),
            cooldown_ns: (self.cfg.cooldown_secs as i64).saturating_mul(1_000_000_000),
        };
        let mut queued = Vec::new();

        // Signals: decided and remembered whatever the targets, so a target
        // switched to `group_by = "signal"` later starts from the truth.
        let changed: BTreeMap<String, Lifecycle> = changes
            .iter()
            .map(|(id, _, to)| (id.clone(), *to))
            .collect();
        let told = outbox::told(c)?;
        let (notices, remember) = notify::decide(signals, &changed, &told, sweep_now_ns, timing);
        for (id, t) in &remember {
            outbox::remember(c, id, t)?;
        }
        for target in self
            .targets
            .iter()
            .filter(|t| t.group_by == GroupBy::Signal)
        {
            let mine: Vec<Notice> = notices
                .iter()
                .filter(|n| {
                    let d = &n.signal.draft;
                    target.wants(d.kind, &d.tool, d.severity())
                })
                .cloned()
                .collect();
            if mine.is_empty() {
                continue;
            }
            let body = render(
                target.kind,
                &mine,
                &self.public_url,
                self.cfg.evidence_per_signal,
                wall_ns,
            );
            let ids: Vec<String> = mine.iter().map(|n| n.signal.draft.id.clone()).collect();
            let webhook_id = outbox::enqueue(c, &target.name, &ids, &body.to_string(), wall_ns)?;
            queued.push(Queued {
                target: target.name.clone(),
                webhook_id,
                signals: ids,
                incident: None,
                event: None,
            });
        }

        // Incidents: one message per notice and target.
        let incidents = crate::incident::store::list(c).map_err(|e| match e {
            crate::incident::IncidentError::Db(e) => e,
            other => rusqlite::Error::ToSqlConversionFailure(Box::new(other)),
        })?;
        let changed: BTreeMap<String, crate::incident::IncidentChange> = incident_changes
            .iter()
            .map(|ch| (ch.id.clone(), ch.clone()))
            .collect();
        let told = outbox::incident_told(c)?;
        let (notices, remember) =
            incidents::decide(&incidents, &changed, &told, sweep_now_ns, timing);
        for (id, t) in &remember {
            outbox::remember_incident(c, id, t)?;
        }
        for target in self
            .targets
            .iter()
            .filter(|t| t.group_by == GroupBy::Incident)
        {
            for n in &notices {
                if !n.event.goes_to(target.kind) || !target.wants_incident(&n.incident) {
                    continue;
                }
                let body = render_incident(
                    target.kind,
                    n,
                    &self.public_url,
                    self.cfg.evidence_per_signal,
                    wall_ns,
                );
                let about = format!("{}:{}", n.incident.id, n.event.as_str());
                let webhook_id =
                    outbox::enqueue(c, &target.name, &[about], &body.to_string(), wall_ns)?;
                queued.push(Queued {
                    target: target.name.clone(),
                    webhook_id,
                    signals: n
                        .incident
                        .members
                        .iter()
                        .map(|m| m.signal_id.clone())
                        .collect(),
                    incident: Some(n.incident.id.clone()),
                    event: Some(n.event),
                });
            }
        }
        Ok(queued)
    }
}
