//! `stormwatch import`: files and directories into the store, and
//! `--follow DIR`, which keeps pulling new files (and new lines of growing
//! JSON-lines files) and remembers in `state.sqlite` what it took.
//!
//! Bounds: a gzip'd file that decompresses to more than
//! `[import] max_decompressed_bytes` (1 GiB) is refused whole, naming the
//! file and the cap (a file's records are all read before any is stored,
//! so nothing of it is imported): `import` stops there, like at any file it
//! cannot read, and `--follow` skips it until it changes. A directory walk
//! follows symlinks, except a link to a directory above it on the path being
//! walked (a loop, whose files are listed already): that link is skipped with
//! a warning naming it and where it leads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::ingest::file::{self, Expanded, FileKind, Record};
use crate::retry::{self, IoFailure};
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
    /// Lines or documents that could not be decoded, skipped.
    pub bad_records: usize,
    /// UTC day of the oldest span submitted (days since the epoch).
    pub oldest_day: Option<i32>,
}

impl ImportReport {
    /// Keep the older of `day` and the oldest day seen so far.
    fn note_day(&mut self, day: Option<i32>) {
        self.oldest_day = match (self.oldest_day, day) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    pub fn add(&mut self, other: &ImportReport) {
        self.files += other.files;
        self.records += other.records;
        self.spans_stored += other.spans_stored;
        self.duplicates += other.duplicates;
        self.rejected += other.rejected;
        self.bad_records += other.bad_records;
        self.note_day(other.oldest_day);
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
    #[error(
        "{path}: refused: its gzip content decompresses to more than {cap} bytes (import.max_decompressed_bytes), \
         a gzip bomb or a file to split; nothing of it was imported"
    )]
    TooLarge { path: PathBuf, cap: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("import state {path}: {source}")]
    State {
        path: PathBuf,
        source: rusqlite::Error,
    },
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
        let prepared = crate::ingest::prepare(&request);
        self.report.rejected += prepared.normalized.rejected;
        if let Some(m) = prepared.normalized.reject_message() {
            tracing::warn!("{where_}: {m}");
        }
        if prepared.spans() == 0 {
            return Ok(());
        }
        let oldest = prepared.normalized.batch.days().first().copied();
        self.report.note_day(oldest);
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

/// Every request of a whole file, its gzip content capped at `cap` bytes.
fn read_file(path: &Path, cap: u64) -> Result<Vec<Record>, ImportError> {
    match file::read(path, cap) {
        Ok((_, records)) => Ok(records),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(ImportError::TooLarge {
            path: path.to_path_buf(),
            cap,
        }),
        Err(source) => Err(ImportError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The files below `paths`; a link that loops back up is warned about
/// (once per link while `warned` remembers it) and skipped.
fn expand(
    paths: &[PathBuf],
    warned: &mut std::collections::HashSet<PathBuf>,
) -> std::io::Result<Vec<PathBuf>> {
    let Expanded { files, loops } = file::expand(paths)?;
    for (link, to) in loops {
        if warned.insert(link.clone()) {
            tracing::warn!(
                "{}: skipped: a symlink loop (it leads back to {}, which is being read already)",
                link.display(),
                to.display()
            );
        }
    }
    Ok(files)
}

/// Import files and directories; a bad record is reported (file and line)
/// and skipped, an unreadable file (or one whose gzip content decompresses
/// past `max_decompressed` bytes) stops the import with its name.
pub fn import_paths(
    store: &Store,
    paths: &[PathBuf],
    progress: bool,
    max_decompressed: u64,
) -> Result<ImportReport, ImportError> {
    let files = expand(paths, &mut Default::default()).map_err(|source| ImportError::Io {
        path: paths.first().cloned().unwrap_or_default(),
        source,
    })?;
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
    for path in &files {
        bar.set_message(path.display().to_string());
        let records = read_file(path, max_decompressed)?;
        for record in records {
            loader.record(path, record)?;
        }
        loader.report.files += 1;
        bar.inc(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
    }
    bar.finish_and_clear();
    loader.finish()
}

/// Per-file progress of the follower, as kept in `state.sqlite`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FileState {
    size: u64,
    mtime_ns: i64,
    offset: u64,
    lines: usize,
    done: bool,
    /// Hash of the file's first `head_len` bytes when it was last read: a
    /// file rewritten in place (copytruncate rotation) is read from the start.
    head_len: u64,
    head_hash: i64,
}

/// Bytes hashed to recognise a file.
const HEAD_BYTES: u64 = 512;

fn head_hash(path: &Path, len: u64) -> std::io::Result<i64> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(len as usize);
    std::fs::File::open(path)?.take(len).read_to_end(&mut buf)?;
    Ok(xxhash_rust::xxh3::xxh3_64(&buf) as i64)
}

struct FollowDb {
    conn: rusqlite::Connection,
    path: PathBuf,
}

impl FollowDb {
    fn open(path: &Path) -> Result<FollowDb, ImportError> {
        let err = |source| ImportError::State {
            path: path.to_path_buf(),
            source,
        };
        let conn = rusqlite::Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS import_files (
                 path TEXT PRIMARY KEY,
                 size INTEGER NOT NULL,
                 mtime_ns INTEGER NOT NULL,
                 offset INTEGER NOT NULL,
                 lines INTEGER NOT NULL,
                 done INTEGER NOT NULL,
                 head_len INTEGER NOT NULL DEFAULT 0,
                 head_hash INTEGER NOT NULL DEFAULT 0,
                 updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
             );",
        )
        .map_err(err)?;
        Ok(FollowDb {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn get(&self, file: &Path) -> Result<Option<FileState>, ImportError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT size, mtime_ns, offset, lines, done, head_len, head_hash FROM import_files WHERE path = ?1")
            .map_err(|source| ImportError::State { path: self.path.clone(), source })?;
        let mut rows =
            stmt.query([file.to_string_lossy()])
                .map_err(|source| ImportError::State {
                    path: self.path.clone(),
                    source,
                })?;
        match rows.next().map_err(|source| ImportError::State {
            path: self.path.clone(),
            source,
        })? {
            None => Ok(None),
            Some(r) => Ok(Some(FileState {
                size: r.get::<_, i64>(0).unwrap_or(0) as u64,
                mtime_ns: r.get(1).unwrap_or(0),
                offset: r.get::<_, i64>(2).unwrap_or(0) as u64,
                lines: r.get::<_, i64>(3).unwrap_or(0) as usize,
                done: r.get::<_, i64>(4).unwrap_or(0) != 0,
                head_len: r.get::<_, i64>(5).unwrap_or(0) as u64,
                head_hash: r.get(6).unwrap_or(0),
            })),
        }
    }

    fn put(&self, file: &Path, s: &FileState) -> Result<(), ImportError> {
        self.conn
            .execute(
                "INSERT INTO import_files (path, size, mtime_ns, offset, lines, done, head_len, head_hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns, offset=excluded.offset,
                   lines=excluded.lines, done=excluded.done, head_len=excluded.head_len, head_hash=excluded.head_hash,
                   updated_at=strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                rusqlite::params![
                    file.to_string_lossy(),
                    s.size as i64,
                    s.mtime_ns,
                    s.offset as i64,
                    s.lines as i64,
                    i64::from(s.done),
                    s.head_len as i64,
                    s.head_hash
                ],
            )
            .map(|_| ())
            .map_err(|source| ImportError::State { path: self.path.clone(), source })
    }
}

/// A file that failed: when to try again, and how often it has.
struct Failing {
    attempts: u32,
    since: Instant,
    next: Instant,
}

const FOLLOW_ATTEMPTS: u32 = 6;
const FOLLOW_GIVE_UP_AFTER: Duration = Duration::from_secs(600);

/// Follow `dir` until `stop` is set. Every poll: new complete lines of
/// JSON-lines files are loaded and their offset saved once acknowledged;
/// other files are loaded once their size and mtime hold still for a poll
/// (gzip'd content capped at `max_decompressed` bytes; a file past it is
/// skipped until it changes).
pub fn follow(
    store: &Store,
    dir: &Path,
    interval: Duration,
    max_decompressed: u64,
    stop: &AtomicBool,
) -> Result<ImportReport, ImportError> {
    let db = FollowDb::open(&store.layout().state_db())?;
    let mut total = ImportReport::default();
    let mut last_seen: HashMap<PathBuf, (u64, i64)> = HashMap::new();
    let mut failing: HashMap<PathBuf, Failing> = HashMap::new();
    let mut skipped: HashMap<PathBuf, i64> = HashMap::new();
    let mut loops_warned = std::collections::HashSet::new();
    tracing::info!(dir = %dir.display(), "following; new files and new lines are loaded as they land");
    while !stop.load(Ordering::Relaxed) {
        let files = match expand(&[dir.to_path_buf()], &mut loops_warned) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot list the followed directory; trying again");
                Vec::new()
            }
        };
        for path in files {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if failing.get(&path).is_some_and(|f| Instant::now() < f.next) {
                continue;
            }
            match follow_file(
                store,
                &db,
                &path,
                &mut last_seen,
                &skipped,
                max_decompressed,
            ) {
                Ok(report) => {
                    failing.remove(&path);
                    total.add(&report);
                }
                Err(e @ ImportError::TooLarge { .. }) => {
                    let mtime = std::fs::metadata(&path).map(|m| mtime_ns(&m)).unwrap_or(0);
                    tracing::warn!("{e}; skipped until it changes");
                    skipped.insert(path.clone(), mtime);
                }
                Err(ImportError::Io { source, .. }) => match retry::classify_io(&source) {
                    IoFailure::Gone => {
                        failing.remove(&path);
                    }
                    IoFailure::Permanent => {
                        let mtime = std::fs::metadata(&path).map(|m| mtime_ns(&m)).unwrap_or(0);
                        tracing::warn!("{}: skipped until it changes: {source}", path.display());
                        skipped.insert(path.clone(), mtime);
                    }
                    IoFailure::Transient => {
                        let f = failing.entry(path.clone()).or_insert(Failing {
                            attempts: 0,
                            since: Instant::now(),
                            next: Instant::now(),
                        });
                        f.attempts += 1;
                        if f.attempts >= FOLLOW_ATTEMPTS
                            || f.since.elapsed() >= FOLLOW_GIVE_UP_AFTER
                        {
                            tracing::error!("{}: giving up after {} attempts over {} s: {source}; skipped until it changes", path.display(), f.attempts, f.since.elapsed().as_secs());
                            let mtime = std::fs::metadata(&path).map(|m| mtime_ns(&m)).unwrap_or(0);
                            skipped.insert(path.clone(), mtime);
                            failing.remove(&path);
                        } else {
                            let delay =
                                retry::full_jitter(interval, Duration::from_secs(60), f.attempts);
                            f.next = Instant::now() + delay;
                            tracing::warn!(
                                "{}: read failed (attempt {}), retrying in {} ms: {source}",
                                path.display(),
                                f.attempts,
                                delay.as_millis()
                            );
                        }
                    }
                },
                Err(e) => return Err(e),
            }
        }
        let deadline = Instant::now() + interval;
        while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(interval));
        }
    }
    Ok(total)
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64)
}

fn follow_file(
    store: &Store,
    db: &FollowDb,
    path: &Path,
    last_seen: &mut HashMap<PathBuf, (u64, i64)>,
    skipped: &HashMap<PathBuf, i64>,
    max_decompressed: u64,
) -> Result<ImportReport, ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    let (size, mtime) = (meta.len(), mtime_ns(&meta));
    if skipped.get(path) == Some(&mtime) {
        return Ok(ImportReport::default());
    }
    let mut state = db.get(path)?.unwrap_or_default();
    if state.done && state.size == size && state.mtime_ns == mtime {
        return Ok(ImportReport::default());
    }
    let gz = {
        let mut magic = [0u8; 2];
        use std::io::Read;
        std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut magic))
            .map_err(io)?
            == 2
            && magic == [0x1f, 0x8b]
    };
    let kind = file::sniff(path).map_err(io)?;
    let mut loader = Loader::new(store);
    if kind == FileKind::JsonLines && !gz {
        let rewritten = state.head_len > 0
            && (size < state.head_len
                || head_hash(path, state.head_len).map_err(io)? != state.head_hash);
        if size < state.offset || rewritten {
            tracing::info!(
                "{}: truncated or rewritten since it was read; reading it again from the start",
                path.display()
            );
            state = FileState::default();
        }
        if size == state.offset {
            return Ok(ImportReport::default());
        }
        let (records, offset, lines) =
            file::read_lines_from(path, state.offset, state.lines).map_err(io)?;
        for r in records {
            loader.record(path, r)?;
        }
        let report = loader.finish()?;
        // Saved only after the store acknowledged: a crash re-reads, dedup drops the repeat.
        let head_len = offset.min(HEAD_BYTES);
        let state = FileState {
            size,
            mtime_ns: mtime,
            offset,
            lines,
            done: false,
            head_len,
            head_hash: head_hash(path, head_len).map_err(io)?,
        };
        db.put(path, &state)?;
        return Ok(report);
    }
    // A whole-file format: wait until it holds still for one poll.
    let stable = last_seen.insert(path.to_path_buf(), (size, mtime)) == Some((size, mtime));
    if !stable {
        return Ok(ImportReport::default());
    }
    let records = read_file(path, max_decompressed)?;
    for r in records {
        loader.record(path, r)?;
    }
    let mut report = loader.finish()?;
    report.files = 1;
    db.put(
        path,
        &FileState {
            size,
            mtime_ns: mtime,
            offset: size,
            done: true,
            ..FileState::default()
        },
    )?;
    tracing::info!("{}: loaded {} spans", path.display(), report.spans_stored);
    Ok(report)
}
