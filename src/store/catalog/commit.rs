//! Making a change to the Parquet files atomic: a flush, a compaction or a
//! retention pass writes new parts under temporary names, then records an
//! intent (renames, parts replaced, WAL segments covered, rollup days to
//! redo), then applies it: the renames, then each day's manifest replaced
//! by the new part set with the replaced parts retired in it (not deleted:
//! [`crate::store::catalog::retire`] deletes them once no reader can hold them). Recovery
//! re-applies an intent found on disk; a change with no intent on disk never
//! happened, and its temporary files are removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::catalog::handle::Catalog;
use crate::store::catalog::layout::Layout;
use crate::store::{
    catalog::dirty, catalog::manifest, catalog::retire, catalog::rollup_set, fsutil, segments,
    StoreError,
};

/// One atomic change of the store's files.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Intent {
    /// (temporary, final) paths, relative to the data directory.
    pub renames: Vec<(String, String)>,
    /// Files the change replaces: parts are retired, other files deleted.
    pub deletes: Vec<String>,
    /// WAL segments this change makes redundant (numbered up to this).
    pub wal_upto: Option<u64>,
    /// Days whose rollup rows must be recomputed (recorded as dirty).
    pub rollup_days: Vec<i32>,
    /// Parts shipped to the shared store before the WAL segments go:
    /// (final local path, name on the shared store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uploads: Vec<(String, String)>,
    /// The shared store's address the uploads go to (`s3://…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ship_to: Option<String>,
}

/// Record the intent durably, then apply it. An earlier intent still on
/// disk (its apply failed) is finished first, never overwritten.
pub fn commit(catalog: &Catalog, intent: &Intent) -> Result<(), StoreError> {
    // Commits read and replace the one intent file and the manifests: one
    // at a time, whichever thread makes them.
    let _one = catalog.exclusive();
    let layout = catalog.layout();
    let durable = finish_pending(catalog).and_then(|_| {
        let path = layout.intent();
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec(intent)
            .map_err(|e| StoreError::data("encoding the commit intent", e))?;
        fsutil::replace_file(&path, &tmp, &body)
    });
    if let Err(e) = durable {
        // Not committed: its temporary files would only be left behind
        // (a retry writes its own).
        for (tmp, _) in &intent.renames {
            let _ = fs::remove_file(layout.absolute(tmp));
        }
        return Err(e);
    }
    apply(catalog, intent)
}

/// Finish the commit a failure left on disk if it covers the WAL up to
/// `wal_upto` (a flush whose upload failed: its parts hold those spans
/// already, so writing them again would store them twice). `false` when
/// there is none such.
pub fn finish_covering(catalog: &Catalog, wal_upto: u64) -> Result<bool, StoreError> {
    let _one = catalog.exclusive();
    let path = catalog.layout().intent();
    let intent: Intent = match fs::read(&path) {
        Ok(body) => serde_json::from_slice(&body)
            .map_err(|e| StoreError::data(format!("reading {}", path.display()), e))?,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
    };
    if intent.wal_upto.is_none_or(|upto| upto < wal_upto) {
        return Ok(false);
    }
    apply(catalog, &intent)?;
    Ok(true)
}

/// The moments of an apply a test can watch (`apply_observed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// New parts renamed into place, not yet named by their day's manifest.
    Renamed,
    /// The manifests name the new set and retire the replaced parts, which
    /// stay on disk until reclaimed.
    Published,
    /// The parts to ship are on the shared store (the WAL segments they
    /// cover not yet deleted); only for an intent that ships.
    Shipped,
    /// The intent is done (and gone from disk).
    Done,
}

/// Ship the intent's parts to the shared store ([`crate::store::hooks::Shipper`]),
/// each unless it is there already with its size (an apply repeated after
/// a crash).
fn ship(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    let to = intent.ship_to.as_deref().unwrap_or("?");
    let Some(shipper) = layout.ship().filter(|r| r.url() == to) else {
        return Err(StoreError::data(
            format!("finishing the commit in {}", layout.intent().display()),
            format!(
                "it ships parts to {to}, but this process has {}; start it again with \
                 --store {to} (the WAL keeps the spans until they are shipped)",
                layout
                    .ship()
                    .map_or("no --store".to_string(), |r| format!("--store {}", r.url()))
            ),
        ));
    };
    for (local, name) in &intent.uploads {
        let path = layout.absolute(local);
        let size = fs::metadata(&path)
            .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?
            .len();
        crate::faults::check("ship").map_err(|e| StoreError::io(format!("shipping {name}"), e))?;
        shipper.ship(&path, name, size)?;
    }
    Ok(())
}

/// Apply an intent; every step can be repeated, so a crash mid-way is
/// finished by recovery.
pub fn apply(catalog: &Catalog, intent: &Intent) -> Result<(), StoreError> {
    apply_observed(catalog, intent, &mut |_| {})
}

/// The day directory and file name of a span part path, `None` for any
/// other file (rollups, summaries): only parts go through manifests.
fn part_of(layout: &Layout, path: &Path) -> Option<(PathBuf, String)> {
    let dir = path.parent()?;
    let name = path.file_name()?.to_str()?;
    (dir.parent()? == layout.spans_dir() && manifest::is_part_name(name))
        .then(|| (dir.to_path_buf(), name.to_string()))
}

/// `apply`, calling `on` after each step. The order is what keeps readers
/// right: (1) every day touched gets a manifest (from its listing, for a day
/// written before manifests) so new files stay invisible; (2) renames;
/// (3) each day's manifest is replaced by the new set, the parts it drops
/// retired in it, in one rename, and the retirement is noted
/// ([`retire::retired`]); (4) files that are not parts are deleted; (5) a
/// day left with no parts and nothing retired loses its manifest and
/// directory (one with retired parts, once they are reclaimed).
pub fn apply_observed(
    catalog: &Catalog,
    intent: &Intent,
    on: &mut dyn FnMut(Step),
) -> Result<(), StoreError> {
    let layout = catalog.layout();
    // Per day directory: the parts this change adds and removes.
    let mut days = DayChanges::new();
    let mut others = Vec::new();
    for (_, to) in &intent.renames {
        if let Some((dir, name)) = part_of(layout, &layout.absolute(to)) {
            days.entry(dir).or_default().0.insert(name);
        }
    }
    for rel in &intent.deletes {
        match part_of(layout, &layout.absolute(rel)) {
            Some((dir, name)) => {
                days.entry(dir).or_default().1.insert(name);
            }
            None => others.push(layout.absolute(rel)),
        }
    }
    for (dir, (added, _)) in &days {
        if dir.is_dir() && manifest::read_bytes(dir)?.is_none() {
            let listed = manifest::list_dir(dir)?;
            manifest::write(
                dir,
                listed.into_iter().filter(|n| !added.contains(n)).collect(),
            )?;
        }
    }
    rename_into_place(layout, intent)?;
    on(Step::Renamed);
    let emptied = publish_manifests(catalog, &days)?;
    on(Step::Published);
    for p in &others {
        match fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(format!("removing {}", p.display()), e)),
        }
        if let Some(d) = p.parent().filter(|d| d.exists()) {
            fsutil::sync_dir(d)?;
        }
    }
    // A day with no parts left (retention) and none retired loses its
    // manifest, then its directory.
    for d in &emptied {
        manifest::remove(d)?;
        if fs::read_dir(d).is_ok_and(|mut e| e.next().is_none()) {
            let _ = fs::remove_dir(d);
        }
    }
    if !intent.uploads.is_empty() {
        ship(layout, intent)?;
        on(Step::Shipped);
        crate::faults::kill_point("ship_before_wal_delete");
    }
    if let Some(upto) = intent.wal_upto {
        segments::delete_upto(&layout.wal_dir(), upto)?;
    }
    if !intent.rollup_days.is_empty() {
        dirty::mark_dirty(layout, &intent.rollup_days)?;
    }
    let path = layout.intent();
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(format!("removing {}", path.display()), e)),
    }
    fsutil::sync_dir(layout.root())?;
    on(Step::Done);
    Ok(())
}

/// Rename an intent's files into place (a rename an interrupted apply made
/// already is passed over), then make their directories durable.
fn rename_into_place(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    let mut dirs = BTreeSet::new();
    for (from, to) in &intent.renames {
        let (from, to) = (layout.absolute(from), layout.absolute(to));
        match fs::rename(&from, &to) {
            Ok(()) => {}
            // Already renamed by an earlier, interrupted apply.
            Err(e) if e.kind() == ErrorKind::NotFound && to.exists() => {}
            Err(e) => {
                return Err(StoreError::io(
                    format!("renaming {} into place", from.display()),
                    e,
                ))
            }
        }
        if let Some(d) = to.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in &dirs {
        fsutil::sync_dir(d)?;
    }
    Ok(())
}

/// The parts each day directory gains and loses.
type DayChanges = BTreeMap<PathBuf, (BTreeSet<String>, BTreeSet<String>)>;

/// Write each changed day's manifest: the parts added, the removed ones
/// retired (and handed to [`retire`]); returns the days left with no part
/// and nothing retired.
fn publish_manifests(catalog: &Catalog, days: &DayChanges) -> Result<Vec<PathBuf>, StoreError> {
    let mut emptied = Vec::new();
    let mut retired = Vec::new();
    let at = retire::now_ms();
    for (dir, (added, removed)) in days {
        let Some(old) = manifest::read(dir)? else {
            continue;
        };
        let parts: Vec<String> = old
            .parts
            .iter()
            .filter(|n| !removed.contains(*n))
            .chain(added.iter().filter(|n| !removed.contains(*n)))
            .cloned()
            .collect();
        // A replaced part still on disk is retired once (an apply repeated
        // after a failure or a crash finds it retired already, and notes it
        // again: the failed one may not have got that far).
        let mut gone = old.retired.clone();
        for name in removed {
            match gone.iter().find(|r| &r.name == name) {
                Some(r) => retired.push((dir.join(name), r.at_ms)),
                None if dir.join(name).exists() => {
                    gone.push(manifest::Retired {
                        name: name.clone(),
                        at_ms: at,
                    });
                    retired.push((dir.join(name), at));
                }
                None => {}
            }
        }
        let new = manifest::Manifest {
            version: old.version.max(1),
            parts,
            retired: gone,
        };
        if new.parts.is_empty() && new.retired.is_empty() {
            emptied.push(dir.clone());
        }
        let mut sorted = new.clone();
        sorted.parts.sort();
        sorted.parts.dedup();
        if sorted != old {
            manifest::write_manifest(dir, sorted)?;
        }
    }
    if !retired.is_empty() {
        retire::retired(catalog, retired);
    }
    Ok(emptied)
}

/// Apply the intent on disk, if any; true when there was one.
fn finish_pending(catalog: &Catalog) -> Result<bool, StoreError> {
    let path = catalog.layout().intent();
    match fs::read(&path) {
        Ok(body) => {
            let intent: Intent = serde_json::from_slice(&body)
                .map_err(|e| StoreError::data(format!("reading {}", path.display()), e))?;
            apply(catalog, &intent)?;
            Ok(true)
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
    }
}

/// Finish an interrupted change, remove temporary files of changes that
/// never committed, make every day's manifest agree with its files, and
/// note the retired files a crash left for reclaiming.
pub fn recover(catalog: &Catalog) -> Result<bool, StoreError> {
    let _one = catalog.exclusive();
    let layout = catalog.layout();
    let path = layout.intent();
    let finished = finish_pending(catalog)?;
    let _ = fs::remove_file(path.with_extension("json.tmp"));
    for day in layout.days()? {
        let dir = layout.day_dir(day);
        if let Ok(entries) = fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(".tmp") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        let retired = manifest::repair(&dir)?;
        retire::found(catalog, &dir, &retired);
    }
    rollup_set::recover(catalog)?;
    Ok(finished)
}
