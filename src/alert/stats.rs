//! Delivery counters by target and outcome, for `/metrics` and logs.

use std::collections::BTreeMap;
use std::sync::Mutex;

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

    /// Prometheus text lines.
    pub fn prometheus(&self) -> String {
        let mut out = String::from(
            "# HELP stormwatch_alert_deliveries_total Alert delivery attempts by target and outcome.\n# TYPE stormwatch_alert_deliveries_total counter\n",
        );
        for (t, o, n) in self.snapshot() {
            let t = crate::serve::metrics::escape_label(&t);
            out.push_str(&format!(
                "stormwatch_alert_deliveries_total{{target=\"{t}\",outcome=\"{o}\"}} {n}\n"
            ));
        }
        out
    }
}
