//! The generic webhook: stormwatch's own JSON (schemas in the README and
//! alerting.md: `"type": "stormwatch.signals"` per signal, and
//! `"type": "stormwatch.incidents"` per incident, each `"version": 1`),
//! signed per Standard Webhooks when the target has a secret. Any 2xx is
//! success; 3xx is a failure (redirects are never followed).

use serde_json::{json, Value};

use super::message::{evidence, page_url, IncidentMessage, Message};
use crate::time::rfc3339;

pub fn render(m: &Message<'_>, sent_ns: i64) -> Value {
    let signals: Vec<Value> = m
        .notices
        .iter()
        .map(|n| {
            let d = &n.signal.draft;
            let (shown, more) = evidence(n, m.evidence);
            let evidence: Vec<Value> = shown
                .iter()
                .map(|e| {
                    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                    if let Some(url) = m.trace_url(&e.trace_id) {
                        v["url"] = json!(url);
                    }
                    v
                })
                .collect();
            json!({
                "event": n.event,
                "id": d.id,
                "key": d.key,
                "kind": d.kind,
                "severity": d.severity().as_str(),
                "tool": d.tool,
                "error_class": d.error_class,
                "title": d.title,
                "state": n.signal.state,
                "first_seen": rfc3339(d.first_seen_ns),
                "last_seen": rfc3339(d.last_seen_ns),
                "days": d.days,
                "findings": d.findings,
                "evidence": evidence,
                "evidence_more": more,
                "remedy": d.remedy,
                "url": m.signal_url(&d.id),
            })
        })
        .collect();
    json!({
        "type": "stormwatch.signals",
        "version": 1,
        "created_at": rfc3339(sent_ns),
        "summary": m.headline(),
        "signals": signals,
    })
}

/// One incident notice (alerting.md, "The incident webhook"): the event,
/// what changed, and the incident whole — members with their reasons and
/// links, timeline, impact, remedies, evidence with links.
pub fn render_incident(m: &IncidentMessage<'_>, sent_ns: i64) -> Value {
    let i = &m.notice.incident;
    let (shown, more) = m.evidence();
    let evidence: Vec<Value> = shown
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
            if let Some(url) = m.trace_url(&e.evidence.trace_id) {
                v["url"] = json!(url);
            }
            v
        })
        .collect();
    let members: Vec<Value> = i
        .members
        .iter()
        .map(|mb| {
            json!({
                "signal_id": mb.signal_id,
                "kind": mb.kind,
                "tool": mb.tool,
                "error_class": mb.error_class,
                "severity": mb.severity,
                "state": mb.state,
                "title": mb.title,
                "reason": mb.reason,
                "joined": rfc3339(mb.joined_ns),
                "first_seen": rfc3339(mb.first_seen_ns),
                "last_seen": rfc3339(mb.last_seen_ns),
                "findings": mb.findings,
                "dependency": mb.dependency,
                "url": page_url(m.public_url, "signals", &mb.signal_id),
            })
        })
        .collect();
    let timeline: Vec<Value> = i
        .timeline
        .iter()
        .map(|t| json!({"at": rfc3339(t.at_ns), "what": t.what, "text": t.text, "signal_id": t.signal_id}))
        .collect();
    json!({
        "type": "stormwatch.incidents",
        "version": 1,
        "created_at": rfc3339(sent_ns),
        "summary": format!("{}: {}", m.headline(), i.title),
        "event": m.notice.event,
        "changes": m.notice.why,
        "incident": {
            "id": i.id,
            "key": i.key,
            "state": i.state,
            "title": i.title,
            "cause": i.cause,
            "severity": i.severity,
            "dependency": i.dependency,
            "service": i.service,
            "tools": i.tools,
            "error_class": i.error_class,
            "first_seen": rfc3339(i.first_seen_ns),
            "last_seen": rfc3339(i.last_seen_ns),
            "opened": rfc3339(i.opened_ns),
            "resolved": i.resolved_ns.map(rfc3339),
            "findings": i.findings,
            "members": members,
            "timeline": timeline,
            "impact": i.impact,
            "remedy": i.remedy,
            "remedies": i.remedies,
            "evidence": evidence,
            "evidence_more": more,
            "url": m.incident_url(),
        },
    })
}

pub fn accepted(status: u16) -> bool {
    (200..300).contains(&status)
}
