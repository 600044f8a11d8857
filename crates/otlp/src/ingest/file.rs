//! Reading OTLP files: one JSON document, JSON lines (the Collector's file
//! exporter and Python's `otlp-json-file` exporter: one request per line),
//! protobuf (a single request or the file exporter's 4-byte length-prefixed
//! frames), each optionally gzip'd. A bad record is reported with its line
//! and skipped; the rest of the file still loads. A gzip'd file is read
//! under a cap on what it decompresses to (past it, an error of kind
//! `FileTooLarge`: a gzip bomb), and a directory walk does not follow a link
//! back to a directory above it (a loop), nor walk a directory (or list a
//! file) a second time when another link leads to it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use super::json;

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
    /// The files, in walk order, each once.
    pub files: Vec<PathBuf>,
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

/// A reader that fails (`FileTooLarge`) once more than `cap` bytes came out.
struct Capped<R> {
    inner: R,
    cap: u64,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the cap is enough to know it is passed.
        let room = self.left.saturating_add(1).min(buf.len() as u64) as usize;
        let n = self.inner.read(&mut buf[..room])?;
        if n as u64 > self.left {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "decompresses to more than {} bytes, the cap on a file's decompressed content",
                    self.cap
                ),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A reader of the file's content, gzip undone, at most `max_decompressed`
/// bytes of it. The gzip magic is read from the same open file the content
/// comes from (a file swapped in between cannot slip past undecoded).
fn decoded(path: &Path, max_decompressed: u64) -> io::Result<Box<dyn Read>> {
    let mut f = File::open(path)?;
    let mut magic = Vec::with_capacity(2);
    (&mut f).take(2).read_to_end(&mut magic)?;
    f.seek(SeekFrom::Start(0))?;
    if magic == [0x1f, 0x8b] {
        Ok(Box::new(Capped {
            inner: flate2::read::MultiGzDecoder::new(f),
            cap: max_decompressed,
            left: max_decompressed,
        }))
    } else {
        Ok(Box::new(f))
    }
}

/// [`decoded`], buffered.
fn content(path: &Path, max_decompressed: u64) -> io::Result<Box<dyn BufRead>> {
    Ok(Box::new(BufReader::new(decoded(path, max_decompressed)?)))
}

/// How much of a file [`sniff`] reads, at most, to find its first line.
const SNIFF_BYTES: u64 = 64 << 20;

/// Guess the layout from the name and the first bytes: at most 64 MiB of
/// them (and one more), and no more than `max_decompressed` out of a
/// gzip'd file (past it, an error of kind `FileTooLarge`).
pub fn sniff(path: &Path, max_decompressed: u64) -> io::Result<FileKind> {
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
    let mut r = BufReader::new(decoded(path, max_decompressed)?.take(SNIFF_BYTES + 1));
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

/// Read every request in a file, in order; a gzip'd file that decompresses
/// to more than `max_decompressed` bytes is an error (`FileTooLarge`), and
/// none of its records are returned.
pub fn read(path: &Path, max_decompressed: u64) -> io::Result<(FileKind, Vec<Record>)> {
    let kind = sniff(path, max_decompressed)?;
    let records = match kind {
        FileKind::Json => {
            let mut buf = Vec::new();
            content(path, max_decompressed)?.read_to_end(&mut buf)?;
            vec![Record {
                line: None,
                result: json::decode(&buf).map_err(|e| e.to_string()),
            }]
        }
        FileKind::JsonLines => {
            let mut records = Vec::new();
            read_lines(content(path, max_decompressed)?, 0, &mut records)?;
            records
        }
        FileKind::Protobuf => {
            let mut buf = Vec::new();
            content(path, max_decompressed)?.read_to_end(&mut buf)?;
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

/// The complete lines of a plain JSON-lines file after `offset`, for
/// `--follow`: the records, and the offset and line count after them.
pub fn read_lines_from(
    path: &Path,
    offset: u64,
    lines_before: usize,
) -> io::Result<(Vec<Record>, u64, usize)> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut records = Vec::new();
    let mut reader = BufReader::new(f);
    let consumed = read_lines(&mut reader, lines_before, &mut records)?;
    // Count the lines consumed, blank ones included, to keep numbering right.
    let mut f = File::open(path)?;
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
