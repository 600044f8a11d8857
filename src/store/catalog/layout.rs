//! Where everything lives under the data directory, and listing what is there.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::{day_from_str, day_to_string};
use crate::store::catalog::ship::Shipper;
use crate::store::StoreError;

/// How the name of a seal compaction's output ends (`part-…-s.parquet`).
pub const SEAL_SUFFIX: &str = "-s.parquet";

/// Whether `path` names a part written by seal compaction.
pub fn is_seal_output(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(SEAL_SUFFIX))
}

/// The data directory's layout (DESIGN.md, "Storage layout"), and the
/// shared store its flushes ship to, if any (an ingest node's).
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
    ship: Option<Arc<dyn Shipper>>,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout {
            root: root.into(),
            ship: None,
        }
    }

    /// A data directory whose flushes are shipped by `shipper`.
    pub fn shipping(root: impl Into<PathBuf>, shipper: Arc<dyn Shipper>) -> Layout {
        Layout {
            root: root.into(),
            ship: Some(shipper),
        }
    }

    /// Where flushes ship to.
    pub fn ship(&self) -> Option<&dyn Shipper> {
        self.ship.as_deref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn wal_dir(&self) -> PathBuf {
        self.root.join("wal")
    }
    pub fn spans_dir(&self) -> PathBuf {
        self.root.join("spans")
    }
    pub fn day_dir(&self, day: i32) -> PathBuf {
        self.spans_dir()
            .join(format!("date={}", day_to_string(day)))
    }
    /// Where the day summaries live (the directory is named `sealed/` on
    /// disk, as it always was).
    pub fn summary_root(&self) -> PathBuf {
        self.root.join("sealed")
    }
    /// `<root>/sealed/date=YYYY-MM-DD`: a final day's summary and its `manifest.json`.
    pub fn summary_dir(&self, day: i32) -> PathBuf {
        self.summary_root()
            .join(format!("date={}", day_to_string(day)))
    }
    pub fn rollups_dir(&self) -> PathBuf {
        self.root.join("rollups")
    }
    /// `rollups/current.json`: which generation of the rollup files is
    /// current ([`crate::store::catalog::rollup_set`]).
    pub fn rollup_manifest(&self) -> PathBuf {
        self.rollups_dir()
            .join(crate::store::catalog::rollup_set::MANIFEST)
    }
    /// The daily rollup's plain name, which an earlier version read: a link
    /// to the current generation's file. This version reads the manifest.
    pub fn tool_daily(&self) -> PathBuf {
        self.rollups_dir().join("tool_daily.parquet")
    }
    /// The error names rollup's plain name (see [`Layout::tool_daily`]).
    pub fn tool_error_names(&self) -> PathBuf {
        self.rollups_dir().join("tool_error_names.parquet")
    }
    pub fn intent(&self) -> PathBuf {
        self.root.join("commit-intent.json")
    }
    pub fn lock(&self) -> PathBuf {
        self.root.join(".lock")
    }
    /// The day summaries' lock across processes
    /// ([`crate::store::catalog::summary::Exclusive`]); not under
    /// `sealed/`, which readers list.
    pub fn summaries_lock(&self) -> PathBuf {
        self.root.join(".summaries.lock")
    }
    pub fn state_db(&self) -> PathBuf {
        self.root.join("state.sqlite")
    }

    /// Create the directories a writable store needs.
    pub fn create(&self) -> Result<(), StoreError> {
        for d in [
            self.root.clone(),
            self.wal_dir(),
            self.spans_dir(),
            self.rollups_dir(),
        ] {
            fs::create_dir_all(&d)
                .map_err(|e| StoreError::io(format!("creating {}", d.display()), e))?;
        }
        Ok(())
    }

    /// Days with a partition directory, in order.
    pub fn days(&self) -> Result<Vec<i32>, StoreError> {
        list_days(&self.spans_dir())
    }

    /// Days with a summary directory (under `sealed/`), in order.
    pub fn summary_days(&self) -> Result<Vec<i32>, StoreError> {
        list_days(&self.summary_root())
    }

    /// The live Parquet parts of a day, in name order: those its manifest
    /// (`_parts.json`) names, so a reader never sees a merged part beside
    /// its sources; for a day written before manifests, its `part-*.parquet`
    /// files. Files the manifest does not name are invisible.
    pub fn parts(&self, day: i32) -> Result<Vec<PathBuf>, StoreError> {
        let dir = self.day_dir(day);
        Ok(crate::store::catalog::manifest::live(&dir)?
            .into_iter()
            .map(|n| dir.join(n))
            .collect())
    }

    /// A fingerprint of the day's live part set, without touching the
    /// parts: a hash of its manifest, "" when the day has no parts. Equal
    /// versions mean the same parts (names are never reused, parts never
    /// rewritten in place).
    pub fn day_version(&self, day: i32) -> Result<String, StoreError> {
        crate::store::catalog::manifest::version(&self.day_dir(day))
    }

    /// A path relative to the root, as intents record it.
    pub fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }

    pub fn absolute(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// The `date=YYYY-MM-DD` directories in `dir`, as days in order.
fn list_days(dir: &Path) -> Result<Vec<i32>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(format!("listing {}", dir.display()), e)),
    };
    let mut days: Vec<i32> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            day_from_str(name.to_str()?.strip_prefix("date=")?)
        })
        .collect();
    days.sort_unstable();
    Ok(days)
}
