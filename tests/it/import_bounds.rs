//! `stormwatch import`'s bounds against hostile files: a gzip bomb is
//! refused whole, naming the file and the cap (`[import]
//! max_decompressed_bytes`), once and under `--follow`; a symlink loop is
//! skipped with a warning, without hanging, while symlinks elsewhere (a
//! file, a directory) are still followed; a tree of links that branches
//! (two links to one directory, level after level) is read once per
//! directory, each file imported once.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{run, spans};
use crate::import::{follower, json_line, sigterm, wait_for};

/// `import` with a config file, within a minute (a walk that loops would
/// not end).
fn import_with(data: &Path, cfg: Option<&Path>, paths: &[&Path]) -> (bool, String, String) {
    let mut args = vec![
        "import".to_string(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    if let Some(c) = cfg {
        args.extend(["--config".to_string(), c.display().to_string()]);
    }
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = run(&args, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "import took {:?}",
        started.elapsed()
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn stored(data: &Path) -> usize {
    if data.join("spans").exists() {
        spans(data).height()
    } else {
        0
    }
}

/// Two good requests around 10 MB of blank lines: about 10 KB gzip'd.
fn bomb() -> Vec<u8> {
    use std::io::Write;
    let mut text = json_line(1, 2);
    text.push('\n');
    text.push_str(&"\n".repeat(10 << 20));
    text.push_str(&json_line(2, 3));
    text.push('\n');
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

#[test]
fn a_gzip_bomb_is_refused_naming_the_file_and_the_cap_and_nothing_of_it_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = dir.path().join("capped.toml");
    std::fs::write(&cfg, "[import]\nmax_decompressed_bytes = 1048576\n").unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, json_line(9, 4)).unwrap();
    let bomb_file = dir.path().join("bomb.jsonl.gz");
    let bytes = bomb();
    assert!(
        bytes.len() < 64 << 10,
        "the bomb is small: {} bytes",
        bytes.len()
    );
    std::fs::write(&bomb_file, &bytes).unwrap();

    let (ok, _, stderr) = import_with(&data, Some(&cfg), &[&good]);
    assert!(ok, "{stderr}");
    assert_eq!(stored(&data), 4);
    let (ok, stdout, stderr) = import_with(&data, Some(&cfg), &[&bomb_file]);
    assert!(!ok, "the bomb must be refused: {stdout}");
    assert!(
        stderr.contains("bomb.jsonl.gz")
            && stderr.contains("1048576")
            && stderr.contains("import.max_decompressed_bytes")
            && stderr.contains("nothing of it was imported"),
        "{stderr}"
    );
    assert_eq!(
        stored(&data),
        4,
        "nothing of the bomb's first lines is stored"
    );

    // The same file under the default cap (1 GiB) is just a file with many
    // blank lines: it was the cap that refused it.
    let (ok, stdout, stderr) = import_with(&data, None, &[&bomb_file]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("5 span(s) stored"), "{stdout}");
    assert_eq!(stored(&data), 9);
}

#[test]
fn a_followed_gzip_bomb_is_skipped_and_the_rest_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let watched = dir.path().join("watched");
    std::fs::create_dir_all(&watched).unwrap();
    let data = dir.path().join("data");
    let cfg = dir.path().join("stormwatch.toml");
    std::fs::write(
        &cfg,
        "[store]\nflush_interval_secs = 1\n[import]\npoll_interval_ms = 100\nmax_decompressed_bytes = 1048576\n",
    )
    .unwrap();
    std::fs::write(watched.join("a-bomb.jsonl.gz"), bomb()).unwrap();
    std::fs::write(watched.join("b-good.json"), json_line(9, 4)).unwrap();
    let child = follower(&data, &watched, &cfg);
    wait_for("the good file", || stored(&data) == 4);
    // A few more polls: the bomb stays skipped (warned about once).
    std::thread::sleep(Duration::from_millis(600));
    let (stdout, stderr) = sigterm(child);
    assert_eq!(stored(&data), 4, "{stdout}");
    let warned = stderr
        .lines()
        .filter(|l| l.contains("a-bomb.jsonl.gz") && l.contains("1048576"))
        .count();
    assert_eq!(
        warned, 1,
        "one warning naming the file and the cap:\n{stderr}"
    );
    assert!(stderr.contains("skipped until it changes"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_is_skipped_without_hanging_and_links_elsewhere_are_followed() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(input.join("sub")).unwrap();
    std::fs::create_dir_all(outside.join("more")).unwrap();
    std::fs::write(input.join("a.json"), json_line(1, 1)).unwrap();
    std::fs::write(input.join("sub/b.json"), json_line(2, 2)).unwrap();
    std::fs::write(outside.join("c.json"), json_line(3, 3)).unwrap();
    std::fs::write(outside.join("more/d.json"), json_line(4, 4)).unwrap();
    // Two loops, which together would make 2^40 paths: back to the top from
    // below, and a directory to itself.
    symlink(&input, input.join("sub/up")).unwrap();
    symlink(".", input.join("sub/here")).unwrap();
    // A file and a directory elsewhere: followed.
    symlink(outside.join("c.json"), input.join("link.json")).unwrap();
    symlink(outside.join("more"), input.join("more")).unwrap();

    let data = dir.path().join("data");
    let (ok, stdout, stderr) = import_with(&data, None, &[&input]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("imported 4 file(s)"), "{stdout}");
    assert_eq!(stored(&data), 1 + 2 + 3 + 4);
    for link in ["sub/up", "sub/here"] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("{link}: skipped: a symlink loop")))
            .unwrap_or_else(|| panic!("no warning for {link}:\n{stderr}"));
        assert!(line.contains("leads back to"), "{line}");
    }

    // Followed: the same tree loads, each loop warned about once.
    let stderr = follow_tree(dir.path(), &input, 10);
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("symlink loop"))
        .count();
    assert_eq!(warnings, 2, "{stderr}");
}

/// `import --follow` of `input` into `<dir>/followed`, polling every
/// 100 ms, until `spans` are stored and a few more polls went by; its stderr.
fn follow_tree(dir: &Path, input: &Path, spans: usize) -> String {
    let cfg = dir.join("stormwatch.toml");
    std::fs::write(
        &cfg,
        "[store]\nflush_interval_secs = 1\n[import]\npoll_interval_ms = 100\n",
    )
    .unwrap();
    let data = dir.join("followed");
    let child = follower(&data, input, &cfg);
    wait_for("the followed tree", || stored(&data) == spans);
    std::thread::sleep(Duration::from_millis(500));
    sigterm(child).1
}

/// `in/` and `shared/1 .. shared/12`, each holding one file and two links
/// (`a`, `b`) to the next: 2^12 paths to the deepest file, 13 files.
#[cfg(unix)]
#[test]
fn a_tree_of_links_that_branches_imports_each_file_once() {
    use std::os::unix::fs::symlink;
    const DEPTH: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let level = |i: usize| {
        if i == 0 {
            dir.path().join("in")
        } else {
            dir.path().join(format!("shared/{i}"))
        }
    };
    for i in 0..=DEPTH {
        std::fs::create_dir_all(level(i)).unwrap();
        std::fs::write(level(i).join("f.json"), json_line(10 + i as u8, 1)).unwrap();
        if i < DEPTH {
            symlink(level(i + 1), level(i).join("a")).unwrap();
            symlink(level(i + 1), level(i).join("b")).unwrap();
        }
    }

    let data = dir.path().join("data");
    let started = Instant::now();
    let (ok, stdout, stderr) = import_with(&data, None, &[&level(0)]);
    assert!(ok, "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(
        stdout.contains(&format!("imported {} file(s)", DEPTH + 1))
            && stdout.contains("0 already stored"),
        "each file once: {stdout}"
    );
    assert_eq!(stored(&data), DEPTH + 1);
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("skipped: it leads to what"))
        .collect();
    assert_eq!(
        skipped.len(),
        DEPTH,
        "one warning per second link:\n{stderr}"
    );
    assert!(
        skipped
            .iter()
            .all(|l| l.contains("/b: skipped") && l.contains("/a does")),
        "{stderr}"
    );
    assert!(!stderr.contains("symlink loop"), "{stderr}");

    // Followed: the same, each second link warned about once over the polls.
    let stderr = follow_tree(dir.path(), &level(0), DEPTH + 1);
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("skipped: it leads to what"))
        .count();
    assert_eq!(warnings, DEPTH, "{stderr}");
    assert_eq!(stored(&data), DEPTH + 1);
}
