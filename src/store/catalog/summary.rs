//! Day summaries, a derived artifact the store owns: a sweep computes a
//! finished day's turn summary (its frames are the sweep's business) and
//! hands it here, which writes it under `sealed/date=YYYY-MM-DD/` as
//! Parquet files and a `manifest.json` ([`SummaryManifest`]) naming the
//! span parts it was built from.
//!
//! A write goes through an intent of its own, `sealed/date=…/.intent.json`
//! (not the store's `commit-intent.json`: a sweep from cron writes
//! summaries beside a serving store without its lock, as it always did):
//! the files are written under temporary names, the intent (their renames
//! and the new manifest) is made durable, then applied — renames, the
//! manifest replaced last — and removed. A crash before the intent leaves
//! the old summary; after it, the next read of the day finishes the write
//! ([`read`]), so after a crash a reader sees the old summary or the new
//! one. Writes, finishing a write, retention and a seal's re-pointing take
//! one lock across processes ([`Exclusive`], `.summaries.lock`), so two of
//! them never interleave. A reader takes no lock: one in another process
//! that reads while a write renames its files can see the old manifest
//! beside some new files; the summary's files keep their plain names (what
//! an earlier version and MCP `query` read), so a rewrite renames them over
//! the old ones (ARCHITECTURE.md, "renamed over").
//!
//! Retention removes a day's summary through [`retire_day`]: the manifest
//! goes at once (no reader takes the summary from then on), its files are
//! retired like parts ([`crate::store::catalog::retire`]: deleted once no
//! pin of this process is older and the grace passed), and the directory
//! goes with its last file ([`forget_retired`]).
//!
//! Seal compaction re-points a manifest at its outputs ([`write_manifest`]).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use polars::prelude::{DataFrame, ParquetCompression};
use serde::{Deserialize, Serialize};

use crate::store::catalog::handle::Catalog;
use crate::store::catalog::layout::Layout;
use crate::store::catalog::retire;
use crate::store::format::parquet;
use crate::store::{fsutil, StoreError};

/// The manifest's file name inside a summary's directory.
pub const MANIFEST: &str = "manifest.json";
/// A write in progress (see the module doc).
const INTENT: &str = ".intent.json";

/// `sealed/date=…/manifest.json`. Every field but `parts` is optional so
/// that a manifest of any earlier form is carried by a seal as it is
/// (absent stays absent, keys this version does not know are kept); a
/// summary is usable only with all of them (its owner checks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryManifest {
    /// The summary's version (its owner's; an older one is rebuilt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The day summarised, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// Span parts the summary was built from, relative to the data directory.
    pub parts: Vec<String>,
    /// The days its read took spans from, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_days: Option<Vec<String>>,
    /// Spans the read held, and the newest end among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_ns: Option<i64>,
    /// The summary's files, in its directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// Turns begun on the day, per service of their anchor span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_by_service: Option<Vec<(String, u64)>>,
    /// Keys this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// A summary write: its files' (temporary, final) names in the day's
/// summary directory, and the manifest that publishes them.
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    renames: Vec<(String, String)>,
    manifest: SummaryManifest,
}

/// A temporary name no other writer of this process or another uses.
fn tmp_name(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.{}-{n}.tmp", std::process::id())
}

fn manifest_path(layout: &Layout, day: i32) -> PathBuf {
    layout.summary_dir(day).join(MANIFEST)
}

/// Held while a summary is written, finished, retired or re-pointed: an
/// exclusive lock on `.summaries.lock` in the data directory (not under
/// `sealed/`, which readers list), across processes (a cron sweep beside a
/// serving store). Not re-entrant: take it once per change.
pub struct Exclusive(#[allow(dead_code)] fs::File);

/// Wait for the summaries' lock ([`Exclusive`]).
pub fn exclusive(layout: &Layout) -> Result<Exclusive, StoreError> {
    let path = layout.summaries_lock();
    let file = fsutil::open_lock_file(&path)?;
    file.lock()
        .map_err(|e| StoreError::io(format!("locking {}", path.display()), e))?;
    Ok(Exclusive(file))
}

/// `day`'s summary manifest as it is on disk, a write a crash left
/// finished first: `None` when there is none, `Some(Err)` when it does not
/// parse (a manifest this version cannot read).
pub fn read(
    layout: &Layout,
    day: i32,
) -> Result<Option<serde_json::Result<SummaryManifest>>, StoreError> {
    if layout.summary_dir(day).join(INTENT).exists() {
        let _x = exclusive(layout)?;
        finish_pending(layout, day)?;
    }
    read_manifest(layout, day)
}

/// [`read`] for a caller that holds [`Exclusive`].
pub fn read_exclusive(
    _held: &Exclusive,
    layout: &Layout,
    day: i32,
) -> Result<Option<serde_json::Result<SummaryManifest>>, StoreError> {
    finish_pending(layout, day)?;
    read_manifest(layout, day)
}

fn read_manifest(
    layout: &Layout,
    day: i32,
) -> Result<Option<serde_json::Result<SummaryManifest>>, StoreError> {
    let path = manifest_path(layout, day);
    let body = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
    };
    Ok(Some(serde_json::from_slice(&body)))
}

/// Replace `day`'s manifest by `m` (temporary file, fsync, rename), as
/// the last step of a write and when a seal re-points it.
pub fn write_manifest(
    _held: &Exclusive,
    layout: &Layout,
    day: i32,
    m: &SummaryManifest,
) -> Result<(), StoreError> {
    put_manifest(layout, day, m)
}

fn put_manifest(layout: &Layout, day: i32, m: &SummaryManifest) -> Result<(), StoreError> {
    let path = manifest_path(layout, day);
    let body = serde_json::to_vec_pretty(m)
        .map_err(|e| StoreError::data("encoding a summary manifest", e))?;
    let tmp = layout.summary_dir(day).join(tmp_name(MANIFEST));
    fsutil::replace_file(&path, &tmp, &body)
}

/// Write `day`'s summary: `files` (name, frame) as Parquet with
/// `compression`, published by `manifest` (its `files` set here), through
/// the day's intent (see the module doc).
pub fn write(
    layout: &Layout,
    day: i32,
    files: &mut [(&str, DataFrame)],
    compression: ParquetCompression,
    manifest: SummaryManifest,
) -> Result<(), StoreError> {
    let _held = exclusive(layout)?;
    let intent = prepare(layout, day, files, compression, manifest)?;
    apply(layout, day, &intent)
}

/// A write up to its durable intent: the files under temporary names,
/// then the intent naming them.
fn prepare(
    layout: &Layout,
    day: i32,
    files: &mut [(&str, DataFrame)],
    compression: ParquetCompression,
    mut manifest: SummaryManifest,
) -> Result<Intent, StoreError> {
    let dir = layout.summary_dir(day);
    fs::create_dir_all(&dir)
        .map_err(|e| StoreError::io(format!("creating {}", dir.display()), e))?;
    finish_pending(layout, day)?;
    let mut renames = Vec::with_capacity(files.len());
    for (name, df) in files.iter_mut() {
        let tmp = tmp_name(name);
        renames.push((tmp.clone(), name.to_string()));
        if let Err(e) = parquet::write_file_with(&dir.join(&tmp), df, compression) {
            remove_tmps(&dir, &renames);
            return Err(e);
        }
        // For the crash test: killed with some files written, no manifest.
        crate::faults::kill_point("summary_write");
    }
    manifest.files = Some(files.iter().map(|(n, _)| n.to_string()).collect());
    let intent = Intent { renames, manifest };
    let body = serde_json::to_vec(&intent)
        .map_err(|e| StoreError::data("encoding a summary intent", e))?;
    // The files' names are durable before an intent can name them.
    if let Err(e) = fsutil::sync_dir(&dir) {
        remove_tmps(&dir, &intent.renames);
        return Err(e);
    }
    if let Err(e) = fsutil::replace_file(&dir.join(INTENT), &dir.join(tmp_name(INTENT)), &body) {
        // An intent that reached the disk (its directory's fsync failed)
        // still names the files: the next read finishes it.
        if fs::read(dir.join(INTENT)).ok().as_deref() != Some(body.as_slice()) {
            remove_tmps(&dir, &intent.renames);
        }
        return Err(e);
    }
    Ok(intent)
}

fn remove_tmps(dir: &Path, renames: &[(String, String)]) {
    for (tmp, _) in renames {
        let _ = fs::remove_file(dir.join(tmp));
    }
}

/// Finish the write an intent on disk records, if any.
fn finish_pending(layout: &Layout, day: i32) -> Result<(), StoreError> {
    let path = layout.summary_dir(day).join(INTENT);
    let body = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
    };
    match serde_json::from_slice::<Intent>(&body) {
        Ok(intent) => apply(layout, day, &intent),
        // Written whole or not at all (a rename), so one that does not
        // parse is no write of this version's: as if it was never made.
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "removing a summary intent this version cannot read; the summary stays as it was");
            fs::remove_file(&path)
                .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))
        }
    }
}

/// Apply an intent; each step can be repeated (a rename already made is
/// passed over), so a write cut short is finished by the next reader. An
/// intent whose file is gone under both names (not this version's, or its
/// files lost) is dropped, the summary left as it was. The caller holds
/// [`Exclusive`].
fn apply(layout: &Layout, day: i32, intent: &Intent) -> Result<(), StoreError> {
    let dir = layout.summary_dir(day);
    let drop_intent = || match fs::remove_file(dir.join(INTENT)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(format!("writing {}", dir.display()), e)),
    };
    if let Some((tmp, _)) = intent
        .renames
        .iter()
        .find(|(tmp, name)| !dir.join(tmp).exists() && !dir.join(name).exists())
    {
        tracing::warn!(day = %crate::model::day_to_string(day), file = %tmp, "a summary write names a file that is gone; the write is dropped and the summary stays as it was");
        drop_intent()?;
        return fsutil::sync_dir(&dir);
    }
    for (tmp, name) in &intent.renames {
        match fs::rename(dir.join(tmp), dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound && dir.join(name).exists() => {}
            Err(e) => return Err(StoreError::io(format!("writing {}", dir.display()), e)),
        }
    }
    fsutil::sync_dir(&dir)?;
    put_manifest(layout, day, &intent.manifest)?;
    drop_intent()?;
    fsutil::sync_dir(&dir)
}

/// Take `day`'s summary out of use (retention): its manifest and any write
/// in progress removed at once, its files retired; the directory goes now
/// when nothing is left in it, else with its last retired file.
pub(in crate::store) fn retire_day(catalog: &Catalog, day: i32) -> Result<(), StoreError> {
    let _x = exclusive(catalog.layout())?;
    let dir = catalog.layout().summary_dir(day);
    let io = |e| StoreError::io(format!("removing {}", dir.display()), e);
    for name in [MANIFEST, INTENT] {
        match fs::remove_file(dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
    }
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let at = retire::now_ms();
    let mut files: Vec<(PathBuf, i64)> = Vec::new();
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            // Nothing this version writes; no reader of it either.
            fs::remove_dir_all(e.path()).map_err(io)?;
        } else {
            files.push((e.path(), at));
        }
    }
    if files.is_empty() {
        remove_if_empty(&dir);
    } else {
        retire::retired(catalog, files);
    }
    Ok(())
}

/// Whether the summary directory `dir` has a manifest (or a write under
/// way) again: its retired files' names are a new summary's.
pub(in crate::store) fn in_use(_held: &Exclusive, dir: &Path) -> bool {
    dir.join(MANIFEST).exists() || dir.join(INTENT).exists()
}

/// After retired files of a summary directory were deleted: the directory
/// goes once nothing is left in it.
pub(in crate::store) fn forget_retired(dir: &Path) {
    remove_if_empty(dir);
}

fn remove_if_empty(dir: &Path) {
    if fs::read_dir(dir).is_ok_and(|mut e| e.next().is_none()) {
        let _ = fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use polars::prelude::*;

    use super::*;

    fn frame(n: i64) -> DataFrame {
        df!("x" => [n]).unwrap()
    }

    fn manifest(parts: &[&str]) -> SummaryManifest {
        SummaryManifest {
            version: Some(1),
            day: Some("2026-01-02".into()),
            parts: parts.iter().map(|p| p.to_string()).collect(),
            ..SummaryManifest::default()
        }
    }

    fn x(layout: &Layout, day: i32) -> i64 {
        let path = layout.summary_dir(day).join("a.parquet");
        let df = parquet::scan(&[path]).unwrap().collect().unwrap();
        df.column("x").unwrap().i64().unwrap().get(0).unwrap()
    }

    #[test]
    fn a_write_cut_short_after_its_intent_is_finished_by_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let day = crate::model::day_from_str("2026-01-02").unwrap();
        let mut files = [("a.parquet", frame(1))];
        write(
            &layout,
            day,
            &mut files,
            ParquetCompression::Zstd(None),
            manifest(&["p1"]),
        )
        .unwrap();
        let m = read(&layout, day).unwrap().unwrap().unwrap();
        assert_eq!(
            (m.parts, m.files),
            (vec!["p1".to_string()], Some(vec!["a.parquet".into()]))
        );
        assert_eq!(x(&layout, day), 1);
        // Killed after the intent: the old summary still on disk …
        let mut files = [("a.parquet", frame(2))];
        let codec = ParquetCompression::Zstd(None);
        prepare(&layout, day, &mut files, codec, manifest(&["p2"])).unwrap();
        assert_eq!(x(&layout, day), 1);
        // … and the next read finds the new one, whole.
        let m = read(&layout, day).unwrap().unwrap().unwrap();
        assert_eq!(m.parts, vec!["p2".to_string()]);
        assert_eq!(x(&layout, day), 2);
        let left: Vec<_> = fs::read_dir(layout.summary_dir(day))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn keys_this_version_does_not_know_are_kept_and_absent_ones_stay_absent() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let day = crate::model::day_from_str("2026-01-02").unwrap();
        fs::create_dir_all(layout.summary_dir(day)).unwrap();
        let body = br#"{"version":1,"rows":123,"parts":["a"]}"#;
        fs::write(manifest_path(&layout, day), body).unwrap();
        let m = read(&layout, day).unwrap().unwrap().unwrap();
        write_manifest(&exclusive(&layout).unwrap(), &layout, day, &m).unwrap();
        let again: serde_json::Value =
            serde_json::from_slice(&fs::read(manifest_path(&layout, day)).unwrap()).unwrap();
        assert_eq!(
            again,
            serde_json::json!({"version": 1, "rows": 123, "parts": ["a"]})
        );
    }

    #[test]
    fn retention_retires_a_summary_and_its_directory_goes_with_its_last_file() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(Layout::new(dir.path()));
        let layout = catalog.layout();
        let day = crate::model::day_from_str("2026-01-02").unwrap();
        let mut files = [("a.parquet", frame(1))];
        write(
            layout,
            day,
            &mut files,
            ParquetCompression::Zstd(None),
            manifest(&[]),
        )
        .unwrap();
        let pin = retire::pin(&catalog);
        retire_day(&catalog, day).unwrap();
        // Out of use at once; its file kept while a pin may hold it.
        assert!(read(layout, day).unwrap().is_none());
        assert_eq!(x(layout, day), 1);
        retire::reclaim(&catalog, Duration::ZERO).unwrap();
        assert_eq!(x(layout, day), 1);
        drop(pin);
        retire::reclaim(&catalog, Duration::ZERO).unwrap();
        assert!(!layout.summary_dir(day).exists());
    }

    #[test]
    fn an_intent_whose_files_are_gone_is_dropped_and_the_summary_kept() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let day = crate::model::day_from_str("2026-01-02").unwrap();
        let codec = ParquetCompression::Zstd(None);
        write(
            &layout,
            day,
            &mut [("a.parquet", frame(1))],
            codec,
            manifest(&["p1"]),
        )
        .unwrap();
        // An intent durable, a new file it names lost (never reached the disk).
        let mut files = [("b.parquet", frame(2))];
        let intent = prepare(&layout, day, &mut files, codec, manifest(&["p2"])).unwrap();
        fs::remove_file(layout.summary_dir(day).join(&intent.renames[0].0)).unwrap();
        let m = read(&layout, day).unwrap().unwrap().unwrap();
        assert_eq!(m.parts, vec!["p1".to_string()]);
        assert!(!layout.summary_dir(day).join(INTENT).exists());
        // Later writes go through again.
        write(
            &layout,
            day,
            &mut [("a.parquet", frame(3))],
            codec,
            manifest(&["p3"]),
        )
        .unwrap();
        assert_eq!(x(&layout, day), 3);
    }

    #[test]
    fn a_summary_written_again_after_retention_is_not_deleted_by_the_reclaim() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(Layout::new(dir.path()));
        let layout = catalog.layout();
        let day = crate::model::day_from_str("2026-01-02").unwrap();
        let codec = ParquetCompression::Zstd(None);
        write(
            layout,
            day,
            &mut [("a.parquet", frame(1))],
            codec,
            manifest(&[]),
        )
        .unwrap();
        retire_day(&catalog, day).unwrap();
        // A sweep whose window reaches back writes the day again …
        write(
            layout,
            day,
            &mut [("a.parquet", frame(2))],
            codec,
            manifest(&[]),
        )
        .unwrap();
        // … and the reclaim of the first one's names leaves it whole.
        retire::reclaim(&catalog, Duration::ZERO).unwrap();
        assert!(read(layout, day).unwrap().is_some());
        assert_eq!(x(layout, day), 2);
        assert_eq!(retire::pending(&catalog), 0);
    }
}
