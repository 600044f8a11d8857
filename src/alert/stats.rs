//! Delivery counters by target and outcome, for `/metrics`, logs and
//! `alerts flush`.
//!
//! A map under a mutex rather than a `prometheus-client` `Family`: `alerts
//! flush` reads the counts back (a `Family` cannot be listed), so `Stats`
//! implements that crate's [`Collector`] instead, and its encoder writes
//! the samples (the label escaping is the crate's). Nothing here knows
//! `serve`, which only registers the collector.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

#[derive(Debug, Default)]
pub struct Stats {
    counts: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl Stats {
    pub fn count(&self, target: &str, outcome: &'static str) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry((target.to_string(), outcome)).or_insert(0) += 1;
    }

    /// (target, outcome, count), sorted.
    pub fn snapshot(&self) -> Vec<(String, &'static str, u64)> {
        let c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.iter().map(|((t, o), n)| (t.clone(), *o, *n)).collect()
    }
}

/// `stormwatch_alert_deliveries_total{target,outcome}` (the encoder adds
/// `_total`).
impl Collector for Stats {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "stormwatch_alert_deliveries",
            "Alert delivery attempts by target and outcome.",
            None,
            MetricType::Counter,
        )?;
        for (target, outcome, n) in self.snapshot() {
            let labels = [("target", target.as_str()), ("outcome", outcome)];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::{prometheus_text, text};
    use prometheus_client::registry::Registry;

    #[test]
    fn deliveries_encode_with_escaped_target_names_in_both_formats() {
        let stats = std::sync::Arc::new(Stats::default());
        stats.count("a\"b\\c\nd", "delivered");
        stats.count("a\"b\\c\nd", "delivered");
        stats.count("plain", "dead");
        let mut registry = Registry::default();
        registry.register_collector(Box::new(std::sync::Arc::clone(&stats)));
        let mut om = String::new();
        text::encode(&mut om, &registry).unwrap();
        assert_eq!(
            om,
            "# HELP stormwatch_alert_deliveries Alert delivery attempts by target and outcome.\n\
             # TYPE stormwatch_alert_deliveries counter\n\
             stormwatch_alert_deliveries_total{target=\"a\\\"b\\\\c\\nd\",outcome=\"delivered\"} 2\n\
             stormwatch_alert_deliveries_total{target=\"plain\",outcome=\"dead\"} 1\n\
             # EOF\n"
        );
        let mut classic = String::new();
        prometheus_text::encode(&mut classic, &registry).unwrap();
        assert!(
            classic.contains("# TYPE stormwatch_alert_deliveries_total counter\n"),
            "{classic}"
        );
        assert!(
            classic.contains(
                "stormwatch_alert_deliveries_total{target=\"a\\\"b\\\\c\\nd\",outcome=\"delivered\"} 2\n"
            ),
            "{classic}"
        );
    }
}
