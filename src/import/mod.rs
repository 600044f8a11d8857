//! `stormwatch import`: files and directories into the store, and
//! `--follow DIR`, which keeps pulling new files (and new lines of growing
//! JSON-lines files) and remembers in `state.sqlite` what it took.
//!
//! Bounds: only regular files are read (told after following symlinks); a
//! FIFO, a device or a socket is never opened: found in a directory it is
//! skipped with a warning saying what it is, named itself it is refused with
//! an error. A file of more than `[import] max_file_bytes` (1 GiB, read
//! bytes counted, so a file that grows while read stops there too), or
//! whose gzip'd content decompresses to more than `max_decompressed_bytes`
//! (1 GiB), is refused whole, naming the file and the cap (a file's records
//! are all read before any is stored, so nothing of it is imported).
//! `import` refuses such a file, goes on with the rest, and exits 1
//! ([`ImportReport::refused`]); `--follow` skips it until it changes, and
//! reads a growing JSON-lines file at most `max_file_bytes` per poll. A
//! directory walk follows symlinks, except a link to a directory above it
//! on the path being walked (a loop, whose files are listed already): that
//! link is skipped with a warning naming it and where it leads.
//!
//! Here: the report, the error, the windowed loader both use and the
//! one-shot [`import_paths`]; [`follow`] (its per-file progress kept in
//! `state.sqlite`, its retries) is in `follow.rs`.

mod follow;

pub use follow::follow;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::ingest::file::{self, Expanded, Limits, Record, Refused, Special};
use crate::retry;
use crate::store::{PendingAck, Store, StoreError};

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    pub files: usize,
    pub records: usize,
    pub spans_stored: usize,
    pub duplicates: usize,
    /// Spans the OTLP rules reject (invalid ids).
    pub rejected: u64,
    /// Spans refused for a time later than the import's clock + `ingest.max_future_secs`.
    pub rejected_future: u64,
    /// Spans refused for a day the retention drops (none with `--retention-days 0`).
    pub rejected_past: u64,
    /// Lines or documents that could not be decoded, skipped.
    pub bad_records: usize,
    /// UTC days of the spans submitted (days since the epoch).
    pub days: std::collections::BTreeSet<i32>,
    /// Files refused (each with an error line): named paths that are not
    /// regular files, files past a cap. `import` exits 1 when there are any.
    pub refused: usize,
    /// FIFOs, devices and sockets found in a directory, skipped (each with
    /// a warning).
    pub not_regular: usize,
}

impl ImportReport {
    pub fn add(&mut self, other: &ImportReport) {
        self.files += other.files;
        self.records += other.records;
        self.spans_stored += other.spans_stored;
        self.duplicates += other.duplicates;
        self.rejected += other.rejected;
        self.rejected_future += other.rejected_future;
        self.rejected_past += other.rejected_past;
        self.bad_records += other.bad_records;
        self.days.extend(other.days.iter().copied());
        self.refused += other.refused;
        self.not_regular += other.not_regular;
    }
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: refused: {}", path.display(), refused_message(refused))]
    Refused { path: PathBuf, refused: Refused },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("import state {path}: {source}")]
    State {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// A file whose schema could not be brought to this build's.
    #[error(transparent)]
    StateFile(crate::state::StateFileError),
}

impl From<crate::state::StateFileError> for ImportError {
    /// A file that does not open reads as it always did ("import state …").
    fn from(e: crate::state::StateFileError) -> ImportError {
        match e {
            crate::state::StateFileError::Open { path, source } => {
                ImportError::State { path, source }
            }
            other => ImportError::StateFile(other),
        }
    }
}

/// What a refusal says, naming the limit that was hit.
fn refused_message(r: &Refused) -> String {
    match r {
        Refused::NotRegular { what } => format!(
            "{what}, not a regular file (only regular files are imported, after following \
             symlinks); nothing was read from it"
        ),
        Refused::FileTooLarge { cap } => format!(
            "it holds more than {cap} bytes (import.max_file_bytes), a file to split or one \
             that does not end; nothing of it was imported"
        ),
        Refused::DecompressedTooLarge { cap } => format!(
            "its gzip content decompresses to more than {cap} bytes \
             (import.max_decompressed_bytes), a gzip bomb or a file to split; nothing of it \
             was imported"
        ),
        Refused::LineTooLong { cap } => format!(
            "a line longer than {cap} bytes (import.max_file_bytes, the most --follow reads \
             of a file at once); nothing from that line on was imported"
        ),
    }
}

/// Requests submitted ahead of their acknowledgement (one fsync serves many).
const WINDOW: usize = 32;
const SUBMIT_ATTEMPTS: u32 = 8;

/// Submits requests with a window of pending acknowledgements.
struct Loader<'a> {
    store: &'a Store,
    pending: Vec<PendingAck>,
    report: ImportReport,
}

impl<'a> Loader<'a> {
    fn new(store: &'a Store) -> Loader<'a> {
        Loader {
            store,
            pending: Vec::new(),
            report: ImportReport::default(),
        }
    }

    fn record(&mut self, path: &Path, record: Record) -> Result<(), ImportError> {
        let where_ = match record.line {
            Some(line) => format!("{}:{line}", path.display()),
            None => path.display().to_string(),
        };
        let request = match record.result {
            Ok(r) => r,
            Err(message) => {
                self.report.bad_records += 1;
                tracing::warn!("{where_}: skipped: {message}");
                return Ok(());
            }
        };
        self.report.records += 1;
        let prepared = crate::ingest::prepare_within(
            &request,
            &self.store.window_now(),
            &self.store.result_shapes(),
        );
        let n = &prepared.normalized;
        self.report.rejected += n.rejected - n.outside();
        self.report.rejected_future += n.rejected_future;
        self.report.rejected_past += n.rejected_past;
        if let Some(m) = prepared.normalized.reject_message() {
            tracing::warn!("{where_}: {m}");
        }
        if prepared.spans() == 0 {
            return Ok(());
        }
        self.report
            .days
            .extend(prepared.normalized.batch.days().iter().copied());
        self.submit(prepared)
    }

    /// Submit, classifying refusals: a full queue waits for our own pending
    /// acks, a failed write backs off; both are capped.
    fn submit(&mut self, prepared: crate::ingest::Prepared) -> Result<(), ImportError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.store.submit(prepared.clone()) {
                Ok(ack) => {
                    self.pending.push(ack);
                    if self.pending.len() >= WINDOW {
                        let oldest = self.pending.remove(0);
                        self.settle(oldest)?;
                    }
                    return Ok(());
                }
                Err(e) if e.is_transient() && attempt < SUBMIT_ATTEMPTS => {
                    if !self.pending.is_empty() {
                        self.drain()?;
                    } else {
                        std::thread::sleep(retry::full_jitter(
                            Duration::from_millis(50),
                            Duration::from_secs(5),
                            attempt,
                        ));
                    }
                }
                Err(e) => {
                    tracing::error!(attempts = attempt, waited_ms = started.elapsed().as_millis() as u64, error = %e, "giving up on a batch");
                    return Err(e.into());
                }
            }
        }
    }

    fn settle(&mut self, ack: PendingAck) -> Result<(), ImportError> {
        let ack = ack.wait()?;
        self.report.spans_stored += ack.stored;
        self.report.duplicates += ack.duplicates;
        Ok(())
    }

    fn drain(&mut self) -> Result<(), ImportError> {
        for ack in std::mem::take(&mut self.pending) {
            self.settle(ack)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ImportReport, ImportError> {
        self.drain()?;
        Ok(self.report)
    }
}

/// Every request of a whole regular file, within `limits`.
fn read_file(path: &Path, limits: &Limits) -> Result<Vec<Record>, ImportError> {
    file::read(path, limits)
        .map(|(_, records)| records)
        .map_err(|e| read_error(path, e))
}

/// A file read's error: not a regular file or past a cap,
/// [`ImportError::Refused`].
fn read_error(path: &Path, e: std::io::Error) -> ImportError {
    match file::refusal(&e) {
        Some(refused) => ImportError::Refused {
            path: path.to_path_buf(),
            refused,
        },
        None => ImportError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The regular files below `paths`, each once, and the paths given that
/// are not regular files (nor directories). A link that loops back up, a
/// path to a directory or file reached already by another, a FIFO, device
/// or socket found in a directory (counted in `report`) are warned about
/// (once per path while `warned` remembers it) and skipped.
fn expand(
    paths: &[PathBuf],
    warned: &mut std::collections::HashSet<PathBuf>,
    report: &mut ImportReport,
) -> std::io::Result<(Vec<PathBuf>, Vec<Special>)> {
    let Expanded {
        files,
        special,
        loops,
        repeats,
    } = file::expand(paths)?;
    let (named, found): (Vec<Special>, Vec<Special>) = special.into_iter().partition(|s| s.named);
    for s in found {
        if warned.insert(s.path.clone()) {
            report.not_regular += 1;
            tracing::warn!(
                "{}: skipped: {}, not a regular file (only regular files are read, after \
                 following symlinks)",
                s.path.display(),
                s.what
            );
        }
    }
    for (link, to) in loops {
        if warned.insert(link.clone()) {
            tracing::warn!(
                "{}: skipped: a symlink loop (it leads back to {}, which is being read already)",
                link.display(),
                to.display()
            );
        }
    }
    for (path, first) in repeats {
        if warned.insert(path.clone()) {
            tracing::warn!(
                "{}: skipped: it leads to what {} does, which is read once",
                path.display(),
                first.display()
            );
        }
    }
    Ok((files, named))
}

/// Import files and directories; a bad record is reported (file and line)
/// and skipped; a file refused (a named path that is not a regular file, a
/// file past `limits`) is reported with an error and counted in
/// [`ImportReport::refused`], and the rest still load; an unreadable file
/// stops the import with its name.
pub fn import_paths(
    store: &Store,
    paths: &[PathBuf],
    progress: bool,
    limits: &Limits,
) -> Result<ImportReport, ImportError> {
    let mut walked = ImportReport::default();
    let (files, named) =
        expand(paths, &mut Default::default(), &mut walked).map_err(|source| ImportError::Io {
            path: paths.first().cloned().unwrap_or_default(),
            source,
        })?;
    for s in named {
        walked.refused += 1;
        let e = ImportError::Refused {
            path: s.path,
            refused: Refused::NotRegular { what: s.what },
        };
        tracing::error!("{e}");
    }
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut loader = Loader::new(store);
    loader.report = walked;
    for path in &files {
        bar.set_message(path.display().to_string());
        bar.inc(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
        let records = match read_file(path, limits) {
            Ok(records) => records,
            Err(e @ ImportError::Refused { .. }) => {
                bar.suspend(|| tracing::error!("{e}"));
                loader.report.refused += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        for record in records {
            loader.record(path, record)?;
        }
        loader.report.files += 1;
    }
    bar.finish_and_clear();
    loader.finish()
}
