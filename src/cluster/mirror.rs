//! The detect role's copy of the shared store: its data directory holds
//! exactly the shared store's live parts, day by day, so that everything
//! that reads a data directory (sweeps, rollups, seals, the dashboard, MCP)
//! works on it unchanged.
//!
//! A pull reads each day as the shared store has it ([`sealed::read_day`]),
//! downloads the live parts the copy lacks (to temporary names, fsynced),
//! and commits them with the parts the copy has that are no longer live
//! (sealed away, or a day retention removed): one commit per day, so a
//! reader sees a day's old set or its new one, as with any commit. A copy
//! never compacts (its parts are the shared store's, name for name).
//!
//! What the copy's node does to the shared store while it holds the lease
//! (seals published, upkeep) is [`super::holder`]'s.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::client::Remote;
use super::error::ClusterError;
use super::holder;
use super::keys::{day_dir, days};
use super::sealed::{self, Day};
use crate::store::hooks::{self, Pulled, Upstream};
use crate::store::{Layout, SealOptions, SealReport, StoreError};

/// The live part names of a day in the copy.
pub(super) fn local_live(layout: &Layout, day: i32) -> Result<BTreeSet<String>, ClusterError> {
    Ok(layout
        .parts(day)?
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .collect())
}

/// Make the copy's day `day` the shared store's `remote_day`.
pub fn sync_day(
    remote: &Remote,
    layout: &Layout,
    day: i32,
    remote_day: &Day,
) -> Result<(usize, u64, usize), ClusterError> {
    let have = local_live(layout, day)?;
    let want: BTreeSet<String> = remote_day.live.iter().cloned().collect();
    let fetch: Vec<&String> = want.difference(&have).collect();
    let drop: Vec<&String> = have.difference(&want).collect();
    if fetch.is_empty() && drop.is_empty() {
        return Ok((0, 0, 0));
    }
    let dir = layout.day_dir(day);
    std::fs::create_dir_all(&dir)
        .map_err(|e| ClusterError::file(format!("creating {}", dir.display()), e))?;
    let mut bytes = 0;
    let mut written = Vec::new();
    let result = (|| {
        for name in &fetch {
            let tmp = dir.join(format!(".{name}.tmp"));
            written.push(tmp.clone());
            bytes += Remote::block(remote.download(&format!("{}/{name}", day_dir(day)), &tmp))?;
        }
        let fetched: Vec<_> = written
            .iter()
            .cloned()
            .zip(fetch.iter().map(|n| n.to_string()))
            .collect();
        let dropped: Vec<String> = drop.iter().map(|n| n.to_string()).collect();
        Ok(hooks::adopt(layout, day, &fetched, &dropped)?)
    })();
    if let Err(e) = result {
        for p in &written {
            let _ = std::fs::remove_file(p);
        }
        return Err(e);
    }
    Ok((fetch.len(), bytes, drop.len()))
}

/// Bring the whole copy up to the shared store; what it did, and the days
/// it changed.
pub fn pull(remote: &Remote, layout: &Layout) -> Result<(Pulled, Vec<i32>), ClusterError> {
    let there = Remote::block(days(remote))?;
    let mut report = Pulled {
        days: there.len(),
        ..Pulled::default()
    };
    let there_set: BTreeSet<i32> = there.iter().copied().collect();
    let mut changed = Vec::new();
    // Days the shared store no longer holds (its retention removed them)
    // are emptied too.
    let gone: Vec<i32> = layout
        .days()?
        .into_iter()
        .filter(|d| !there_set.contains(d))
        .collect();
    for day in there.iter().copied().chain(gone) {
        let d = if there_set.contains(&day) {
            Remote::block(sealed::read_day(remote, day))?
        } else {
            Day::default()
        };
        let (fetched, bytes, dropped) = sync_day(remote, layout, day, &d)?;
        report.fetched += fetched;
        report.bytes += bytes;
        report.dropped += dropped;
        if fetched + dropped > 0 {
            report.changed += 1;
            changed.push(day);
        }
    }
    Ok((report, changed))
}

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

    fn pull(&self, layout: &Layout) -> Result<(Pulled, Vec<i32>), StoreError> {
        Ok(pull(&self.remote, layout)?)
    }

    fn may_seal(&self) -> bool {
        Mirror::may_seal(self)
    }

    fn seal(
        &self,
        layout: &Layout,
        day: i32,
        opts: &SealOptions,
    ) -> Result<Option<SealReport>, StoreError> {
        Ok(holder::seal(layout, self, day, opts)?)
    }

    fn upkeep(&self, grace: Duration) -> Result<usize, StoreError> {
        Ok(holder::upkeep(self, grace)?)
    }
}
