//! What every target's message says, before each target shapes and escapes
//! it: a headline, and per signal its event, title, numbers, remedy and
//! evidence traces with links to the dashboard's trace view; per incident
//! its event, title, members with the reason each joined, impact, timeline,
//! remedies, evidence and a link to the dashboard's incident page.

use super::incidents::IncidentNotice;
use super::notify::{Event, Notice};
use crate::incident::IncidentEvidence;
use crate::signal::Evidence;
use crate::time::rfc3339;

/// A link to a trace in the dashboard, when the public URL is known and the
/// id is a trace id (hex), never untrusted text in a URL.
pub fn trace_url(public_url: &str, trace_id: &str) -> Option<String> {
    let hex = !trace_id.is_empty() && trace_id.bytes().all(|b| b.is_ascii_hexdigit());
    (!public_url.is_empty() && hex)
        .then(|| format!("{}/traces/{trace_id}", public_url.trim_end_matches('/')))
}

/// A link to a page of the dashboard (`signals`, `incidents`) for an id made
/// of letters, digits and dashes only.
pub fn page_url(public_url: &str, page: &str, id: &str) -> Option<String> {
    let safe = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    (!public_url.is_empty() && safe)
        .then(|| format!("{}/{page}/{id}", public_url.trim_end_matches('/')))
}

/// One grouped message: the notices of one sweep for one target.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    pub notices: &'a [Notice],
    /// The dashboard's base URL (no trailing slash), or empty.
    pub public_url: &'a str,
    /// Evidence traces shown per signal.
    pub evidence: usize,
}

impl Message<'_> {
    /// "stormwatch: 2 new, 1 resolved".
    pub fn headline(&self) -> String {
        let mut counts: Vec<(Event, usize)> = Vec::new();
        for n in self.notices {
            match counts.iter_mut().find(|(e, _)| *e == n.event) {
                Some((_, c)) => *c += 1,
                None => counts.push((n.event, 1)),
            }
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|(e, c)| format!("{c} {}", e.as_str().replace('_', " ")))
            .collect();
        format!("stormwatch: {}", parts.join(", "))
    }

    /// A link to a trace in the dashboard, when the public URL is known and
    /// the id is a trace id (hex), never untrusted text in a URL.
    pub fn trace_url(&self, trace_id: &str) -> Option<String> {
        trace_url(self.public_url, trace_id)
    }

    /// A link to the signal's page.
    pub fn signal_url(&self, id: &str) -> Option<String> {
        page_url(self.public_url, "signals", id)
    }
}

/// One incident's message: one notice for one target.
#[derive(Debug, Clone)]
pub struct IncidentMessage<'a> {
    pub notice: &'a IncidentNotice,
    /// The dashboard's base URL (no trailing slash), or empty.
    pub public_url: &'a str,
    /// Evidence traces shown.
    pub evidence: usize,
}

impl IncidentMessage<'_> {
    /// "stormwatch: INC-XHPQ opened".
    pub fn headline(&self) -> String {
        format!(
            "stormwatch: {} {}",
            self.notice.incident.id,
            self.notice.event.as_str()
        )
    }

    /// "OPENED · INC-XHPQ: search_flights failing since …".
    pub fn heading(&self) -> String {
        let i = &self.notice.incident;
        format!("{} · {}: {}", self.notice.event.label(), i.id, i.title)
    }

    /// Severity, members, state and times, and what joined them.
    pub fn status_line(&self) -> String {
        let i = &self.notice.incident;
        let n = i.members.len();
        let mut s = format!(
            "{} · {n} {} · {} · since {} · last {}",
            i.severity,
            if n == 1 { "signal" } else { "signals" },
            i.state.as_str(),
            crate::incident::body::minute(i.first_seen_ns),
            crate::incident::body::minute(i.last_seen_ns),
        );
        if let Some(at) = i.resolved_ns {
            s.push_str(&format!(
                " · resolved {}",
                crate::incident::body::minute(at)
            ));
        }
        s.push_str(&format!(" · joined by {}", i.cause));
        s
    }

    /// What changed, for `updated` and `reopened`.
    pub fn why(&self) -> &[String] {
        &self.notice.why
    }

    /// One line per member: id, kind, tool, severity, state, why it is
    /// here, its title.
    pub fn member_lines(&self) -> Vec<String> {
        self.notice
            .incident
            .members
            .iter()
            .map(|m| {
                format!(
                    "{} {} · {} · {} · {} — {}: {}",
                    m.signal_id,
                    m.kind.replace('_', " "),
                    m.tool,
                    m.severity,
                    m.state,
                    m.reason,
                    m.title
                )
            })
            .collect()
    }

    /// "Impact: 62 calls, 53 failed; 41 wasted retries (180.5 s); 6 agent
    /// turns in 4 sessions", the parts that are not zero.
    pub fn impact_line(&self) -> Option<String> {
        let m = &self.notice.incident.impact;
        let mut parts = Vec::new();
        if m.calls > 0 {
            parts.push(format!("{} calls, {} failed", m.calls, m.failed_calls));
        }
        if m.wasted_calls > 0 {
            parts.push(format!(
                "{} wasted retries ({:.1} s)",
                m.wasted_calls, m.wasted_seconds
            ));
        }
        if m.turns > 0 {
            let mut t = format!(
                "{} agent {}",
                m.turns,
                if m.turns == 1 { "turn" } else { "turns" }
            );
            if m.sessions > 0 {
                t.push_str(&format!(
                    " in {} {}",
                    m.sessions,
                    if m.sessions == 1 {
                        "session"
                    } else {
                        "sessions"
                    }
                ));
            }
            parts.push(t);
        }
        (!parts.is_empty()).then(|| format!("Impact: {}", parts.join("; ")))
    }

    /// The timeline's moments: "2026-07-29 19:46Z first finding: …".
    pub fn timeline_lines(&self) -> Vec<String> {
        self.notice
            .incident
            .timeline
            .iter()
            .map(|m| format!("{} {}", crate::incident::body::minute(m.at_ns), m.text))
            .collect()
    }

    /// "What to do: …" (the lead member's), then each other member's remedy
    /// once: "Also (SW-ABCD): …".
    pub fn remedy_lines(&self) -> Vec<String> {
        let i = &self.notice.incident;
        let mut out = Vec::new();
        let lead = i.remedy.as_ref().map(|r| r.summary.as_str());
        if let Some(r) = lead {
            out.push(format!("What to do: {r}"));
        }
        for r in &i.remedies {
            if Some(r.summary.as_str()) != lead {
                out.push(format!("Also ({}): {}", r.signal_ids.join(", "), r.summary));
            }
        }
        out
    }

    /// Evidence shown, and how many more there are.
    pub fn evidence(&self) -> (&[IncidentEvidence], usize) {
        let all = &self.notice.incident.evidence;
        let shown = &all[..all.len().min(self.evidence)];
        (
            shown,
            all.len() - shown.len() + self.notice.incident.evidence_more,
        )
    }

    pub fn trace_url(&self, trace_id: &str) -> Option<String> {
        trace_url(self.public_url, trace_id)
    }

    /// The incident's page in the dashboard.
    pub fn incident_url(&self) -> Option<String> {
        page_url(self.public_url, "incidents", &self.notice.incident.id)
    }
}

/// Lines kept within a character budget: each pushed while it fits, the
/// rest of its kind counted for a "+N more …" line at the end.
#[derive(Debug, Default)]
pub struct Fit {
    pub text: String,
    used: usize,
    room: usize,
    left: Vec<(&'static str, usize)>,
}

impl Fit {
    /// A budget of `room` characters, of which the "+N more" lines may
    /// take up to 120.
    pub fn new(room: usize) -> Fit {
        Fit {
            text: String::new(),
            used: 0,
            room: room.saturating_sub(120),
            left: Vec::new(),
        }
    }

    /// Push `line` (and a newline) if it fits; else count it as one more
    /// `what` left out. True when pushed.
    pub fn push(&mut self, line: &str, what: &'static str) -> bool {
        let n = line.chars().count() + 1;
        if self.used + n <= self.room {
            self.used += n;
            self.text.push_str(line);
            self.text.push('\n');
            true
        } else {
            self.more(what, 1);
            false
        }
    }

    /// Count `n` more `what` left out.
    pub fn more(&mut self, what: &'static str, n: usize) {
        if n == 0 {
            return;
        }
        match self.left.iter_mut().find(|(w, _)| *w == what) {
            Some((_, c)) => *c += n,
            None => self.left.push((what, n)),
        }
    }

    /// The text with one "+N more …" line per kind left out.
    pub fn finish(mut self) -> String {
        for (what, n) in &self.left {
            self.text.push_str(&format!("+{n} more {what}\n"));
        }
        self.text.trim_end().to_string()
    }
}

/// The numbers line of a notice: findings, days, last seen.
pub fn numbers(n: &Notice) -> String {
    let d = &n.signal.draft;
    let days = match d.days.as_slice() {
        [] => String::new(),
        [one] => format!(" on {one}"),
        [first, .., last] => format!(" on {} days, {first} to {last}", d.days.len()),
    };
    format!(
        "{} {}{days}; last {}; state {}",
        d.findings,
        if d.findings == 1 {
            "finding"
        } else {
            "findings"
        },
        rfc3339(d.last_seen_ns),
        n.signal.state.as_str()
    )
}

/// The remedy line of a notice ("What to do: …"), when its signal has one.
pub fn remedy_line(n: &Notice) -> Option<String> {
    n.signal
        .draft
        .remedy
        .as_ref()
        .map(|r| format!("What to do: {}", r.summary))
}

/// One evidence line (no links): what the trace shows.
pub fn evidence_line(e: &Evidence) -> String {
    let mut s = format!("{} calls, {} failed", e.calls, e.failures);
    if let Some(r) = &e.rhythm {
        s.push_str(&format!(", {r}"));
    }
    if e.wasted_seconds > 0.0 {
        s.push_str(&format!(", {:.1} s wasted", e.wasted_seconds));
    }
    if let (Some(t), Some(h)) = (e.turn_duration_s, e.healthy_turn_duration_s) {
        if h > 0.0 {
            s.push_str(&format!(", turn {t:.1} s vs {h:.1} s healthy"));
        }
    }
    s
}

/// The short form of a trace id for link text.
pub fn short_trace(trace_id: &str) -> String {
    trace_id.chars().take(12).collect()
}

/// Evidence shown for a notice, and how many more there are (kept beyond
/// the limit plus those the signal only counted).
pub fn evidence(n: &Notice, limit: usize) -> (&[Evidence], usize) {
    let all = &n.signal.draft.evidence;
    let shown = &all[..all.len().min(limit)];
    (
        shown,
        all.len() - shown.len() + n.signal.draft.evidence_more,
    )
}

/// `s` cut to at most `max` characters, ending in "…" when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}
