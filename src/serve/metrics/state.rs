//! The `Collector` of what `state.sqlite` holds: signals by state and the
//! outbox by target and status, counted at scrape time (blocking: it runs
//! on the thread that encodes).

use std::fmt::Error;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::collect::gauges;
use crate::store::Store;

/// Signals by state and the outbox by target and status. A family whose
/// read fails has no samples this scrape, and the failure is logged.
pub struct StateDb(pub Arc<Store>);

impl std::fmt::Debug for StateDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateDb")
    }
}

impl Collector for StateDb {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        let path = self.0.layout().state_db();
        let states = ["new", "ongoing", "regressed", "resolved", "muted"];
        let signals = match crate::signal::StateDb::open(&path).and_then(|db| db.counts_by_state())
        {
            Ok(counts) => states
                .iter()
                .map(|state| {
                    let n = counts
                        .iter()
                        .find(|(s, _)| s == state)
                        .map_or(0, |(_, n)| *n);
                    ([("state", *state)], n)
                })
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "metrics: cannot count signals");
                Vec::new()
            }
        };
        gauges(&mut e, "stormwatch_signals", "Signals by state.", signals)?;
        let outbox = match crate::alert::commands::open(&path)
            .and_then(|c| crate::alert::outbox::counts(&c))
        {
            Ok(rows) => rows,
            Err(err) => {
                tracing::warn!(error = %err, "metrics: cannot count the outbox");
                Vec::new()
            }
        };
        gauges(
            &mut e,
            "stormwatch_alert_outbox",
            "Alert messages in the outbox, by target and status (pending, delivered, dead).",
            outbox.iter().map(|(target, status, n)| {
                (
                    [("target", target.as_str()), ("status", status.as_str())],
                    *n,
                )
            }),
        )
    }
}
