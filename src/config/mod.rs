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

    fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, why: &str| {
            Err(ConfigError::Invalid {
                path: origin.to_path_buf(),
                message: format!("{key}: {why}"),
            })
        };
        if self.ingest.max_body_bytes < 1024 {
            return bad("ingest.max_body_bytes", "must be at least 1024");
        }
        if self.ingest.max_inflight_bytes < self.ingest.max_body_bytes {
            return bad(
                "ingest.max_inflight_bytes",
                "must be at least ingest.max_body_bytes",
            );
        }
        if self.import.max_file_bytes < 1024 {
            return bad("import.max_file_bytes", "must be at least 1024");
        }
        for (model, price) in &self.cost.models {
            for (key, v) in [
                ("input_per_mtok", price.input_per_mtok),
                ("output_per_mtok", price.output_per_mtok),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return bad(
                        &format!("cost.models.\"{model}\".{key}"),
                        &format!("must be a price of 0 or more (USD per million tokens), got {v}"),
                    );
                }
            }
        }
        for (i, shape) in self.ingest.result_failures.iter().enumerate() {
            if let Some((key, why)) = shape.problem() {
                return bad(&format!("ingest.result_failures[{i}].{key}"), &why);
            }
        }
        let max_future = crate::ingest::window::MAX_FUTURE_LIMIT.as_secs();
        if !(1..=max_future).contains(&self.ingest.max_future_secs) {
            return bad(
                "ingest.max_future_secs",
                &format!(
                    "must be from 1 to {max_future} (a day), got {}",
                    self.ingest.max_future_secs
                ),
            );
        }
        if let Err((key, why)) = self.detect.silent.check() {
            return bad(key, &why);
        }
        if let Err((key, why)) = self.admission.check() {
            return bad(key, &why);
        }
        if self.store.flush_interval_secs == 0 {
            return bad("store.flush_interval_secs", "must be at least 1");
        }
        if self.store.flush_rows == 0 {
            return bad("store.flush_rows", "must be at least 1");
        }
        if self.store.compact_parts < 2 {
            return bad("store.compact_parts", "must be at least 2");
        }
        let spike = &self.detect.error_spike;
        if spike.multiplier.is_nan() || spike.multiplier <= 0.0 {
            return bad("detect.error_spike.multiplier", "must be above 0");
        }
        if !(0.5..1.0).contains(&spike.confidence) {
            return bad(
                "detect.error_spike.confidence",
                "must be at least 0.5 and below 1",
            );
        }
        if !(0.0..1.0).contains(&spike.baseline_floor) || !(0.0..1.0).contains(&spike.warmup_floor)
        {
            return bad(
                "detect.error_spike.baseline_floor / warmup_floor",
                "must be rates from 0 to below 1",
            );
        }
        if self.sweep.since_days == 0 || self.sweep.since_days > 3660 {
            return bad("sweep.since_days", "must be from 1 to 3660");
        }
        if self.sweep.interval_secs > 0 && !(10..=604_800).contains(&self.sweep.interval_secs) {
            return bad(
                "sweep.interval_secs",
                "must be 0 (off) or from 10 seconds to a week (604800)",
            );
        }
        if self.signals.evidence_limit == 0
            || self.signals.resolve_after_days < 1
            || self.signals.resolve_after_hours < 1
        {
            return bad(
                "signals.evidence_limit / resolve_after_days / resolve_after_hours",
                "must be at least 1",
            );
        }
        if let Some(g) = self
            .detect
            .retry_after_success
            .read_only_tools
            .iter()
            .find(|g| glob::Pattern::new(g).is_err())
        {
            return bad(
                "detect.retry_after_success.read_only_tools",
                &format!("{g:?} is not a glob (expected names with *, ? or [...])"),
            );
        }
        if let Some((key, why)) = self.detect.retry_after.problem() {
            return bad(&format!("detect.retry_after.{key}"), &why);
        }
        let lp = &self.detect.tool_loop;
        if lp.loop_min_calls < 2
            || lp.cycle_min_repeats < 2
            || !(2..=8).contains(&lp.cycle_max_period)
        {
            return bad(
                "detect.tool_loop",
                "need loop_min_calls >= 2, cycle_min_repeats >= 2 and cycle_max_period from 2 to 8",
            );
        }
        if let Err(e) = self.alert.validate() {
            return Err(ConfigError::Invalid {
                path: origin.to_path_buf(),
                message: e.to_string(),
            });
        }
        if let Err(message) = self.mcp.validate() {
            return Err(ConfigError::Invalid {
                path: origin.to_path_buf(),
                message,
            });
        }
        let c = &self.cluster;
        for (key, value, low) in [
            ("lease_secs", c.lease_secs, 3),
            ("pull_interval_secs", c.pull_interval_secs, 1),
            ("state_sync_secs", c.state_sync_secs, 1),
        ] {
            if !(low..=3600).contains(&value) {
                return bad(
                    &format!("cluster.{key}"),
                    &format!("must be from {low} to 3600, got {value}"),
                );
            }
        }
        if c.state_sync_secs * 2 > c.lease_secs {
            return bad(
                "cluster.state_sync_secs",
                &format!(
                    "must be at most half of cluster.lease_secs ({}), got {} (a holder ships its state at least twice a lease)",
                    c.lease_secs, c.state_sync_secs
                ),
            );
        }
        let storm = &self.detect.retry_storm;
        if storm.storm_min_calls < 2 || storm.min_failures < 1 {
            return bad(
                "detect.retry_storm.storm_min_calls / min_failures",
                "need storm_min_calls >= 2 and min_failures >= 1",
            );
        }
        if spike.baseline_days < 1 || spike.reach_back_days < spike.baseline_days {
            return bad(
                "detect.error_spike.baseline_days / reach_back_days",
                "need 1 <= baseline_days <= reach_back_days",
            );
        }
        Ok(())
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
mod tests {
    use super::*;

    #[test]
    fn read_only_tools_match_every_naming_style() {
        let c = AfterSuccessConfig::default();
        for tool in [
            "get_weather",
            "getWeather",
            "get-weather",
            "mcp__github__get_issue",
            "search_flights",
            "fetch_page",
        ] {
            assert!(c.read_only(tool), "{tool}");
        }
        for tool in [
            "book_flight",
            "bookFlight",
            "charge_card",
            "bash",
            "forget_user",
        ] {
            assert!(!c.read_only(tool), "{tool}");
        }
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(
            Config::parse("", Path::new("x.toml")).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn unknown_price_keys_are_refused() {
        let bad = "[cost.models.\"gpt-4o\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\ncached_per_mtok = 1.0\n";
        let e = Config::parse(bad, std::path::Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().contains("cached_per_mtok"), "{e}");
        let e = Config::parse("[cost]\nprices = 1\n", std::path::Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().contains("prices"), "{e}");
        let e = Config::parse(
            "[cost.models.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("cost.models.\"m\".input_per_mtok"),
            "{e}"
        );
        let ok = Config::parse(
            "[cost.models.\"gpt-4o\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\n",
            std::path::Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(ok.detect.cost, ok.cost);
        assert_eq!(ok.cost.models["gpt-4o"].output_per_mtok, 10.0);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::parse("[store]\nretention_dayz = 3\n", Path::new("x.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("retention_dayz"), "{msg}");
        assert!(msg.contains("x.toml"), "{msg}");
    }

    #[test]
    fn result_shapes_are_read_and_checked_naming_the_key() {
        let ok = "[[ingest.result_failures]]\npointer = \"/outcome/state\"\nequals = [\"FAILED\"]\nmessage = \"/outcome/reason\"\ntools = [\"book_*\"]\n";
        let c = Config::parse(ok, Path::new("x.toml")).unwrap();
        assert_eq!(c.ingest.result_failures.len(), 1);
        let shapes = c.store_options(None).result_shapes;
        assert_eq!(shapes.0[0].pointer, "/outcome/state");
        let bad = "[[ingest.result_failures]]\npointer = \"outcome\"\n";
        let err = Config::parse(bad, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ingest.result_failures[0].pointer"), "{err}");
        assert!(err.contains("\"outcome\""), "what came: {err}");
        let unknown = "[[ingest.result_failures]]\npointer = \"/s\"\nequal = [\"x\"]\n";
        let err = Config::parse(unknown, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("equal"), "{err}");
    }

    #[test]
    fn wrong_type_says_what_was_expected() {
        let err =
            Config::parse("[ingest]\nmax_body_bytes = \"big\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("max_body_bytes"), "{err}");
    }

    /// The README's config reference is `config default`'s file, and that
    /// file is the real defaults, key for key.
    #[test]
    fn the_default_file_is_the_built_in_defaults_and_the_readme_shows_it() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("The defaults:\n\n```toml\n")
            .expect("README has the defaults block");
        let block = &readme[start..];
        let body = &block[block.find("```toml\n").unwrap() + 8..];
        let body = &body[..body.find("```").unwrap()];
        assert_eq!(
            body, DEFAULT_FILE,
            "README block differs from src/config/default.toml"
        );
        let parsed = Config::parse(DEFAULT_FILE, Path::new("default.toml")).unwrap();
        assert_eq!(parsed, Config::default());
        // Every key the program has is spelled out, so none can hide.
        fn leaves(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
            match v {
                toml::Value::Table(t) => {
                    for (k, v) in t {
                        leaves(&format!("{prefix}{k}."), v, out);
                    }
                }
                _ => out.push(prefix.trim_end_matches('.').to_string()),
            }
        }
        let (mut written, mut built_in) = (Vec::new(), Vec::new());
        leaves(
            "",
            &DEFAULT_FILE.parse::<toml::Table>().unwrap().into(),
            &mut written,
        );
        leaves(
            "",
            &toml::Value::try_from(Config::default()).unwrap(),
            &mut built_in,
        );
        written.sort();
        built_in.sort();
        assert_eq!(written, built_in);
    }

    #[test]
    fn detection_thresholds_are_checked() {
        for (text, key) in [
            ("[detect.error_spike]\nmultiplier = 0.0\n", "multiplier"),
            ("[detect.error_spike]\nconfidence = 1.5\n", "confidence"),
            (
                "[detect.error_spike]\nbaseline_days = 30\n",
                "reach_back_days",
            ),
            ("[detect.error_spike]\nmin_call = 3\n", "min_call"),
        ] {
            let err = Config::parse(text, Path::new("x.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let c = Config::parse(
            "[detect.error_spike]\nmultiplier = 4.0\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(c.detect.error_spike.multiplier, 4.0);
        assert_eq!(c.detect.error_spike.min_calls, 10);
    }

    #[test]
    fn import_caps_are_checked_and_reach_the_limits() {
        let err = Config::parse("[import]\nmax_file_bytes = 10\n", Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("import.max_file_bytes: must be at least 1024"),
            "{err}"
        );
        let c = Config::parse("[import]\nmax_file_bytes = 4096\n", Path::new("x.toml")).unwrap();
        let limits = c.import.limits();
        assert_eq!(limits.max_file_bytes, 4096);
        assert_eq!(limits.max_decompressed_bytes, 1 << 30);
    }

    #[test]
    fn silent_params_are_range_checked() {
        let err = Config::parse("[detect.silent]\nmax_ratio = 1.5\n", Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("detect.silent.max_ratio: must be a share from 0 to below 1, got 1.5"),
            "{err}"
        );
    }

    #[test]
    fn retention_zero_keeps_everything_and_flag_wins() {
        let c = Config::parse("[store]\nretention_days = 0\n", Path::new("x.toml")).unwrap();
        assert_eq!(c.store_options(None).retention_days, None);
        assert_eq!(c.store_options(Some(7)).retention_days, Some(7));
    }
}
