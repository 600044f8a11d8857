//! Reading OTLP files: one JSON document, JSON lines (the Collector's file
//! exporter and Python's `otlp-json-file` exporter: one request per line),
//! protobuf (a single request or the file exporter's 4-byte length-prefixed
//! frames), each optionally gzip'd. A bad record is reported with its line
//! and skipped; the rest of the file still loads. Only regular files are
//! read, each under a cap on its bytes and, gzip'd, on what it decompresses
//! to (past either, an error of kind `FileTooLarge`: a gzip bomb, a device
//! or a file growing without end; `file_limits.rs`). A directory walk lists
//! what is neither a directory nor a regular file (a FIFO, a device, a
//! socket) apart, unopened, and does not follow a link back to a directory
//! above it (a loop), nor walk a directory (or list a file) a second time
//! when another link leads to it.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use super::file_limits::{describe, open_capped, open_regular, Capped};
use super::json;

pub use super::file_limits::{refusal, Limits, Refused};

/// How a file's content is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Json,
    JsonLines,
    Protobuf,
}

/// One request read from a file, or why it could not be read.
#[derive(Debug)]
pub struct Record {
    /// 1-based line for JSON lines, 1-based frame for framed protobuf.
    pub line: Option<usize>,
    pub result: Result<ExportTraceServiceRequest, String>,
}

/// What [`expand`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The regular files, in walk order, each once.
    pub files: Vec<PathBuf>,
    /// Paths that are neither a directory nor a regular file once symlinks
    /// are followed (a FIFO, a device, a socket), in walk order: not read.
    pub special: Vec<Special>,
    /// Links to a directory not followed because it leads back to a
    /// directory above them (a loop; the files there are listed already):
    /// each link, and the directory it leads to.
    pub loops: Vec<(PathBuf, PathBuf)>,
    /// Paths not walked (or listed) because the directory or file they
    /// lead to was reached already by another path (a second link to it,
    /// a hard link, a path given twice): each path, and the one it was
    /// first reached by.
    pub repeats: Vec<(PathBuf, PathBuf)>,
}

/// A path [`expand`] does not list as a file: what it is, and whether it was
/// one of the paths given (rather than found in a directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Special {
    pub path: PathBuf,
    pub what: &'static str,
    pub named: bool,
}

/// Every file below `paths` (directories walked in name order, symlinks
/// followed except back up the path being walked), skipping hidden files.
/// A directory or file is walked or listed once however many paths lead
/// to it, so a tree of links that branches stays as cheap as the
/// directories it holds.
pub fn expand(paths: &[PathBuf]) -> io::Result<Expanded> {
    let mut walk = Walk::default();
    for p in paths {
        walk.walk(p)?;
    }
    Ok(walk.out)
}

/// What identifies a directory or file however it is reached.
#[cfg(unix)]
fn id(_path: &Path, meta: &std::fs::Metadata) -> io::Result<Id> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn id(path: &Path, _meta: &std::fs::Metadata) -> io::Result<Id> {
    std::fs::canonicalize(path)
}

#[cfg(unix)]
type Id = (u64, u64);
#[cfg(not(unix))]
type Id = PathBuf;

#[derive(Default)]
struct Walk {
    /// The directories on the way to the one being walked (each by the path
    /// it was first reached by).
    above: Vec<PathBuf>,
    /// Every directory and file reached so far, and the path it was first
    /// reached by.
    seen: std::collections::HashMap<Id, PathBuf>,
    out: Expanded,
}

impl Walk {
    fn walk(&mut self, path: &Path) -> io::Result<()> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let meta = std::fs::metadata(path).map_err(named)?;
        if !meta.is_dir() && !meta.is_file() {
            self.out.special.push(Special {
                path: path.to_path_buf(),
                what: describe(&meta.file_type()),
                named: self.above.is_empty(),
            });
            return Ok(());
        }
        let id = id(path, &meta).map_err(named)?;
        if let Some(first) = self.seen.get(&id) {
            // Above the path being walked: a loop; elsewhere: walked already.
            let found = if self.above.contains(first) {
                &mut self.out.loops
            } else {
                &mut self.out.repeats
            };
            found.push((path.to_path_buf(), first.clone()));
            return Ok(());
        }
        self.seen.insert(id, path.to_path_buf());
        if !meta.is_dir() {
            self.out.files.push(path.to_path_buf());
            return Ok(());
        }
        self.above.push(path.to_path_buf());
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(named)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                !p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
            })
            .collect();
        entries.sort();
        for e in entries {
            self.walk(&e)?;
        }
        self.above.pop();
        Ok(())
    }
}

/// A reader of the regular file's content, at most `limits.max_file_bytes`
/// of it, gzip undone, at most `limits.max_decompressed_bytes` of that. The
/// gzip magic is read from the same open file the content comes from (a
/// file swapped in between cannot slip past undecoded).
fn decoded(path: &Path, limits: &Limits) -> io::Result<Box<dyn Read>> {
    let mut f = open_capped(path, limits.max_file_bytes)?;
    let mut magic = Vec::with_capacity(2);
    (&mut f).take(2).read_to_end(&mut magic)?;
    let gzip = magic == [0x1f, 0x8b];
    let raw = io::Cursor::new(magic).chain(f);
    if gzip {
        Ok(Box::new(Capped::decompressed(
            flate2::read::MultiGzDecoder::new(raw),
            limits.max_decompressed_bytes,
        )))
    } else {
        Ok(Box::new(raw))
    }
}

/// [`decoded`], buffered.
fn content(path: &Path, limits: &Limits) -> io::Result<Box<dyn BufRead>> {
    Ok(Box::new(BufReader::new(decoded(path, limits)?)))
}

/// Whether a regular file's content starts with the gzip magic.
pub fn is_gzip(path: &Path) -> io::Result<bool> {
    let mut magic = Vec::with_capacity(2);
    open_regular(path)?.take(2).read_to_end(&mut magic)?;
    Ok(magic == [0x1f, 0x8b])
}

/// `len` bytes of a regular file from `offset` (fewer if it is shorter).
pub fn read_at(path: &Path, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut f = open_regular(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len.min(1 << 20) as usize);
    f.take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

/// How much of a file [`sniff`] reads, at most, to find its first line.
const SNIFF_BYTES: u64 = 64 << 20;

/// Guess the layout from the name and the first bytes: at most 64 MiB of
/// them (and one more), and no more than `limits` allow (past them, an
/// error of kind `FileTooLarge`).
pub fn sniff(path: &Path, limits: &Limits) -> io::Result<FileKind> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".jsonl") || name.ends_with(".ndjson") {
        return Ok(FileKind::JsonLines);
    }
    if name.ends_with(".pb") || name.ends_with(".binpb") || name.ends_with(".proto") {
        return Ok(FileKind::Protobuf);
    }
    // Decompressed: the first line, one byte to tell whether more follows,
    // and no further (the cap still refuses a first line longer than it).
    let mut r = BufReader::new(decoded(path, limits)?.take(SNIFF_BYTES + 1));
    let mut first_line = Vec::new();
    r.by_ref()
        .take(SNIFF_BYTES)
        .read_until(b'\n', &mut first_line)?;
    let trimmed = first_line.trim_ascii_start();
    if !trimmed.starts_with(b"{") {
        return Ok(FileKind::Protobuf);
    }
    // A first line that is a whole JSON value means one request per line.
    let more = !r.fill_buf()?.is_empty();
    if more && serde_json::from_slice::<serde_json::Value>(&first_line).is_ok() {
        Ok(FileKind::JsonLines)
    } else {
        Ok(FileKind::Json)
    }
}

/// Read every request in a regular file, in order; a file past `limits`
/// (its bytes, or its gzip'd content decompressed) is an error
/// (`FileTooLarge`), and none of its records are returned.
pub fn read(path: &Path, limits: &Limits) -> io::Result<(FileKind, Vec<Record>)> {
    let kind = sniff(path, limits)?;
    let records = match kind {
        FileKind::Json => {
            let mut buf = Vec::new();
            content(path, limits)?.read_to_end(&mut buf)?;
            vec![Record {
                line: None,
                result: json::decode(&buf).map_err(|e| e.to_string()),
            }]
        }
        FileKind::JsonLines => {
            let mut records = Vec::new();
            read_lines(content(path, limits)?, 0, &mut records)?;
            records
        }
        FileKind::Protobuf => {
            let mut buf = Vec::new();
            content(path, limits)?.read_to_end(&mut buf)?;
            read_protobuf(&buf)
        }
    };
    Ok((kind, records))
}

/// JSON lines from `reader`, numbering from `first_line + 1`; blank lines are
/// skipped. Returns the bytes consumed by complete lines.
fn read_lines(
    mut reader: impl BufRead,
    first_line: usize,
    out: &mut Vec<Record>,
) -> io::Result<u64> {
    let mut consumed = 0u64;
    let mut line_no = first_line;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            // End of file, or a line still being written: leave it for later.
            return Ok(consumed);
        }
        consumed += n as u64;
        line_no += 1;
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        out.push(Record {
            line: Some(line_no),
            result: json::decode(line).map_err(|e| e.to_string()),
        });
    }
}

/// The complete lines of a plain JSON-lines regular file after `offset`,
/// within the next `max_bytes` bytes, for `--follow`: the records, and the
/// offset and line count after them (the lines past `max_bytes` are for
/// the next call). A line longer than `max_bytes` is an error
/// ([`Refused::LineTooLong`], kind `FileTooLarge`).
pub fn read_lines_from(
    path: &Path,
    offset: u64,
    lines_before: usize,
    max_bytes: u64,
) -> io::Result<(Vec<Record>, u64, usize)> {
    let mut f = open_regular(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut records = Vec::new();
    let mut reader = BufReader::new(f.take(max_bytes));
    let consumed = read_lines(&mut reader, lines_before, &mut records)?;
    if consumed == 0 && reader.get_ref().limit() == 0 {
        return Err(Refused::LineTooLong { cap: max_bytes }.into_io());
    }
    // Count the lines consumed, blank ones included, to keep numbering right.
    let mut f = open_regular(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut counted = 0usize;
    let mut chunk = BufReader::new(f.take(consumed));
    let mut buf = Vec::new();
    while chunk.read_until(b'\n', &mut buf)? > 0 {
        counted += 1;
        buf.clear();
    }
    Ok((records, offset + consumed, lines_before + counted))
}

fn read_protobuf(buf: &[u8]) -> Vec<Record> {
    // The Collector's file exporter frames each message with a 4-byte
    // big-endian length; a bare request never starts with a zero byte.
    if buf.first() != Some(&0) {
        return vec![Record {
            line: None,
            result: ExportTraceServiceRequest::decode(buf)
                .map_err(|e| format!("not an OTLP protobuf request: {e}")),
        }];
    }
    let mut records = Vec::new();
    let mut rest = buf;
    let mut frame = 0;
    while !rest.is_empty() {
        frame += 1;
        if rest.len() < 4 {
            records.push(Record {
                line: Some(frame),
                result: Err(format!("truncated frame header ({} bytes)", rest.len())),
            });
            break;
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if rest.len() - 4 < len {
            records.push(Record {
                line: Some(frame),
                result: Err(format!("frame says {len} bytes, {} remain", rest.len() - 4)),
            });
            break;
        }
        let body = &rest[4..4 + len];
        records.push(Record {
            line: Some(frame),
            result: ExportTraceServiceRequest::decode(body)
                .map_err(|e| format!("not an OTLP protobuf request: {e}")),
        });
        rest = &rest[4 + len..];
    }
    records
}
