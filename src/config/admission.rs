//! `[admission]`: how connections and request bodies are let in on the
//! three ports (README "Admission"); `serve::admission` and `serve::conn`
//! enforce it.

use serde::{Deserialize, Serialize};

/// `[admission]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// Share of `ingest.max_inflight_bytes` a body still arriving may only
    /// borrow, for two seconds, once the rest is taken (never so much that
    /// the rest cannot hold one body of `ingest.max_body_bytes`).
    pub reserved_share: f64,
    /// A request body must arrive at this many bytes a second, judged over
    /// every 5 s; 0 turns the check off.
    pub min_body_rate_bytes: u64,
    /// A request body must arrive whole within this.
    pub body_timeout_secs: u64,
    /// A request's headers must arrive within this of their first byte (a
    /// new connection's first request: of its opening).
    pub header_timeout_secs: u64,
    /// A connection with no request in flight, or whose peer stopped
    /// reading an answer, is closed after this.
    pub idle_timeout_secs: u64,
    /// Connections open at once from one IP address, per port (loopback
    /// included); 0: no cap.
    pub max_connections_per_peer: usize,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            reserved_share: 0.25,
            min_body_rate_bytes: 16 << 10,
            body_timeout_secs: 30,
            header_timeout_secs: 10,
            idle_timeout_secs: 60,
            max_connections_per_peer: 64,
        }
    }
}

impl AdmissionConfig {
    /// The first key out of range, and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(0.0..=0.75).contains(&self.reserved_share) {
            return Err((
                "admission.reserved_share",
                format!("must be from 0 to 0.75, got {}", self.reserved_share),
            ));
        }
        for (key, value, high) in [
            ("admission.body_timeout_secs", self.body_timeout_secs, 3600),
            (
                "admission.header_timeout_secs",
                self.header_timeout_secs,
                600,
            ),
            ("admission.idle_timeout_secs", self.idle_timeout_secs, 3600),
        ] {
            if !(1..=high).contains(&value) {
                return Err((key, format!("must be from 1 to {high}, got {value}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    #[test]
    fn admission_keys_are_checked() {
        for (text, key) in [
            (
                "[admission]\nreserved_share = 0.9\n",
                "admission.reserved_share",
            ),
            (
                "[admission]\nheader_timeout_secs = 0\n",
                "admission.header_timeout_secs",
            ),
            (
                "[admission]\nidle_timeout_secs = 7200\n",
                "admission.idle_timeout_secs",
            ),
            (
                "[admission]\nbody_timeout_secs = 0\n",
                "admission.body_timeout_secs",
            ),
            (
                "[admission]\nmax_conections_per_peer = 3\n",
                "max_conections_per_peer",
            ),
        ] {
            let err = Config::parse(text, Path::new("x.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let c = Config::parse(
            "[admission]\nmin_body_rate_bytes = 0\nmax_connections_per_peer = 0\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(c.admission.min_body_rate_bytes, 0);
        assert_eq!(c.admission.max_connections_per_peer, 0);
        assert_eq!(c.admission.idle_timeout_secs, 60);
    }
}
