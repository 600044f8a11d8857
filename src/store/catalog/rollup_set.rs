//! The rollup's files. A refresh never rewrites a file a reader may have
//! open: it writes a new generation, `rollups/tool_daily-<gen>.parquet` and
//! `rollups/tool_error_names-<gen>.parquet` (fsynced), then replaces the
//! small manifest `rollups/current.json` (temporary file, fsync, rename),
//! which names the current generation's files and retires the previous
//! ones in the same rename; [`crate::store::catalog::retire`] deletes those once no reader
//! can hold them. A reader reads the manifest once and scans the files it
//! names: they never change.
//!
//! An earlier version read `tool_daily.parquet` and `tool_error_names.parquet`
//! by those names: they are kept as hard links to the current generation's
//! files (no copy), and on open a plain-named file that is not the current
//! generation's (an earlier version wrote it since) is adopted as a new
//! generation. A store without a manifest is migrated so at its first open.

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;
use serde::{Deserialize, Serialize};

use crate::store::catalog::handle::Catalog;
use crate::store::catalog::layout::Layout;
use crate::store::catalog::manifest::Retired;
use crate::store::{catalog::retire, format::parquet, fsutil, StoreError};

/// The manifest's file name in `rollups/`.
pub const MANIFEST: &str = "current.json";
const DAILY: &str = "tool_daily";
const NAMES: &str = "tool_error_names";

/// What `current.json` holds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Current {
    pub version: u32,
    /// Bumped by every refresh; 0 before the first.
    pub generation: u64,
    /// The current files' names in `rollups/` (`None`: no rows).
    pub tool_daily: Option<String>,
    pub tool_error_names: Option<String>,
    /// Earlier generations' files, waiting to be deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<Retired>,
}

impl Current {
    fn names(&self) -> impl Iterator<Item = &String> {
        self.tool_daily.iter().chain(&self.tool_error_names)
    }
}

/// A generation's file name: `tool_daily-00000042.parquet`.
fn gen_name(kind: &str, generation: u64) -> String {
    format!("{kind}-{generation:08}.parquet")
}

/// Whether `name` is a generation's file.
fn is_gen_name(name: &str) -> bool {
    [DAILY, NAMES].iter().any(|k| {
        name.strip_prefix(k)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.strip_suffix(".parquet"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The rollup manifest, `None` when there is none (a store this version
/// never opened, or no rollup yet).
pub fn read(layout: &Layout) -> Result<Option<Current>, StoreError> {
    let path = layout.rollup_manifest();
    match fs::read(&path) {
        Ok(body) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| StoreError::data(format!("reading {}", path.display()), e)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
    }
}

fn write(layout: &Layout, current: &Current) -> Result<(), StoreError> {
    let body = serde_json::to_vec(current)
        .map_err(|e| StoreError::data("encoding the rollup manifest", e))?;
    let path = layout.rollup_manifest();
    fsutil::replace_file(
        &path,
        &layout.rollups_dir().join(".current.json.tmp"),
        &body,
    )
}

/// Make `frames` (tool_daily, tool_error_names; `None`: no rows) the
/// current generation: new files, then the manifest that names them and
/// retires the previous generation's, then the plain names linked.
pub fn publish(
    catalog: &Catalog,
    daily: Option<&mut DataFrame>,
    names: Option<&mut DataFrame>,
) -> Result<(), StoreError> {
    let _one = catalog.exclusive();
    let layout = catalog.layout();
    let dir = layout.rollups_dir();
    let old = read(layout)?.unwrap_or_default();
    let generation = old.generation + 1;
    // Fresh names no manifest ever named (a crash's leftovers of this
    // generation were never published, and are overwritten).
    let put = |kind: &str, df: Option<&mut DataFrame>| -> Result<Option<String>, StoreError> {
        let Some(df) = df else { return Ok(None) };
        let name = gen_name(kind, generation);
        parquet::write_file(&dir.join(&name), df)?;
        Ok(Some(name))
    };
    let tool_daily = put(DAILY, daily)?;
    let tool_error_names = put(NAMES, names)?;
    fsutil::sync_dir(&dir)?;
    switch(catalog, old, generation, tool_daily, tool_error_names)
}

/// Replace the manifest by one naming `tool_daily` and `tool_error_names`
/// (already durable) as `generation`, retiring `old`'s files.
fn switch(
    catalog: &Catalog,
    old: Current,
    generation: u64,
    tool_daily: Option<String>,
    tool_error_names: Option<String>,
) -> Result<(), StoreError> {
    let layout = catalog.layout();
    let dir = layout.rollups_dir();
    let at = retire::now_ms();
    let mut retired = old.retired.clone();
    let mut newly = Vec::new();
    for name in old.names() {
        let kept = [&tool_daily, &tool_error_names]
            .iter()
            .any(|n| n.as_ref() == Some(name));
        if !kept && !retired.iter().any(|r| &r.name == name) && dir.join(name).exists() {
            retired.push(Retired {
                name: name.clone(),
                at_ms: at,
            });
            newly.push((dir.join(name), at));
        }
    }
    let current = Current {
        version: 1,
        generation,
        tool_daily,
        tool_error_names,
        retired,
    };
    write(layout, &current)?;
    if !newly.is_empty() {
        retire::retired(catalog, newly);
    }
    link_plain_names(layout, &current);
    Ok(())
}

/// Point the plain names an earlier version reads at the current files. A
/// name that cannot be linked is removed instead, so no stale file is left
/// to be taken for an earlier version's newer one.
fn link_plain_names(layout: &Layout, current: &Current) {
    let dir = layout.rollups_dir();
    for (plain, name) in [
        (layout.tool_daily(), &current.tool_daily),
        (layout.tool_error_names(), &current.tool_error_names),
    ] {
        let linked = match name {
            // Already that file (adopted from it).
            Some(n) if identity(&plain).is_some() && identity(&plain) == identity(&dir.join(n)) => {
                Ok(())
            }
            Some(n) => {
                let tmp = dir.join(format!(".{}.link.tmp", file_name(&plain)));
                let _ = fs::remove_file(&tmp);
                fs::hard_link(dir.join(n), &tmp).and_then(|()| fs::rename(&tmp, &plain))
            }
            None => Err(std::io::Error::from(ErrorKind::NotFound)),
        };
        if let Err(e) = linked {
            if name.is_some() {
                tracing::debug!(file = %plain.display(), error = %e, "could not link the rollup's plain name (read only by an earlier version); removed");
            }
            match fs::remove_file(&plain) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %plain.display(), error = %e, "could not remove a stale rollup file an earlier version would read")
                }
            }
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The file's identity (device, inode).
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// Stop naming `names` as retired (their files are deleted).
pub fn forget_retired(layout: &Layout, names: &BTreeSet<String>) -> Result<(), StoreError> {
    let Some(mut current) = read(layout)? else {
        return Ok(());
    };
    let before = current.retired.len();
    current.retired.retain(|r| !names.contains(&r.name));
    if current.retired.len() != before {
        write(layout, &current)?;
    }
    Ok(())
}

/// On open (the commit lock held): adopt plain-named files an earlier
/// version wrote (or, with no manifest, migrate to generations), remove
/// temporary files and generations no manifest names (a refresh a crash
/// cut short), and note the retired generations for reclaiming.
pub fn recover(catalog: &Catalog) -> Result<(), StoreError> {
    let layout = catalog.layout();
    let dir = layout.rollups_dir();
    let current = match read(layout) {
        Ok(c) => c,
        Err(e) => {
            // Nothing says which generation is current: every day is refreshed.
            tracing::warn!(error = %e, "the rollup manifest is unreadable; the rollup is rebuilt from the spans");
            crate::store::catalog::dirty::mark_dirty(layout, &layout.days()?)?;
            None
        }
    };
    let plain = [layout.tool_daily(), layout.tool_error_names()];
    let theirs = |i: usize, name: Option<&String>| {
        let p = &plain[i];
        p.exists() && name.is_none_or(|n| identity(p) != identity(&dir.join(n)))
    };
    let adopt = match &current {
        None => plain.iter().any(|p| p.exists()),
        Some(c) => theirs(0, c.tool_daily.as_ref()) || theirs(1, c.tool_error_names.as_ref()),
    };
    let current = if adopt {
        Some(adopt_plain(catalog, current)?)
    } else {
        current
    };
    let c = current.unwrap_or_default();
    let mut stray = Vec::new();
    if let Ok(entries) = fs::read_dir(&dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let named = c.names().any(|n| *n == name) || c.retired.iter().any(|r| r.name == name);
            if name.ends_with(".tmp") || (is_gen_name(&name) && !named) {
                let _ = fs::remove_file(e.path());
                stray.push(name);
            }
        }
    }
    if stray.iter().any(|n| is_gen_name(n)) {
        tracing::info!(files = ?stray, "removed rollup files no manifest names (a refresh cut short)");
    }
    let (kept, gone): (Vec<Retired>, Vec<Retired>) = c
        .retired
        .iter()
        .cloned()
        .partition(|r| dir.join(&r.name).exists());
    if !gone.is_empty() {
        forget_retired(layout, &gone.into_iter().map(|r| r.name).collect())?;
    }
    retire::found(catalog, &dir, &kept);
    Ok(())
}

/// Make the plain-named files the current generation (linked, or copied
/// where links are not possible), retiring what `current` named.
fn adopt_plain(catalog: &Catalog, current: Option<Current>) -> Result<Current, StoreError> {
    let layout = catalog.layout();
    let dir = layout.rollups_dir();
    let migrating = current.is_none();
    let old = current.unwrap_or_default();
    let generation = old.generation + 1;
    let take = |kind: &str, plain: PathBuf| -> Result<Option<String>, StoreError> {
        if !plain.exists() {
            return Ok(None);
        }
        let name = gen_name(kind, generation);
        let to = dir.join(&name);
        let _ = fs::remove_file(&to);
        let context = || format!("adopting {}", plain.display());
        if fs::hard_link(&plain, &to).is_err() {
            fs::copy(&plain, &to).map_err(|e| StoreError::io(context(), e))?;
            fs::File::open(&to)
                .and_then(|f| f.sync_all())
                .map_err(|e| StoreError::io(context(), e))?;
        }
        Ok(Some(name))
    };
    let tool_daily = take(DAILY, layout.tool_daily())?;
    let tool_error_names = take(NAMES, layout.tool_error_names())?;
    fsutil::sync_dir(&dir)?;
    if migrating {
        tracing::info!(
            generation,
            "rollups: now generation-numbered files named by rollups/current.json (the existing files adopted); tool_daily.parquet and tool_error_names.parquet stay as links to the current ones for an earlier stormwatch"
        );
    } else {
        tracing::info!(
            generation,
            "rollups: adopted tool_daily.parquet and tool_error_names.parquet, which an earlier stormwatch wrote"
        );
    }
    switch(catalog, old, generation, tool_daily, tool_error_names)?;
    read(layout)?
        .ok_or_else(|| StoreError::data("adopting the rollup", "no manifest after writing it"))
}
