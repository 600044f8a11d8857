//! File helpers every part of the store shares: replacing a small file
//! durably, making a directory's entries durable, and opening a lock file.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::StoreError;

/// Replace `path` with `body` durably: written to `tmp` and fsynced, renamed
/// over `path`, the directory fsynced. A crash leaves the old file or the new.
pub fn replace_file(path: &Path, tmp: &Path, body: &[u8]) -> Result<(), StoreError> {
    File::create(tmp)
        .and_then(|mut f| {
            f.write_all(body)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(tmp, path))
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

/// Make a directory's entries (new, renamed or removed files) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(format!("syncing directory {}", dir.display()), e))
}

/// Open (creating it, never truncating) the lock file at `path`, for the
/// caller to `lock` or `try_lock`.
pub fn open_lock_file(path: &Path) -> Result<File, StoreError> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))
}
