//! From findings to signal drafts: one per key `v1:{kind}:{tool}:{class}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::detect::{
    DayVerdict, IgnoredRetryAfter, RetryAfterSuccess, StackedRetries, Storm, ToolLoop, WastedRetry,
};
use crate::model::{day_to_string, ErrorClass, NANOS_PER_DAY};

/// The kinds of signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ErrorRateSpike,
    RetryStorm,
    WastedRetries,
    RetryAfterSuccess,
    StackedRetries,
    LatencySpike,
    ToolLoop,
    ToolSilent,
    NoSuccess,
    IgnoredRetryAfter,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ErrorRateSpike => "error_rate_spike",
            Kind::RetryStorm => "retry_storm",
            Kind::WastedRetries => "wasted_retries",
            Kind::RetryAfterSuccess => "retry_after_success",
            Kind::StackedRetries => "stacked_retries",
            Kind::LatencySpike => "latency_spike",
            Kind::ToolLoop => "tool_loop",
            Kind::ToolSilent => "tool_silent",
            Kind::NoSuccess => "no_success",
            Kind::IgnoredRetryAfter => "ignored_retry_after",
        }
    }

    /// Judged per UTC day over the rollup (the rest: per turn).
    pub fn is_daily(self) -> bool {
        matches!(
            self,
            Kind::ErrorRateSpike | Kind::LatencySpike | Kind::ToolSilent | Kind::NoSuccess
        )
    }
}

/// How much a signal matters, for target filters and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    /// Retry storms, repeated side effects, retries that ignore the
    /// server's Retry-After and a tool with no success for days page; spikes, wasted retries, loops and a silent tool warn; a
    /// latency spike informs. (A retry after success of a
    /// read-only tool informs too: see [`SignalDraft::severity`].)
    pub fn of(kind: Kind) -> Severity {
        match kind {
            Kind::RetryStorm
            | Kind::RetryAfterSuccess
            | Kind::NoSuccess
            | Kind::IgnoredRetryAfter => Severity::Critical,
            Kind::ErrorRateSpike
            | Kind::WastedRetries
            | Kind::StackedRetries
            | Kind::ToolLoop
            | Kind::ToolSilent => Severity::Warning,
            Kind::LatencySpike => Severity::Info,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One trace that shows the problem (also an MCP answer: its schema is
/// part of `list_signal_traces`' output schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    pub trace_id: String,
    pub turn_id: Option<String>,
    pub session_id: Option<String>,
    pub day: String,
    pub calls: usize,
    pub failures: usize,
    pub rhythm: Option<String>,
    pub outcome: Option<String>,
    pub wasted_seconds: f64,
    pub turn_duration_s: Option<f64>,
    pub turn_spans: Option<usize>,
    pub healthy_turn_duration_s: Option<f64>,
    pub healthy_turn_spans: Option<f64>,
    /// A storm's retries that repeated the previous arguments (share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_args: Option<f64>,
    /// A storm's failed calls by class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, usize>,
    /// Stacked retries: the parent spans that each retried, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    /// Silent tools (`trace_id`: the last successful call's trace): the
    /// tool's calls and successes and its service's turns, day by day for
    /// the eight days up to the latest flagged one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daily: Vec<crate::detect::silent::DayCount>,
    /// A chain's retries after a failure that stated how long to wait
    /// (Retry-After, docs/detection.md §4.9): per retry, the stated wait,
    /// the gap taken and whether it came early.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<crate::detect::RetryWait>,
    /// A retry chain's driver (storms, wasted retries): who made the
    /// retries, and the model round trips between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<super::driver::DriverEvidence>,
}

impl Evidence {
    /// Evidence of one turn with only its counts known; rules that know
    /// more (rhythm, outcome, turn comparison) fill those in.
    pub fn turn(trace_id: &str, turn: &str, day: i32, calls: usize, failures: usize) -> Evidence {
        Evidence {
            trace_id: trace_id.to_string(),
            turn_id: Some(turn.to_string()),
            session_id: None,
            day: day_to_string(day),
            calls,
            failures,
            rhythm: None,
            outcome: None,
            wasted_seconds: 0.0,
            turn_duration_s: None,
            turn_spans: None,
            healthy_turn_duration_s: None,
            healthy_turn_spans: None,
            same_args: None,
            classes: BTreeMap::new(),
            parents: Vec::new(),
            daily: Vec::new(),
            waits: Vec::new(),
            driver: None,
        }
    }
}

/// One finding of any rule, reduced to what grouping needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: Kind,
    pub tool: String,
    pub class: ErrorClass,
    /// When it happened (ns): the day's start for daily rules, the turn's first call otherwise.
    pub at_ns: i64,
    pub day: i32,
    pub evidence: Option<Evidence>,
    /// For titles: the numbers the finding carries.
    pub calls: u64,
    pub errors: u64,
    pub rate: f64,
    pub baseline: f64,
    /// The tool only reads (`read_only_tools`): repeating it changes nothing.
    #[serde(default)]
    pub read_only: bool,
    /// What a spike's baseline was made of, in words for its title
    /// (`trailing week`, `warm-up floor`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// A silent tool's or a tool with no success: what its title names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence: Option<crate::detect::silent::Silence>,
}

impl Finding {
    pub fn from_spike(v: &DayVerdict) -> Finding {
        Finding {
            kind: Kind::ErrorRateSpike,
            tool: v.tool.clone(),
            class: crate::detect::dominant_class(v.classes.iter().map(|(c, n)| (*c, *n))),
            at_ns: i64::from(v.day) * NANOS_PER_DAY,
            day: v.day,
            evidence: None,
            calls: v.calls,
            errors: v.errors,
            rate: v.rate,
            baseline: v.baseline,
            read_only: false,
            basis: Some(
                match v.basis {
                    crate::detect::Basis::Trailing => "trailing week",
                    crate::detect::Basis::ReachBack => "earlier unflagged days",
                    crate::detect::Basis::AllRecent => "recent days",
                    crate::detect::Basis::Warmup => "warm-up floor",
                }
                .to_string(),
            ),
            silence: None,
        }
    }

    /// A latency spike: the day's p95 (`rate` holds it in seconds, `baseline`
    /// the baseline days' p95).
    pub fn from_latency(v: &DayVerdict) -> Finding {
        Finding {
            kind: Kind::LatencySpike,
            tool: v.tool.clone(),
            class: ErrorClass::Ok,
            at_ns: i64::from(v.day) * NANOS_PER_DAY,
            day: v.day,
            evidence: None,
            calls: v.calls,
            errors: v.errors,
            rate: v.p95_ns / 1e9,
            baseline: v.baseline_p95_ns.unwrap_or(0.0) / 1e9,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    pub fn from_stacked(s: &StackedRetries) -> Finding {
        let layers = s
            .layers
            .iter()
            .map(|(_, n)| n.to_string())
            .collect::<Vec<_>>()
            .join("×");
        Finding {
            kind: Kind::StackedRetries,
            tool: s.tool.clone(),
            class: s.class,
            at_ns: s.first_start_ns,
            day: s.day,
            evidence: Some(Evidence {
                rhythm: Some(format!("layers {layers}")),
                parents: s.layers.iter().map(|(p, _)| p.clone()).collect(),
                ..Evidence::turn(&s.trace_id, &s.turn, s.day, s.attempts, s.failures)
            }),
            calls: s.attempts as u64,
            errors: s.failures as u64,
            rate: s.layers.len() as f64,
            baseline: 0.0,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    pub fn from_storm(s: &Storm) -> Finding {
        Finding {
            kind: Kind::RetryStorm,
            tool: s.tool.clone(),
            class: crate::detect::dominant_class(s.classes.iter().map(|(c, n)| (*c, *n as u64))),
            at_ns: s.first_start_ns,
            day: s.day,
            evidence: Some(Evidence {
                session_id: s.session_id.clone(),
                rhythm: Some(s.rhythm.as_str().to_string()),
                outcome: Some(s.outcome.as_str().to_string()),
                wasted_seconds: s.wasted_seconds,
                turn_duration_s: Some(s.turn_duration_s),
                turn_spans: Some(s.turn_spans),
                healthy_turn_duration_s: s.healthy_turn_duration_s,
                healthy_turn_spans: s.healthy_turn_spans,
                same_args: s.same_args,
                classes: s
                    .classes
                    .iter()
                    .map(|(c, n)| (c.as_str().to_string(), *n))
                    .collect(),
                waits: s.waits.clone(),
                driver: Some((&s.drive).into()),
                // A storm's size is its rounds: overlapping calls count once.
                ..Evidence::turn(&s.trace_id, &s.turn, s.day, s.rounds, s.failures)
            }),
            calls: s.rounds as u64,
            errors: s.failures as u64,
            rate: 0.0,
            baseline: 0.0,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    /// A chain that ignored Retry-After: `calls` its rounds, `rate` its
    /// early retries, `baseline` the median stated wait (ms).
    pub fn from_ignored(r: &IgnoredRetryAfter) -> Finding {
        Finding {
            kind: Kind::IgnoredRetryAfter,
            tool: r.tool.clone(),
            class: r.class,
            at_ns: r.first_start_ns,
            day: r.day,
            evidence: Some(Evidence {
                session_id: r.session_id.clone(),
                rhythm: Some(format!("{} of {} retries early", r.early(), r.waits.len())),
                outcome: Some(if r.recovered { "recovered" } else { "gave_up" }.to_string()),
                turn_duration_s: Some(r.turn_duration_s),
                turn_spans: Some(r.turn_spans),
                healthy_turn_duration_s: r.healthy_turn_duration_s,
                healthy_turn_spans: r.healthy_turn_spans,
                waits: r.waits.clone(),
                ..Evidence::turn(&r.trace_id, &r.turn, r.day, r.rounds, r.failures)
            }),
            calls: r.rounds as u64,
            errors: r.failures as u64,
            rate: r.early() as f64,
            baseline: r.stated_ms as f64,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    pub fn from_wasted(w: &WastedRetry) -> Finding {
        Finding {
            kind: Kind::WastedRetries,
            tool: w.tool.clone(),
            class: w.class,
            at_ns: w.first_start_ns,
            day: w.day,
            evidence: Some(Evidence {
                outcome: Some("gave_up".to_string()),
                wasted_seconds: w.wasted_seconds,
                driver: Some((&w.drive).into()),
                ..Evidence::turn(&w.trace_id, &w.turn, w.day, w.attempts, w.attempts)
            }),
            calls: w.attempts as u64,
            errors: w.attempts as u64,
            rate: 0.0,
            baseline: 0.0,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    pub fn from_loop(l: &ToolLoop) -> Finding {
        let shape = if l.steps.len() == 1 {
            format!("repeat ×{}", l.repeats)
        } else {
            format!("cycle {} ×{}", l.steps.join(" → "), l.repeats)
        };
        Finding {
            kind: Kind::ToolLoop,
            tool: l.tool.clone(),
            class: ErrorClass::Ok,
            at_ns: l.first_start_ns,
            day: l.day,
            evidence: Some(Evidence {
                session_id: l.session_id.clone(),
                rhythm: Some(shape),
                outcome: Some(
                    if l.results_known {
                        "same_result"
                    } else {
                        "result_unknown"
                    }
                    .to_string(),
                ),
                wasted_seconds: l.wasted_seconds,
                turn_duration_s: Some(l.turn_duration_s),
                turn_spans: Some(l.turn_spans),
                healthy_turn_duration_s: l.healthy_turn_duration_s,
                healthy_turn_spans: l.healthy_turn_spans,
                ..Evidence::turn(&l.trace_id, &l.turn, l.day, l.calls, 0)
            }),
            calls: l.calls as u64,
            errors: 0,
            rate: l.repeats as f64,
            baseline: l.steps.len() as f64,
            read_only: false,
            basis: None,
            silence: None,
        }
    }

    pub fn from_after_success(r: &RetryAfterSuccess, read_only: bool) -> Finding {
        Finding {
            kind: Kind::RetryAfterSuccess,
            tool: r.tool.clone(),
            class: ErrorClass::Ok,
            at_ns: r.first_repeat_ns,
            day: r.day,
            evidence: Some(Evidence::turn(
                &r.trace_id,
                &r.turn,
                r.day,
                r.repeats + 1,
                0,
            )),
            calls: (r.repeats + 1) as u64,
            errors: 0,
            rate: 0.0,
            baseline: 0.0,
            read_only,
            basis: None,
            silence: None,
        }
    }
}

/// A signal as this sweep's findings make it (before its lifecycle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalDraft {
    pub id: String,
    pub key: String,
    pub kind: Kind,
    pub tool: String,
    pub error_class: String,
    pub title: String,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    /// UTC dates it fired on.
    pub days: Vec<String>,
    pub findings: usize,
    pub evidence: Vec<Evidence>,
    /// Evidence traces beyond the limit.
    pub evidence_more: usize,
    /// Seconds spent on attempts that could not help, over every finding
    /// (not only the evidence kept).
    #[serde(default)]
    pub wasted_seconds: f64,
    /// Set where the kind alone does not decide it (a retry after success
    /// of a read-only tool is `info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// What to do about it (see [`super::remedy`]); drafts stored before
    /// remedies existed have none until the next sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<super::remedy::Remedy>,
}

impl SignalDraft {
    /// How much this signal matters.
    pub fn severity(&self) -> Severity {
        self.severity.unwrap_or(Severity::of(self.kind))
    }
}

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

fn title(kind: Kind, tool: &str, class: ErrorClass, group: &[&Finding]) -> String {
    let class_words = class.as_str().replace('_', " ");
    match kind {
        Kind::ErrorRateSpike => {
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
        Kind::RetryStorm => {
            let worst = group
                .iter()
                .max_by_key(|f| f.calls)
                .expect("a group has findings");
            let raw = worst
                .evidence
                .as_ref()
                .and_then(|e| e.rhythm.clone())
                .unwrap_or_default();
            let rhythm = raw.replace('_', " ");
            let turns = if group.len() == 1 {
                String::new()
            } else {
                format!(", {} turns", group.len())
            };
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
        Kind::WastedRetries => {
            let retries: u64 = group.iter().map(|f| f.calls.saturating_sub(1)).sum();
            format!(
                "Wasted retries: {tool} retried {retries} times on {class_words}, which never succeeds on retry")
        }
        Kind::StackedRetries => {
            let worst = group
                .iter()
                .max_by_key(|f| f.calls)
                .expect("a group has findings");
            let layers = worst
                .evidence
                .as_ref()
                .and_then(|e| e.rhythm.clone())
                .unwrap_or_default();
            format!("Stacked retries: {tool} ×{} in one turn, retry loops inside retry loops ({layers}, {class_words})", worst.calls)
        }
        Kind::LatencySpike => {
            let worst = group
                .iter()
                .max_by(|a, b| {
                    (a.rate / a.baseline.max(1e-9)).total_cmp(&(b.rate / b.baseline.max(1e-9)))
                })
                .expect("a group has findings");
            format!(
                "Latency spike: {tool} p95 {:.1} s vs {:.1} s trailing week ({} calls, errors flat)",
                worst.rate, worst.baseline, worst.calls
            )
        }
        Kind::ToolLoop => {
            let worst = group
                .iter()
                .max_by_key(|f| f.calls)
                .expect("a group has findings");
            let shape = worst
                .evidence
                .as_ref()
                .and_then(|e| e.rhythm.clone())
                .unwrap_or_default();
            let turns = if group.len() == 1 {
                String::new()
            } else {
                format!(", {} turns", group.len())
            };
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
        Kind::ToolSilent | Kind::NoSuccess => super::silent::title(kind, tool, class, group),
        Kind::IgnoredRetryAfter => {
            let evidence: Vec<&Evidence> =
                group.iter().filter_map(|f| f.evidence.as_ref()).collect();
            let (calls, early, stated, wait) =
                ignored_worst(evidence.iter().copied()).map_or((0, 0, 0, 0), |e| {
                    (
                        e.calls,
                        e.waits.iter().filter(|w| w.early).count(),
                        e.waits.len(),
                        crate::detect::retry_after::stated_wait(&e.waits).unwrap_or(0),
                    )
                });
            let turns = if group.len() == 1 {
                String::new()
            } else {
                format!(", {} turns", group.len())
            };
            format!(
                "Ignored Retry-After: {tool} retried {}× ignoring Retry-After: {} ({early} of {stated} retries early, {class_words}{turns})",
                calls.saturating_sub(1),
                crate::detect::retry_after::words(wait),
            )
        }
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

/// The worst evidence turn of an ignored Retry-After signal, the one its
/// title and its remedy name: most rounds, then most early retries, then
/// the first trace id — the first of the kept evidence, which [`group`]
/// sorts so.
pub fn ignored_worst<'a>(evidence: impl Iterator<Item = &'a Evidence>) -> Option<&'a Evidence> {
    let early = |e: &Evidence| e.waits.iter().filter(|w| w.early).count();
    evidence.min_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| early(b).cmp(&early(a)))
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    })
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
        .map(|(key, group)| {
            let f0 = group[0];
            let mut evidence: Vec<Evidence> =
                group.iter().filter_map(|f| f.evidence.clone()).collect();
            let wasted_seconds = evidence.iter().map(|e| e.wasted_seconds).sum();
            let early = |e: &Evidence| e.waits.iter().filter(|w| w.early).count();
            evidence.sort_by(|a, b| {
                b.calls
                    .cmp(&a.calls)
                    .then_with(|| b.wasted_seconds.total_cmp(&a.wasted_seconds))
                    .then_with(|| early(b).cmp(&early(a)))
                    .then_with(|| a.trace_id.cmp(&b.trace_id))
            });
            // A silent tool's evidence: its last success once, with the
            // counts up to the latest flagged day.
            if matches!(f0.kind, Kind::ToolSilent | Kind::NoSuccess) {
                let latest = |e: &Evidence| e.daily.last().map(|d| d.day.clone());
                evidence.sort_by_key(|e| std::cmp::Reverse(latest(e)));
                evidence.truncate(1);
            }
            let more = evidence.len().saturating_sub(evidence_limit);
            evidence.truncate(evidence_limit);
            let mut days: Vec<String> = group.iter().map(|f| day_to_string(f.day)).collect();
            days.sort();
            days.dedup();
            let mut draft = SignalDraft {
                id: short_id(&key),
                title: title(f0.kind, &f0.tool, f0.class, &group),
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
        })
        .collect()
}
