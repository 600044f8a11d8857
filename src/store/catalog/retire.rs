//! Deferred deletion: a commit never deletes the files it replaces. It
//! retires them: the manifest that takes them out of the live set (a day's
//! `_parts.json`, the rollups' `current.json`) names them as retired, with
//! the time, in the same atomic replace. A retired file is deleted
//! (reclaimed, on the flusher thread) only once no reader can still use it:
//!
//! - a reader of the directory's [`Catalog`] (every `Reader` a `Store`
//!   hands out) holds a [`Pin`], taken before it lists any
//!   file and dropped when it is done with what it listed — for a polars
//!   `LazyFrame` that is after `collect`, since a scan opens its files by
//!   path when it runs (and reads a footer first, the rest later). Each
//!   retirement is numbered (a generation, in the catalog). A pin taken at
//!   generation `g` may hold the files retired after `g`, never those
//!   retired at or before it (a pin taken after a manifest was replaced
//!   lists the new set), so a file retired at generation `r` is reclaimable
//!   once every live pin has `g ≥ r`: epoch-based reclamation;
//! - readers in other processes (`stormwatch sweep` from cron, `mcp
//!   --stdio`), and a directory opened again on its own in this one (a
//!   catalog of its own), take no pin the catalog can see: a retired file is also
//!   kept for `StoreOptions::retired_grace` after its retirement (wall
//!   clock), longer than any read lasts; one that outlives it finds a file
//!   gone and says so ([`gone_hint`]);
//! - on open, the retired files a crash left (retired in a manifest, not yet
//!   deleted) are found while the manifests are repaired and reclaimed under
//!   the same rule; no pin of the new process can hold them.
//!
//! The files are deleted before the manifest stops naming them, so a crash
//! in between only repeats a deletion.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use crate::store::catalog::handle::Catalog;
use crate::store::catalog::manifest::Retired;
use crate::store::{catalog::manifest, catalog::rollup_set, catalog::summary, fsutil, StoreError};

/// What a [`Catalog`] knows of its directory's retirements and pins.
#[derive(Default)]
pub(in crate::store) struct State {
    /// Retirements in this process so far.
    generation: u64,
    /// Live pins, counted by the generation they were taken at.
    live: BTreeMap<u64, usize>,
    /// Retired files not yet deleted: (generation, retired at, ms since the
    /// epoch). A file retired by an earlier process has generation 0.
    retired: BTreeMap<PathBuf, (u64, i64)>,
}

fn state(catalog: &Catalog) -> MutexGuard<'_, State> {
    catalog.retire.lock().unwrap_or_else(|e| e.into_inner())
}

/// The wall clock in milliseconds since the epoch, as retirements record it.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A reader's hold on the files of a data directory it lists from now on:
/// none of them is deleted while the pin (or a clone) lives. Take it before
/// listing; keep it until every frame read from those files is collected.
#[derive(Clone)]
pub struct Pin(Arc<Held>);

struct Held {
    catalog: Arc<Catalog>,
    generation: u64,
    since: Instant,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut s = state(&self.catalog);
        if let Some(n) = s.live.get_mut(&self.generation) {
            *n -= 1;
            if *n == 0 {
                s.live.remove(&self.generation);
            }
        }
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin")
            .field("dir", &self.0.catalog.layout().root())
            .field("generation", &self.0.generation)
            .field("age", &self.age())
            .finish()
    }
}

impl Pin {
    /// How long ago the pin was taken (how long its read has run).
    pub fn age(&self) -> Duration {
        self.0.since.elapsed()
    }
}

/// Pin the files of `catalog`'s directory a read is about to list (see [`Pin`]).
pub fn pin(catalog: &Arc<Catalog>) -> Pin {
    let generation = {
        let mut s = state(catalog);
        let generation = s.generation;
        *s.live.entry(generation).or_insert(0) += 1;
        generation
    };
    Pin(Arc::new(Held {
        catalog: Arc::clone(catalog),
        generation,
        since: Instant::now(),
    }))
}

/// Files of `catalog`'s directory whose retirement was just made durable: a
/// new generation. Call after the manifest is replaced (a pin taken before
/// this holds them).
pub(in crate::store) fn retired(
    catalog: &Catalog,
    files: impl IntoIterator<Item = (PathBuf, i64)>,
) {
    let mut s = state(catalog);
    s.generation += 1;
    let generation = s.generation;
    for (path, at) in files {
        s.retired.entry(path).or_insert((generation, at));
    }
}

/// Retired files found in `dir`'s manifest on open (a crash, or a stop
/// within the grace, left them): no pin of this process holds them.
pub(in crate::store) fn found(catalog: &Catalog, dir: &Path, files: &[Retired]) {
    let mut s = state(catalog);
    for r in files {
        s.retired.entry(dir.join(&r.name)).or_insert((0, r.at_ms));
    }
}

/// How many retired files of `catalog`'s directory wait to be deleted.
pub fn pending(catalog: &Catalog) -> usize {
    state(catalog).retired.len()
}

/// Delete the retired files of `catalog`'s directory that no reader can use
/// any more: no live pin is older than their retirement, and `grace` has
/// passed since it. Each file first, then its manifest without it; a day
/// directory left with neither parts nor retired files goes. Returns the
/// files deleted.
pub(in crate::store) fn reclaim(catalog: &Catalog, grace: Duration) -> Result<usize, StoreError> {
    // Manifests are read and replaced by commits too: one at a time.
    let _one = catalog.exclusive();
    let layout = catalog.layout();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let now = now_ms();
    let mut due: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    {
        let s = state(catalog);
        let oldest = s.live.keys().next().copied();
        for (path, &(generation, at)) in &s.retired {
            let unpinned = oldest.is_none_or(|g| generation <= g);
            if !unpinned || at.saturating_add(grace_ms) > now {
                continue;
            }
            if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
                due.entry(dir.to_path_buf())
                    .or_default()
                    .insert(name.to_string_lossy().into_owned());
            }
        }
    }
    let mut deleted = 0;
    for (dir, names) in due {
        // A summary written again since its retirement (its manifest back)
        // owns those names now: forget them, delete nothing.
        let _summaries = if dir.starts_with(layout.summary_root()) {
            let held = summary::exclusive(layout)?;
            if summary::in_use(&held, &dir) {
                let mut s = state(catalog);
                for name in &names {
                    s.retired.remove(&dir.join(name));
                }
                continue;
            }
            Some(held)
        } else {
            None
        };
        for name in &names {
            let p = dir.join(name);
            match fs::remove_file(&p) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(format!("removing {}", p.display()), e)),
            }
        }
        if dir.exists() {
            fsutil::sync_dir(&dir)?;
        }
        if dir == layout.rollups_dir() {
            rollup_set::forget_retired(layout, &names)?;
        } else if dir.starts_with(layout.summary_root()) {
            summary::forget_retired(&dir);
        } else {
            manifest::forget_retired(&dir, &names)?;
        }
        let mut s = state(catalog);
        for name in &names {
            s.retired.remove(&dir.join(name));
        }
    }
    Ok(deleted)
}

/// The hint a read adds when a file it listed is gone: an error whose
/// chain of sources holds an `std::io::Error` of kind `NotFound` (polars'
/// and the store's alike), or, where the type was lost on the way, whose
/// text carries the OS's words for it.
pub fn gone_hint(error: &(dyn std::error::Error + 'static), pin: Option<&Pin>) -> Option<String> {
    let mut cause = Some(error);
    let mut gone = false;
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::NotFound)
        {
            gone = true;
            break;
        }
        cause = e.source();
    }
    // An error that kept only the text of its cause (polars' `ComputeError`
    // strings, an object store's message) is read by the OS's words for it.
    gone = gone || error.to_string().contains("No such file or directory");
    if !gone {
        return None;
    }
    Some(format!(
        "a file this read listed was deleted under it; the store keeps a replaced file while \
         a read in its own process may use it and, for reads from other processes, for \
         `store.retired_grace_secs` after it was replaced{}",
        pin.map(|p| format!(" (this read started {} s ago)", p.age().as_secs()))
            .unwrap_or_default()
    ))
}
