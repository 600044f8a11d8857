//! Signal titles, built by rule from a group's findings: one line per kind
//! naming the tool, the worst finding's numbers and the error class.

use super::evidence::Evidence;
use super::finding::Finding;
use super::kind::Kind;
use crate::model::ErrorClass;

/// The title of a signal of `kind` on `tool` and `class` made of `group`
/// (never empty).
pub fn title(kind: Kind, tool: &str, class: ErrorClass, group: &[&Finding]) -> String {
    let class_words = class.as_str().replace('_', " ");
    match kind {
        Kind::ErrorRateSpike => error_rate_spike(tool, &class_words, group),
        Kind::RetryStorm => retry_storm(tool, class, &class_words, group),
        Kind::WastedRetries => {
            let retries: u64 = group.iter().map(|f| f.calls.saturating_sub(1)).sum();
            format!(
                "Wasted retries: {tool} retried {retries} times on {class_words}, which never succeeds on retry")
        }
        Kind::StackedRetries => {
            let worst = most_calls(group);
            let layers = rhythm(worst);
            format!("Stacked retries: {tool} ×{} in one turn, retry loops inside retry loops ({layers}, {class_words})", worst.calls)
        }
        Kind::LatencySpike => latency_spike(tool, group),
        Kind::ToolLoop => tool_loop(tool, group),
        Kind::ToolSilent | Kind::NoSuccess => super::silent::title(kind, tool, class, group),
        Kind::IgnoredRetryAfter => ignored_retry_after(tool, &class_words, group),
        Kind::RetryAfterSuccess => {
            let turns = if group.len() == 1 {
                "1 turn".to_string()
            } else {
                format!("{} turns", group.len())
            };
            format!("Retry after success: {tool} called again with the same arguments after it succeeded ({turns})")
        }
    }
}

/// The finding with the most calls (the last of equals).
fn most_calls<'a>(group: &[&'a Finding]) -> &'a Finding {
    group
        .iter()
        .copied()
        .max_by_key(|f| f.calls)
        .expect("a group has findings")
}

/// The rhythm (or shape, or layers) the finding's evidence names, raw.
fn rhythm(f: &Finding) -> String {
    f.evidence
        .as_ref()
        .and_then(|e| e.rhythm.clone())
        .unwrap_or_default()
}

/// `, N turns` when the group holds more than one turn.
fn turns_suffix(group: &[&Finding]) -> String {
    if group.len() == 1 {
        String::new()
    } else {
        format!(", {} turns", group.len())
    }
}

fn error_rate_spike(tool: &str, class_words: &str, group: &[&Finding]) -> String {
    let worst = group
        .iter()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .expect("a group has findings");
    format!(
        "Error-rate spike: {tool} {:.0}% vs {:.0}% {} ({}/{} calls, {class_words})",
        worst.rate * 100.0,
        worst.baseline * 100.0,
        worst.basis.as_deref().unwrap_or("trailing week"),
        worst.errors,
        worst.calls
    )
}

fn retry_storm(tool: &str, class: ErrorClass, class_words: &str, group: &[&Finding]) -> String {
    let worst = most_calls(group);
    let raw = rhythm(worst);
    let rhythm = raw.replace('_', " ");
    let turns = turns_suffix(group);
    // Retries of a rate limit at a pace that does not change (no
    // backoff, a fixed gap) that did not honour the waits stated:
    // the client keeps its pace against the limit. A storm whose
    // stated waits were all honoured is paced, whatever its rhythm.
    let waits = worst.evidence.as_ref().map_or(&[][..], |e| &e.waits[..]);
    let honoured = !waits.is_empty() && waits.iter().all(|w| !w.early);
    let unpaced = if class == ErrorClass::RateLimited
        && matches!(raw.as_str(), "no_backoff" | "fixed")
        && !honoured
    {
        "unpaced, "
    } else {
        ""
    };
    format!(
        "Retry storm: {tool} ×{} in one turn ({class_words}, {unpaced}{rhythm}{turns})",
        worst.calls
    )
}

fn latency_spike(tool: &str, group: &[&Finding]) -> String {
    let worst = group
        .iter()
        .max_by(|a, b| (a.rate / a.baseline.max(1e-9)).total_cmp(&(b.rate / b.baseline.max(1e-9))))
        .expect("a group has findings");
    format!(
        "Latency spike: {tool} p95 {:.1} s vs {:.1} s trailing week ({} calls, errors flat)",
        worst.rate, worst.baseline, worst.calls
    )
}

fn tool_loop(tool: &str, group: &[&Finding]) -> String {
    let worst = most_calls(group);
    let shape = rhythm(worst);
    let turns = turns_suffix(group);
    if shape.starts_with("cycle") {
        format!(
            "Tool loop: {tool} in a cycle of {} calls in one turn, nothing failing ({shape}{turns})",
            worst.calls
        )
    } else {
        format!(
            "Tool loop: {tool} called {} times in one turn with the same arguments, nothing failing ({shape}{turns})",
            worst.calls
        )
    }
}

fn ignored_retry_after(tool: &str, class_words: &str, group: &[&Finding]) -> String {
    let evidence: Vec<&Evidence> = group.iter().filter_map(|f| f.evidence.as_ref()).collect();
    let (calls, early, stated, wait) =
        ignored_worst(evidence.iter().copied()).map_or((0, 0, 0, 0), |e| {
            (
                e.calls,
                e.waits.iter().filter(|w| w.early).count(),
                e.waits.len(),
                crate::detect::retry_after::stated_wait(&e.waits).unwrap_or(0),
            )
        });
    let turns = turns_suffix(group);
    format!(
        "Ignored Retry-After: {tool} retried {}× ignoring Retry-After: {} ({early} of {stated} retries early, {class_words}{turns})",
        calls.saturating_sub(1),
        crate::detect::retry_after::words(wait),
    )
}

/// The worst evidence turn of an ignored Retry-After signal, the one its
/// title and its remedy name: most rounds, then most early retries, then
/// the first trace id — the first of the kept evidence, which
/// [`super::group::group`] sorts so.
pub fn ignored_worst<'a>(evidence: impl Iterator<Item = &'a Evidence>) -> Option<&'a Evidence> {
    let early = |e: &Evidence| e.waits.iter().filter(|w| w.early).count();
    evidence.min_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| early(b).cmp(&early(a)))
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    })
}
