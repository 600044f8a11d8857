//! The write-ahead log: numbered segment files of length- and
//! CRC-framed records, each record one acknowledged request as OTLP protobuf.
//! A batch of records is written and fsynced together (group commit); a
//! segment is deleted only once a committed flush covers it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::StoreError;

const HEADER: usize = 8;
/// A record larger than this is corrupt, not real (the body cap is far lower).
const MAX_RECORD: usize = 1 << 30;

/// The open log: the segment being appended to.
pub struct Wal {
    dir: PathBuf,
    seq: u64,
    file: File,
    len: u64,
    /// A failed write could not be cut back: nothing is appended until it is.
    dirty_tail: bool,
}

/// A segment's records as read back on recovery.
pub struct Segment {
    pub seq: u64,
    pub records: Vec<Vec<u8>>,
    /// Set when the tail was torn (a crash mid-write) and cut off.
    pub torn_at: Option<u64>,
}

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

/// Read one segment. A torn tail — the last record cut short or failing its
/// CRC, as a crash mid-write leaves it — is cut off the newest segment (it
/// was never acknowledged). Damage anywhere else is an error: those records
/// were acknowledged, and stormwatch will not guess past them.
pub fn read_segment(dir: &Path, seq: u64, newest: bool) -> Result<Segment, StoreError> {
    let path = segment_path(dir, seq);
    let mut buf = Vec::new();
    File::open(&path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    let mut records = Vec::new();
    let mut pos = 0usize;
    let mut torn_at = None;
    while pos < buf.len() {
        let rest = buf.len() - pos;
        let damage = if rest < HEADER {
            Some((true, format!("a {rest}-byte fragment of a record header")))
        } else {
            let h = &buf[pos..pos + HEADER];
            let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
            let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            if len > MAX_RECORD || len > rest - HEADER {
                Some((
                    true,
                    format!("a record of {len} bytes with {} left", rest - HEADER),
                ))
            } else if crc32fast::hash(&buf[pos + HEADER..pos + HEADER + len]) != crc {
                Some((
                    pos + HEADER + len == buf.len(),
                    format!("a {len}-byte record failing its CRC"),
                ))
            } else {
                records.push(buf[pos + HEADER..pos + HEADER + len].to_vec());
                pos += HEADER + len;
                None
            }
        };
        if let Some((at_tail, what)) = damage {
            if newest && at_tail {
                torn_at = Some(pos as u64);
                break;
            }
            return Err(StoreError::data(
                format!("WAL segment {} is damaged at byte {pos}", path.display()),
                format!(
                    "{what}, with {rest} bytes from there to the end; these were acknowledged, so stormwatch will not \
                     guess past them: move the file aside to start (the records after byte {pos} are then lost)"
                ),
            ));
        }
    }
    if let Some(at) = torn_at {
        OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| {
                f.set_len(at)?;
                f.sync_all()
            })
            .map_err(|e| {
                StoreError::io(format!("cutting the torn tail of {}", path.display()), e)
            })?;
    }
    Ok(Segment {
        seq,
        records,
        torn_at,
    })
}

impl Wal {
    /// Start a new segment after the highest one present.
    pub fn create(dir: &Path, after: u64) -> Result<Wal, StoreError> {
        let seq = after + 1;
        let path = segment_path(dir, seq);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io(format!("creating {}", path.display()), e))?;
        sync_dir(dir)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            seq,
            file,
            len: 0,
            dirty_tail: false,
        })
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Append records and fsync them: after `Ok`, they survive a crash.
    /// On failure the segment is cut back to where the batch began, so a
    /// refused batch never half-exists; until that cut succeeds, every
    /// append is refused.
    pub fn append_sync(&mut self, records: &[&[u8]]) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, self.seq);
        if self.dirty_tail {
            self.cut_back().map_err(|e| {
                StoreError::io(format!("cutting a failed write off {}", path.display()), e)
            })?;
        }
        let total: usize = records.iter().map(|r| HEADER + r.len()).sum();
        let mut buf = Vec::with_capacity(total);
        for r in records {
            buf.extend_from_slice(&(r.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(r).to_le_bytes());
            buf.extend_from_slice(r);
        }
        let result = crate::faults::check("wal_write")
            .and_then(|()| self.file.write_all(&buf))
            .and_then(|()| crate::faults::check("wal_fsync"))
            .and_then(|()| self.file.sync_data());
        match result {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                // The bytes may or may not be on disk: cut them off.
                self.dirty_tail = true;
                let _ = self.cut_back();
                Err(StoreError::io(
                    format!("writing the WAL segment {}", path.display()),
                    e,
                ))
            }
        }
    }

    fn cut_back(&mut self) -> io::Result<()> {
        self.file.set_len(self.len)?;
        self.file.sync_all()?;
        self.dirty_tail = false;
        Ok(())
    }

    /// Bytes in the current segment.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Close this segment and open the next; returns the sealed segment's number.
    pub fn rotate(&mut self) -> Result<u64, StoreError> {
        let sealed = self.seq;
        *self = Wal::create(&self.dir, sealed)?;
        Ok(sealed)
    }
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

/// Make a directory's entries (new, renamed or removed files) durable.
/// Replace `path` with `body` durably: written to `tmp` and fsynced, renamed
/// over `path`, the directory fsynced. A crash leaves the old file or the new.
pub fn replace_file(path: &Path, tmp: &Path, body: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
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

pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(format!("syncing directory {}", dir.display()), e))
}
