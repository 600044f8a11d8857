//! Microsoft Teams (Workflows webhook): a message carrying one Adaptive Card
//! 1.4. Span text is markdown-escaped (TextBlocks render a markdown subset;
//! HTML is never rendered). Teams refuses messages over about 28 KB; the
//! card is kept under 24 KB. Success is 202 (any 2xx is taken).

use serde_json::{json, Value};

use super::message::{
    cut, evidence, evidence_line, numbers, remedy_line, short_trace, IncidentMessage, Message,
};
use super::LimitError;

pub const MAX_BYTES: usize = 24 * 1024;

/// Markdown characters escaped with a backslash.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '*'
                | '_'
                | '~'
                | '`'
                | '#'
                | '['
                | ']'
                | '('
                | ')'
                | '<'
                | '>'
                | '-'
                | '+'
                | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn text(s: String, extra: Value) -> Value {
    let mut v = json!({"type": "TextBlock", "text": s, "wrap": true});
    if let (Some(o), Some(x)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(x.clone());
    }
    v
}

fn card(body: Vec<Value>) -> Value {
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": body,
            }
        }]
    })
}

pub fn render(m: &Message<'_>) -> Value {
    let mut body = vec![text(
        escape(&m.headline()),
        json!({"size": "Large", "weight": "Bolder"}),
    )];
    let mut left = m.notices.len();
    for n in m.notices {
        let d = &n.signal.draft;
        let mut items = vec![
            text(
                escape(&cut(
                    &format!("{} · {}: {}", n.event.label(), d.id, d.title),
                    400,
                )),
                json!({"weight": "Bolder", "color": if n.event == super::notify::Event::Resolved { "Good" } else { "Attention" }}),
            ),
            text(escape(&numbers(n)), json!({"isSubtle": true})),
        ];
        if let Some(r) = remedy_line(n) {
            items.push(text(escape(&r), json!({"wrap": true})));
        }
        let (shown, more) = evidence(n, m.evidence);
        for e in shown {
            let trace = short_trace(&e.trace_id);
            let line = match m.trace_url(&e.trace_id) {
                Some(url) => format!("[trace {trace}]({url}): {}", escape(&evidence_line(e))),
                None => format!("trace {trace}: {}", escape(&evidence_line(e))),
            };
            items.push(text(line, json!({"spacing": "None"})));
        }
        if more > 0 {
            items.push(text(
                format!("+{more} more traces"),
                json!({"isSubtle": true}),
            ));
        }
        let container = json!({"type": "Container", "separator": true, "items": items});
        body.push(container);
        left -= 1;
        if serde_json::to_vec(&card(body.clone())).map_or(0, |b| b.len()) > MAX_BYTES - 2048 {
            body.pop();
            left += 1;
            break;
        }
    }
    if left > 0 {
        body.push(text(
            format!("+{left} more signals"),
            json!({"isSubtle": true}),
        ));
    }
    card(body)
}

/// One incident: a card with the headline, what happened and changed, the
/// members and why each is here, impact, timeline, remedies, evidence
/// links and the incident's page; items past the size budget are counted
/// in "+N more" lines.
pub fn render_incident(m: &IncidentMessage<'_>) -> Value {
    let i = &m.notice.incident;
    let good = m.notice.event == super::incidents::IncidentEvent::Resolved;
    let mut body = vec![
        text(
            escape(&m.headline()),
            json!({"size": "Large", "weight": "Bolder"}),
        ),
        text(
            escape(&cut(&m.heading(), 400)),
            json!({"weight": "Bolder", "color": if good { "Good" } else { "Attention" }}),
        ),
        text(
            escape(&cut(&m.status_line(), 400)),
            json!({"isSubtle": true}),
        ),
    ];
    // Room for the items below: the card so far, less a margin for the
    // "+N more" lines and the link.
    let size = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
    let mut used = size(&card(body.clone()));
    let budget = MAX_BYTES - 2048;
    let mut left: Vec<(&'static str, usize)> = Vec::new();
    let mut add = |body: &mut Vec<Value>, item: Value, what: &'static str| {
        let n = size(&item) + 1;
        if used + n <= budget {
            used += n;
            body.push(item);
        } else {
            match left.iter_mut().find(|(w, _)| *w == what) {
                Some((_, c)) => *c += 1,
                None => left.push((what, 1)),
            }
        }
    };
    for w in m.why() {
        add(
            &mut body,
            text(escape(&cut(w, 400)), json!({"spacing": "None"})),
            "changes",
        );
    }
    add(
        &mut body,
        text("Members".into(), json!({"weight": "Bolder"})),
        "members",
    );
    for l in m.member_lines() {
        add(
            &mut body,
            text(escape(&cut(&l, 400)), json!({"spacing": "None"})),
            "members",
        );
    }
    if let Some(l) = m.impact_line() {
        add(&mut body, text(escape(&l), json!({})), "moments");
    }
    for l in m.timeline_lines() {
        add(
            &mut body,
            text(
                escape(&cut(&l, 400)),
                json!({"spacing": "None", "isSubtle": true}),
            ),
            "moments",
        );
    }
    for l in m.remedy_lines() {
        add(
            &mut body,
            text(escape(&cut(&l, 600)), json!({})),
            "remedies",
        );
    }
    let (shown, more) = m.evidence();
    for e in shown {
        let trace = short_trace(&e.evidence.trace_id);
        let line = match m.trace_url(&e.evidence.trace_id) {
            Some(url) => format!(
                "[trace {trace}]({url}): {}",
                escape(&evidence_line(&e.evidence))
            ),
            None => format!("trace {trace}: {}", escape(&evidence_line(&e.evidence))),
        };
        add(&mut body, text(line, json!({"spacing": "None"})), "traces");
    }
    if more > 0 {
        match left.iter_mut().find(|(w, _)| *w == "traces") {
            Some((_, c)) => *c += more,
            None => left.push(("traces", more)),
        }
    }
    for (what, n) in left {
        body.push(text(format!("+{n} more {what}"), json!({"isSubtle": true})));
    }
    if let Some(url) = m.incident_url() {
        body.push(text(format!("[{} in stormwatch]({url})", i.id), json!({})));
    }
    card(body)
}

/// The Adaptive Card shape and the size limit, checked on a rendered payload.
pub fn check(v: &Value) -> Result<(), LimitError> {
    let bytes = serde_json::to_vec(v).map_err(LimitError::Json)?.len();
    if bytes > MAX_BYTES {
        return Err(LimitError::Bytes {
            bytes,
            max: MAX_BYTES,
        });
    }
    let content = &v["attachments"][0]["content"];
    if v["type"] != "message"
        || v["attachments"][0]["contentType"] != "application/vnd.microsoft.card.adaptive"
        || content["type"] != "AdaptiveCard"
        || content["version"] != "1.4"
    {
        return Err(LimitError::Rule("not a message with an Adaptive Card 1.4"));
    }
    Ok(())
}

pub fn accepted(status: u16) -> bool {
    (200..300).contains(&status)
}
