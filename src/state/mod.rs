//! `state.sqlite`, the one file the sweep, the alert sender, the dashboard,
//! the MCP server and `import --follow` keep their state in: its schema (every
//! table, one place: [`schema`]), its version (`PRAGMA user_version`) and
//! the steps from every earlier version ([`migrate`]), and the one way to
//! open it ([`open`]). The rows are read and written by their owners —
//! `signal` (signals, history, sweeps, per-day results), `incident`,
//! `alert` (the outbox and what was told), `import` (followed files) —
//! against the tables declared here; this module knows none of their types.

mod migrate;
pub mod schema;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

pub use migrate::{migrate, VERSION};

/// Why `state.sqlite` could not be opened or brought to this build's schema.
/// The message names SQLite's too, as this crate's other state errors do:
/// the dashboard and MCP show errors by `to_string`, without the chain.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("state file {}: cannot open it: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("state file {}: cannot bring its schema from version {from} to {to}: {source}", path.display())]
    Migrate {
        path: PathBuf,
        from: i64,
        to: i64,
        #[source]
        source: rusqlite::Error,
    },
}

impl StateFileError {
    /// The SQLite error underneath, for callers that still speak
    /// `rusqlite::Result`.
    pub fn into_sqlite(self) -> rusqlite::Error {
        match self {
            StateFileError::Open { source, .. } | StateFileError::Migrate { source, .. } => source,
        }
    }
}

/// Open `state.sqlite` at `path` (created if missing): `busy` as SQLite's
/// busy timeout, WAL journaling, the schema brought to [`VERSION`].
pub fn open(path: &Path, busy: Duration) -> Result<Connection, StateFileError> {
    let opened = |source| StateFileError::Open {
        path: path.to_path_buf(),
        source,
    };
    let c = Connection::open(path).map_err(opened)?;
    c.busy_timeout(busy).map_err(opened)?;
    c.execute_batch("PRAGMA journal_mode=WAL;")
        .map_err(opened)?;
    migrate(&c).map_err(|(from, source)| StateFileError::Migrate {
        path: path.to_path_buf(),
        from,
        to: VERSION,
        source,
    })?;
    Ok(c)
}

/// A fresh in-memory state database at [`VERSION`] (tests).
pub fn open_in_memory() -> rusqlite::Result<Connection> {
    let c = Connection::open_in_memory()?;
    migrate(&c).map_err(|(_, e)| e)?;
    Ok(c)
}
