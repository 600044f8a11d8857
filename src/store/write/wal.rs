//! The write-ahead log: numbered segment files of checksummed groups of
//! records, each record one acknowledged request as OTLP protobuf. One
//! `append_sync` writes one group and fsyncs it (group commit); a segment is
//! deleted only once a committed flush covers it.
//!
//! **Format** (version 2; all integers little-endian):
//!
//! ```text
//! segment := "SWAL" version:u32=2  group*
//! group   := "SWGR" count:u32 offset:u64 body_len:u64 body_crc:u32 header_crc:u32  body
//! body    := (len:u32 payload[len]){count}
//! ```
//!
//! `offset` is the group's own byte position in the segment, `body_crc` the
//! CRC-32 of the body (record lengths and payloads), `header_crc` the CRC-32
//! of the 28 header bytes before it. A flipped length is therefore told
//! apart from a write cut short: the header that declares the extent is
//! itself checksummed. A segment that does not begin with `SWAL` is a
//! version 1 segment (`len:u32 crc32(payload):u32 payload`, one record after
//! another, as stormwatch wrote before) and is read with version 1's rules;
//! new segments are always version 2, their header written with their first
//! group (a segment that took none is empty). (A stormwatch from before version 2
//! takes a version 2 segment for a torn one, or for damage: downgrade only
//! after a clean shutdown, which leaves no records in the WAL.)
//!
//! **What recovery cuts** ([`read_segment`]). Groups are written strictly
//! one after another: the next `append_sync` starts only after the previous
//! one's fsync returned, a failed write is cut back before anything else is
//! appended, and a segment is closed only with no failed write on its end.
//! So a crash can have interrupted at most one write, the final group of the
//! newest segment, and every group before it, or in an older segment, was
//! fsynced. The final group is the one no valid group header follows. It is
//! cut, as a torn write that was never acknowledged, when its bytes are what
//! an interrupted write leaves:
//! - **cut short**: fewer bytes left than a group header, or a valid header
//!   whose declared extent runs past the end of the file (the length reached
//!   the disk and not all the data); or
//! - **unwritten sectors**: it fails its checksum (header or body) and a
//!   sector of the file inside it reads as zeros: a whole 512-byte sector,
//!   the piece from the group's first byte to the next sector boundary, the
//!   file's last partial sector, or everything from its first byte to the
//!   end of the file. A crash mid-write can leave the file's new length on
//!   disk with some of the data it covers unwritten (the filesystem's
//!   metadata journal and the data blocks are written separately; with
//!   ext4 `data=writeback` an unwritten block may even show old bytes
//!   rather than zeros, which is refused, not cut), and a block never
//!   written reads as zeros.
//!
//! Everything else is damage and refuses to start, naming the file, the
//! byte and what was found, and leaving the file as it was: damage followed
//! by valid data (a valid group header anywhere after a bad one, or any
//! byte after a group that fails its checksum), anything wrong in an older
//! segment, an unknown version. So is a **complete final group that fails
//! its checksum with no zeroed sector** (a flipped payload byte, say): all
//! its bytes are there, and on ext4 (`data=ordered`, the default) a length
//! is only persisted once the data it covers is written, so it was most likely fsynced
//! and acknowledged; it is bit rot or a misbehaving disk, not a torn write.
//! The operator decides: the message says to move the file out of the WAL directory, or to cut
//! it at the named byte (which drops exactly that group). The one guess left:
//! a rotted final group that also holds a zeroed sector is cut (a group
//! header is never zeros, and OTLP protobuf hardly ever holds 512 aligned
//! zero bytes).
//!
//! A segment that does not begin with `SWAL` but holds a valid group
//! header anywhere is a version 2 segment whose first sector was lost: it
//! is refused, never read as version 1 (whose zeros would pass for empty
//! records). Version 1 segments keep version 1's rules: in the newest one,
//! a record cut short, or failing its CRC as the very last bytes, is cut;
//! zeros to the end of the file are a write never reached, and cut; an
//! empty record (version 1 never wrote one) or a length past the 1 GiB
//! record limit before more bytes is damage. Without a header checksum a
//! flipped length under the limit there still reads as a tear; such a
//! segment is only ever read on the first start after an upgrade.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use crate::store::fsutil::{replace_file, sync_dir};
pub use crate::store::segments::{delete_upto, list, segment_path};
use crate::store::StoreError;

mod recover;
mod recover_v1;

pub use recover::{read_segment, Format, Segment, Torn};

/// A record larger than this is corrupt, not real (the body cap is far lower).
const MAX_RECORD: usize = 1 << 30;
/// The first bytes of a version 2 segment.
const SEGMENT_MAGIC: [u8; 4] = *b"SWAL";
const VERSION: u32 = 2;
/// The segment header: magic and version.
pub(crate) const SEGMENT_HEADER: usize = 8;
/// The first bytes of a group header.
const GROUP_MAGIC: [u8; 4] = *b"SWGR";
/// A group header: magic, count, offset, body length, body CRC, header CRC.
pub(crate) const GROUP_HEADER: usize = 32;
/// A record's frame inside a group body: its length.
pub(crate) const RECORD_HEADER: usize = 4;

/// The header of a version 2 segment.
fn segment_header() -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..4].copy_from_slice(&SEGMENT_MAGIC);
    h[4..].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// A group's header, as written before its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupHeader {
    count: u32,
    /// Where the group starts in its segment.
    offset: u64,
    body_len: u64,
    body_crc: u32,
}

impl GroupHeader {
    fn encode(&self) -> [u8; GROUP_HEADER] {
        let mut h = [0u8; GROUP_HEADER];
        h[..4].copy_from_slice(&GROUP_MAGIC);
        h[4..8].copy_from_slice(&self.count.to_le_bytes());
        h[8..16].copy_from_slice(&self.offset.to_le_bytes());
        h[16..24].copy_from_slice(&self.body_len.to_le_bytes());
        h[24..28].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32fast::hash(&h[..28]);
        h[28..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// The header in `b` (at least [`GROUP_HEADER`] bytes), or `None` when
    /// its magic or checksum is wrong.
    fn decode(b: &[u8]) -> Option<GroupHeader> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if b.len() < GROUP_HEADER
            || b[..4] != GROUP_MAGIC
            || crc32fast::hash(&b[..28]) != u32_at(28)
        {
            return None;
        }
        Some(GroupHeader {
            count: u32_at(4),
            offset: u64_at(8),
            body_len: u64_at(16),
            body_crc: u32_at(24),
        })
    }
}

/// One group as written at byte `offset` of a segment: header and body.
fn encode_group(offset: u64, records: &[&[u8]]) -> Vec<u8> {
    let body: usize = records.iter().map(|r| RECORD_HEADER + r.len()).sum();
    let mut buf = Vec::with_capacity(GROUP_HEADER + body);
    buf.resize(GROUP_HEADER, 0);
    for r in records {
        buf.extend_from_slice(&(r.len() as u32).to_le_bytes());
        buf.extend_from_slice(r);
    }
    let header = GroupHeader {
        count: records.len() as u32,
        offset,
        body_len: body as u64,
        body_crc: crc32fast::hash(&buf[GROUP_HEADER..]),
    };
    buf[..GROUP_HEADER].copy_from_slice(&header.encode());
    buf
}

/// The open log: the segment being appended to.
pub struct Wal {
    dir: PathBuf,
    seq: u64,
    file: File,
    len: u64,
    /// A failed write could not be cut back: nothing is appended until it is.
    dirty_tail: bool,
}

impl Wal {
    /// Start a new (version 2) segment after the highest one present; its
    /// directory entry is fsynced. The segment header goes out with the
    /// first group, so a segment that never took one stays empty (a clean
    /// stop leaves no bytes in the WAL).
    pub fn create(dir: &Path, after: u64) -> Result<Wal, StoreError> {
        let seq = after + 1;
        let path = segment_path(dir, seq);
        let file = OpenOptions::new()
            .create_new(true)
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

    /// Append records as one group and fsync it: after `Ok`, they survive a
    /// crash. On failure the segment is cut back to where the group began,
    /// so a refused group never half-exists; until that cut succeeds, every
    /// append is refused.
    pub fn append_sync(&mut self, records: &[&[u8]]) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, self.seq);
        if self.dirty_tail {
            self.cut_back().map_err(|e| {
                StoreError::io(format!("cutting a failed write off {}", path.display()), e)
            })?;
        }
        if records.is_empty() {
            return Ok(());
        }
        if let Some(r) = records.iter().find(|r| r.len() > MAX_RECORD) {
            return Err(StoreError::data(
                format!("writing the WAL segment {}", path.display()),
                format!(
                    "a record of {} bytes, over the {MAX_RECORD}-byte limit",
                    r.len()
                ),
            ));
        }
        if u32::try_from(records.len()).is_err() {
            return Err(StoreError::data(
                format!("writing the WAL segment {}", path.display()),
                format!("a group of {} records, over u32::MAX", records.len()),
            ));
        }
        let buf = if self.len == 0 {
            let mut buf = segment_header().to_vec();
            buf.extend_from_slice(&encode_group(SEGMENT_HEADER as u64, records));
            buf
        } else {
            encode_group(self.len, records)
        };
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

    /// Bytes in the current segment, its header included (0 before the
    /// first group).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the current segment holds no group.
    pub fn is_empty(&self) -> bool {
        self.len <= SEGMENT_HEADER as u64
    }

    /// Close this segment and open the next; returns the closed segment's
    /// number. Refused while a failed write is not cut back: only the
    /// newest segment may end in an unfinished group.
    pub fn rotate(&mut self) -> Result<u64, StoreError> {
        if self.dirty_tail {
            let path = segment_path(&self.dir, self.seq);
            self.cut_back().map_err(|e| {
                StoreError::io(format!("cutting a failed write off {}", path.display()), e)
            })?;
        }
        let closed = self.seq;
        *self = Wal::create(&self.dir, closed)?;
        Ok(closed)
    }
}
