//! The delivery policy (alerting.md, "Delivery"), as pure functions:
//! classify an answer before deciding to retry; wait full-jitter backoff
//! but never less than `Retry-After` (seconds, an HTTP date, or Discord's
//! `retry_after` in the body — the larger); give up on attempts or age.

use std::time::{Duration, SystemTime};

use super::target::TargetKind;

/// How long a PagerDuty 429 without `Retry-After` waits at least:
/// PagerDuty asks for "a backoff of a few minutes" on throttling.
pub const PAGERDUTY_THROTTLE: Duration = Duration::from_secs(30);

/// What one attempt's answer means.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Delivered,
    /// Worth another attempt, not before `after` when the target said so.
    Retry {
        after: Option<Duration>,
        reason: String,
        /// 429: the target asked everyone to slow down; pause it.
        throttled: bool,
    },
    /// Will not get better by retrying: dead-letter it.
    Dead {
        reason: String,
    },
    /// The endpoint is gone: stop sending to this target.
    Disable {
        reason: String,
    },
}

/// For people (`alerts test`): the reason, and what the sender does next.
impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Delivered => write!(f, "delivered"),
            Verdict::Retry {
                after: Some(after),
                reason,
                ..
            } => write!(
                f,
                "{reason}; the sender would try again in {} s (the target's Retry-After)",
                after.as_secs()
            ),
            Verdict::Retry { reason, .. } => {
                write!(f, "{reason}; the sender would try again, with backoff")
            }
            Verdict::Dead { reason } => {
                write!(
                    f,
                    "{reason}; not worth retrying: the message would be dead-lettered"
                )
            }
            Verdict::Disable { reason } => {
                write!(f, "{reason}; the target would be disabled")
            }
        }
    }
}

impl Verdict {
    /// Replace every `secret` in the reason by `instead` (a target that
    /// echoes what it was sent must not put a key in a log line).
    pub fn redact(&mut self, secret: &str, instead: &str) {
        if secret.is_empty() {
            return;
        }
        match self {
            Verdict::Delivered => {}
            Verdict::Retry { reason, .. }
            | Verdict::Dead { reason }
            | Verdict::Disable { reason } => {
                if reason.contains(secret) {
                    *reason = reason.replace(secret, instead);
                }
            }
        }
    }

    /// Add `note` to the reason of a failure (a delivery has none).
    pub fn note(&mut self, note: &str) {
        match self {
            Verdict::Delivered => {}
            Verdict::Retry { reason, .. }
            | Verdict::Dead { reason }
            | Verdict::Disable { reason } => {
                reason.push(' ');
                reason.push_str(note);
            }
        }
    }
}

/// What of a body a reason shows: its first 200 characters, `…` when
/// there was more.
fn snippet(body: &str) -> String {
    let mut chars = body.chars();
    let mut s: String = chars.by_ref().take(200).collect();
    if chars.next().is_some() {
        s.push('…');
    }
    s
}

/// Classify an HTTP answer of a target of `kind`. `body` is what was read
/// of the answer's body (at most the sender's cap).
pub fn classify(
    kind: TargetKind,
    status: u16,
    retry_after_header: Option<&str>,
    body: &str,
    now: SystemTime,
) -> Verdict {
    let snippet = snippet(body);
    let ok = match kind {
        TargetKind::Slack => super::slack::accepted(status, body),
        TargetKind::Discord => super::discord::accepted(status),
        TargetKind::Teams => super::teams::accepted(status),
        TargetKind::Webhook => super::webhook::accepted(status),
        TargetKind::PagerDuty => super::pagerduty::accepted(status),
    };
    if ok {
        return Verdict::Delivered;
    }
    if kind == TargetKind::PagerDuty && status == 400 {
        // An invalid event: retrying sends the same one.
        let why = super::pagerduty::refusal(body).unwrap_or(snippet);
        return Verdict::Dead {
            reason: format!("HTTP 400 {why}").trim().to_string(),
        };
    }
    let slack_gone = kind == TargetKind::Slack
        && ["channel_not_found", "channel_is_archived", "no_service"]
            .iter()
            .any(|e| body.trim() == *e);
    if status == 410 || (kind == TargetKind::Discord && status == 404) || slack_gone {
        return Verdict::Disable {
            reason: format!("HTTP {status} {snippet}"),
        };
    }
    match status {
        429 | 408 | 500..=599 => {
            let mut after = retry_after_header.and_then(|h| parse_retry_after(h, now));
            if kind == TargetKind::Discord {
                if let Some(b) = discord_retry_after(body) {
                    after = Some(after.map_or(b, |h| h.max(b)));
                }
            }
            if kind == TargetKind::PagerDuty && status == 429 && after.is_none() {
                after = Some(PAGERDUTY_THROTTLE);
            }
            Verdict::Retry {
                after,
                reason: format!("HTTP {status} {snippet}").trim().to_string(),
                throttled: status == 429,
            }
        }
        200..=299 => Verdict::Dead {
            reason: format!("HTTP {status} with an unexpected body: {snippet}"),
        },
        300..=399 => Verdict::Dead {
            reason: format!("HTTP {status}: redirects are not followed"),
        },
        _ => Verdict::Dead {
            reason: format!("HTTP {status} {snippet}").trim().to_string(),
        },
    }
}

/// `Retry-After`: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(86_400.0)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Discord's `{"retry_after": 64.57, ...}` (seconds).
pub fn discord_retry_after(body: &str) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let s = v.get("retry_after")?.as_f64()?;
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(86_400.0)))
}

/// The retry budget: attempts and age, both.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_attempts: u32,
    pub max_age: Duration,
    pub base: Duration,
    pub cap: Duration,
}

/// After a failed attempt number `attempts` (1-based) of a message `age`
/// old: how long to wait before the next, or `None` to give up. `jitter` is
/// the full-jitter draw for this attempt; `after` the target's Retry-After.
pub fn next_wait(
    b: &Budget,
    attempts: u32,
    age: Duration,
    jitter: Duration,
    after: Option<Duration>,
) -> Option<Duration> {
    if attempts >= b.max_attempts {
        return None;
    }
    let wait = after.map_or(jitter, |a| a.max(jitter));
    (age + wait <= b.max_age).then_some(wait)
}
