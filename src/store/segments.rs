//! The WAL's segment files by number (`wal/wal-{seq}.log`): their names,
//! listing them, deleting those a commit covers. The writer appends to
//! them ([`super::wal`]); a commit deletes them ([`super::catalog::commit`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::fsutil::sync_dir;
use super::StoreError;

pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("wal-{seq:016}.log"))
}

/// Sequence numbers of the segments present, in order.
pub fn list(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let mut seqs = Vec::new();
    let entries =
        fs::read_dir(dir).map_err(|e| StoreError::io(format!("listing {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name
            .strip_prefix("wal-")
            .and_then(|n| n.strip_suffix(".log"))
        {
            if let Ok(seq) = n.parse() {
                seqs.push(seq);
            }
        }
    }
    seqs.sort_unstable();
    Ok(seqs)
}

/// Delete every segment numbered `upto` or lower.
pub fn delete_upto(dir: &Path, upto: u64) -> Result<(), StoreError> {
    for seq in list(dir)?.into_iter().filter(|s| *s <= upto) {
        let path = segment_path(dir, seq);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(format!("removing {}", path.display()), e)),
        }
    }
    sync_dir(dir)
}
