//! `[mcp]`: the bounds of the MCP server: over HTTP (`crate::mcp`'s
//! sessions) how many sessions live at once, how long an idle one lives,
//! how many requests are in flight at once; and the memory and time a
//! `query` worker may use.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A bound of `[mcp]` out of its range: the key (under `mcp.`) and why.
#[derive(Debug, thiserror::Error)]
#[error("mcp.{key}: {why}")]
pub struct McpBoundError {
    pub key: &'static str,
    pub why: String,
}

/// `[mcp]` in the config file.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Sessions (2025-11-25 clients) live at once; an `initialize` past it
    /// is refused with a JSON-RPC error.
    pub max_sessions: usize,
    /// A session that sees no message for this long is closed (its client
    /// gets 404 and initializes again).
    pub session_idle_secs: u64,
    /// Requests (tool calls and the rest) in flight at once: every
    /// session's and the stateless ones together.
    pub max_calls_in_flight: usize,
    /// `query` runs in a worker process stopped past this resident memory.
    pub query_memory_mib: u64,
    /// ... or past this many seconds.
    pub query_timeout_secs: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            max_sessions: 256,
            session_idle_secs: 300,
            max_calls_in_flight: 128,
            query_memory_mib: 1024,
            query_timeout_secs: 10,
        }
    }
}

impl McpConfig {
    /// Why these bounds cannot be used, naming the key.
    pub fn validate(&self) -> Result<(), McpBoundError> {
        if !(1..=100_000).contains(&self.max_sessions) {
            return Err(McpBoundError {
                key: "max_sessions",
                why: format!("must be from 1 to 100000, got {}", self.max_sessions),
            });
        }
        if !(5..=86_400).contains(&self.session_idle_secs) {
            return Err(McpBoundError {
                key: "session_idle_secs",
                why: format!(
                    "must be from 5 to 86400 (a day), got {}",
                    self.session_idle_secs
                ),
            });
        }
        if !(1..=100_000).contains(&self.max_calls_in_flight) {
            return Err(McpBoundError {
                key: "max_calls_in_flight",
                why: format!("must be from 1 to 100000, got {}", self.max_calls_in_flight),
            });
        }
        if !(128..=65536).contains(&self.query_memory_mib) {
            return Err(McpBoundError {
                key: "query_memory_mib",
                why: format!(
                    "must be 128 to 65536 (a query worker needs ~100 MiB to start), got {}",
                    self.query_memory_mib
                ),
            });
        }
        if !(1..=3600).contains(&self.query_timeout_secs) {
            return Err(McpBoundError {
                key: "query_timeout_secs",
                why: format!("must be 1 to 3600, got {}", self.query_timeout_secs),
            });
        }
        Ok(())
    }

    pub fn session_idle(&self) -> Duration {
        Duration::from_secs(self.session_idle_secs)
    }
}
