//! A day's ledger, `_sealed.json` on the shared store (what the seals of the
//! day published: their outputs, and the parts they replaced), and the
//! day's live parts.
//!
//! Ingest nodes only add parts to a day (`part-<node>-…`). The lease holder
//! seals a day: it uploads the seal's outputs (`…-s.parquet`), then replaces
//! `_sealed.json` (a conditional put over the version it read) naming them
//! as the day's outputs and every part they replace. So a day's live set is
//!
//! - its listed node parts, less those `_sealed.json` names as replaced;
//! - its listed seal outputs that `_sealed.json` names as outputs (one not
//!   named is a seal still uploading, or one a crash left: never live).
//!
//! Replaced parts are deleted by the holder once `store.retired_grace_secs`
//! passed (readers elsewhere may still hold the list); their names stay in
//! the document, marked deleted, for as long as the day is kept, so a part
//! an ingest node uploads again after a crash (it could not know its first
//! upload landed) is not live, and is deleted again. A glob over the day
//! reads replaced parts twice until they are deleted.

use std::collections::BTreeSet;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::client::{Put, Remote, Version};
use super::error::ClusterError;
use super::keys::day_dir;
use crate::store::hooks::{is_part_name, is_seal_output};

pub const FILE: &str = "_sealed.json";

/// A day's ledger (`_sealed.json`): what the last seal of the day
/// published, and every part the day's seals replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub version: u32,
    /// The lease generation of the seal that wrote it.
    pub generation: u64,
    /// The seal's outputs: the day's only live seal outputs.
    pub outputs: Vec<String>,
    /// Parts the seals replaced, with when (ms since the epoch), still on
    /// the store until the grace passed.
    pub replaced: Vec<Replaced>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    pub name: String,
    pub at_ms: u64,
    /// Deleted after the grace; the name stays (until the day expires) so
    /// that a node re-uploading it after a crash does not make it live.
    #[serde(default)]
    pub deleted: bool,
}

/// A day as the shared store holds it.
#[derive(Debug, Clone, Default)]
pub struct Day {
    /// The live parts' names (file names, no directory), sorted.
    pub live: Vec<String>,
    /// Every part listed, live or not, with its size.
    pub listed: Vec<(String, u64)>,
    pub ledger: Ledger,
    /// The version of `_sealed.json` read (`None`: there is none yet).
    pub at: Option<Version>,
}

/// Read a day: its listing and its `_sealed.json`. The document is read
/// first: a seal publishing meanwhile can only add outputs it names, which
/// this listing then either shows (and the old document does not name:
/// not live) or not.
pub async fn read_day(remote: &Remote, day: i32) -> Result<Day, ClusterError> {
    let dir = day_dir(day);
    let (ledger, at) = match remote.get(&format!("{dir}/{FILE}")).await? {
        Some((bytes, v)) => {
            let s: Ledger = serde_json::from_slice(&bytes).map_err(|e| {
                ClusterError::document(format!("reading {dir}/{FILE} ({})", remote.url()), e)
            })?;
            (s, Some(v))
        }
        None => (Ledger::default(), None),
    };
    let listed: Vec<(String, u64)> = remote
        .list(&dir)
        .await?
        .into_iter()
        .filter_map(|o| {
            let name = o.name.rsplit('/').next()?.to_string();
            is_part_name(&name).then_some((name, o.size))
        })
        .collect();
    let replaced: BTreeSet<&str> = ledger.replaced.iter().map(|r| r.name.as_str()).collect();
    let outputs: BTreeSet<&str> = ledger.outputs.iter().map(String::as_str).collect();
    let mut live: Vec<String> = listed
        .iter()
        .map(|(n, _)| n)
        .filter(|n| {
            if is_seal_output(std::path::Path::new(n)) {
                outputs.contains(n.as_str())
            } else {
                !replaced.contains(n.as_str())
            }
        })
        .cloned()
        .collect();
    live.sort();
    Ok(Day {
        live,
        listed,
        ledger,
        at,
    })
}

/// Publish a seal of `day`: `outputs` (uploaded already) replace `inputs`
/// (the live set the seal read). `Ok(false)`: the day changed on the store
/// meanwhile (another seal published), and nothing was written.
pub async fn publish(
    remote: &Remote,
    day: i32,
    read: &Day,
    inputs: &[String],
    outputs: &[String],
    generation: u64,
    now_ms: u64,
) -> Result<bool, ClusterError> {
    let mut next = read.ledger.clone();
    next.version = 1;
    next.generation = generation;
    let fresh: BTreeSet<&str> = outputs.iter().map(String::as_str).collect();
    for name in inputs {
        if !fresh.contains(name.as_str()) && !next.replaced.iter().any(|r| &r.name == name) {
            next.replaced.push(Replaced {
                name: name.clone(),
                at_ms: now_ms,
                deleted: false,
            });
        }
    }
    next.outputs = outputs.to_vec();
    write(remote, day, &next, read.at.clone()).await
}

/// Replace the day's document if it is still at `at`.
pub async fn write(
    remote: &Remote,
    day: i32,
    doc: &Ledger,
    at: Option<Version>,
) -> Result<bool, ClusterError> {
    let body = serde_json::to_vec_pretty(doc)
        .map_err(|e| ClusterError::document("encoding _sealed.json", e))?;
    let name = format!("{}/{FILE}", day_dir(day));
    Ok(matches!(
        remote.put_if(&name, Bytes::from(body), at).await?,
        Put::Done(_)
    ))
}

/// Delete what seals replaced more than `grace_ms` ago, and seal outputs no
/// document names that old (a crashed seal's), then drop the deleted ones
/// from the document. The number of objects deleted.
pub async fn reclaim(
    remote: &Remote,
    day: i32,
    grace_ms: u64,
    now_ms: u64,
) -> Result<usize, ClusterError> {
    let read = read_day(remote, day).await?;
    let dir = day_dir(day);
    let old = |at_ms: u64| now_ms.saturating_sub(at_ms) >= grace_ms;
    // Replaced past the grace, or deleted already and listed again (a node
    // that crashed before it knew its upload had landed uploads it again).
    let listed: BTreeSet<&str> = read.listed.iter().map(|(n, _)| n.as_str()).collect();
    let gone: Vec<&Replaced> = read
        .ledger
        .replaced
        .iter()
        .filter(|r| old(r.at_ms) && (!r.deleted || listed.contains(r.name.as_str())))
        .collect();
    // A seal's outputs carry its start (ns) in their name.
    let orphans: Vec<&String> = read
        .listed
        .iter()
        .map(|(n, _)| n)
        .filter(|n| {
            is_seal_output(std::path::Path::new(n.as_str()))
                && !read.ledger.outputs.contains(n)
                && !read.ledger.replaced.iter().any(|r| &r.name == *n)
                && seal_stamp_ms(n).is_some_and(old)
        })
        .collect();
    for n in &orphans {
        remote.delete(&format!("{dir}/{n}")).await?;
    }
    if gone.is_empty() {
        return Ok(orphans.len());
    }
    for r in &gone {
        remote.delete(&format!("{dir}/{}", r.name)).await?;
    }
    let mut next = read.ledger.clone();
    for r in next.replaced.iter_mut().filter(|r| old(r.at_ms)) {
        r.deleted = true;
    }
    // Lost to a concurrent publish: the next reclaim marks them (deleting
    // them again is no error).
    write(remote, day, &next, read.at).await?;
    Ok(gone.len() + orphans.len())
}

/// When a seal output was begun, from its name (`part-<ns>-<n>-s.parquet`).
fn seal_stamp_ms(name: &str) -> Option<u64> {
    let ns: u64 = name
        .strip_prefix("part-")?
        .split('-')
        .next()?
        .parse()
        .ok()?;
    Some(ns / 1_000_000)
}
