//! A dry run: the sweep a real one would make, against a copy of the
//! signal state, so nothing it finds changes a signal or queues an alert.

use super::{run, SweepError, SweepOptions, SweepReport};
use crate::config::DetectConfig;
use crate::signal::{StateDb, StateError};
use std::path::PathBuf;

/// A directory of the dry run's own in the data dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(reader: &Reader) -> Result<Scratch, SweepError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = reader
            .layout()
            .root()
            .join(format!(".dry-run-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|source| SweepError::Scratch {
            path: dir.clone(),
            source,
        })?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(path = %self.0.display(), error = %e, "could not remove a dry run's scratch copy of the state");
        }
    }
}
use crate::store::Reader;

/// Sweep `reader`'s store as [`run`] would, on a snapshot of its
/// `state.sqlite` (SQLite's `VACUUM INTO`) that is thrown away afterwards.
/// Alerting is off whatever `opts` says. Like any sweep it may write the summaries
/// of days that became final: those summaries are a cache, not state.
pub fn dry_run(
    reader: &Reader,
    cfg: &DetectConfig,
    opts: &SweepOptions,
) -> Result<SweepReport, SweepError> {
    let state_path = reader.layout().state_db();
    let scratch = Scratch::new(reader)?;
    let copy = scratch.0.join("state.sqlite");
    if state_path.exists() {
        let db = |source| StateError::Db {
            path: state_path.clone(),
            source,
        };
        let conn = rusqlite::Connection::open_with_flags(
            &state_path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(db)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(db)?;
        conn.execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()])
            .map_err(db)?;
    }
    let mut state = StateDb::open(&copy)?;
    let opts = SweepOptions {
        alerting: None,
        ..opts.clone()
    };
    run(reader, &mut state, cfg, &opts)
}
