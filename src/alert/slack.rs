//! Slack incoming webhooks: `text` (the notification line, formatting off)
//! and Block Kit `blocks`. Limits: at most 50 blocks, a section's text at
//! most 3000 characters, a header's 150, a context block's elements 10.
//! Span text goes only into `plain_text` objects, escaped (`&`, `<`, `>`),
//! so `<!channel>` or `*bold*` in a tool name arrives as text.
//! Success is 200 with the body `ok`; anything else is a failure.

use serde_json::{json, Value};

use super::message::{
    cut, evidence, evidence_line, numbers, remedy_line, short_trace, Fit, IncidentMessage, Message,
};
use super::LimitError;

pub const MAX_BLOCKS: usize = 50;
pub const MAX_SECTION: usize = 3000;
pub const MAX_HEADER: usize = 150;

/// Slack's escaping of the three control characters.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn plain(s: &str, max: usize) -> Value {
    json!({"type": "plain_text", "text": cut(&escape(s), max), "emoji": false})
}

pub fn render(m: &Message<'_>) -> Value {
    let mut blocks = vec![json!({"type": "header", "text": plain(&m.headline(), MAX_HEADER)})];
    // Each signal takes a section, a context of evidence and a divider;
    // keep room for the "+N more" block.
    let per_signal = 3;
    let room = (MAX_BLOCKS - 2) / per_signal;
    for n in m.notices.iter().take(room) {
        let d = &n.signal.draft;
        let mut text = format!(
            "{} · {}\n{}\n{}",
            n.event.label(),
            d.id,
            d.title,
            numbers(n)
        );
        if let Some(r) = remedy_line(n) {
            text.push('\n');
            text.push_str(&r);
        }
        blocks.push(json!({"type": "section", "text": plain(&text, MAX_SECTION)}));
        let (shown, more) = evidence(n, m.evidence);
        let mut elements: Vec<Value> = shown
            .iter()
            .take(9)
            .map(|e| {
                // Only hex ids and numbers go into mrkdwn.
                let trace = short_trace(&e.trace_id);
                let link = match m.trace_url(&e.trace_id) {
                    Some(url) => format!("<{url}|trace {trace}>"),
                    None => format!("trace {trace}"),
                };
                json!({"type": "mrkdwn", "text": format!("{link}: {}", mrkdwn_safe(&evidence_line(e)))})
            })
            .collect();
        let more = more + shown.len().saturating_sub(9);
        if more > 0 {
            elements.push(json!({"type": "plain_text", "text": format!("+{more} more traces")}));
        }
        if !elements.is_empty() {
            blocks.push(json!({"type": "context", "elements": elements}));
        }
        blocks.push(json!({"type": "divider"}));
    }
    if m.notices.len() > room {
        let rest = m.notices.len() - room;
        blocks.push(json!({"type": "section", "text": plain(&format!("+{rest} more signals"), MAX_SECTION)}));
    }
    json!({
        "text": cut(&escape(&m.headline()), MAX_SECTION),
        "mrkdwn": false,
        "blocks": blocks,
    })
}

/// One incident: a header, a section each for what happened (with what
/// changed), the members and why each is here, the impact and timeline,
/// the remedies; a context of evidence links and one of the incident's
/// page. At most 7 blocks, each section within its 3000 characters.
pub fn render_incident(m: &IncidentMessage<'_>) -> Value {
    let section = |lines: &[String], what: &'static str| -> Option<Value> {
        let mut fit = Fit::new(MAX_SECTION);
        for l in lines {
            fit.push(&cut(&escape(l), 1000), what);
        }
        let text = fit.finish();
        (!text.is_empty())
            .then(|| json!({"type": "section", "text": {"type": "plain_text", "text": text, "emoji": false}}))
    };
    let mut blocks = vec![json!({"type": "header", "text": plain(&m.headline(), MAX_HEADER)})];
    let mut head = vec![m.heading(), m.status_line()];
    head.extend(m.why().iter().cloned());
    blocks.extend(section(&head, "changes"));
    let mut members = vec!["Members:".to_string()];
    members.extend(m.member_lines());
    blocks.extend(section(&members, "members"));
    let mut story: Vec<String> = m.impact_line().into_iter().collect();
    story.extend(m.timeline_lines());
    blocks.extend(section(&story, "moments"));
    blocks.extend(section(&m.remedy_lines(), "remedies"));
    let (shown, more) = m.evidence();
    let mut elements: Vec<Value> = shown
        .iter()
        .take(9)
        .map(|e| {
            // Only hex ids, numbers and the dashboard's own URL go into mrkdwn.
            let trace = short_trace(&e.evidence.trace_id);
            let link = match m.trace_url(&e.evidence.trace_id) {
                Some(url) => format!("<{url}|trace {trace}>"),
                None => format!("trace {trace}"),
            };
            json!({"type": "mrkdwn", "text": format!("{link}: {}", mrkdwn_safe(&evidence_line(&e.evidence)))})
        })
        .collect();
    let more = more + shown.len().saturating_sub(9);
    if more > 0 {
        elements.push(json!({"type": "plain_text", "text": format!("+{more} more traces")}));
    }
    if !elements.is_empty() {
        blocks.push(json!({"type": "context", "elements": elements}));
    }
    if let Some(url) = m.incident_url() {
        let id = &m.notice.incident.id;
        blocks.push(json!({"type": "context", "elements": [
            {"type": "mrkdwn", "text": format!("<{url}|{id} in stormwatch>")}
        ]}));
    }
    json!({
        "text": cut(&escape(&format!("{}: {}", m.headline(), m.notice.incident.title)), MAX_SECTION),
        "mrkdwn": false,
        "blocks": blocks,
    })
}

/// An evidence line is built from hex ids, numbers and rhythm names only;
/// this keeps it so even if that changes.
fn mrkdwn_safe(s: &str) -> String {
    escape(s)
        .chars()
        .map(|c| if c == '_' { ' ' } else { c })
        .filter(|c| !matches!(c, '*' | '~' | '`' | '!' | '@' | '|'))
        .collect()
}

/// Slack's documented limits, checked on a rendered payload.
pub fn check(v: &Value) -> Result<(), LimitError> {
    let blocks = v["blocks"]
        .as_array()
        .ok_or(LimitError::Missing("blocks"))?;
    if blocks.len() > MAX_BLOCKS {
        return Err(LimitError::Blocks {
            count: blocks.len(),
            max: MAX_BLOCKS,
        });
    }
    for b in blocks {
        let t = b["text"]["text"].as_str().unwrap_or("");
        let max = if b["type"] == "header" {
            MAX_HEADER
        } else {
            MAX_SECTION
        };
        if t.chars().count() > max {
            return Err(LimitError::Chars {
                what: format!("{} text", b["type"]),
                chars: t.chars().count(),
            });
        }
        if let Some(els) = b["elements"].as_array() {
            if els.len() > 10 {
                return Err(LimitError::Elements(els.len()));
            }
        }
    }
    if v["text"].as_str().unwrap_or("").chars().count() > MAX_SECTION {
        return Err(LimitError::Rule("text too long"));
    }
    Ok(())
}

/// Slack answers 200 `ok`; 200 with anything else is a failure.
pub fn accepted(status: u16, body: &str) -> bool {
    status == 200 && body.trim() == "ok"
}
