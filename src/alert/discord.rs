//! Discord webhooks: `content` ≤ 2000 characters, ≤ 10 `embeds` (title 256,
//! description 4096, ≤ 25 fields of name 256 / value 1024, all embeds
//! together ≤ 6000 characters). Span text is markdown-escaped and `@` gets a
//! zero-width joiner; `allowed_mentions` is empty, so nothing pings anyone.
//! Success is 204 (200 with `?wait=true`); 404 means the webhook is gone.

use serde_json::{json, Value};

use super::incidents::IncidentEvent;
use super::message::{
    cut, evidence, evidence_line, numbers, remedy_line, short_trace, Fit, IncidentMessage, Message,
};
use super::notify::Event;
use super::LimitError;

pub const MAX_CONTENT: usize = 2000;
pub const MAX_EMBEDS: usize = 10;
pub const MAX_TITLE: usize = 256;
pub const MAX_DESCRIPTION: usize = 4096;
pub const MAX_TOTAL: usize = 6000;

/// Markdown characters escaped with a backslash; `@` made inert.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' | '*' | '_' | '~' | '`' | '|' | '>' | '<' | '#' | '[' | ']' | '(' | ')' => {
                out.push('\\');
                out.push(c);
            }
            '@' => out.push_str("@\u{200D}"),
            _ => out.push(c),
        }
    }
    out
}

fn colour(e: Event) -> u32 {
    match e {
        Event::New | Event::Regressed | Event::Escalated => 0xD6_2728,
        Event::Resolved => 0x2C_A02C,
        Event::Reminder => 0xFF_7F0E,
    }
}

/// An escaped text cut to `max` characters without leaving a lone
/// backslash (which would escape the "…").
fn cut_escaped(s: &str, max: usize) -> String {
    let mut out = cut(s, max);
    if out.ends_with('…') {
        out.pop();
        let trailing = out.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            out.pop();
        }
        out.push('…');
    }
    out
}

pub fn render(m: &Message<'_>) -> Value {
    let mut embeds = Vec::new();
    // Share the 6000 characters among the embeds, with room for titles.
    let shown_signals = m.notices.len().min(MAX_EMBEDS);
    let budget = (MAX_TOTAL - 200) / shown_signals.max(1);
    for n in m.notices.iter().take(MAX_EMBEDS) {
        let d = &n.signal.draft;
        let title = cut_escaped(
            &escape(&format!("{} · {}: {}", n.event.label(), d.id, d.title)),
            MAX_TITLE,
        );
        let mut desc = format!("{}\n", escape(&numbers(n)));
        if let Some(r) = remedy_line(n) {
            desc.push_str(&escape(&r));
            desc.push('\n');
        }
        let (shown, mut more) = evidence(n, m.evidence);
        let room = budget
            .saturating_sub(title.chars().count())
            .min(MAX_DESCRIPTION)
            - 40;
        for (i, e) in shown.iter().enumerate() {
            let trace = short_trace(&e.trace_id);
            let line = match m.trace_url(&e.trace_id) {
                Some(url) => format!("[trace {trace}]({url}): {}\n", escape(&evidence_line(e))),
                None => format!("trace {trace}: {}\n", escape(&evidence_line(e))),
            };
            if desc.chars().count() + line.chars().count() > room {
                more += shown.len() - i;
                break;
            }
            desc.push_str(&line);
        }
        if more > 0 {
            desc.push_str(&format!("+{more} more traces"));
        }
        let mut embed = json!({
            "title": title,
            "description": cut(&desc, MAX_DESCRIPTION),
            "color": colour(n.event),
        });
        if let Some(url) = m.signal_url(&d.id) {
            embed["url"] = json!(url);
        }
        embeds.push(embed);
    }
    let mut content = escape(&m.headline());
    if m.notices.len() > MAX_EMBEDS {
        content.push_str(&format!(
            " (+{} more signals)",
            m.notices.len() - MAX_EMBEDS
        ));
    }
    json!({
        "content": cut(&content, MAX_CONTENT),
        "embeds": embeds,
        "allowed_mentions": {"parse": []},
    })
}

fn incident_colour(e: IncidentEvent) -> u32 {
    match e {
        IncidentEvent::Opened | IncidentEvent::Reopened | IncidentEvent::Updated => 0xD6_2728,
        IncidentEvent::Resolved => 0x2C_A02C,
        IncidentEvent::Acknowledged => 0x1F_77B4,
        IncidentEvent::Reminder => 0xFF_7F0E,
    }
}

/// One incident: one embed (title: event, id, title; the description:
/// what happened and changed, the members and why each is here, impact,
/// timeline, remedies, evidence links), within the 4096 and 6000
/// character limits, cut with "+N more".
pub fn render_incident(m: &IncidentMessage<'_>) -> Value {
    let title = cut_escaped(&escape(&m.heading()), MAX_TITLE);
    let room = (MAX_TOTAL - 200)
        .saturating_sub(title.chars().count())
        .min(MAX_DESCRIPTION);
    let mut fit = Fit::new(room);
    // Each line cut before it is escaped, then whole escapes kept (an
    // escaped line is never cut again).
    let line = |fit: &mut Fit, s: &str, what: &'static str| {
        fit.push(&escape(&cut(s, 500)), what);
    };
    line(&mut fit, &m.status_line(), "changes");
    for w in m.why() {
        line(&mut fit, w, "changes");
    }
    fit.push("**Members**", "members");
    for l in m.member_lines() {
        line(&mut fit, &l, "members");
    }
    if let Some(i) = m.impact_line() {
        line(&mut fit, &i, "moments");
    }
    for l in m.timeline_lines() {
        line(&mut fit, &l, "moments");
    }
    for l in m.remedy_lines() {
        line(&mut fit, &l, "remedies");
    }
    let (shown, more) = m.evidence();
    for e in shown {
        let trace = short_trace(&e.evidence.trace_id);
        let text = match m.trace_url(&e.evidence.trace_id) {
            Some(url) => format!(
                "[trace {trace}]({url}): {}",
                escape(&evidence_line(&e.evidence))
            ),
            None => format!("trace {trace}: {}", escape(&evidence_line(&e.evidence))),
        };
        fit.push(&text, "traces");
    }
    fit.more("traces", more);
    let mut embed = json!({
        "title": title,
        "description": fit.finish(),
        "color": incident_colour(m.notice.event),
    });
    if let Some(url) = m.incident_url() {
        embed["url"] = json!(url);
    }
    json!({
        "content": cut_escaped(&escape(&m.headline()), MAX_CONTENT),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    })
}

/// Discord's documented limits, checked on a rendered payload.
pub fn check(v: &Value) -> Result<(), LimitError> {
    let len = |x: &Value| x.as_str().map_or(0, |s| s.chars().count());
    if len(&v["content"]) > MAX_CONTENT {
        return Err(LimitError::Rule("content too long"));
    }
    let embeds = v["embeds"]
        .as_array()
        .ok_or(LimitError::Missing("embeds"))?;
    if embeds.len() > MAX_EMBEDS {
        return Err(LimitError::Embeds(embeds.len()));
    }
    let mut total = 0;
    for e in embeds {
        if len(&e["title"]) > MAX_TITLE || len(&e["description"]) > MAX_DESCRIPTION {
            return Err(LimitError::Rule("embed title or description too long"));
        }
        let fields = e["fields"].as_array().map_or(0, Vec::len);
        if fields > 25 {
            return Err(LimitError::Rule("too many fields"));
        }
        total += len(&e["title"]) + len(&e["description"]);
    }
    if total > MAX_TOTAL {
        return Err(LimitError::EmbedsTotal {
            total,
            max: MAX_TOTAL,
        });
    }
    if v["allowed_mentions"]["parse"] != json!([]) {
        return Err(LimitError::Rule("allowed_mentions must be empty"));
    }
    Ok(())
}

pub fn accepted(status: u16) -> bool {
    status == 204 || status == 200
}
