//! Reading files under hostile layouts: a tree of links that branches
//! without looping is walked once per directory, a file reached by two
//! paths is listed once, and sniffing a gzip'd file decompresses no more
//! than the cap allows.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::file::{self, FileKind, Limits};

/// The default caps, but at most `cap` bytes of decompressed content.
fn decompressed(cap: u64) -> Limits {
    Limits {
        max_decompressed_bytes: cap,
        ..Limits::default()
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn names(root: &Path, paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect()
}

/// `pairs` as their names relative to `root`.
fn pair_names(root: &Path, pairs: &[(PathBuf, PathBuf)]) -> Vec<Vec<String>> {
    pairs
        .iter()
        .map(|(a, b)| names(root, &[a.clone(), b.clone()]))
        .collect()
}

/// `in/` and `shared/1 .. shared/DEPTH`, each directory holding one file and
/// two links (`a`, `b`) to the next: 2^DEPTH paths to the deepest file,
/// DEPTH + 1 directories.
#[cfg(unix)]
#[test]
fn a_tree_of_links_that_branches_is_walked_once_per_directory() {
    use std::os::unix::fs::symlink;
    const DEPTH: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let level = |i: usize| {
        if i == 0 {
            root.join("in")
        } else {
            root.join(format!("shared/{i}"))
        }
    };
    for i in 0..=DEPTH {
        std::fs::create_dir_all(level(i)).unwrap();
        std::fs::write(level(i).join("f.json"), "{}").unwrap();
        if i < DEPTH {
            symlink(level(i + 1), level(i).join("a")).unwrap();
            symlink(level(i + 1), level(i).join("b")).unwrap();
        }
    }

    let started = Instant::now();
    let found = file::expand(&[level(0)]).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Each file once, by the first path (name order: `a` before `b` before
    // `f.json`, so the deepest comes first).
    let expected: Vec<String> = (0..=DEPTH)
        .rev()
        .map(|i| format!("in/{}f.json", "a/".repeat(i)))
        .collect();
    assert_eq!(names(root, &found.files), expected);
    assert!(found.loops.is_empty(), "{:?}", found.loops);
    // Each `b` is skipped, naming the `a` that reached the same directory.
    assert_eq!(found.repeats.len(), DEPTH, "{:?}", found.repeats);
    for (i, (path, first)) in found.repeats.iter().enumerate() {
        let above = "a/".repeat(DEPTH - 1 - i);
        assert_eq!(
            names(root, &[path.clone(), first.clone()]),
            [format!("in/{above}b"), format!("in/{above}a")]
        );
    }
}

/// A link back up is still a loop, not a repeat, and a directory given
/// twice (or below one given) is walked once.
#[cfg(unix)]
#[test]
fn a_loop_stays_a_loop_and_paths_given_twice_are_walked_once() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let input = root.join("in");
    std::fs::create_dir_all(input.join("sub")).unwrap();
    std::fs::write(input.join("sub/b.json"), "{}").unwrap();
    symlink(&input, input.join("sub/up")).unwrap();

    let found = file::expand(&[input.clone(), input.join("sub"), input.clone()]).unwrap();
    assert_eq!(names(root, &found.files), ["in/sub/b.json"]);
    assert_eq!(pair_names(root, &found.loops), [["in/sub/up", "in"]]);
    assert_eq!(
        pair_names(root, &found.repeats),
        [["in/sub", "in/sub"], ["in", "in"]]
    );
}

/// A file reached by a symlink, a hard link and its own name is listed once.
#[cfg(unix)]
#[test]
fn a_file_reached_by_several_paths_is_listed_once() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let input = root.join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a.json"), "{}").unwrap();
    std::fs::write(input.join("other.json"), "{}").unwrap();
    std::fs::hard_link(input.join("a.json"), input.join("b.json")).unwrap();
    symlink(input.join("a.json"), input.join("c.json")).unwrap();

    let found = file::expand(&[input]).unwrap();
    assert_eq!(names(root, &found.files), ["in/a.json", "in/other.json"]);
    assert_eq!(
        pair_names(root, &found.repeats),
        [["in/b.json", "in/a.json"], ["in/c.json", "in/a.json"]]
    );
}

/// A gzip'd file whose first line decompresses past the cap is refused by
/// the sniff already (it would read no more than the cap); under a cap it
/// fits, the layout is told as before.
#[test]
fn sniffing_a_gzip_file_decompresses_no_more_than_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    // One 4 MiB line (a JSON string) and a second line: a few KB gzip'd.
    let mut text = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(4 << 20));
    text.push_str("{}\n");
    let path = dir.path().join("big.json.gz");
    std::fs::write(&path, gzip(text.as_bytes())).unwrap();

    let err = file::sniff(&path, &decompressed(1 << 20)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge, "{err}");
    assert!(err.to_string().contains("1048576"), "{err}");
    let err = file::read(&path, &decompressed(1 << 20)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge, "{err}");

    assert_eq!(
        file::sniff(&path, &decompressed(8 << 20)).unwrap(),
        FileKind::JsonLines
    );
    // The cap is on the content: one byte short of it refuses the file.
    let exact = text.len() as u64;
    assert!(file::read(&path, &decompressed(exact)).is_ok());
    let err = file::read(&path, &decompressed(exact - 1)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge, "{err}");
}

/// The gzip magic is read from the file the content then comes from: a
/// gzip'd file is undone, a plain one (even one byte of the magic, or
/// empty) is read as it is.
#[test]
fn content_is_undone_only_when_it_starts_with_the_gzip_magic() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("one.json");
    std::fs::write(&gz, gzip(b"{\"resourceSpans\":[]}")).unwrap();
    let (kind, records) = file::read(&gz, &decompressed(1 << 20)).unwrap();
    assert_eq!(kind, FileKind::Json);
    assert!(records[0].result.is_ok(), "{:?}", records[0].result);

    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, "{\"resourceSpans\":[]}").unwrap();
    let (kind, records) = file::read(&plain, &decompressed(1 << 20)).unwrap();
    assert_eq!(kind, FileKind::Json);
    assert!(records[0].result.is_ok(), "{:?}", records[0].result);

    for (name, bytes) in [("half.pb", &[0x1f][..]), ("empty.pb", &[][..])] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let (kind, records) = file::read(&path, &decompressed(1 << 20)).unwrap();
        assert_eq!(kind, FileKind::Protobuf, "{name}");
        assert_eq!(records.len(), 1, "{name}");
    }
}
