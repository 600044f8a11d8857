//! The per-day manifest of live parts, `spans/date=YYYY-MM-DD/_parts.json`:
//! which `part-*.parquet` files of the day a reader sees, and which files
//! the day's commits retired (replaced, still on disk until no reader can
//! hold them: [`crate::store::catalog::retire`]). A commit (`commit::apply`) replaces it
//! atomically (temporary file, fsync, rename) after renaming new parts in:
//! one rename publishes the new set and retires the replaced parts, so a
//! reader lists either the old set or the new one, never both. A day written
//! before manifests existed has none; its parts are then the directory's
//! `part-*.parquet` files, and its first commit writes the manifest. An
//! earlier version reads `parts` and ignores `retired`.

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::{fsutil, StoreError};

/// The manifest's file name inside a day directory.
pub const FILE: &str = "_parts.json";

/// What the manifest holds: the live parts' file names, sorted, and the
/// retired ones.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub parts: Vec<String>,
    /// Files a commit took out of the live set, waiting to be deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<Retired>,
}

/// A file taken out of a live set, and when (wall clock, ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    pub name: String,
    pub at_ms: i64,
}

/// The part of a manifest its version hashes: the live set only (the bytes
/// an earlier version wrote, so fingerprints kept by it still hold).
#[derive(Serialize)]
struct Live<'a> {
    version: u32,
    parts: &'a [String],
}

/// Whether `name` is a committed part's file name.
pub fn is_part_name(name: &str) -> bool {
    name.starts_with("part-") && name.ends_with(".parquet")
}

pub fn path(day_dir: &Path) -> PathBuf {
    day_dir.join(FILE)
}

/// The manifest's bytes, `None` when the day has none.
pub fn read_bytes(day_dir: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let p = path(day_dir);
    match fs::read(&p) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(format!("reading {}", p.display()), e)),
    }
}

/// The day's manifest, `None` when it has none (a day written before
/// manifests, or no day at all).
pub fn read(day_dir: &Path) -> Result<Option<Manifest>, StoreError> {
    read_bytes(day_dir)?
        .map(|b| decode(day_dir, &b))
        .transpose()
}

fn decode(day_dir: &Path, bytes: &[u8]) -> Result<Manifest, StoreError> {
    serde_json::from_slice(bytes)
        .map_err(|e| StoreError::data(format!("reading {}", path(day_dir).display()), e))
}

/// The `part-*.parquet` files in the directory, sorted (what a day without
/// a manifest holds).
pub fn list_dir(day_dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = match fs::read_dir(day_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(format!("listing {}", day_dir.display()), e)),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| is_part_name(n))
        .collect();
    names.sort();
    Ok(names)
}

/// The live part names of a day: the manifest's, or the listing's without one.
pub fn live(day_dir: &Path) -> Result<Vec<String>, StoreError> {
    match read(day_dir)? {
        Some(m) => Ok(m.parts),
        None => list_dir(day_dir),
    }
}

/// A fingerprint of the day's live part set: a hash of the manifest's
/// live set (not its retired files), of the listed names for a day without
/// one, "" for no parts. Part names are never reused, so a change of the
/// set changes it.
pub fn version(day_dir: &Path) -> Result<String, StoreError> {
    let bytes = match read(day_dir)? {
        Some(m) => {
            if m.parts.is_empty() {
                return Ok(String::new());
            }
            let live = Live {
                version: m.version,
                parts: &m.parts,
            };
            serde_json::to_vec(&live).map_err(|e| StoreError::data("encoding a manifest", e))?
        }
        None => {
            let names = list_dir(day_dir)?;
            if names.is_empty() {
                return Ok(String::new());
            }
            format!("listed:{}", names.join("\n")).into_bytes()
        }
    };
    Ok(format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(bytes.as_slice())
    ))
}

/// Replace the manifest with `parts` (sorted here) and no retired files.
pub fn write(day_dir: &Path, parts: Vec<String>) -> Result<(), StoreError> {
    write_manifest(
        day_dir,
        Manifest {
            version: 1,
            parts,
            retired: Vec::new(),
        },
    )
}

/// Replace the manifest with `m` (its parts sorted here): temporary file,
/// fsync, rename, directory fsync.
pub fn write_manifest(day_dir: &Path, mut m: Manifest) -> Result<(), StoreError> {
    m.parts.sort();
    m.parts.dedup();
    let p = path(day_dir);
    let tmp = day_dir.join(format!(".{FILE}.tmp"));
    let body = serde_json::to_vec(&m).map_err(|e| StoreError::data("encoding a manifest", e))?;
    fsutil::replace_file(&p, &tmp, &body)
}

/// Remove the manifest (a day whose last part went).
pub fn remove(day_dir: &Path) -> Result<(), StoreError> {
    let p = path(day_dir);
    match fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(format!("removing {}", p.display()), e)),
    }
}

/// Stop naming `names` as retired (their files are deleted); a day left
/// with neither live parts nor retired files loses its manifest, then its
/// directory if nothing else is in it.
pub fn forget_retired(day_dir: &Path, names: &BTreeSet<String>) -> Result<(), StoreError> {
    let Some(mut m) = read(day_dir)? else {
        return Ok(());
    };
    let before = m.retired.len();
    m.retired.retain(|r| !names.contains(&r.name));
    if m.parts.is_empty() && m.retired.is_empty() {
        remove(day_dir)?;
        if fs::read_dir(day_dir).is_ok_and(|mut e| e.next().is_none()) {
            let _ = fs::remove_dir(day_dir);
        }
        return Ok(());
    }
    if m.retired.len() != before {
        write_manifest(day_dir, m)?;
    }
    Ok(())
}

/// On open, with no commit pending: make the manifest agree with the disk.
/// An unreadable manifest is rebuilt from the listing; names whose files
/// are gone are dropped (live or retired); a day without one gets one.
/// Parts on disk that the manifest neither names nor retired are left
/// invisible and reported. Returns the retired files still on disk.
pub fn repair(day_dir: &Path) -> Result<Vec<Retired>, StoreError> {
    let listed = list_dir(day_dir)?;
    let bytes = read_bytes(day_dir)?;
    let current = match bytes.as_deref().map(|b| decode(day_dir, b)) {
        Some(Ok(m)) => m,
        None => {
            if !listed.is_empty() {
                write(day_dir, listed)?;
            }
            return Ok(Vec::new());
        }
        Some(Err(e)) => {
            tracing::warn!(error = %e, "rebuilding an unreadable part manifest from the directory listing");
            write(day_dir, listed)?;
            return Ok(Vec::new());
        }
    };
    let on_disk = |n: &String| listed.contains(n) || day_dir.join(n).exists();
    let (kept, gone): (Vec<String>, Vec<String>) = current.parts.into_iter().partition(on_disk);
    let (retired, reclaimed): (Vec<Retired>, Vec<Retired>) =
        current.retired.into_iter().partition(|r| on_disk(&r.name));
    let unnamed: Vec<&String> = listed
        .iter()
        .filter(|n| !kept.contains(n) && !retired.iter().any(|r| &r.name == *n))
        .collect();
    if !unnamed.is_empty() {
        tracing::warn!(dir = %day_dir.display(), files = ?unnamed, "parts not named by the day's manifest are ignored");
    }
    if !gone.is_empty() {
        tracing::warn!(dir = %day_dir.display(), files = ?gone, "the day's manifest named missing parts; dropped from it");
    }
    if !gone.is_empty() || !reclaimed.is_empty() {
        write_manifest(
            day_dir,
            Manifest {
                version: current.version.max(1),
                parts: kept,
                retired: retired.clone(),
            },
        )?;
    }
    Ok(retired)
}
