//! The detect role's copy of the shared store: its data directory holds
//! exactly the shared store's live parts, day by day, so that everything
//! that reads a data directory (sweeps, rollups, seals, the dashboard, MCP)
//! works on it unchanged.
//!
//! A pull reads each day as the shared store has it ([`super::ledger::read_day`], in [`super::sync`]),
//! downloads the live parts the copy lacks (to temporary names, fsynced),
//! and commits them with the parts the copy has that are no longer live
//! (sealed away, or a day retention removed): one commit per day, so a
//! reader sees a day's old set or its new one, as with any commit. A copy
//! never compacts (its parts are the shared store's, name for name).
//!
//! What the copy's node does to the shared store while it holds the lease
//! (seals published, upkeep) is [`super::holder`]'s.

use std::sync::Arc;
use std::time::Duration;

use super::client::Remote;
use super::holder;
use super::sync::pull;
use crate::store::hooks::{Pulled, Upstream};
use crate::store::{Catalog, SealOptions, SealReport, StoreError};

/// A data directory kept as a copy of the shared store: the detect role's.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub remote: Remote,
    /// The detect lease this node keeps (`None`: a one-shot read, such as
    /// `sweep --store s3://…`, which never seals or trims the shared store).
    pub lease: Option<Arc<super::lease::Lease>>,
    /// How often the flusher pulls (and a sweep pulls first anyway).
    pub pull_every: Duration,
    /// Delete the shared store's days older than this (the holder does).
    pub retention_days: Option<u32>,
}

impl Mirror {
    /// Whether this copy's node seals and trims the shared store now: it
    /// holds the detect lease.
    pub fn may_seal(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.held().is_some())
    }
}

impl Upstream for Mirror {
    fn url(&self) -> &str {
        self.remote.url()
    }

    fn pull_every(&self) -> Duration {
        self.pull_every
    }

    fn pull(&self, catalog: &Catalog) -> Result<(Pulled, Vec<i32>), StoreError> {
        Ok(pull(&self.remote, catalog)?)
    }

    fn may_seal(&self) -> bool {
        Mirror::may_seal(self)
    }

    fn seal(
        &self,
        catalog: &Catalog,
        day: i32,
        opts: &SealOptions,
    ) -> Result<Option<SealReport>, StoreError> {
        Ok(holder::seal(
            catalog,
            &self.remote,
            self.lease.as_deref(),
            day,
            opts,
        )?)
    }

    fn upkeep(&self, grace: Duration) -> Result<usize, StoreError> {
        Ok(holder::upkeep(
            &self.remote,
            self.lease.as_deref(),
            self.retention_days,
            grace,
        )?)
    }
}
