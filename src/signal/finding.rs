//! Findings: every rule's result reduced to what grouping needs — the key's
//! parts, when it happened, the numbers its title names and its evidence.

use serde::{Deserialize, Serialize};

use super::evidence::Evidence;
use super::kind::Kind;
use crate::detect::{
    DayVerdict, IgnoredRetryAfter, RetryAfterSuccess, StackedRetries, Storm, ToolLoop, WastedRetry,
};
use crate::model::{ErrorClass, NANOS_PER_DAY};

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
