//! Alerts (alerting.md): decide which signal changes are news, render one
//! grouped message per target (Slack, Discord, Teams, a signed generic
//! webhook), queue it in the outbox in the sweep's own transaction, and
//! deliver it with a retry policy that classifies before it retries.
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
pub mod message;
pub mod notify;
pub mod outbox;
pub mod policy;
pub mod sender;
pub mod sign;
pub mod slack;
pub mod stats;
pub mod teams;
pub mod webhook;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use rusqlite::Connection;

pub use config::{AlertConfig, Target, TargetKind};
pub use notify::{Event, Notice};
pub use sender::{Clock, Mode, Sender, SenderError};

use crate::signal::{Lifecycle, Signal};

/// Alerting as a sweep sees it: the policy, the resolved targets and the
/// public URL for links.
#[derive(Debug, Clone)]
pub struct Alerting {
    pub cfg: AlertConfig,
    pub targets: Vec<Target>,
    pub public_url: String,
}

/// What one sweep queued.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Queued {
    pub target: String,
    pub webhook_id: String,
    pub signals: Vec<String>,
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
    }
}

/// The documented limits of `kind`, checked on a rendered body.
pub fn check_limits(kind: TargetKind, body: &serde_json::Value) -> Result<(), String> {
    match kind {
        TargetKind::Slack => slack::check(body),
        TargetKind::Discord => discord::check(body),
        TargetKind::Teams => teams::check(body),
        TargetKind::Webhook => Ok(()),
    }
}

impl Alerting {
    /// Decide this sweep's notices and queue one message per target, on
    /// `c` (the sweep's transaction). `sweep_now_ns` times reminders and
    /// cooldowns (so a replayed sweep behaves as it would have); `wall_ns`
    /// stamps the outbox rows.
    pub fn enqueue(
        &self,
        c: &Connection,
        signals: &[Signal],
        changes: &[(String, Option<Lifecycle>, Lifecycle)],
        sweep_now_ns: i64,
        wall_ns: i64,
    ) -> rusqlite::Result<Vec<Queued>> {
        outbox::ensure(c)?;
        let changed: BTreeMap<String, Lifecycle> = changes
            .iter()
            .map(|(id, _, to)| (id.clone(), *to))
            .collect();
        let told = outbox::told(c)?;
        let timing = notify::Timing {
            repeat_interval_ns: (self.cfg.repeat_interval_secs as i64)
                .saturating_mul(1_000_000_000),
            cooldown_ns: (self.cfg.cooldown_secs as i64).saturating_mul(1_000_000_000),
        };
        let (notices, remember) = notify::decide(signals, &changed, &told, sweep_now_ns, timing);
        for (id, t) in &remember {
            outbox::remember(c, id, t)?;
        }
        let mut queued = Vec::new();
        for target in &self.targets {
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
            });
        }
        Ok(queued)
    }
}
