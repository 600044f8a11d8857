//! From findings to signal drafts: one per key `v1:{kind}:{tool}:{class}`.

use std::collections::BTreeMap;

pub use super::draft::SignalDraft;
use super::evidence::Evidence;
use super::finding::Finding;
use super::kind::{Kind, Severity};
use super::title::title;
use crate::model::{day_to_string, ErrorClass};

/// `v1:{kind}:{tool}:{class}`.
pub fn key(kind: Kind, tool: &str, class: ErrorClass) -> String {
    format!("v1:{}:{tool}:{}", kind.as_str(), class.as_str())
}

/// A short, stable, sayable id from a key: `SW-` and four consonants
/// (the id a key gets unless another key took it: see
/// [`super::state::free_id`]).
pub fn short_id(key: &str) -> String {
    short_id_of(key, 4)
}

/// `SW-` and `letters` consonants from the key's hash; a longer id starts
/// with the shorter one.
pub fn short_id_of(key: &str, letters: usize) -> String {
    const LETTERS: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";
    let mut n = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
    let mut id = String::from("SW-");
    for _ in 0..letters {
        id.push(LETTERS[(n % 20) as usize] as char);
        n /= 20;
    }
    id
}

/// Group findings by key; evidence worst first (most calls, then most
/// wasted seconds, then most early retries), at most `evidence_limit` kept.
pub fn group(findings: &[Finding], evidence_limit: usize) -> Vec<SignalDraft> {
    let mut by_key: BTreeMap<String, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        by_key
            .entry(key(f.kind, &f.tool, f.class))
            .or_default()
            .push(f);
    }
    by_key
        .into_iter()
        .map(|(key, group)| draft(key, &group, evidence_limit))
        .collect()
}

/// The draft of one key's findings, its remedy attached.
fn draft(key: String, group: &[&Finding], evidence_limit: usize) -> SignalDraft {
    let f0 = group[0];
    let mut evidence: Vec<Evidence> = group.iter().filter_map(|f| f.evidence.clone()).collect();
    let wasted_seconds = evidence.iter().map(|e| e.wasted_seconds).sum();
    worst_first(f0.kind, &mut evidence);
    let more = evidence.len().saturating_sub(evidence_limit);
    evidence.truncate(evidence_limit);
    let mut days: Vec<String> = group.iter().map(|f| day_to_string(f.day)).collect();
    days.sort();
    days.dedup();
    let mut draft = SignalDraft {
        id: short_id(&key),
        title: title(f0.kind, &f0.tool, f0.class, group),
        kind: f0.kind,
        tool: f0.tool.clone(),
        error_class: f0.class.as_str().to_string(),
        first_seen_ns: group.iter().map(|f| f.at_ns).min().unwrap_or(0),
        last_seen_ns: group.iter().map(|f| f.at_ns).max().unwrap_or(0),
        days,
        findings: group.len(),
        evidence,
        evidence_more: more,
        wasted_seconds,
        // Read-only tools only: repeating a read changes nothing.
        severity: (f0.kind == Kind::RetryAfterSuccess && group.iter().all(|f| f.read_only))
            .then_some(Severity::Info),
        key,
        remedy: None,
    };
    draft.remedy = Some(super::remedy::remedy(&draft, &[]));
    draft
}

/// Sorts a group's evidence worst first; a silent tool's evidence is its
/// last success once, with the counts up to the latest flagged day.
fn worst_first(kind: Kind, evidence: &mut Vec<Evidence>) {
    let early = |e: &Evidence| e.waits.iter().filter(|w| w.early).count();
    evidence.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| b.wasted_seconds.total_cmp(&a.wasted_seconds))
            .then_with(|| early(b).cmp(&early(a)))
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
    if matches!(kind, Kind::ToolSilent | Kind::NoSuccess) {
        let latest = |e: &Evidence| e.daily.last().map(|d| d.day.clone());
        evidence.sort_by_key(|e| std::cmp::Reverse(latest(e)));
        evidence.truncate(1);
    }
}
