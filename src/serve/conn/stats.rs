//! What the connections of each port did, for `/metrics`: open now, and
//! closed by the limits, by reason.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

use super::Port;

/// Why a connection was closed (or refused) by its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Past its peer's cap: answered and closed at once.
    PeerCap,
    /// A request's headers did not arrive in time.
    HeaderTimeout,
    /// No request in flight for the idle timeout.
    IdleTimeout,
    /// The peer stopped reading an answer for the idle timeout.
    WriteStall,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::PeerCap,
        Reason::HeaderTimeout,
        Reason::IdleTimeout,
        Reason::WriteStall,
    ];

    /// The `/metrics` label (and the log's).
    pub fn name(self) -> &'static str {
        match self {
            Reason::PeerCap => "peer_cap",
            Reason::HeaderTimeout => "header_timeout",
            Reason::IdleTimeout => "idle_timeout",
            Reason::WriteStall => "write_stall",
        }
    }
}

#[derive(Debug, Default)]
struct PortStats {
    open: AtomicU64,
    closed: [AtomicU64; 4],
    /// When a refusal was last logged (ms since `Connections::epoch`).
    warned_ms: AtomicU64,
}

/// The three ports' counts.
#[derive(Debug)]
pub struct Connections {
    ports: [PortStats; 3],
    epoch: Instant,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            ports: Default::default(),
            epoch: Instant::now(),
        }
    }
}

/// A refusal is logged at most this often per port.
const WARN_EVERY_MS: u64 = 60_000;

impl Connections {
    fn port(&self, p: Port) -> &PortStats {
        &self.ports[p as usize]
    }

    pub(super) fn opened(&self, p: Port) {
        self.port(p).open.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn dropped(&self, p: Port) {
        self.port(p).open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn closed(&self, p: Port, r: Reason) {
        self.port(p).closed[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a refusal on `p` should be logged now (the first, then one
    /// a minute).
    pub(super) fn warn_due(&self, p: Port) -> bool {
        let now = self.epoch.elapsed().as_millis() as u64 + WARN_EVERY_MS;
        let last = &self.port(p).warned_ms;
        let prev = last.load(Ordering::Relaxed);
        (prev == 0 || now >= prev + WARN_EVERY_MS)
            && last
                .compare_exchange(prev, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Connections open now on `p`.
    pub fn open(&self, p: Port) -> u64 {
        self.port(p).open.load(Ordering::Relaxed)
    }

    /// Connections `p` closed (or refused) for `r`.
    pub fn closed_for(&self, p: Port, r: Reason) -> u64 {
        self.port(p).closed[r as usize].load(Ordering::Relaxed)
    }
}
