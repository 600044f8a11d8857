//! Staging a new part: a fresh name, the file written under a temporary
//! name in its day's directory, durably; the commit that names it renames
//! it into place ([`super::commit`]).

use std::fs;
use std::path::Path;

use polars::prelude::DataFrame;

use crate::store::catalog::layout::Layout;
use crate::store::format::parquet::write_file;
use crate::store::{fsutil, StoreError};

/// A fresh name for a flush output (`part-{tag}.parquet`): the wall clock
/// in nanoseconds, strictly increasing within the process, then 32 random
/// bits. It depends on nothing that restarts (WAL numbering does when the
/// WAL directory is reset), so a new part never takes an existing name;
/// names still sort by when their part was written.
pub fn new_part_tag() -> String {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Process-wide, not a catalog's: it is the clock made strictly
    // increasing, which names must be whichever directory (or second
    // catalog of one directory) a part is written to; it holds no state of
    // any directory.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let prev = LAST.fetch_max(now, Ordering::AcqRel);
    let t = if now > prev {
        now
    } else {
        LAST.fetch_add(1, Ordering::AcqRel) + 1
    };
    let random = foldhash::fast::RandomState::default().hash_one((t, std::process::id()));
    format!("{t:020}-{:08x}", random as u32)
}

/// Write `df` as a new part of `day` under a temporary name; returns the
/// (temporary, final) paths relative to the data directory, for an intent.
pub fn write_tmp_part(
    layout: &Layout,
    day: i32,
    tag: &str,
    df: &mut DataFrame,
) -> Result<(String, String), StoreError> {
    write_tmp_part_with(layout, day, tag, |path| write_file(path, df))
}

/// `write_tmp_part` with the file written by `write` (which must fsync it).
pub fn write_tmp_part_with(
    layout: &Layout,
    day: i32,
    tag: &str,
    write: impl FnOnce(&Path) -> Result<(), StoreError>,
) -> Result<(String, String), StoreError> {
    let dir = layout.day_dir(day);
    let created = !dir.exists();
    fs::create_dir_all(&dir)
        .map_err(|e| StoreError::io(format!("creating {}", dir.display()), e))?;
    let final_path = dir.join(format!("part-{tag}.parquet"));
    if final_path.exists() {
        return Err(StoreError::data(
            format!("writing {}", final_path.display()),
            "a part of that name already exists; parts are never overwritten",
        ));
    }
    let tmp = dir.join(format!(".part-{tag}.parquet.tmp"));
    write(&tmp)?;
    // The intent that names this file must never outlive its directory entries.
    fsutil::sync_dir(&dir)?;
    if created {
        fsutil::sync_dir(&layout.spans_dir())?;
    }
    Ok((layout.relative(&tmp), layout.relative(&final_path)))
}
