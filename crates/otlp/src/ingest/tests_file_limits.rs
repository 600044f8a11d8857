//! What an import file may be: a FIFO, a device, a socket (directly or
//! through a symlink) is refused without blocking and listed apart by a
//! walk; a regular file is read no further than its cap, even one that
//! grows after it was opened; a followed log is read a cap's worth of
//! lines at a time.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use super::file::{self, Limits, Refused};
use super::file_limits::{open_capped, open_regular, refusal};

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn not_regular(e: &std::io::Error) -> &'static str {
    match refusal(e) {
        Some(Refused::NotRegular { what }) => what,
        other => panic!("not a refusal of a non-regular file: {e} ({other:?})"),
    }
}

#[cfg(unix)]
#[test]
fn fifos_devices_and_sockets_are_refused_without_blocking_even_behind_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let socket = dir.path().join("sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let link = dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let started = Instant::now();
    for (path, what) in [
        (fifo.as_path(), "a FIFO (named pipe)"),
        (&socket, "a socket"),
        (&link, "a character device"),
        (Path::new("/dev/zero"), "a character device"),
        (dir.path(), "a directory"),
    ] {
        let e = open_regular(path).unwrap_err();
        assert_eq!(not_regular(&e), what, "{}", path.display());
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let e = file::read(path, &Limits::default()).unwrap_err();
        assert_eq!(not_regular(&e), what, "{}", path.display());
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(open_regular(&dir.path().join("missing")).is_err());
}

#[cfg(unix)]
#[test]
fn a_walk_lists_what_is_not_a_regular_file_apart_and_says_whether_it_was_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    mkfifo(&input.join("a-pipe"));
    std::os::unix::fs::symlink("/dev/null", input.join("b-null")).unwrap();
    std::fs::write(input.join("c.json"), "{}").unwrap();

    let found = file::expand(&[input.clone(), "/dev/zero".into()]).unwrap();
    assert_eq!(found.files, [input.join("c.json")]);
    let special: Vec<(String, &str, bool)> = found
        .special
        .iter()
        .map(|s| (s.path.display().to_string(), s.what, s.named))
        .collect();
    assert_eq!(
        special,
        [
            (
                input.join("a-pipe").display().to_string(),
                "a FIFO (named pipe)",
                false
            ),
            (
                input.join("b-null").display().to_string(),
                "a character device",
                false
            ),
            ("/dev/zero".to_string(), "a character device", true),
        ]
    );
}

#[test]
fn a_file_that_grows_after_it_was_opened_is_read_no_further_than_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("growing.pb");
    std::fs::write(&path, [0u8; 100]).unwrap();
    let mut reader = open_capped(&path, 1024).unwrap();
    // Its size said 100 bytes when opened; now it holds 8 KiB more.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0u8; 8192])
        .unwrap();
    let mut buf = Vec::new();
    let e = reader.read_to_end(&mut buf).unwrap_err();
    assert_eq!(refusal(&e), Some(Refused::FileTooLarge { cap: 1024 }));
    assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
    assert!(buf.len() <= 1024, "{} bytes read", buf.len());

    // A file past the cap already is refused before it is read; at the cap
    // it is read whole.
    let e = open_capped(&path, 8291).err().unwrap();
    assert_eq!(refusal(&e), Some(Refused::FileTooLarge { cap: 8291 }));
    let mut all = Vec::new();
    open_capped(&path, 8292)
        .unwrap()
        .read_to_end(&mut all)
        .unwrap();
    assert_eq!(all.len(), 8292);
}

#[test]
fn a_file_past_max_file_bytes_is_refused_gzip_d_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("big.json");
    std::fs::write(&plain, format!("{{\"pad\":\"{}\"}}", "x".repeat(4096))).unwrap();
    let limits = Limits {
        max_file_bytes: 1024,
        ..Limits::default()
    };
    let e = file::sniff(&plain, &limits).unwrap_err();
    assert_eq!(refusal(&e), Some(Refused::FileTooLarge { cap: 1024 }));
    let e = file::read(&plain, &limits).unwrap_err();
    assert!(e.to_string().contains("more than 1024 bytes"), "{e}");
    assert!(file::read(&plain, &Limits::default()).is_ok());

    // The cap is on the file's bytes: a gzip'd file past it is refused
    // before anything is decompressed.
    let gz = dir.path().join("big.json.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    e.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let e = file::read(&gz, &limits).unwrap_err();
    assert_eq!(refusal(&e), Some(Refused::FileTooLarge { cap: 1024 }));
}

#[test]
fn a_followed_log_is_read_a_cap_of_lines_at_a_time_and_a_longer_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let line = "{\"resourceSpans\":[]}\n"; // 21 bytes
    std::fs::write(&path, line.repeat(10)).unwrap();
    // 50 bytes: two whole lines per call.
    let mut offset = 0;
    let mut lines = 0;
    let mut calls = 0;
    while offset < 210 {
        let (records, o, l) = file::read_lines_from(&path, offset, lines, 50).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].line, Some(lines + 1));
        (offset, lines) = (o, l);
        calls += 1;
    }
    assert_eq!((offset, lines, calls), (210, 10, 5));

    // A line longer than the cap, then a short one.
    let long = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(100));
    std::fs::write(&path, format!("{line}{long}{line}")).unwrap();
    let (records, offset, _) = file::read_lines_from(&path, 0, 0, 50).unwrap();
    assert_eq!((records.len(), offset), (1, 21));
    let e = file::read_lines_from(&path, offset, 1, 50).unwrap_err();
    assert_eq!(refusal(&e), Some(Refused::LineTooLong { cap: 50 }));
    // An incomplete short line is left for later, not refused.
    std::fs::write(&path, "{\"resourceSpans\"").unwrap();
    let (records, offset, _) = file::read_lines_from(&path, 0, 0, 50).unwrap();
    assert_eq!((records.len(), offset), (0, 0));
}
