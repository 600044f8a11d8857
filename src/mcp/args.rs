//! The MCP tools' argument types (each tool's `inputSchema`: field docs
//! become the descriptions an agent reads, `schemars` ranges its bounds,
//! unknown fields refused) and the answers of `run_sweep`, `mute_signal`
//! and `resolve_signal` (their `outputSchema`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::signal_reads;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowArgs {
    /// Days in the window, ending on the newest day with data (default 30).
    #[schemars(range(min = 1, max = 366))]
    pub days: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Tools per page (default 50, at most 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CoverageArgs {
    /// Days read, ending on the newest day with data (default 7).
    #[schemars(range(min = 1, max = 366))]
    pub days: Option<u32>,
    /// Only the spans that started at or after this time (RFC 3339, like
    /// `2026-12-05T23:40:00Z`, a date, or a duration back from now like
    /// `90m`): to see a fix take effect. Not with `days`.
    pub since: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDailyArgs {
    /// The tool's name, as `list_tools` gives it.
    pub tool: String,
    /// Days in the window, ending on the newest day with data (default 30).
    #[schemars(range(min = 1, max = 366))]
    pub days: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IncidentsArgs {
    /// `open`, `acknowledged` (every open member muted), `resolved` or `all`; by default the open and the acknowledged ones.
    pub state: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IncidentArgs {
    /// The incident's id, like `INC-BCDF`, as `list_incidents` gives it.
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalsArgs {
    /// `open` (new, ongoing or regressed), `new`, `ongoing`, `resolved`, `regressed` or `muted`.
    pub state: Option<String>,
    /// `retry_storm`, `error_rate_spike`, `wasted_retries`, `retry_after_success`, `stacked_retries`, `latency_spike`, `tool_loop`, `tool_silent`, `no_success` or `ignored_retry_after`.
    pub kind: Option<String>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Seen since a date (`2026-07-29`) or a number of days ago (`7d`).
    pub since: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page.
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalArgs {
    /// The signal's id, like `SW-BCDF`.
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalTracesArgs {
    /// The signal's id, like `SW-BCDF`.
    pub id: String,
    /// Only the turns begun on this day (`2026-07-29`), like a flagged day of `list_tools`.
    pub day: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page.
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArgs {
    /// The trace id (hex).
    pub trace_id: String,
    /// Only this turn (a `turn_id` from `list_signal_traces`).
    pub turn_id: Option<String>,
    /// The trace's day (`2026-07-29`), which makes the lookup read one day instead of all.
    pub day: Option<String>,
    /// Include each span's attributes (cut to 600 characters). Default false.
    #[serde(default)]
    pub attributes: bool,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page.
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StormsArgs {
    /// Days in the window, ending on the newest day with data (default 30).
    #[schemars(range(min = 1, max = 366))]
    pub days: Option<u32>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only storms of at least this many rounds of calls.
    pub min_rounds: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page.
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// One SELECT over tool_daily, turn_summary and spans (polars SQL).
    pub sql: String,
    /// Days of spans and sealed turns the tables hold, ending on the newest day (1 to 7, default 1).
    #[schemars(range(min = 1, max = 7))]
    pub days: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepArgs {
    /// Only report what a sweep would find and change (default true); false runs a real sweep, which changes signals and queues alerts.
    pub dry_run: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MuteArgs {
    /// The signal's id, like `SW-BCDF`.
    pub id: String,
    /// Muted until this time (RFC 3339, like `2026-08-01T00:00:00Z`); until unmuted when absent.
    pub until: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangeLine {
    pub id: String,
    pub from: Option<String>,
    pub to: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SweepAnswer {
    pub dry_run: bool,
    /// `ok`, or `empty` when the store holds no spans yet.
    pub outcome: String,
    pub spans_scanned: usize,
    pub days_scanned: usize,
    pub days_reused: usize,
    /// Days read from their sealed summaries, and days this sweep sealed.
    pub days_from_summary: usize,
    pub days_sealed: usize,
    /// The signals with findings in the sweep's window, as they stand (or
    /// would stand) after it; other signals keep their state.
    pub signals: Vec<signal_reads::SignalLine>,
    /// Lifecycle changes it made (or would make).
    pub changes: Vec<ChangeLine>,
    pub alerts_queued: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StateAnswer {
    pub id: String,
    pub state: String,
}
