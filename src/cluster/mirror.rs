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

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::client::Remote;
use super::error::ClusterError;
use super::keys::{day_dir, days, file_name};
use super::sealed::{self, Day};
use crate::store::hooks::{self, Pulled, Upstream};
use crate::store::{Layout, SealOptions, SealReport, StoreError};

/// The live part names of a day in the copy.
fn local_live(layout: &Layout, day: i32) -> Result<BTreeSet<String>, ClusterError> {
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

/// The file names of relative paths.
fn names(paths: &[String]) -> Vec<String> {
    paths.iter().filter_map(|p| file_name(p)).collect()
}

/// Seal a day of the copy and publish the seal on the shared store, when
/// this node holds the lease: the outputs are uploaded, then the day's
/// `_sealed.json` is replaced over the version read before the seal began,
/// then the copy commits. `None` when not sealed now: not the holder, or
/// the copy was behind on this day (it is brought up to date, and sealed at
/// a later pass).
pub fn seal(
    layout: &Layout,
    m: &Mirror,
    day: i32,
    opts: &SealOptions,
) -> Result<Option<SealReport>, ClusterError> {
    let Some(lease) = &m.lease else {
        return Ok(None);
    };
    let Some(generation) = lease.held() else {
        return Ok(None);
    };
    let read = Remote::block(sealed::read_day(&m.remote, day))?;
    let want: BTreeSet<String> = read.live.iter().cloned().collect();
    if local_live(layout, day)? != want {
        sync_day(&m.remote, layout, day, &read)?;
        return Ok(None);
    }
    let dir = day_dir(day);
    crate::store::seal_compact_publishing(layout, day, opts, &mut |outputs, sources| {
        let lost = || ClusterError::Dropped {
            context: format!("publishing the seal of {dir}"),
            reason: "this node no longer holds the detect lease; the seal is dropped",
        };
        if lease.held() != Some(generation) {
            return Err(lost().into());
        }
        let mut published = Vec::new();
        for (tmp, fin) in outputs {
            let name = file_name(fin).unwrap_or_default();
            Remote::block(
                m.remote
                    .upload(&format!("{dir}/{name}"), &layout.absolute(tmp)),
            )?;
            published.push(name);
        }
        if lease.held() != Some(generation) {
            return Err(lost().into());
        }
        let now_ms = hooks::now_ms().max(0) as u64;
        if !Remote::block(sealed::publish(
            &m.remote,
            day,
            &read,
            &names(sources),
            &published,
            generation,
            now_ms,
        ))? {
            return Err(ClusterError::Dropped {
                context: format!("publishing the seal of {dir}"),
                reason: "the day changed on the shared store while it was sealed; the seal is \
                         dropped and the day sealed again from its new parts",
            }
            .into());
        }
        Ok(())
    })
    .map_err(ClusterError::from)
}

/// The holder's upkeep of the shared store: what seals replaced deleted
/// once `grace` passed (and what crashed seals left), and days past the
/// retention removed. The number of objects deleted.
pub fn upkeep(m: &Mirror, grace: Duration) -> Result<usize, ClusterError> {
    let Some(lease) = &m.lease else {
        return Ok(0);
    };
    if lease.held().is_none() {
        return Ok(0);
    }
    let now_ms = hooks::now_ms().max(0) as u64;
    let mut deleted = 0;
    let today = (now_ms / 86_400_000) as i32;
    for day in Remote::block(days(&m.remote))? {
        if lease.held().is_none() {
            break;
        }
        let expired = m
            .retention_days
            .is_some_and(|keep| keep > 0 && day < today - keep as i32);
        if expired {
            let dir = day_dir(day);
            // Parts first, the document last: a reader between the two
            // sees fewer parts, never a replaced one come back.
            let mut objects = Remote::block(m.remote.list(&dir))?;
            objects.sort_by_key(|o| o.name.ends_with(sealed::FILE));
            let n = objects.len();
            for o in objects {
                Remote::block(m.remote.delete(&o.name))?;
            }
            deleted += n;
            tracing::info!(
                day = %crate::model::day_to_string(day),
                objects = n,
                retention_days = m.retention_days.unwrap_or(0),
                "removed a day past the retention from the shared store (by the clock; serve --retention-days 0 keeps every day)"
            );
            continue;
        }
        deleted += Remote::block(sealed::reclaim(
            &m.remote,
            day,
            grace.as_millis() as u64,
            now_ms,
        ))?;
    }
    Ok(deleted)
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
        Ok(seal(layout, self, day, opts)?)
    }

    fn upkeep(&self, grace: Duration) -> Result<usize, StoreError> {
        Ok(upkeep(self, grace)?)
    }
}
