//! Making a change to the Parquet files atomic: a flush, a compaction or a
//! retention pass writes new parts under temporary names, then records an
//! intent (renames, deletions, WAL segments covered, rollup days to redo),
//! then applies it, publishing the new part set in each day's manifest
//! between the renames and the deletions. Recovery re-applies an intent
//! found on disk; a change with no intent on disk never happened, and its
//! temporary files are removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::layout::Layout;
use super::{manifest, rollup, wal, StoreError};

/// One atomic change of the store's files.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Intent {
    /// (temporary, final) paths, relative to the data directory.
    pub renames: Vec<(String, String)>,
    /// Files the change replaces.
    pub deletes: Vec<String>,
    /// WAL segments this change makes redundant (numbered up to this).
    pub wal_upto: Option<u64>,
    /// Days whose rollup rows must be recomputed (recorded as dirty).
    pub rollup_days: Vec<i32>,
}

static COMMITS: Mutex<()> = Mutex::new(());

/// Record the intent durably, then apply it. An earlier intent still on
/// disk (its apply failed) is finished first, never overwritten.
pub fn commit(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    // Commits read and replace the one intent file and the manifests: one
    // at a time, whichever thread makes them.
    let _one = COMMITS.lock().unwrap_or_else(|e| e.into_inner());
    finish_pending(layout)?;
    let path = layout.intent();
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(intent)
        .map_err(|e| StoreError::data("encoding the commit intent", e))?;
    wal::replace_file(&path, &tmp, &body)?;
    apply(layout, intent)
}

/// The moments of an apply a test can watch (`apply_observed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// New parts renamed into place, not yet named by their day's manifest.
    Renamed,
    /// The manifests name the new set; the replaced parts are still on disk.
    Published,
    /// The replaced parts are deleted.
    Deleted,
}

/// Apply an intent; every step can be repeated, so a crash mid-way is
/// finished by recovery.
pub fn apply(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    apply_observed(layout, intent, &mut |_| {})
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
/// (3) each day's manifest is replaced by the new set; (4) deletions;
/// (5) a day left with no parts loses its manifest and directory.
pub fn apply_observed(
    layout: &Layout,
    intent: &Intent,
    on: &mut dyn FnMut(Step),
) -> Result<(), StoreError> {
    // Per day directory: the parts this change adds and removes.
    let mut days: BTreeMap<PathBuf, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (_, to) in &intent.renames {
        if let Some((dir, name)) = part_of(layout, &layout.absolute(to)) {
            days.entry(dir).or_default().0.insert(name);
        }
    }
    for rel in &intent.deletes {
        if let Some((dir, name)) = part_of(layout, &layout.absolute(rel)) {
            days.entry(dir).or_default().1.insert(name);
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
        wal::sync_dir(d)?;
    }
    on(Step::Renamed);
    let mut emptied = Vec::new();
    for (dir, (added, removed)) in &days {
        let Some(old) = manifest::read(dir)? else {
            continue;
        };
        let new: Vec<String> = old
            .parts
            .iter()
            .filter(|n| !removed.contains(*n))
            .chain(added.iter().filter(|n| !removed.contains(*n)))
            .cloned()
            .collect();
        if new.is_empty() {
            emptied.push(dir.clone());
        }
        let mut sorted = new.clone();
        sorted.sort();
        sorted.dedup();
        if sorted != old.parts {
            manifest::write(dir, sorted)?;
        }
    }
    on(Step::Published);
    for rel in &intent.deletes {
        let p = layout.absolute(rel);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(format!("removing {}", p.display()), e)),
        }
        if let Some(d) = p.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in &dirs {
        if d.exists() {
            wal::sync_dir(d)?;
        }
    }
    on(Step::Deleted);
    // A day with no parts left (retention) loses its manifest, then its directory.
    for d in &emptied {
        manifest::remove(d)?;
    }
    for d in dirs.iter().chain(&emptied) {
        if d.starts_with(layout.spans_dir())
            && fs::read_dir(d).is_ok_and(|mut e| e.next().is_none())
        {
            let _ = fs::remove_dir(d);
        }
    }
    if let Some(upto) = intent.wal_upto {
        wal::delete_upto(&layout.wal_dir(), upto)?;
    }
    if !intent.rollup_days.is_empty() {
        rollup::mark_dirty(layout, &intent.rollup_days)?;
    }
    let path = layout.intent();
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(format!("removing {}", path.display()), e)),
    }
    wal::sync_dir(layout.root())
}

/// Apply the intent on disk, if any; true when there was one.
fn finish_pending(layout: &Layout) -> Result<bool, StoreError> {
    let path = layout.intent();
    match fs::read(&path) {
        Ok(body) => {
            let intent: Intent = serde_json::from_slice(&body)
                .map_err(|e| StoreError::data(format!("reading {}", path.display()), e))?;
            apply(layout, &intent)?;
            Ok(true)
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
    }
}

/// Finish an interrupted change, remove temporary files of changes that
/// never committed, and make every day's manifest agree with its files.
pub fn recover(layout: &Layout) -> Result<bool, StoreError> {
    let _one = COMMITS.lock().unwrap_or_else(|e| e.into_inner());
    let path = layout.intent();
    let finished = finish_pending(layout)?;
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
        manifest::repair(&dir)?;
    }
    let _ = fs::remove_file(layout.tool_daily().with_extension("parquet.tmp"));
    Ok(finished)
}
