//! The pipeline's configuration file (TOML). Unknown keys are errors that
//! name the key, so a typo never silently becomes a default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::StoreOptions;

mod mcp;
pub use mcp::McpConfig;
mod admission;
pub use admission::AdmissionConfig;
mod validate;

/// The whole file. Every section and key is optional.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub ingest: IngestConfig,
    pub store: StoreConfig,
    pub import: ImportConfig,
    pub detect: DetectConfig,
    pub sweep: SweepConfig,
    pub signals: SignalsConfig,
    pub alert: crate::alert::AlertConfig,
    pub cluster: ClusterConfig,
    pub mcp: McpConfig,
    pub admission: AdmissionConfig,
    /// `[cost]`: model prices, for what a model-driven retry chain cost
    /// (detection.md §4.2, "Driver"); empty by default.
    pub cost: crate::detect::CostParams,
}

/// `[cluster]`: nodes over a shared store (`--store s3://…`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// A detect lease stands this long without renewal (renewed every third).
    pub lease_secs: u64,
    /// A detect node pulls new parts from the shared store this often.
    pub pull_interval_secs: u64,
    /// The lease holder ships its changed state this often; a standby
    /// reads the holder's this often.
    pub state_sync_secs: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            lease_secs: 15,
            pull_interval_secs: 5,
            state_sync_secs: 2,
        }
    }
}

/// The commented default file: `stormwatch config default` prints it, the
/// README shows it, and a test holds it to the built-in defaults key for key.
pub const DEFAULT_FILE: &str = include_str!("default.toml");

/// `[sweep]`: the sweeps `serve` runs by itself.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SweepConfig {
    /// Seconds between scheduled sweeps; 0 turns the schedule off.
    pub interval_secs: u64,
    /// How far back a sweep looks (days).
    pub since_days: u32,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            interval_secs: 300,
            since_days: 30,
        }
    }
}

/// `[signals]`: how findings become signals (alerting.md, Signals).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SignalsConfig {
    /// Evidence traces kept per signal (the rest are counted).
    pub evidence_limit: usize,
    /// A daily signal (spike) resolves after this many complete days
    /// without a finding.
    pub resolve_after_days: i64,
    /// A per-turn signal (storm, loop, retries) resolves after this many
    /// hours of the tool's own traffic without a finding.
    pub resolve_after_hours: i64,
}

impl Default for SignalsConfig {
    fn default() -> Self {
        SignalsConfig {
            evidence_limit: 10,
            resolve_after_days: 2,
            resolve_after_hours: 24,
        }
    }
}

/// `[detect.*]`: the detection rules' thresholds (detection.md §4).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DetectConfig {
    pub error_spike: crate::detect::SpikeParams,
    pub retry_storm: crate::detect::StormParams,
    pub tool_loop: crate::detect::LoopParams,
    pub retry_after_success: AfterSuccessConfig,
    pub silent: crate::detect::SilentParams,
    pub retry_after: crate::detect::RetryAfterParams,
    /// The file's `[cost]` section, copied here by [`Config::parse`] so
    /// the per-turn rules (and the fingerprint of their day results) see it.
    #[serde(skip)]
    pub cost: crate::detect::CostParams,
}

/// `[detect.retry_after_success]` (detection.md §4.4).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AfterSuccessConfig {
    /// Globs (`*`, `?`, `[...]`) of tools that only read: repeating one
    /// after it succeeded is `info`, not `critical`.
    pub read_only_tools: Vec<String>,
}

impl Default for AfterSuccessConfig {
    fn default() -> Self {
        AfterSuccessConfig {
            read_only_tools: [
                "get_*", "list_*", "search_*", "read_*", "fetch_*", "lookup_*",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

impl AfterSuccessConfig {
    /// Whether `tool` matches one of the read-only globs, as written or in
    /// its snake_case form (`getWeather`, `get-weather` → `get_weather`),
    /// its MCP-prefixed name's last part included (`mcp__github__get_issue`).
    pub fn read_only(&self, tool: &str) -> bool {
        let snake = snake_case(tool);
        let last = snake.rsplit("__").next().unwrap_or(&snake).to_string();
        self.read_only_tools.iter().any(|g| {
            glob::Pattern::new(g)
                .is_ok_and(|p| p.matches(tool) || p.matches(&snake) || p.matches(&last))
        })
    }
}

/// `getWeather` / `get-weather` / `Get Weather` → `get_weather`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for ch in name.chars() {
        if ch.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
            prev_lower = false;
        } else if ch == '-' || ch == ' ' || ch == '.' {
            out.push('_');
            prev_lower = false;
        } else {
            out.push(ch);
            prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        }
    }
    out
}

/// `[ingest]`: limits of the OTLP/HTTP receiver.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Largest request body, compressed or decompressed (bytes); 413 past it.
    pub max_body_bytes: usize,
    /// Request bodies held in memory at once (bytes); 429 past it.
    pub max_inflight_bytes: usize,
    /// A span starting or ending later than this after it was received is
    /// refused (partial success); 1 to 86400 seconds.
    pub max_future_secs: u64,
    /// Result shapes of the user's own tools that say a call failed
    /// (`[[ingest.result_failures]]`, docs/detection.md §3), tried before
    /// the documented ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub result_failures: Vec<crate::ingest::ResultShape>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_body_bytes: 64 << 20,
            max_inflight_bytes: 256 << 20,
            max_future_secs: crate::ingest::window::DEFAULT_MAX_FUTURE.as_secs(),
            result_failures: Vec::new(),
        }
    }
}

/// `[store]`: the write path and what is kept.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Delete days older than this; 0 keeps everything.
    pub retention_days: u32,
    pub flush_interval_secs: u64,
    pub flush_rows: usize,
    pub max_pending_bytes: usize,
    pub max_memory_bytes: usize,
    pub compact_parts: usize,
    pub rollup_interval_secs: u64,
    /// Seal-compact a day once it ended this long ago; 0 never does.
    pub seal_after_secs: u64,
    /// A file a compaction or refresh replaced stays this long at least,
    /// for reads from other processes (`sweep` from cron, `mcp --stdio`).
    pub retired_grace_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let d = StoreOptions::default();
        StoreConfig {
            retention_days: 90,
            flush_interval_secs: d.flush_interval.as_secs(),
            flush_rows: d.flush_rows,
            max_pending_bytes: d.max_pending_bytes,
            max_memory_bytes: d.max_memory_bytes,
            compact_parts: d.compact_parts,
            rollup_interval_secs: d.rollup_interval.as_secs(),
            seal_after_secs: d.seal_after.map_or(0, |a| a.as_secs()),
            retired_grace_secs: d.retired_grace.as_secs(),
        }
    }
}

/// `[import]`: the file follower.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ImportConfig {
    /// How often `import --follow` looks for new data (milliseconds).
    pub poll_interval_ms: u64,
    /// Largest a gzip'd file may decompress to (bytes); past it the file is
    /// refused whole (a gzip bomb).
    pub max_decompressed_bytes: u64,
    /// Most bytes read from one file (bytes); past it the file is refused
    /// whole (a device, a file that grows without end); `--follow` reads a
    /// growing JSON-lines file at most this much per poll.
    pub max_file_bytes: u64,
}

impl Default for ImportConfig {
    fn default() -> Self {
        let d = crate::ingest::file::Limits::default();
        ImportConfig {
            poll_interval_ms: 1000,
            max_decompressed_bytes: d.max_decompressed_bytes,
            max_file_bytes: d.max_file_bytes,
        }
    }
}

impl ImportConfig {
    /// The caps on each imported file.
    pub fn limits(&self) -> crate::ingest::file::Limits {
        crate::ingest::file::Limits {
            max_file_bytes: self.max_file_bytes,
            max_decompressed_bytes: self.max_decompressed_bytes,
        }
    }
}

/// Why a config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// Parse a config file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: origin.to_path_buf(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        config.validate(origin)?;
        config.detect.cost = config.cost.clone();
        Ok(config)
    }

    /// Load `path`, or `./stormwatch.toml` when no path is given and it
    /// exists, or the defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => {
                let default = PathBuf::from("stormwatch.toml");
                if !default.exists() {
                    return Ok(Config::default());
                }
                default
            }
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Config::parse(&text, &path)
    }

    /// The store's options, with a retention given on the command line winning.
    pub fn store_options(&self, retention_days: Option<u32>) -> StoreOptions {
        let days = retention_days.unwrap_or(self.store.retention_days);
        StoreOptions {
            flush_interval: Duration::from_secs(self.store.flush_interval_secs),
            flush_rows: self.store.flush_rows,
            max_pending_bytes: self.store.max_pending_bytes,
            max_memory_bytes: self.store.max_memory_bytes,
            compact_parts: self.store.compact_parts,
            retention_days: (days > 0).then_some(days),
            rollup_interval: Duration::from_secs(self.store.rollup_interval_secs.max(1)),
            seal_after: (self.store.seal_after_secs > 0)
                .then(|| Duration::from_secs(self.store.seal_after_secs)),
            retired_grace: Duration::from_secs(self.store.retired_grace_secs),
            accept: crate::ingest::TimeBounds {
                max_future: Duration::from_secs(self.ingest.max_future_secs),
                retention_days: (days > 0).then_some(days),
            },
            result_shapes: std::sync::Arc::new(crate::ingest::ResultShapes(
                self.ingest.result_failures.clone(),
            )),
            ..StoreOptions::default()
        }
    }
}

#[cfg(test)]
mod tests;
