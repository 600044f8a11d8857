//! The checks a parsed config file passes before it is used, section by
//! section, in a fixed order: the first problem found is the one reported,
//! naming its key.

use std::path::Path;

use super::{Config, ConfigError};

/// What is wrong with one key: `key: why`.
struct Problem(String);

fn bad(key: &str, why: &str) -> Result<(), Problem> {
    Err(Problem(format!("{key}: {why}")))
}

impl Config {
    /// The first problem of this config, read from `origin`.
    pub(super) fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        self.problem()
            .map_err(|Problem(message)| ConfigError::Invalid {
                path: origin.to_path_buf(),
                message,
            })
    }

    fn problem(&self) -> Result<(), Problem> {
        self.check_limits()?;
        self.check_cost()?;
        self.check_ingest()?;
        if let Err((key, why)) = self.detect.silent.check() {
            return bad(key, &why);
        }
        if let Err((key, why)) = self.admission.check() {
            return bad(key, &why);
        }
        self.check_store()?;
        self.check_error_spike()?;
        self.check_sweep_and_signals()?;
        self.check_rules()?;
        self.alert.validate().map_err(|e| Problem(e.to_string()))?;
        self.mcp.validate().map_err(|e| Problem(e.to_string()))?;
        self.check_cluster()?;
        self.check_storm_and_baseline()
    }

    /// The sizes a request body and an import file may have.
    fn check_limits(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[cost]`: every model's prices.
    fn check_cost(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[ingest]`: the result shapes and how far ahead a span may end.
    fn check_ingest(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[store]`: flushes and compaction.
    fn check_store(&self) -> Result<(), Problem> {
        if self.store.flush_interval_secs == 0 {
            return bad("store.flush_interval_secs", "must be at least 1");
        }
        if self.store.flush_rows == 0 {
            return bad("store.flush_rows", "must be at least 1");
        }
        if self.store.compact_parts < 2 {
            return bad("store.compact_parts", "must be at least 2");
        }
        Ok(())
    }

    /// `[detect.error_spike]`: the multiplier, confidence and floors.
    fn check_error_spike(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[sweep]` and `[signals]`.
    fn check_sweep_and_signals(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// The rules' own sections: repeats after success, stated waits, loops.
    fn check_rules(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[cluster]`: the lease and the intervals within it.
    fn check_cluster(&self) -> Result<(), Problem> {
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
        Ok(())
    }

    /// `[detect.retry_storm]`, and the spike's baseline window.
    fn check_storm_and_baseline(&self) -> Result<(), Problem> {
        let storm = &self.detect.retry_storm;
        if storm.storm_min_calls < 2 || storm.min_failures < 1 {
            return bad(
                "detect.retry_storm.storm_min_calls / min_failures",
                "need storm_min_calls >= 2 and min_failures >= 1",
            );
        }
        let spike = &self.detect.error_spike;
        if spike.baseline_days < 1 || spike.reach_back_days < spike.baseline_days {
            return bad(
                "detect.error_spike.baseline_days / reach_back_days",
                "need 1 <= baseline_days <= reach_back_days",
            );
        }
        Ok(())
    }
}
