//! stormwatch watches what AI agents do with their tools.
//!
//! Data flows down this list of modules, one stage each (see ARCHITECTURE.md):
//!
//! - [`ingest`]: OTLP protobuf/JSON bodies and files → normalized span rows
//!   (tool-call detection, sessions, error classes). It is the crate
//!   `crates/otlp` (with [`model`]), re-exported here.
//! - [`store`]: write-ahead log, Parquet partitions, compaction, retention,
//!   daily rollups, readers returning polars `LazyFrame`s.
//! - [`detect`]: pure functions from frames to findings: error-rate and
//!   latency spikes, retry storms, wasted retries, retries after success,
//!   stacked retry layers.
//! - [`signal`]: findings grouped into named signals with a lifecycle in
//!   `state.sqlite`.
//! - [`incident`]: open signals with one likely cause (the same tool, the
//!   same dependency, a burst of one class) joined into incidents, with
//!   their lifecycle in `state.sqlite`.
//! - [`serve`]: the OTLP/HTTP receiver and the HTTP surface (health,
//!   metrics, the dashboard).
//! - [`sweep`]: one detection pass: rules, signals, lifecycle, reports.
//! - [`read`]: the read models the dashboard and the MCP server share (the
//!   rollup and signals kept in memory, the tools table, one trace judged,
//!   incidents as every surface shows them).
//! - [`dash`]: the dashboard and JSON API (rollups and state only; spans
//!   only for the trace view).
//! - [`mcp`]: the MCP server for coding agents (`/mcp` and stdio): the
//!   reads, the remedies and the three state changes as tools.
//! - [`alert`]: which changes are news, one message per target, the outbox
//!   and its sender.
//! - [`coverage`]: what the stored spans leave stormwatch blind to, per
//!   service and instrumentation scope, and the framework's fix.
//! - [`import`]: the `import` command: files and followed directories into the store.
//! - [`state`]: `state.sqlite` itself: its one schema, its version and
//!   migrations, the one way to open it (below every stage that keeps rows
//!   in it).
//! - [`cmd`]: the subcommands' bodies on plain parameters, output to a
//!   writer; the only module that reads [`cli`].
//!
//! Shared pieces: [`model`] (the span row and error classes), [`config`]
//! (the TOML file), [`cli`], [`telemetry`] (logs), [`retry`] (backoff),
//! [`time`] (RFC 3339 and the `--now` / `--since`
//! values), [`faults`] (fault injection for tests), [`demo`] (the bundled incident), [`alloc`]
//! (mimalloc's purge delay: the crate's one `unsafe` call).

pub use stormwatch_otlp::{ingest, model};

pub mod alert;
pub mod alloc;
pub mod cli;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod coverage;
pub mod dash;
pub mod demo;
pub mod detect;
pub mod faults;
pub mod import;
pub mod incident;
pub mod mcp;
pub mod read;
pub mod retry;
pub mod serve;
pub mod signal;
pub mod spans;
pub mod state;
pub mod store;
pub mod sweep;
pub mod telemetry;
pub mod time;

#[cfg(test)]
mod tests_module_graph;
