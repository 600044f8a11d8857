//! What the detect lease holder writes to the shared store, on its copy's
//! flusher thread: a day's seal published (outputs uploaded, then the
//! day's `_sealed.json` replaced over the version read before the seal,
//! then the copy commits), and the upkeep (what seals replaced deleted once
//! the grace passed, days past the retention removed). Nothing here runs
//! on a node that does not hold the lease.

use std::collections::BTreeSet;
use std::time::Duration;

use super::client::Remote;
use super::error::ClusterError;
use super::keys::{day_dir, days, file_name};
use super::lease::Lease;
use super::ledger;
use super::sync::{local_live, sync_day};
use crate::store::hooks;
use crate::store::{Catalog, SealOptions, SealReport};

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
    catalog: &Catalog,
    remote: &Remote,
    lease: Option<&Lease>,
    day: i32,
    opts: &SealOptions,
) -> Result<Option<SealReport>, ClusterError> {
    let Some(lease) = lease else {
        return Ok(None);
    };
    let Some(generation) = lease.held() else {
        return Ok(None);
    };
    let read = Remote::block(ledger::read_day(remote, day))?;
    let want: BTreeSet<String> = read.live.iter().cloned().collect();
    let layout = catalog.layout();
    if local_live(layout, day)? != want {
        sync_day(remote, catalog, day, &read)?;
        return Ok(None);
    }
    let dir = day_dir(day);
    crate::store::seal_compact_publishing(catalog, day, opts, &mut |outputs, sources| {
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
            Remote::block(remote.upload(&format!("{dir}/{name}"), &layout.absolute(tmp)))?;
            published.push(name);
        }
        if lease.held() != Some(generation) {
            return Err(lost().into());
        }
        let now_ms = hooks::now_ms().max(0) as u64;
        if !Remote::block(ledger::publish(
            remote,
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
pub fn upkeep(
    remote: &Remote,
    lease: Option<&Lease>,
    retention_days: Option<u32>,
    grace: Duration,
) -> Result<usize, ClusterError> {
    let Some(lease) = lease else {
        return Ok(0);
    };
    if lease.held().is_none() {
        return Ok(0);
    }
    let now_ms = hooks::now_ms().max(0) as u64;
    let mut deleted = 0;
    let today = (now_ms / 86_400_000) as i32;
    for day in Remote::block(days(remote))? {
        if lease.held().is_none() {
            break;
        }
        let expired = retention_days.is_some_and(|keep| keep > 0 && day < today - keep as i32);
        if expired {
            let dir = day_dir(day);
            // Parts first, the document last: a reader between the two
            // sees fewer parts, never a replaced one come back.
            let mut objects = Remote::block(remote.list(&dir))?;
            objects.sort_by_key(|o| o.name.ends_with(ledger::FILE));
            let n = objects.len();
            for o in objects {
                Remote::block(remote.delete(&o.name))?;
            }
            deleted += n;
            tracing::info!(
                day = %crate::model::day_to_string(day),
                objects = n,
                retention_days = retention_days.unwrap_or(0),
                "removed a day past the retention from the shared store (by the clock; serve --retention-days 0 keeps every day)"
            );
            continue;
        }
        deleted += Remote::block(ledger::reclaim(
            remote,
            day,
            grace.as_millis() as u64,
            now_ms,
        ))?;
    }
    Ok(deleted)
}
