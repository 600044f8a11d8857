//! What every target's message says, before each target shapes and escapes
//! it: a headline, and per signal its event, title, numbers, remedy and
//! evidence traces with links to the dashboard's trace view.

use super::notify::{Event, Notice};
use crate::signal::Evidence;
use crate::time::rfc3339;

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
        let hex = !trace_id.is_empty() && trace_id.bytes().all(|b| b.is_ascii_hexdigit());
        (!self.public_url.is_empty() && hex).then(|| {
            format!(
                "{}/traces/{trace_id}",
                self.public_url.trim_end_matches('/')
            )
        })
    }

    /// A link to the signal's page.
    pub fn signal_url(&self, id: &str) -> Option<String> {
        let safe = id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        (!self.public_url.is_empty() && safe)
            .then(|| format!("{}/signals/{id}", self.public_url.trim_end_matches('/')))
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
