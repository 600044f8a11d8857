//! Deferred deletion: a commit never deletes the files it replaces. It
//! retires them: the manifest that takes them out of the live set (a day's
//! `_parts.json`, the rollups' `current.json`) names them as retired, with
//! the time, in the same atomic replace. A retired file is deleted
//! (reclaimed, on the flusher thread) only once no reader can still use it:
//!
//! - a reader in this process holds a [`Pin`], taken before it lists any
//!   file and dropped when it is done with what it listed — for a polars
//!   `LazyFrame` that is after `collect`, since a scan opens its files by
//!   path when it runs (and reads a footer first, the rest later). Each
//!   retirement is numbered (a generation, in memory). A pin taken at
//!   generation `g` may hold the files retired after `g`, never those
//!   retired at or before it (a pin taken after a manifest was replaced
//!   lists the new set), so a file retired at generation `r` is reclaimable
//!   once every live pin has `g ≥ r`: epoch-based reclamation;
//! - readers in other processes (`stormwatch sweep` from cron, `mcp
//!   --stdio`) take no pin this process can see: a retired file is also
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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::store::catalog::layout::Layout;
use crate::store::catalog::manifest::Retired;
use crate::store::{
    catalog::commit, catalog::manifest, catalog::rollup_set, catalog::summary, fsutil, StoreError,
};

struct State {
    /// Per data directory (canonical path): its retirements and live pins.
    dirs: BTreeMap<PathBuf, Pins>,
    /// Retired files not yet deleted: (generation, retired at, ms since the
    /// epoch). A file retired by an earlier process has generation 0.
    retired: BTreeMap<PathBuf, (u64, i64)>,
}

#[derive(Default)]
struct Pins {
    /// Retirements in this process so far.
    generation: u64,
    /// Live pins, counted by the generation they were taken at.
    live: BTreeMap<u64, usize>,
}

static STATE: Mutex<State> = Mutex::new(State {
    dirs: BTreeMap::new(),
    retired: BTreeMap::new(),
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which data directory pins and retirements belong to: the same directory
/// under any spelling of its path.
fn key(layout: &Layout) -> PathBuf {
    fs::canonicalize(layout.root()).unwrap_or_else(|_| layout.root().to_path_buf())
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
    dir: PathBuf,
    generation: u64,
    since: Instant,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut s = state();
        if let Some(pins) = s.dirs.get_mut(&self.dir) {
            if let Some(n) = pins.live.get_mut(&self.generation) {
                *n -= 1;
                if *n == 0 {
                    pins.live.remove(&self.generation);
                }
            }
        }
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin")
            .field("dir", &self.0.dir)
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

/// Pin the files of `layout` a read is about to list (see [`Pin`]).
pub fn pin(layout: &Layout) -> Pin {
    let dir = key(layout);
    let mut s = state();
    let pins = s.dirs.entry(dir.clone()).or_default();
    let generation = pins.generation;
    *pins.live.entry(generation).or_insert(0) += 1;
    Pin(Arc::new(Held {
        dir,
        generation,
        since: Instant::now(),
    }))
}

/// Files of `layout` whose retirement was just made durable: a new
/// generation. Call after the manifest is replaced (a pin taken before
/// this holds them).
pub(in crate::store) fn retired(layout: &Layout, files: impl IntoIterator<Item = (PathBuf, i64)>) {
    let dir = key(layout);
    let mut guard = state();
    let s = &mut *guard;
    let pins = s.dirs.entry(dir).or_default();
    pins.generation += 1;
    let generation = pins.generation;
    for (path, at) in files {
        s.retired.entry(path).or_insert((generation, at));
    }
}

/// Retired files found in `dir`'s manifest on open (a crash, or a stop
/// within the grace, left them): no pin of this process holds them.
pub(in crate::store) fn found(dir: &Path, files: &[Retired]) {
    let mut s = state();
    for r in files {
        s.retired.entry(dir.join(&r.name)).or_insert((0, r.at_ms));
    }
}

/// How many retired files under `layout` wait to be deleted.
pub fn pending(layout: &Layout) -> usize {
    let root = layout.root();
    state()
        .retired
        .keys()
        .filter(|p| p.starts_with(root))
        .count()
}

/// Delete the retired files of `layout` that no reader can use any more:
/// no live pin is older than their retirement, and `grace` has passed since
/// it. Each file first, then its manifest without it; a day directory left
/// with neither parts nor retired files goes. Returns the files deleted.
pub(in crate::store) fn reclaim(layout: &Layout, grace: Duration) -> Result<usize, StoreError> {
    // Manifests are read and replaced by commits too: one at a time.
    let _one = commit::exclusive();
    let root = layout.root();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let now = now_ms();
    let dir_key = key(layout);
    let mut due: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    {
        let s = state();
        let oldest = s
            .dirs
            .get(&dir_key)
            .and_then(|p| p.live.keys().next().copied());
        for (path, &(generation, at)) in s.retired.range(root.to_path_buf()..) {
            if !path.starts_with(root) {
                break;
            }
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
        } else if dir.starts_with(layout.sealed_root()) {
            summary::forget_retired(&dir);
        } else {
            manifest::forget_retired(&dir, &names)?;
        }
        let mut s = state();
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

/// Forget what this process knows of `layout`'s pins and retirements, as a
/// new process would (a test's crash).
#[cfg(test)]
pub(in crate::store) fn forget(layout: &Layout) {
    let mut s = state();
    s.dirs.remove(&key(layout));
    let root = layout.root();
    s.retired.retain(|p, _| !p.starts_with(root));
}
