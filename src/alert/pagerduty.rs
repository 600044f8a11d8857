//! PagerDuty's Events API v2 (alerting.md, "PagerDuty"): one alert per
//! incident, `dedup_key` = the incident key, so every event about an
//! incident — its trigger, the updates (more `trigger`s, which PagerDuty
//! appends to the open alert; reminders are not sent), `acknowledge` and
//! `resolve` — lands on the same PagerDuty alert, and a repeat after a
//! crash between send and mark is deduplicated by PagerDuty itself.
//!
//! The body is stored in the outbox *without* `routing_key`: the sender
//! adds it from the resolved target as it posts ([`with_routing_key`]), so
//! the key is never in `state.sqlite`, a log line or `alerts list`, and a
//! sweep from cron needs no key. Success is 202 (any 2xx); 400 is an
//! invalid event (dead-lettered with the body's `errors`); 429 and 5xx are
//! retried, as PagerDuty documents.

use serde_json::{json, Value};

use super::incidents::IncidentEvent;
use super::message::{cut, evidence_line, short_trace, IncidentMessage};
use super::LimitError;
use crate::incident::{Incident, IncidentEvidence};
use crate::model::ErrorClass;
use crate::signal::Severity;
use crate::time::rfc3339;

/// `payload.summary`: at most 1024 characters.
pub const MAX_SUMMARY: usize = 1024;
/// `dedup_key`: at most 255 characters.
pub const MAX_DEDUP_KEY: usize = 255;
/// A whole event: at most 512 KB.
pub const MAX_BYTES: usize = 512 * 1024;
/// Members and timeline moments listed in `custom_details` at most (the
/// rest counted), so an incident of hundreds of signals stays far under
/// the size limit.
const MAX_LISTED: usize = 50;

/// The `event_action` of a notice.
pub fn event_action(e: IncidentEvent) -> &'static str {
    match e {
        IncidentEvent::Resolved => "resolve",
        IncidentEvent::Acknowledged => "acknowledge",
        IncidentEvent::Opened
        | IncidentEvent::Reopened
        | IncidentEvent::Updated
        | IncidentEvent::Reminder => "trigger",
    }
}

/// PagerDuty's severity for an incident: a critical member → `critical`; a
/// warning with failed calls → `error`; a warning otherwise → `warning`;
/// info → `info`.
pub fn severity(i: &Incident) -> &'static str {
    let failed = i.impact.failed_calls > 0
        || ErrorClass::parse(&i.error_class)
            .is_some_and(|c| c.is_failure() && c != ErrorClass::Unknown);
    match i.severity() {
        Severity::Critical => "critical",
        Severity::Warning if failed => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// The incident key, as `dedup_key`: within 255 characters (a longer key
/// keeps its first 238 and a hash of the whole).
pub fn dedup_key(i: &Incident) -> String {
    if i.key.chars().count() <= MAX_DEDUP_KEY {
        return i.key.clone();
    }
    let head: String = i.key.chars().take(MAX_DEDUP_KEY - 17).collect();
    format!(
        "{head}#{:016x}",
        xxhash_rust::xxh3::xxh3_64(i.key.as_bytes())
    )
}

/// `payload.source`: the dashboard's host, else `stormwatch`.
pub fn source(public_url: &str) -> String {
    reqwest::Url::parse(public_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "stormwatch".to_string())
}

/// The event for one incident notice, without `routing_key`.
pub fn render(m: &IncidentMessage<'_>) -> Value {
    let i = &m.notice.incident;
    let action = event_action(m.notice.event);
    if action != "trigger" {
        return json!({"event_action": action, "dedup_key": dedup_key(i)});
    }
    let (shown, more) = m.evidence();
    let mut event = json!({
        "event_action": action,
        "dedup_key": dedup_key(i),
        "payload": payload(m, details(m, shown, more)),
        "links": links(m, shown),
        "client": "stormwatch",
    });
    if let Some(url) = m.incident_url().or_else(|| {
        (!m.public_url.is_empty()).then(|| m.public_url.trim_end_matches('/').to_string())
    }) {
        event["client_url"] = json!(url);
    }
    fit(&mut event, i.members.len());
    event
}

/// `payload`: the summary, where it is and how bad, and `details`.
fn payload(m: &IncidentMessage<'_>, details: Value) -> Value {
    let i = &m.notice.incident;
    let mut summary = i.title.clone();
    if m.notice.event == IncidentEvent::Reopened {
        summary = format!("Reopened: {summary}");
    }
    let mut payload = json!({
        "summary": cut(&summary, MAX_SUMMARY),
        "source": source(m.public_url),
        "severity": severity(i),
        "timestamp": rfc3339(i.last_seen_ns),
        "class": class(i),
        "custom_details": details,
    });
    let component = i
        .dependency
        .clone()
        .or_else(|| (i.tools.len() == 1).then(|| i.tools[0].clone()));
    if let Some(c) = component {
        payload["component"] = json!(cut(&c, 255));
    }
    if let Some(g) = &i.service {
        payload["group"] = json!(cut(g, 255));
    }
    payload
}

/// `payload.custom_details`: the incident whole — members, timeline,
/// impact, remedies and the `shown` evidence — lists cut to `MAX_LISTED`.
fn details(m: &IncidentMessage<'_>, shown: &[IncidentEvidence], more: usize) -> Value {
    let i = &m.notice.incident;
    let evidence: Vec<Value> = shown
        .iter()
        .map(|e| {
            json!({
                "trace_id": e.evidence.trace_id,
                "url": m.trace_url(&e.evidence.trace_id),
                "signal_id": e.signal_id,
                "tool": e.tool,
                "day": e.evidence.day,
                "what": evidence_line(&e.evidence),
            })
        })
        .collect();
    let members: Vec<Value> = i
        .members
        .iter()
        .take(MAX_LISTED)
        .map(|mb| {
            json!({
                "signal_id": mb.signal_id,
                "kind": mb.kind,
                "tool": mb.tool,
                "error_class": mb.error_class,
                "severity": mb.severity,
                "state": mb.state,
                "reason": mb.reason,
                "title": cut(&mb.title, 300),
                "findings": mb.findings,
            })
        })
        .collect();
    let timeline: Vec<String> = m
        .timeline_lines()
        .into_iter()
        .take(MAX_LISTED)
        .map(|l| cut(&l, 300))
        .collect();
    let mut details = json!({
        "incident": i.id,
        "event": m.notice.event,
        "changes": m.notice.why.iter().take(MAX_LISTED).map(|w| cut(w, 300)).collect::<Vec<_>>(),
        "state": i.state,
        "severity": i.severity,
        "cause": cut(&i.cause, 300),
        "tools": i.tools.iter().take(MAX_LISTED).map(|t| cut(t, 255)).collect::<Vec<_>>(),
        "dependency": i.dependency,
        "service": i.service,
        "error_class": i.error_class,
        "first_seen": rfc3339(i.first_seen_ns),
        "last_seen": rfc3339(i.last_seen_ns),
        "findings": i.findings,
        "impact": i.impact,
        "members": members,
        "timeline": timeline,
        "remedy": i.remedy,
        "remedies": m.remedy_lines(),
        "evidence": evidence,
        "evidence_more": more,
        "url": m.incident_url(),
    });
    if i.members.len() > MAX_LISTED {
        details["members_more"] = json!(i.members.len() - MAX_LISTED);
    }
    details
}

/// `links`: the incident's page, then each `shown` trace's.
fn links(m: &IncidentMessage<'_>, shown: &[IncidentEvidence]) -> Vec<Value> {
    let mut links = Vec::new();
    if let Some(url) = m.incident_url() {
        links.push(json!({"href": url, "text": format!("{} in stormwatch", m.notice.incident.id)}));
    }
    for e in shown {
        if let Some(url) = m.trace_url(&e.evidence.trace_id) {
            links.push(json!({
                "href": url,
                "text": format!("trace {}: {}", short_trace(&e.evidence.trace_id), evidence_line(&e.evidence)),
            }));
        }
    }
    links
}

/// Never past the size limit, whatever the members' titles hold: an
/// event too big loses its lists (the `members` counted instead).
fn fit(event: &mut Value, members: usize) {
    if serde_json::to_vec(&*event).map_or(0, |b| b.len()) > MAX_BYTES - 4096 {
        let d = &mut event["payload"]["custom_details"];
        d["members"] = json!([]);
        d["timeline"] = json!([]);
        d["changes"] = json!([]);
        d["tools"] = json!([]);
        d["remedies"] = json!([]);
        d["members_more"] = json!(members);
    }
}

/// Signal notices as one event (a PagerDuty target is told per incident,
/// so only a caller that renders signals for every kind gets here): a
/// trigger keyed by the first signal's key.
pub fn render_signals(m: &super::message::Message<'_>) -> Value {
    let Some(first) = m.notices.first() else {
        return json!({});
    };
    let severity = m
        .notices
        .iter()
        .map(|n| n.signal.draft.severity())
        .max()
        .unwrap_or(Severity::Info);
    let titles: Vec<&str> = m
        .notices
        .iter()
        .map(|n| n.signal.draft.title.as_str())
        .collect();
    let key = &first.signal.draft.key;
    json!({
        "event_action": "trigger",
        "dedup_key": cut(key, MAX_DEDUP_KEY),
        "payload": {
            "summary": cut(&format!("{}: {}", m.headline(), titles.join("; ")), MAX_SUMMARY),
            "source": source(m.public_url),
            "severity": match severity {
                Severity::Critical => "critical",
                Severity::Warning => "warning",
                Severity::Info => "info",
            },
            "timestamp": rfc3339(first.signal.draft.last_seen_ns),
            "component": cut(&first.signal.draft.tool, 255),
            "class": first.signal.draft.error_class,
            "custom_details": {
                "signals": m.notices.iter().map(|n| json!({
                    "event": n.event,
                    "id": n.signal.draft.id,
                    "key": n.signal.draft.key,
                    "title": n.signal.draft.title,
                })).collect::<Vec<_>>(),
            },
        },
        "client": "stormwatch",
    })
}

/// `payload.class`: the members' error class, or (when no call failed: a
/// loop, a retry after success) their kinds.
fn class(i: &Incident) -> String {
    if i.error_class != "ok" {
        return i.error_class.clone();
    }
    let kinds: Vec<&str> = i.kinds().into_iter().map(|k| k.as_str()).collect();
    kinds.join(", ")
}

/// Why a stored event cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum StoredEventError {
    #[error("the stored event is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("the stored event is not a JSON object")]
    NotObject,
}

/// The body as sent: `stored` with `routing_key` added.
pub fn with_routing_key(stored: &str, key: &str) -> Result<String, StoredEventError> {
    let mut v: Value = serde_json::from_str(stored).map_err(StoredEventError::NotJson)?;
    let o = v.as_object_mut().ok_or(StoredEventError::NotObject)?;
    o.insert("routing_key".into(), json!(key));
    Ok(v.to_string())
}

/// The Events API v2 contract, checked on a rendered (stored) event.
pub fn check(v: &Value) -> Result<(), LimitError> {
    let bytes = serde_json::to_vec(v).map_err(LimitError::Json)?.len();
    if bytes > MAX_BYTES {
        return Err(LimitError::Bytes {
            bytes,
            max: MAX_BYTES,
        });
    }
    if v.get("routing_key").is_some() {
        return Err(LimitError::Rule("a stored event must not hold routing_key"));
    }
    let action = v["event_action"].as_str().unwrap_or("");
    if !["trigger", "acknowledge", "resolve"].contains(&action) {
        return Err(LimitError::Value {
            field: "event_action",
            value: action.to_string(),
        });
    }
    let key = v["dedup_key"].as_str().unwrap_or("");
    if key.is_empty() || key.chars().count() > MAX_DEDUP_KEY {
        return Err(LimitError::Chars {
            what: "dedup_key".into(),
            chars: key.chars().count(),
        });
    }
    if action == "trigger" {
        let p = &v["payload"];
        let summary = p["summary"].as_str().unwrap_or("");
        if summary.is_empty() || summary.chars().count() > MAX_SUMMARY {
            return Err(LimitError::Chars {
                what: "summary".into(),
                chars: summary.chars().count(),
            });
        }
        if p["source"].as_str().unwrap_or("").is_empty() {
            return Err(LimitError::Missing("source"));
        }
        let sev = p["severity"].as_str().unwrap_or("");
        if !["critical", "error", "warning", "info"].contains(&sev) {
            return Err(LimitError::Value {
                field: "severity",
                value: sev.to_string(),
            });
        }
        for l in v["links"].as_array().into_iter().flatten() {
            if l["href"].as_str().unwrap_or("").is_empty() {
                return Err(LimitError::Rule("a link without href"));
            }
        }
    }
    Ok(())
}

pub fn accepted(status: u16) -> bool {
    (200..300).contains(&status)
}

/// What a 400 says: `{"status": "invalid event", "message": …, "errors":
/// […]}` as "invalid event: Event object is invalid: 'payload.summary' is
/// missing; …" (cut to 500 characters); a body that is not that, as is.
pub fn refusal(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let status = v["status"].as_str().unwrap_or("");
    let message = v["message"].as_str().unwrap_or("");
    let errors: Vec<String> = v["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
        .collect();
    if status.is_empty() && message.is_empty() && errors.is_empty() {
        return None;
    }
    let mut s = [status, message]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(": ");
    if !errors.is_empty() {
        s.push_str(&format!(" (errors: {})", errors.join("; ")));
    }
    Some(cut(&s, 500))
}
