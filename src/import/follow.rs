//! `stormwatch import --follow DIR`: poll a directory, load new complete
//! lines of JSON-lines files (offsets saved once the store acknowledged;
//! a file truncated or rewritten in place is read again from the start) and
//! whole files once they hold still for a poll, remembering per file in
//! `state.sqlite` what was taken. A file whose read fails for a while is
//! retried with jitter, up to a number of attempts and a time; one that
//! cannot be read at all, is not a regular file, or is past a cap, is
//! skipped until it changes (a FIFO, device or socket in the directory is
//! never opened: warned about once). A growing JSON-lines file is read at
//! most `max_file_bytes` per poll; a line longer than that stops its file
//! there until it is rewritten.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::{expand, read_error, read_file, ImportError, ImportReport, Loader};
use crate::ingest::file::{self, FileKind, Limits, Refused};
use crate::retry::{self, IoFailure};
use crate::store::Store;

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
    hash_at(path, 0, len)
}

/// Hash of `len` bytes of the file from `offset`.
fn hash_at(path: &Path, offset: u64, len: u64) -> std::io::Result<i64> {
    Ok(xxhash_rust::xxh3::xxh3_64(&file::read_at(path, offset, len)?) as i64)
}

struct FollowDb {
    conn: rusqlite::Connection,
    path: PathBuf,
}

impl FollowDb {
    fn open(path: &Path) -> Result<FollowDb, ImportError> {
        // rusqlite's default busy timeout (5 s), as before the file had one opener.
        let conn = crate::state::open(path, std::time::Duration::from_secs(5))?;
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
/// (within `limits`; a file past them, or not a regular file, is skipped
/// until it changes).
pub fn follow(
    store: &Store,
    dir: &Path,
    interval: Duration,
    limits: &Limits,
    stop: &AtomicBool,
) -> Result<ImportReport, ImportError> {
    let db = FollowDb::open(&store.layout().state_db())?;
    let mut total = ImportReport::default();
    let mut last_seen: HashMap<PathBuf, (u64, i64)> = HashMap::new();
    let mut failing: HashMap<PathBuf, Failing> = HashMap::new();
    let mut skipped: HashMap<PathBuf, i64> = HashMap::new();
    // JSON-lines files stopped by a line longer than the cap: the offset it
    // starts at, and the hash of its first bytes (while they stay, it does).
    let mut stuck: HashMap<PathBuf, (u64, i64)> = HashMap::new();
    let mut loops_warned = std::collections::HashSet::new();
    tracing::info!(dir = %dir.display(), "following; new files and new lines are loaded as they land");
    while !stop.load(Ordering::Relaxed) {
        // Each path that is not a regular file is counted (and warned of)
        // once over all the polls.
        let walked = expand(&[dir.to_path_buf()], &mut loops_warned, &mut total);
        let files = match walked {
            Ok((files, named)) => {
                for s in named {
                    if loops_warned.insert(s.path.clone()) {
                        tracing::warn!(
                            "{}: not followed: {}, neither a directory nor a regular file",
                            s.path.display(),
                            s.what
                        );
                    }
                }
                files
            }
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
            let seen = Seen {
                last: &mut last_seen,
                skipped: &skipped,
                stuck: &stuck,
            };
            match follow_file(store, &db, &path, seen, limits) {
                Ok(report) => {
                    failing.remove(&path);
                    total.add(&report);
                }
                Err(
                    e @ ImportError::Refused {
                        refused: Refused::LineTooLong { .. },
                        ..
                    },
                ) => {
                    let offset = db.get(&path)?.unwrap_or_default().offset;
                    tracing::warn!("{e}; the file is read again once rewritten");
                    let hash = hash_at(&path, offset, HEAD_BYTES).unwrap_or(0);
                    stuck.insert(path.clone(), (offset, hash));
                }
                Err(e @ ImportError::Refused { .. }) => {
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

/// What the follower knows of the files across polls: the size and mtime
/// each had at the last poll, the files skipped until they change (by
/// their mtime then) and those stopped at a line too long (by its offset
/// and the hash of its first bytes).
struct Seen<'a> {
    last: &'a mut HashMap<PathBuf, (u64, i64)>,
    skipped: &'a HashMap<PathBuf, i64>,
    stuck: &'a HashMap<PathBuf, (u64, i64)>,
}

fn follow_file(
    store: &Store,
    db: &FollowDb,
    path: &Path,
    seen: Seen<'_>,
    limits: &Limits,
) -> Result<ImportReport, ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let refused = |e| read_error(path, e);
    let meta = std::fs::metadata(path).map_err(io)?;
    let (size, mtime) = (meta.len(), mtime_ns(&meta));
    if seen.skipped.get(path) == Some(&mtime) {
        return Ok(ImportReport::default());
    }
    let mut state = db.get(path)?.unwrap_or_default();
    if state.done && state.size == size && state.mtime_ns == mtime {
        return Ok(ImportReport::default());
    }
    let gz = file::is_gzip(path).map_err(refused)?;
    let kind = file::sniff(path, limits).map_err(refused)?;
    let mut loader = Loader::new(store);
    if kind == FileKind::JsonLines && !gz {
        let rewritten = state.head_len > 0
            && (size < state.head_len
                || head_hash(path, state.head_len).map_err(refused)? != state.head_hash);
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
        if let Some(&(offset, hash)) = seen.stuck.get(path) {
            if offset == state.offset && hash_at(path, offset, HEAD_BYTES).map_err(refused)? == hash
            {
                return Ok(ImportReport::default());
            }
        }
        let (records, offset, lines) =
            file::read_lines_from(path, state.offset, state.lines, limits.max_file_bytes)
                .map_err(refused)?;
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
            head_hash: head_hash(path, head_len).map_err(refused)?,
        };
        db.put(path, &state)?;
        return Ok(report);
    }
    // A whole-file format: wait until it holds still for one poll.
    let stable = seen.last.insert(path.to_path_buf(), (size, mtime)) == Some((size, mtime));
    if !stable {
        return Ok(ImportReport::default());
    }
    let records = read_file(path, limits)?;
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
