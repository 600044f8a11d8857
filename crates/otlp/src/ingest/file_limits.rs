//! What an imported file may be, and how much of it is read: only a
//! regular file (told after following symlinks: `stat` first, so a device
//! or a FIFO is never opened, then `fstat` on what was opened, so one
//! swapped in between is not read either; the open is non-blocking, so a
//! FIFO swapped in cannot hang it), and no more than a cap of its bytes
//! however large it says it is or grows while read, and of its gzip'd
//! content once decompressed. A refusal is an [`io::Error`] carrying a
//! [`Refused`] (see [`refusal`]).

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// The caps on one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes read from the file itself (gzip'd or not).
    pub max_file_bytes: u64,
    /// Bytes a gzip'd file's content may decompress to.
    pub max_decompressed_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 1 << 30,
            max_decompressed_bytes: 1 << 30,
        }
    }
}

/// Why a file (or part of one) is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{what}, not a regular file (only regular files are read, after following symlinks)")]
    NotRegular { what: &'static str },
    #[error("it holds more than {cap} bytes, the cap on a file")]
    FileTooLarge { cap: u64 },
    #[error("decompresses to more than {cap} bytes, the cap on a file's decompressed content")]
    DecompressedTooLarge { cap: u64 },
    #[error("a line longer than {cap} bytes, the cap on a file's read")]
    LineTooLong { cap: u64 },
}

impl Refused {
    /// As an [`io::Error`]: kind `FileTooLarge` for a cap, `InvalidInput`
    /// for a file that is not regular.
    pub fn into_io(self) -> io::Error {
        let kind = match self {
            Refused::NotRegular { .. } => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::FileTooLarge,
        };
        io::Error::new(kind, self)
    }
}

/// The [`Refused`] an error carries, if it is one.
pub fn refusal(e: &io::Error) -> Option<Refused> {
    e.get_ref()?.downcast_ref::<Refused>().copied()
}

/// What a file type is, in words.
pub fn describe(t: &FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn regular(meta: &Metadata) -> io::Result<()> {
    if meta.is_file() {
        Ok(())
    } else {
        Err(Refused::NotRegular {
            what: describe(&meta.file_type()),
        }
        .into_io())
    }
}

/// Open `path` for reading if it is a regular file (symlinks followed).
/// Anything else is an error carrying [`Refused::NotRegular`], told by
/// `stat` before opening (a device is never opened, so its driver sees
/// nothing) and by `fstat` after (what was opened is what is read).
pub fn open_regular(path: &Path) -> io::Result<File> {
    regular(&std::fs::metadata(path)?)?;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO opens at once without a writer; a terminal does not become
        // ours. Neither flag changes how a regular file reads.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = options.open(path)?;
    regular(&f.metadata()?)?;
    Ok(f)
}

/// A reader that fails with `over` once more than `cap` bytes came out.
pub struct Capped<R> {
    inner: R,
    left: u64,
    over: Refused,
}

impl<R> Capped<R> {
    /// `inner`, at most `cap` bytes of it.
    pub(super) fn file(inner: R, cap: u64) -> Capped<R> {
        Capped {
            inner,
            left: cap,
            over: Refused::FileTooLarge { cap },
        }
    }

    /// `inner`'s decompressed content, at most `cap` bytes of it.
    pub(super) fn decompressed(inner: R, cap: u64) -> Capped<R> {
        Capped {
            inner,
            left: cap,
            over: Refused::DecompressedTooLarge { cap },
        }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the cap is enough to know it is passed.
        let room = self.left.saturating_add(1).min(buf.len() as u64) as usize;
        let n = self.inner.read(&mut buf[..room])?;
        if n as u64 > self.left {
            return Err(self.over.into_io());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A regular file at `path`, opened, that reads at most `max_file_bytes`
/// of it (past them, [`Refused::FileTooLarge`], however large the file
/// said it was when opened). A file whose size is past the cap already is
/// refused before anything is read.
pub fn open_capped(path: &Path, max_file_bytes: u64) -> io::Result<Capped<File>> {
    let f = open_regular(path)?;
    if f.metadata()?.len() > max_file_bytes {
        return Err(Refused::FileTooLarge {
            cap: max_file_bytes,
        }
        .into_io());
    }
    Ok(Capped::file(f, max_file_bytes))
}
