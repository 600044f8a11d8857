//! The pieces the `alerts` commands (`crate::cmd::alerts`), `serve` and the
//! sweep share: the outbox opened on `state.sqlite`, a sender, a flush of
//! every target, the sample messages of `alerts test` (an incident, or a
//! signal for a target told per signal), alerting resolved from the
//! config. Plain parameters; nothing here prints.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::incidents::{IncidentEvent, IncidentNotice};
use super::notify::{Event, Notice};
use super::sender::{self, Clock, Mode, Sender};
use super::target::{GroupBy, Target};
use super::{outbox, AlertConfig};
use crate::signal::{Evidence, Kind, Lifecycle, Signal, SignalDraft};
use crate::time::rfc3339;

/// Open `state.sqlite` for the outbox (through [`crate::state::open`]),
/// waiting up to 10 s for another writer.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    crate::state::open(path, Duration::from_secs(10))
        .map_err(crate::state::StateFileError::into_sqlite)
}

/// `alerts list`, as text.
pub fn list_text(rows: &[outbox::Row]) -> String {
    if rows.is_empty() {
        return "the outbox is empty\n".into();
    }
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{:>5}  {:<10} {:<16} attempts {:<2} created {}  {} {}{}\n",
            r.id,
            r.status,
            r.target,
            r.attempts,
            rfc3339(r.created_ns),
            if r.signals.starts_with("INC-") {
                "incident"
            } else {
                "signals"
            },
            r.signals,
            r.last_error
                .as_deref()
                .map(|e| format!("\n       last error: {e}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// A sender over `db` for `cfg`.
pub fn sender(db: Connection, cfg: &AlertConfig) -> Sender {
    Sender {
        db: Arc::new(Mutex::new(db)),
        cfg: cfg.clone(),
        client: sender::client(cfg),
        clock: Clock::System,
        stats: Arc::default(),
        gate: None,
        hosts: Arc::new(super::hosts::Guard {
            policy: cfg.host_policy(),
            own: Vec::new(),
        }),
    }
}

/// `alerts flush`: work every target's queue, waiting for retries at most
/// `wait`; the sender's counters after.
pub async fn flush(
    s: &Sender,
    targets: &[Target],
    wait: Duration,
) -> Result<(), sender::SenderError> {
    let mut tasks = tokio::task::JoinSet::new();
    for t in targets {
        let (s, t) = (s.clone(), t.clone());
        tasks.spawn(async move { s.run(t, Mode::Drain { wait }).await });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r {
            return Err(e);
        }
    }
    Ok(())
}

/// The sample signal `alerts test` sends: the seeds' dead airline feed.
pub fn sample() -> Vec<Notice> {
    let day = "2026-07-29".to_string();
    let evidence = Evidence {
        rhythm: Some("no_backoff".into()),
        outcome: Some("gave_up".into()),
        wasted_seconds: 82.5,
        turn_duration_s: Some(98.0),
        turn_spans: Some(33),
        healthy_turn_duration_s: Some(8.1),
        healthy_turn_spans: Some(3.0),
        ..Evidence::turn("baacbed78f2b62522a113193688fafe8", "sample", 20_663, 15, 15)
    };
    let mut draft = SignalDraft {
                id: "SW-TEST".into(),
                key: "v1:retry_storm:search_flights:unavailable".into(),
                kind: Kind::RetryStorm,
                tool: "search_flights".into(),
                error_class: "unavailable".into(),
                title: "Test from stormwatch: Retry storm: search_flights ×15 in one turn (unavailable, no backoff)".into(),
                first_seen_ns: 1_785_283_200_000_000_000,
                last_seen_ns: 1_785_283_200_000_000_000,
                days: vec![day],
                findings: 1,
                evidence: vec![evidence],
                evidence_more: 0,
                wasted_seconds: 0.0,
                severity: None,
                remedy: None,
    };
    draft.remedy = Some(crate::signal::remedy(&draft, &["HTTP 503".to_string()]));
    vec![Notice {
        event: Event::New,
        signal: Signal {
            draft,
            state: Lifecycle::New,
            muted_until_ns: None,
            mute_until_escalates: false,
        },
    }]
}

/// The sample incident `alerts test` sends a target told per incident: the
/// sample signal as an incident of its own tool, keyed apart from any real
/// one (`inc1:test:…`), so a PagerDuty test opens its own alert.
pub fn sample_incident(target: &str) -> IncidentNotice {
    let notice = sample().remove(0);
    let cause = crate::incident::Cause::Tool(notice.signal.draft.tool.clone());
    let joined = [crate::incident::body::Joined {
        signal: &notice.signal,
        joined_ns: notice.signal.draft.first_seen_ns,
        reason: "first finding".into(),
    }];
    let mut incident = crate::incident::body::build(
        "INC-TEST",
        &cause,
        &joined,
        &crate::incident::Facts::default(),
        notice.signal.draft.first_seen_ns,
        None,
        5,
    );
    incident.key = format!("inc1:test:{target}");
    incident.title = format!("Test from stormwatch: {}", incident.title);
    IncidentNotice {
        event: IncidentEvent::Opened,
        why: Vec::new(),
        incident,
    }
}

/// The body `alerts test` sends `target`: the sample incident, or the
/// sample signal for a target told per signal.
pub fn test_body(target: &Target, public_url: &str, evidence: usize, now_ns: i64) -> String {
    match target.group_by {
        GroupBy::Incident => super::render_incident(
            target.kind,
            &sample_incident(&target.name),
            public_url,
            evidence,
            now_ns,
        ),
        GroupBy::Signal => super::render(target.kind, &sample(), public_url, evidence, now_ns),
    }
    .to_string()
}

/// Alerting for a sweep (`send` false: only routing is needed, secrets may
/// be absent) or for a sender (`send` true: every URL and secret resolved);
/// `None` when no target is configured.
pub fn alerting(
    cfg: &AlertConfig,
    public_url: Option<&str>,
    send: bool,
) -> anyhow::Result<Option<super::Alerting>> {
    if cfg.targets.is_empty() {
        return Ok(None);
    }
    let targets = if send {
        cfg.targets(|k| std::env::var(k).ok())
    } else {
        cfg.routing()
    }
    .map_err(|e| anyhow::Error::msg(e.to_string()))?;
    Ok(Some(super::Alerting {
        cfg: cfg.clone(),
        targets,
        public_url: public_url.unwrap_or(&cfg.public_url).to_string(),
    }))
}
