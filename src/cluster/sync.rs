//! A day of the detect role's copy made what the shared store has: the
//! live parts the copy lacks downloaded (to temporary names, fsynced) and
//! committed with the parts it has that are no longer live, one commit per
//! day; and the whole copy brought up to the shared store (a pull). Below
//! both the copy's pull (`mirror`) and the holder's seal (`holder`).

use std::collections::BTreeSet;

use super::client::Remote;
use super::error::ClusterError;
use super::keys::{day_dir, days};
use super::ledger::{self, Day};
use crate::store::hooks::{self, Pulled};
use crate::store::{Catalog, Layout};

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
    catalog: &Catalog,
    day: i32,
    remote_day: &Day,
) -> Result<(usize, u64, usize), ClusterError> {
    let layout = catalog.layout();
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
        Ok(hooks::adopt(catalog, day, &fetched, &dropped)?)
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
pub fn pull(remote: &Remote, catalog: &Catalog) -> Result<(Pulled, Vec<i32>), ClusterError> {
    let layout = catalog.layout();
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
            Remote::block(ledger::read_day(remote, day))?
        } else {
            Day::default()
        };
        let (fetched, bytes, dropped) = sync_day(remote, catalog, day, &d)?;
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
