//! The kinds of signal and how much each matters: the names keys, titles,
//! remedies and target filters use.

use serde::{Deserialize, Serialize};

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
    /// read-only tool informs too: see [`crate::signal::draft::SignalDraft::severity`].)
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
