//! The generic webhook: stormwatch's own JSON (schema in the README,
//! `"type": "stormwatch.signals"`, `"version": 1`), signed per Standard
//! Webhooks when the target has a secret. Any 2xx is success; 3xx is a
//! failure (redirects are never followed).

use serde_json::{json, Value};

use super::message::{evidence, Message};
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

pub fn accepted(status: u16) -> bool {
    (200..300).contains(&status)
}
