//! Remedies: every signal's short answer to the three questions a retry
//! design must answer (will waiting fix it? when do you cut it off? what do
//! you change before the next attempt?), built by rule from the signal's own
//! evidence and numbers — never guessed by a model. A sweep attaches one to
//! each draft; the signal page, the alerts, `sweep --format markdown` and the
//! MCP server's `get_signal` show it.

use super::draft::SignalDraft;
use super::{Evidence, Kind};
use crate::model::ErrorClass;

pub use super::draft::Remedy;

/// The evidence turn with the most calls.
fn worst(d: &SignalDraft) -> Option<&Evidence> {
    d.evidence.iter().max_by_key(|e| e.calls)
}

/// A time cap for one call's retries: twice what a healthy turn takes,
/// between 5 and 60 s (30 s when no healthy turn was seen).
fn time_cap_s(e: Option<&Evidence>) -> u64 {
    match e.and_then(|e| e.healthy_turn_duration_s) {
        Some(h) if h > 0.0 => ((2.0 * h).ceil() as u64).clamp(5, 60),
        _ => 30,
    }
}

fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// What the worst turn showed, in words: "15 calls over 80 s, no backoff".
fn seen(e: Option<&Evidence>) -> String {
    let Some(e) = e else {
        return "no evidence turn kept".to_string();
    };
    let mut s = format!("{} calls", e.calls);
    if let Some(t) = e.turn_duration_s {
        s.push_str(&format!(" over {}", seconds(t)));
    }
    if let Some(r) = &e.rhythm {
        s.push_str(&format!(", {}", r.replace('_', " ")));
    }
    if let Some(h) = e.healthy_turn_duration_s.filter(|h| *h > 0.0) {
        s.push_str(&format!("; a healthy turn takes {}", seconds(h)));
    }
    s
}

/// The raw error names, quoted, for a message: `"HTTP 422", "ValidationError"`.
fn quoted(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().take(5).map(|n| format!("{n:?}")).collect();
    let more = names.len().saturating_sub(5);
    let mut s = shown.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// The remedy of `d`; `raw_names` are the names its class was logged under
/// for its tool (from the daily rollup), most frequent first. A retry
/// chain's remedy follows its driver, counted over all the signal's
/// evidence chains (`model` or `code` when they all agree, else `mixed`):
/// the wrapper to fix when code retried; only the error to return and the
/// framework's cap when the model did (no backoff advice: the model cannot
/// act on it); both when mixed (detection.md §4.2, "Driver").
pub fn remedy(d: &SignalDraft, raw_names: &[String]) -> Remedy {
    let mut r = by_rule(d, raw_names);
    if matches!(d.kind, Kind::RetryStorm | Kind::WastedRetries) {
        let driven = super::driver::of_signal(d.evidence.iter().filter_map(|e| e.driver.as_ref()));
        let words = driven.as_ref().and_then(|(dr, split)| {
            super::driver::remedy_words(dr, &d.tool, split.as_deref()).map(|w| (dr, w))
        });
        if let Some((dr, (change, clause))) = words {
            if dr.driver == "model" {
                r.change = change;
                r.summary = format!("{}.", upper_first(&clause));
            } else {
                r.change = format!("{change} {}", r.change);
                r.summary = format!("{} Driver: {clause}.", r.summary);
            }
        }
    }
    r
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// What a rule's remedy is built from: the signal and the words and
/// numbers every remedy names.
struct Facts<'a> {
    d: &'a SignalDraft,
    class: ErrorClass,
    class_words: String,
    /// ` (logged as "…")`, or nothing when no raw name is known.
    names: String,
    /// The evidence turn with the most calls.
    e: Option<&'a Evidence>,
    /// The time cap for one call's retries (s).
    cap: u64,
}

const BACKOFF: &str = "exponential backoff with full jitter (1 s, 2 s, 4 s … each drawn between 0 and the step), and honour Retry-After when the tool sends it";

fn by_rule(d: &SignalDraft, raw_names: &[String]) -> Remedy {
    let class = ErrorClass::parse(&d.error_class).unwrap_or(ErrorClass::Unknown);
    let names = if raw_names.is_empty() {
        String::new()
    } else {
        format!(" (logged as {})", quoted(raw_names))
    };
    let e = worst(d);
    let f = Facts {
        d,
        class,
        class_words: d.error_class.replace('_', " "),
        names,
        e,
        cap: time_cap_s(e),
    };
    match (d.kind, class.retryable()) {
        (Kind::WastedRetries, _) | (Kind::RetryStorm, Some(false)) => fail_fast(&f),
        (Kind::RetryStorm, _) => retry_storm(&f),
        (Kind::RetryAfterSuccess, _) => retry_after_success(&f),
        (Kind::StackedRetries, _) => stacked_retries(&f),
        (Kind::ErrorRateSpike, _) => error_rate_spike(&f),
        (Kind::LatencySpike, _) => latency_spike(&f),
        (Kind::ToolSilent, _) => tool_silent(&f),
        (Kind::NoSuccess, _) => no_success(&f),
        (Kind::IgnoredRetryAfter, _) => ignored_retry_after(&f),
        (Kind::ToolLoop, _) => tool_loop(&f),
    }
}

/// Wasted retries, and storms of a class that never succeeds on retry.
fn fail_fast(f: &Facts) -> Remedy {
    let &Facts {
        d,
        ref class_words,
        ref names,
        ..
    } = f;
    let retries: usize = d.evidence.iter().map(|e| e.calls.saturating_sub(1)).sum();
    Remedy {
        waiting_fixes: format!(
            "No: {class_words}{names} is deterministic, the same request fails the same way however long you wait."
        ),
        cut_off: format!(
            "At the first failure: fail fast, this class never succeeds on retry ({retries} retries in the evidence turns were wasted)."
        ),
        change: format!(
            "Change the request before any new attempt — fix the arguments, the credentials or the permission the error names — or stop and report it; feed the error's text back to the model rather than sending {} again.",
            d.tool
        ),
        summary: format!(
            "Fail fast: {class_words}{names} never succeeds on retry; fix the request instead of repeating it."
        ),
    }
}

fn retry_storm(f: &Facts) -> Remedy {
    let (d, class, e, cap) = (f.d, f.class, f.e, f.cap);
    let (class_words, names) = (&f.class_words, &f.names);
    let backoff = BACKOFF;
    let same = e
        .and_then(|e| e.same_args)
        .map(|s| {
            format!(
                " ({:.0} % of its retries repeated the previous arguments)",
                s * 100.0
            )
        })
        .unwrap_or_default();
    let waiting = match class.retryable() {
        Some(true) => format!(
            "Often, but not at this pace: {class_words}{names} is transient, and the worst turn ({}) asked again before the tool could recover.",
            seen(e)
        ),
        _ => format!(
            "Unknown: the failures are not classified ({class_words}{names}); the worst turn ({}) shows waiting was never tried.",
            seen(e)
        ),
    };
    Remedy {
        waiting_fixes: waiting,
        cut_off: format!(
            "Cap at 3 attempts or {cap} s per call, whichever comes first; the worst turn made {} calls{}.",
            e.map_or(0, |e| e.calls),
            e.and_then(|e| e.turn_duration_s)
                .map(|t| format!(" in {}", seconds(t)))
                .unwrap_or_default()
        ),
        change: format!(
            "Use {backoff}; after the cap, return the failure to the agent instead of calling {} again with the same arguments{same}.",
            d.tool
        ),
        summary: format!(
            "Cap at 3 attempts or {cap} s, exponential backoff with jitter, honour Retry-After."
        ),
    }
}

fn retry_after_success(f: &Facts) -> Remedy {
    let d = f.d;
    Remedy {
        waiting_fixes: format!(
            "Nothing to wait for: {} had succeeded; the retry repeated a call whose answer (or confirmation) was lost.",
            d.tool
        ),
        cut_off: "Before the first repeat: a call that succeeded is not retried blindly.".to_string(),
        change: format!(
            "Check the side effect before retrying — send an idempotency key, or look the result up (ledger, booking, order) — so a lost confirmation does not repeat {}.",
            d.tool
        ),
        summary: "Check the side effect (idempotency key, ledger lookup) before retrying.".to_string(),
    }
}

fn stacked_retries(f: &Facts) -> Remedy {
    let (d, class, e, cap) = (f.d, f.class, f.e, f.cap);
    let (class_words, names) = (&f.class_words, &f.names);
    let parents: Vec<String> = e.map(|e| e.parents.clone()).unwrap_or_default();
    let named = if parents.is_empty() {
        String::new()
    } else {
        format!(" (parent spans {})", quoted(&parents))
    };
    let layers = e.and_then(|e| e.rhythm.clone()).unwrap_or_default();
    Remedy {
        waiting_fixes: match class.retryable() {
            Some(false) => format!("No: {class_words}{names} is deterministic; more layers only repeat it."),
            _ => format!("Sometimes, but every layer multiplies the attempts ({layers})."),
        },
        cut_off: format!(
            "Keep one retry layer and put the cap there (3 attempts or {cap} s): the worst turn made {} calls under {} retrying parents{named}.",
            e.map_or(0, |e| e.calls),
            parents.len().max(2)
        ),
        change: format!(
            "Remove the outer loop{named}; the caller throws at once and only the innermost layer around {} retries, with backoff and jitter.",
            d.tool
        ),
        summary: format!("Keep one retry layer{named}; remove the others."),
    }
}

fn error_rate_spike(f: &Facts) -> Remedy {
    let &Facts {
        d,
        class,
        ref class_words,
        ref names,
        cap,
        ..
    } = f;
    let retryable = class.retryable();
    Remedy {
        waiting_fixes: match retryable {
            Some(true) => format!("Possibly: the failures are {class_words}{names}, which clear when the tool recovers — with backoff, not by asking faster."),
            Some(false) => format!("No: the failures are {class_words}{names}, which no wait fixes; something in the requests or the tool changed."),
            None => format!("Unknown: the failures are {class_words}{names}; look at one evidence trace first."),
        },
        cut_off: match retryable {
            Some(false) => format!("At the first failure of this class: fail fast, {class_words} never succeeds on retry."),
            _ => format!("Give each call a cap (3 attempts or {cap} s) so a bad day for {} cannot turn into a storm.", d.tool),
        },
        change: match retryable {
            Some(false) => "Find what changed in the requests or the tool (a deploy, a schema, a credential) and fix that; retrying will not.".to_string(),
            _ => format!("Back off with jitter and honour Retry-After while {} is degraded; page its owner if it lasts.", d.tool),
        },
        summary: match retryable {
            Some(false) => format!("Fix the cause: {class_words} does not clear by retrying."),
            _ => "Back off with jitter, honour Retry-After, cap each call.".to_string(),
        },
    }
}

fn latency_spike(f: &Facts) -> Remedy {
    let &Facts { d, cap, .. } = f;
    Remedy {
        waiting_fixes: format!(
            "Possibly: {} answers, but slowly; retrying a slow call adds load.",
            d.tool
        ),
        cut_off: format!(
            "Set a per-call timeout near the healthy p95 and a total budget of {cap} s per turn."
        ),
        change: "Do not retry timeouts immediately: back off, and check the tool's capacity."
            .to_string(),
        summary: "Timeout near the healthy p95, no immediate retries of slow calls.".to_string(),
    }
}

fn tool_silent(f: &Facts) -> Remedy {
    let d = f.d;
    Remedy {
        waiting_fixes: format!("No: nothing failed loudly — the agent stopped calling {} while its turns went on, so no error will ever say so.", d.tool),
        cut_off: "Now: a tool that is not called produces no failures to catch; this signal is the only alarm.".to_string(),
        change: format!("Check what the agent sees of {}: its name, description and schema in the tool list (an MCP server's tools/list), a prompt or routing change, a flag or deploy that dropped it; compare the evidence trace (its last success) with a turn from the silent day.", d.tool),
        summary: "Find why the agent stopped calling it: tool list, prompt, routing.".to_string(),
    }
}

fn no_success(f: &Facts) -> Remedy {
    let &Facts {
        d,
        ref class_words,
        ref names,
        ..
    } = f;
    Remedy {
        waiting_fixes: format!("Not so far: every call of {} has failed for days ({class_words}{names}); it will not come back by itself.", d.tool),
        cut_off: format!("Stop sending {} traffic (a circuit breaker) until a probe call succeeds: each call now only fails.", d.tool),
        change: "Open the evidence trace (its last success) beside the first failure after it: what changed between them — a credential, an upstream API, a quota, a deploy — is the fix.".to_string(),
        summary: "Circuit-break it; fix what changed since its last success.".to_string(),
    }
}

fn ignored_retry_after(f: &Facts) -> Remedy {
    let &Facts {
        d,
        ref class_words,
        ref names,
        cap,
        ..
    } = f;
    let backoff = BACKOFF;
    // The same turn and wait the title names.
    let e = super::title::ignored_worst(d.evidence.iter());
    let (early, stated, wait) = e.map_or((0, 0, 0), |e| {
        let early = e.waits.iter().filter(|w| w.early).count();
        let wait = crate::detect::retry_after::stated_wait(&e.waits).unwrap_or(0);
        (early, e.waits.len(), wait)
    });
    let wait = crate::detect::retry_after::words(wait);
    Remedy {
        waiting_fixes: format!(
            "Yes, and the server said how long: {}'s failures ({class_words}{names}) came with Retry-After {wait}, and {early} of {stated} retries in the worst turn came sooner — each early retry only hits the limit again and can extend it.",
            d.tool
        ),
        cut_off: format!(
            "After 2 consecutive {class_words} answers, latch: stop calling {} until the stated time has passed (an HTTP-date counts from the response), for every caller sharing the limit — not a retry per caller.",
            d.tool
        ),
        change: format!(
            "Honour Retry-After (seconds or an HTTP-date) before the next attempt of {}; without one, {backoff}; cap each call at 3 attempts or {cap} s.",
            d.tool
        ),
        summary: "Honour Retry-After; back off with jitter; latch after consecutive 429s.".to_string(),
    }
}

fn tool_loop(f: &Facts) -> Remedy {
    let &Facts { d, e, .. } = f;
    Remedy {
        waiting_fixes: "Nothing failed: the agent asked the same thing again and got the same answer.".to_string(),
        cut_off: format!("Stop after the second identical call: {}.", seen(e)),
        change: format!("Give the agent the earlier result (or a note that {} already answered) instead of letting it call again with the same arguments.", d.tool),
        summary: "Stop identical repeat calls; reuse the earlier result.".to_string(),
    }
}
