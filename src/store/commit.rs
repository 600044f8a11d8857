//! Making a change to the Parquet files atomic: a flush, a compaction or a
//! retention pass writes new parts under temporary names, then records an
//! intent (renames, deletions, WAL segments covered, rollup days to redo),
//! then applies it. Recovery re-applies an intent found on disk; a change
//! with no intent on disk never happened, and its temporary files are removed.

use std::fs;
use std::io::{ErrorKind, Write};

use serde::{Deserialize, Serialize};

use super::layout::Layout;
use super::{rollup, wal, StoreError};

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

/// Record the intent durably, then apply it. An earlier intent still on
/// disk (its apply failed) is finished first, never overwritten.
pub fn commit(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    finish_pending(layout)?;
    let path = layout.intent();
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(intent)
        .map_err(|e| StoreError::data("encoding the commit intent", e))?;
    fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(&body)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    wal::sync_dir(layout.root())?;
    apply(layout, intent)
}

/// Apply an intent; every step can be repeated, so a crash mid-way is
/// finished by recovery.
pub fn apply(layout: &Layout, intent: &Intent) -> Result<(), StoreError> {
    let mut dirs = std::collections::BTreeSet::new();
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
    // A day directory left empty (retention, or a compaction of nothing) goes.
    for d in &dirs {
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

/// Finish an interrupted change, and remove temporary files of changes that
/// never committed.
pub fn recover(layout: &Layout) -> Result<bool, StoreError> {
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
    }
    let _ = fs::remove_file(layout.tool_daily().with_extension("parquet.tmp"));
    Ok(finished)
}
