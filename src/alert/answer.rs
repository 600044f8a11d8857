//! A target's answer to one attempt, as the policy sees it: the status,
//! `Retry-After`, and the body read to [`BODY_CAP`] bytes at most (what
//! is past it is never read); or the request's failure to get one.

use std::time::SystemTime;

use super::policy::{self, Verdict};
use super::target::TargetKind;

/// What an answer's body is read to, at most: Slack's `ok`, Discord's
/// `retry_after` JSON and any target's error text fit many times over, and
/// only its first 200 characters reach a log line or `alerts list`. The
/// rest is not read (the connection is dropped): a huge or endless body
/// costs one target's task 64 KiB and no time.
pub const BODY_CAP: usize = 64 << 10;

/// One attempt's result, before the policy decides.
pub struct Answer {
    pub verdict: Verdict,
    pub status: Option<u16>,
}

/// The answer `resp` of a target of `kind`, classified at `now`.
pub async fn read(kind: TargetKind, resp: reqwest::Response, now: SystemTime) -> Answer {
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = read_capped(resp, BODY_CAP).await;
    let mut verdict = policy::classify(kind, status, retry_after.as_deref(), &body.text, now);
    if let Some(note) = body.note() {
        verdict.note(&note);
    }
    Answer {
        verdict,
        status: Some(status),
    }
}

/// An answer's body as far as it was read.
struct Body {
    text: String,
    /// More came than the cap: the rest was not read.
    cut: bool,
    /// The body broke off (a reset, the request's timeout) after the status
    /// arrived; `text` is what came before.
    broken: Option<String>,
}

impl Body {
    /// What a reason says about a body not read whole.
    fn note(&self) -> Option<String> {
        match (&self.broken, self.cut) {
            (Some(e), _) => Some(format!(
                "(body broke off after {} bytes: {e})",
                self.text.len()
            )),
            (None, true) => Some(format!("(body cut at {} KiB)", BODY_CAP >> 10)),
            (None, false) => None,
        }
    }
}

/// Read `resp`'s body chunk by chunk, at most `cap` bytes; what is past the
/// cap is never read. A body that breaks off is what came before it: the
/// status already answered (a 2xx stays a delivery).
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Body {
    let mut buf: Vec<u8> = Vec::new();
    let (mut cut, mut broken) = (false, None);
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap - buf.len();
                if chunk.len() > room {
                    buf.extend_from_slice(&chunk[..room]);
                    cut = true;
                    break;
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                broken = Some(error_chain(&e.without_url()));
                break;
            }
        }
    }
    // Dropping `resp` closes the connection of a body not read to its end.
    Body {
        text: String::from_utf8_lossy(&buf).into_owned(),
        cut,
        broken,
    }
}

/// A request that got no answer: connect, reset and timeout are worth
/// another try; a request that could not be built is not.
pub fn transport(e: reqwest::Error) -> Answer {
    // The URL is a secret for Slack, Discord and Teams: never in a reason.
    let e = e.without_url();
    let verdict = if e.is_builder() || e.is_redirect() {
        Verdict::Dead {
            reason: format!("request failed: {e}"),
        }
    } else {
        Verdict::Retry {
            after: None,
            reason: format!("no answer: {}", error_chain(&e)),
            throttled: false,
        }
    };
    Answer {
        verdict,
        status: None,
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
