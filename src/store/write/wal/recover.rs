//! Reading a segment back on recovery: its records, and where it stops.
//! A stop is either a torn final group (cut off the newest segment) or
//! damage (refused, the file left as it was); the rules are in the parent
//! module's doc.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

use super::{
    segment_header, segment_path, GroupHeader, StoreError, GROUP_HEADER, GROUP_MAGIC, MAX_RECORD,
    RECORD_HEADER, SEGMENT_HEADER, SEGMENT_MAGIC, VERSION,
};

/// The unit a disk writes whole: a sector never reached reads as zeros.
const SECTOR: usize = 512;
/// A version 1 record's header: length and CRC.
pub(super) const V1_HEADER: usize = 8;

/// How a segment is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Version 1: records one after another, no segment header.
    V1,
    /// Version 2: a segment header, then checksummed groups.
    V2,
}

/// A segment's records as read back on recovery.
#[derive(Debug)]
pub struct Segment {
    pub seq: u64,
    pub format: Format,
    pub records: Vec<Vec<u8>>,
    /// Set when the tail was torn (a crash mid-write) and cut off.
    pub torn: Option<Torn>,
}

/// A torn tail that was cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// The byte the segment was cut back to.
    pub at: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// What was found there.
    pub what: String,
}

/// Where reading stopped and what was there: a torn write (cut, in the
/// newest segment) or damage (refused anywhere).
pub(super) struct Stop {
    at: usize,
    torn: bool,
    what: String,
}

pub(super) struct Parsed {
    pub(super) format: Format,
    pub(super) records: Vec<Vec<u8>>,
    pub(super) stop: Option<Stop>,
}

pub(super) fn torn(at: usize, what: String) -> Option<Stop> {
    Some(Stop {
        at,
        torn: true,
        what,
    })
}

pub(super) fn damage(at: usize, what: String) -> Option<Stop> {
    Some(Stop {
        at,
        torn: false,
        what,
    })
}

/// Read one segment. A torn final group of the newest segment is cut off
/// (it was never acknowledged); anything else that does not read is an
/// error naming the file and byte, and the file is left untouched.
pub fn read_segment(dir: &Path, seq: u64, newest: bool) -> Result<Segment, StoreError> {
    let path = segment_path(dir, seq);
    let mut buf = Vec::new();
    File::open(&path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    let parsed = parse(&buf);
    let torn = match parsed.stop {
        None => None,
        Some(stop) if !(stop.torn && newest) => {
            return Err(refusal(&path, &stop, parsed.records.len(), buf.len()))
        }
        Some(stop) => {
            OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| {
                    f.set_len(stop.at as u64)?;
                    f.sync_all()
                })
                .map_err(|e| {
                    StoreError::io(format!("cutting the torn tail of {}", path.display()), e)
                })?;
            Some(Torn {
                at: stop.at as u64,
                bytes: (buf.len() - stop.at) as u64,
                what: stop.what,
            })
        }
    };
    Ok(Segment {
        seq,
        format: parsed.format,
        records: parsed.records,
        torn,
    })
}

/// The error that stops the open: the file, the byte, what is there, and
/// what the operator can do. One sentence each: what is wrong, why it is
/// not cut, the two ways to start.
fn refusal(path: &Path, stop: &Stop, intact: usize, len: usize) -> StoreError {
    let older = if stop.torn {
        " This is an older segment, complete before the next one was begun, so no crash \
         interrupted it."
    } else {
        ""
    };
    let dir = path
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let (path, at) = (path.display(), stop.at);
    let keep = if intact == 0 {
        String::new()
    } else {
        format!(
            " either keep the {} before it (`truncate -s {at} {path}`; what follows is lost) or",
            n_records(intact)
        )
    };
    StoreError::data(
        format!("WAL segment {path} is damaged at byte {at}"),
        format!(
            "{}.{older} The {} bytes from there to the end may hold acknowledged spans, so \
             stormwatch will not guess past them. To start,{keep} move the file out of \
             {dir} (none of its records are replayed). Keep a copy of the file either way.",
            stop.what,
            len - at,
        ),
    )
}

/// A segment's records and where they stop, by its format.
fn parse(buf: &[u8]) -> Parsed {
    let header = segment_header();
    let v2 = |stop| Parsed {
        format: Format::V2,
        records: Vec::new(),
        stop,
    };
    if !buf.is_empty() && buf.len() < SEGMENT_HEADER && header.starts_with(buf) {
        return v2(torn(
            0,
            format!(
                "a {}-byte fragment of the segment header (a crash as the segment was created)",
                buf.len()
            ),
        ));
    }
    if buf.len() >= SEGMENT_MAGIC.len() && buf[..SEGMENT_MAGIC.len()] == SEGMENT_MAGIC {
        if buf.len() < SEGMENT_HEADER || buf[..SEGMENT_HEADER] != header {
            let version = buf
                .get(4..8)
                .map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]]).to_string())
                .unwrap_or_else(|| "(cut short)".into());
            return v2(damage(
                0,
                format!(
                    "a segment of format version {version}, where this stormwatch reads \
                     versions 1 and {VERSION} (was it written by a newer one?)"
                ),
            ));
        }
        return parse_v2(buf);
    }
    // A valid group where version 2 puts its first one: the segment header
    // is what is damaged (read as version 1, it would pass for a tear).
    let first = buf.get(SEGMENT_HEADER..SEGMENT_HEADER + GROUP_HEADER);
    if first
        .and_then(GroupHeader::decode)
        .is_some_and(|h| h.offset == SEGMENT_HEADER as u64)
    {
        return v2(damage(
            0,
            format!(
                "a damaged segment header ({:?} where {:?} belongs), before a valid group header \
                 at byte {SEGMENT_HEADER}",
                String::from_utf8_lossy(&buf[..SEGMENT_HEADER]),
                String::from_utf8_lossy(&header),
            ),
        ));
    }
    // A valid group header anywhere: the file is version 2 whose first
    // sector was lost (zeroed or overwritten). Read as version 1, its
    // zeros would pass for empty records and its first group for a tear.
    if let Some(q) = next_group(buf, 0) {
        return v2(damage(
            0,
            format!(
                "no segment header ({} bytes that are not {:?}), before a valid group header at \
                 byte {q}: the start of the segment was lost",
                SEGMENT_HEADER.min(buf.len()),
                String::from_utf8_lossy(&header),
            ),
        ));
    }
    super::recover_v1::parse_v1(buf)
}

/// Version 2: checksummed groups after the segment header.
fn parse_v2(buf: &[u8]) -> Parsed {
    let mut records = Vec::new();
    let mut pos = SEGMENT_HEADER;
    let stop = loop {
        if pos == buf.len() {
            break None;
        }
        let rest = buf.len() - pos;
        if rest < GROUP_HEADER {
            break torn(pos, format!("a {rest}-byte fragment of a group header"));
        }
        let Some(h) = GroupHeader::decode(&buf[pos..pos + GROUP_HEADER]) else {
            let what = "the group header there fails its checksum".to_string();
            break match next_group(buf, pos + 1) {
                Some(q) => damage(
                    pos,
                    format!("{what}, with a valid group header at byte {q} after it"),
                ),
                None => unfinished(buf, pos, what),
            };
        };
        if h.offset != pos as u64 {
            break damage(
                pos,
                format!(
                    "a valid group header written for byte {} (bytes before it were lost or added)",
                    h.offset
                ),
            );
        }
        let left = (rest - GROUP_HEADER) as u64;
        if h.body_len > left {
            break torn(
                pos,
                format!(
                    "the group of {} there declares {} bytes, and {left} are left (a write cut short)",
                    n_records(h.count as usize),
                    h.body_len
                ),
            );
        }
        let end = pos + GROUP_HEADER + h.body_len as usize;
        let body = &buf[pos + GROUP_HEADER..end];
        if crc32fast::hash(body) != h.body_crc {
            let what = format!(
                "the group of {} at bytes {pos} to {} fails its checksum",
                n_records(h.count as usize),
                end - 1
            );
            break if end < buf.len() {
                damage(
                    pos,
                    format!(
                        "{what}, and more was written after it (a later group is written only \
                         once this one was on disk, so no crash cut it short)"
                    ),
                )
            } else {
                unfinished(buf, pos, what)
            };
        }
        match split_records(body, h.count) {
            Ok(group) => records.extend(group),
            Err(what) => break damage(pos, what.to_string()),
        }
        pos = end;
    };
    Parsed {
        format: Format::V2,
        records,
        stop,
    }
}

/// The final group at `pos` fails its checksum: a torn write when a sector
/// of it reads as zeros (one the write never reached), damage otherwise.
fn unfinished(buf: &[u8], pos: usize, what: String) -> Option<Stop> {
    if zeroed(buf, pos) {
        torn(
            pos,
            format!("{what}: the last group, with sectors never written (zeros)"),
        )
    } else {
        damage(
            pos,
            format!(
                "{what}; it is the last group, but none of its sectors reads as never \
                 written (zeros), as a write a crash interrupted leaves them, so this is \
                 damage, not a torn write"
            ),
        )
    }
}

/// Whether a sector of the file from `from` on reads as zeros: everything
/// to the end, the piece from `from` to the next 512-byte boundary, any
/// whole sector after it, or the file's last partial sector (the file grew
/// past its last boundary, the write never reached it). A group header is
/// never zeros (its magic), nor, in practice, 512 aligned bytes of OTLP
/// protobuf.
fn zeroed(buf: &[u8], from: usize) -> bool {
    let zeros = |s: &[u8]| !s.is_empty() && s.iter().all(|&b| b == 0);
    if zeros(&buf[from..]) {
        return true;
    }
    let boundary = from.div_ceil(SECTOR) * SECTOR;
    if zeros(&buf[from..boundary.min(buf.len())]) {
        return true;
    }
    buf.get(boundary..)
        .unwrap_or_default()
        .chunks(SECTOR)
        .any(zeros)
}

/// The first valid group header at or after `from`, wherever it says it is.
fn next_group(buf: &[u8], from: usize) -> Option<usize> {
    let last = buf.len().checked_sub(GROUP_HEADER)?;
    (from..=last).find(|&q| {
        buf[q..q + GROUP_MAGIC.len()] == GROUP_MAGIC
            && GroupHeader::decode(&buf[q..q + GROUP_HEADER]).is_some()
    })
}

/// "1 record", "3 records".
fn n_records(n: usize) -> String {
    if n == 1 {
        "1 record".to_string()
    } else {
        format!("{n} records")
    }
}

/// How a group's body that passes its checksum does not hold the records
/// its header declares.
#[derive(Debug, thiserror::Error)]
enum BadBody {
    #[error("a group whose body passes its checksum but ends in a {rest}-byte fragment")]
    Fragment { rest: usize },
    #[error(
        "a group whose body passes its checksum but holds a record of {len} bytes with {left} left"
    )]
    Overlong { len: usize, left: usize },
    #[error("a group declaring {} whose body passes its checksum and holds {held}", n_records(*.declared))]
    Count { declared: usize, held: usize },
}

/// A checksummed body's records; that they do not fill it exactly as the
/// header says is damage (the checksum matched, so no tear did this).
fn split_records(body: &[u8], count: u32) -> Result<Vec<Vec<u8>>, BadBody> {
    // The count is checksummed, not trusted: no allocation larger than the body.
    let mut records = Vec::with_capacity((count as usize).min(body.len() / RECORD_HEADER));
    let mut pos = 0usize;
    while pos < body.len() {
        let rest = body.len() - pos;
        if rest < RECORD_HEADER {
            return Err(BadBody::Fragment { rest });
        }
        let h = &body[pos..pos + RECORD_HEADER];
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if len > MAX_RECORD || len > rest - RECORD_HEADER {
            return Err(BadBody::Overlong {
                len,
                left: rest - RECORD_HEADER,
            });
        }
        records.push(body[pos + RECORD_HEADER..pos + RECORD_HEADER + len].to_vec());
        pos += RECORD_HEADER + len;
    }
    if records.len() != count as usize {
        return Err(BadBody::Count {
            declared: count as usize,
            held: records.len(),
        });
    }
    Ok(records)
}
