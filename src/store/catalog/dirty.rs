//! The days whose rollup rows are stale (`rollups/dirty.json`): marked by
//! a commit that changed a day, cleared by the rollup refresh
//! ([`crate::store::maintain::rollup::refresh`]).

use std::collections::BTreeSet;
use std::fs;

use crate::store::catalog::layout::Layout;
use crate::store::{fsutil, StoreError};

fn dirty_path(layout: &Layout) -> std::path::PathBuf {
    layout.rollups_dir().join("dirty.json")
}

/// Days whose rollup rows are stale.
pub fn dirty(layout: &Layout) -> Result<BTreeSet<i32>, StoreError> {
    let path = dirty_path(layout);
    match fs::read(&path) {
        Ok(body) => serde_json::from_slice(&body)
            .map_err(|e| StoreError::data(format!("reading {}", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
    }
}

pub fn write_dirty(layout: &Layout, days: &BTreeSet<i32>) -> Result<(), StoreError> {
    let path = dirty_path(layout);
    if days.is_empty() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(days).map_err(|e| StoreError::data("encoding dirty days", e))?;
    fsutil::replace_file(&path, &tmp, &body)
}

/// Record days whose rollup rows must be recomputed.
pub fn mark_dirty(layout: &Layout, days: &[i32]) -> Result<(), StoreError> {
    let mut all = dirty(layout)?;
    let before = all.len();
    all.extend(days.iter().copied());
    if all.len() == before {
        return Ok(());
    }
    write_dirty(layout, &all)
}
