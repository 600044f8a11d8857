//! `stormwatch import`'s bounds against files that are not what an export
//! file is (more of `import_bounds`): a device (`/dev/zero`), a FIFO or a
//! socket, named or found in a directory (directly or through a symlink),
//! once and under `--follow`, and a regular file past `[import]
//! max_file_bytes`. Every run is inside a memory cgroup, its peak memory
//! bounded; each refusal is one line naming the file and what it is (or the
//! cap); the valid files around them load, within seconds.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{spans, BIN};
use crate::import::{follower, json_line, sigterm};
use crate::memcap::{peak_rss, MemCap};

/// The cgroup of a run: far above what a bounded import needs, far below
/// what reading `/dev/zero` reaches in a few seconds.
const CGROUP_BYTES: u64 = 512 << 20;
/// The stated bound on the peak memory of a run that refuses what it must
/// and loads a few spans: the larger of the process's own peak RSS
/// (`VmHWM`, sampled every 10 ms while it runs, so it holds the binary's
/// mapped pages too) and the cgroup's peak (what was charged to it: its
/// anonymous memory and the page cache it brought in, counted to the end).
/// Measured: 77-83 MiB for the one-shot runs (the same as importing one
/// valid span: the Parquet flush at close; `/dev/zero` alone, 21 MiB),
/// 44-46 MiB for the follower (BENCHMARKS.md, "Hardening v2: import").
const PEAK_BOUND: u64 = 128 << 20;
/// The same for a follower that also loads 28 000 spans of a 9 MB log a
/// cap's worth per poll: measured 87 MiB.
const LOG_PEAK_BOUND: u64 = 160 << 20;

/// How a capped run ended.
struct Run {
    ok: bool,
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    peak: u64,
    oom_kills: u64,
    took: Duration,
}

/// `import` in a memory cgroup, with a config file when given; a run that
/// does not end within 60 s (a read that blocks) is killed and fails.
fn import_capped(data: &Path, cfg: Option<&Path>, paths: &[&Path]) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.arg("import").arg("--data-dir").arg(data);
    if let Some(c) = cfg {
        cmd.arg("--config").arg(c);
    }
    cmd.args(paths)
        .env_remove("STORMWATCH_FAULTS")
        .env("STORMWATCH_RETENTION_DAYS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cap = MemCap::new(CGROUP_BYTES);
    let started = Instant::now();
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    cap.add(pid);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let mut rss = 0;
    let out = loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(out) => break out.unwrap(),
            Err(_) => {
                rss = rss.max(peak_rss(pid));
                // Past this, the cgroup is dropped: the import is killed.
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "import did not end within 60 s: a read blocks"
                );
            }
        }
    };
    let run = Run {
        ok: out.status.success(),
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        peak: cap.peak().max(rss),
        oom_kills: cap.oom_kills(),
        took: started.elapsed(),
    };
    eprintln!(
        "import {paths:?}: {}, peak {:.1} MiB (VmHWM {:.1}, cgroup {:.1}), {:?}",
        run.status,
        run.peak as f64 / (1 << 20) as f64,
        rss as f64 / (1 << 20) as f64,
        cap.peak() as f64 / (1 << 20) as f64,
        run.took
    );
    assert_eq!(run.oom_kills, 0, "killed for memory: {}", run.stderr);
    assert!(
        run.status.code().is_some(),
        "import ended by a signal ({}): {}",
        run.status,
        run.stderr
    );
    assert!(
        run.peak < PEAK_BOUND,
        "peak {} bytes over the {PEAK_BOUND}-byte bound",
        run.peak
    );
    run
}

fn stored(data: &Path) -> usize {
    if data.join("spans").exists() {
        spans(data).height()
    } else {
        0
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The lines of `log` that mention `name`.
fn lines_naming<'a>(log: &'a str, name: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(name)).collect()
}

#[cfg(unix)]
#[test]
fn named_devices_and_fifos_are_refused_at_once_and_the_named_good_file_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let good = dir.path().join("good.json");
    std::fs::write(&good, json_line(1, 4)).unwrap();
    let data = dir.path().join("data");

    let run = import_capped(&data, None, &[Path::new("/dev/zero"), &fifo, &good]);
    assert!(!run.ok, "two files were refused: {}", run.stdout);
    assert!(run.took < Duration::from_secs(20), "{:?}", run.took);
    for (name, what) in [("/dev/zero", "a character device"), ("pipe", "a FIFO")] {
        let lines = lines_naming(&run.stderr, name);
        assert_eq!(lines.len(), 1, "one line for {name}:\n{}", run.stderr);
        assert!(
            lines[0].contains("refused") && lines[0].contains(what),
            "{}",
            lines[0]
        );
    }
    assert!(run.stdout.contains("imported 1 file(s)"), "{}", run.stdout);
    assert!(run.stdout.contains("2 file(s) refused"), "{}", run.stdout);
    assert_eq!(stored(&data), 4);
}

/// `in/`: a FIFO, a socket and a symlink to `/dev/zero` ahead of a valid
/// file (in name order).
#[cfg(unix)]
fn hostile_dir(root: &Path, name: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    mkfifo(&dir.join("a-pipe.jsonl"));
    let socket = std::os::unix::net::UnixListener::bind(dir.join("b-socket.json")).unwrap();
    // The socket file outlives the listener.
    drop(socket);
    std::os::unix::fs::symlink("/dev/zero", dir.join("c-zero.json")).unwrap();
    std::fs::write(dir.join("d-good.json"), json_line(2, 4)).unwrap();
    dir
}

const HOSTILE: [(&str, &str); 3] = [
    ("a-pipe.jsonl", "a FIFO"),
    ("b-socket.json", "a socket"),
    ("c-zero.json", "a character device"),
];

#[cfg(unix)]
#[test]
fn a_directory_walk_skips_fifos_sockets_and_a_link_to_dev_zero_and_loads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let input = hostile_dir(dir.path(), "in");
    let data = dir.path().join("data");

    let run = import_capped(&data, None, &[&input]);
    assert!(
        run.ok,
        "skipped in a directory, as a loop is: {}",
        run.stderr
    );
    assert!(run.took < Duration::from_secs(20), "{:?}", run.took);
    for (name, what) in HOSTILE {
        let lines = lines_naming(&run.stderr, name);
        assert_eq!(lines.len(), 1, "one line for {name}:\n{}", run.stderr);
        assert!(
            lines[0].contains("skipped") && lines[0].contains(what),
            "{}",
            lines[0]
        );
    }
    assert!(run.stdout.contains("imported 1 file(s)"), "{}", run.stdout);
    assert!(
        run.stdout.contains("3 not regular skipped"),
        "{}",
        run.stdout
    );
    assert_eq!(stored(&data), 4);
}

/// A follower of `watched` in a memory cgroup until `spans` are stored
/// (within `within`) and a few more polls went by; its stderr, how long
/// the spans took and its peak memory (the larger of its own `VmHWM` and
/// the cgroup's peak), which must stay under `bound`.
fn follow_capped(
    dir: &Path,
    watched: &Path,
    extra: &str,
    spans: usize,
    (within, bound): (Duration, u64),
) -> (String, Duration, u64, String) {
    let cfg = dir.join("follow.toml");
    std::fs::write(
        &cfg,
        format!("[store]\nflush_interval_secs = 1\n[import]\npoll_interval_ms = 100\n{extra}"),
    )
    .unwrap();
    let data = dir.join("followed");
    let cap = MemCap::new(CGROUP_BYTES);
    let started = Instant::now();
    let mut child = follower(&data, watched, &cfg);
    cap.add(child.id());
    while stored(&data) != spans {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the follower ended ({status}, {} OOM kill(s)): {}",
                cap.oom_kills(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            started.elapsed() < within,
            "{} of {spans} spans stored after {within:?}: the follower is stuck",
            stored(&data)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(600));
    let (rss, cgroup) = (peak_rss(child.id()), cap.peak());
    eprintln!(
        "follower VmHWM {:.1} MiB, cgroup peak {:.1} MiB",
        rss as f64 / (1 << 20) as f64,
        cgroup as f64 / (1 << 20) as f64
    );
    let peak = rss.max(cgroup);
    let (stdout, stderr) = sigterm(child);
    assert_eq!(cap.oom_kills(), 0);
    assert_eq!(stored(&data), spans, "nothing more after the wait");
    eprintln!(
        "follow {}: {spans} spans in {took:?}, peak {:.1} MiB",
        watched.display(),
        peak as f64 / (1 << 20) as f64
    );
    assert!(
        peak < bound,
        "peak {peak} bytes over the {bound}-byte bound"
    );
    (stderr, took, peak, stdout)
}

#[cfg(unix)]
#[test]
fn follow_never_blocks_on_a_fifo_first_and_skips_a_link_to_dev_zero_loading_the_file_after() {
    let dir = tempfile::tempdir().unwrap();
    let watched = hostile_dir(dir.path(), "watched");
    let (stderr, took, _, stdout) = follow_capped(
        dir.path(),
        &watched,
        "",
        4,
        (Duration::from_secs(10), PEAK_BOUND),
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        stdout.contains("3 not regular skipped"),
        "each counted once over the polls: {stdout}"
    );
    for (name, what) in HOSTILE {
        let lines = lines_naming(&stderr, name);
        assert_eq!(
            lines.len(),
            1,
            "one line for {name} over the polls:\n{stderr}"
        );
        assert!(
            lines[0].contains("skipped") && lines[0].contains(what),
            "{}",
            lines[0]
        );
    }
}

/// `json_line`s of 1000 spans each (about 300 KB), 28 of them (seeds
/// 20-47): about 9 MB of JSON lines, 28 000 spans.
fn many_lines() -> String {
    let mut text = String::new();
    for seed in 20..48 {
        text.push_str(&json_line(seed, 1000));
        text.push('\n');
    }
    text
}

#[test]
fn a_file_past_max_file_bytes_is_refused_naming_the_cap_and_a_growing_log_loads_in_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("capped.toml");
    let extra = "max_file_bytes = 1048576\n";
    std::fs::write(&cfg, format!("[import]\n{extra}")).unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, json_line(60, 6000)).unwrap();
    assert!(std::fs::metadata(&big).unwrap().len() > 1 << 20);
    let good = dir.path().join("good.json");
    std::fs::write(&good, json_line(3, 4)).unwrap();
    let data = dir.path().join("data");

    let run = import_capped(&data, Some(&cfg), &[&big, &good]);
    assert!(!run.ok, "the big file was refused: {}", run.stdout);
    let lines = lines_naming(&run.stderr, "big.json");
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].contains("refused")
            && lines[0].contains("1048576")
            && lines[0].contains("import.max_file_bytes"),
        "{}",
        lines[0]
    );
    assert!(run.stdout.contains("1 file(s) refused"), "{}", run.stdout);
    assert_eq!(stored(&data), 4, "the good file, nothing of the big one");

    // Followed: the whole-file document is refused once (skipped until it
    // changes), a line longer than the cap too, and a JSON-lines log nine
    // times the cap loads a cap's worth of lines per poll.
    let watched = dir.path().join("watched");
    std::fs::create_dir_all(&watched).unwrap();
    std::fs::rename(&big, watched.join("a-big.json")).unwrap();
    let long = json_line(61, 6000) + "\n";
    std::fs::write(watched.join("b-long.jsonl"), long).unwrap();
    let log = many_lines();
    assert!(log.len() > 8 << 20, "{}", log.len());
    std::fs::write(watched.join("c-log.jsonl"), log).unwrap();
    std::fs::write(watched.join("d-good.json"), json_line(4, 4)).unwrap();
    let (stderr, _, _, _) = follow_capped(
        dir.path(),
        &watched,
        extra,
        28_000 + 4,
        (Duration::from_secs(60), LOG_PEAK_BOUND),
    );
    for (name, what) in [
        ("a-big.json", "more than 1048576 bytes"),
        ("b-long.jsonl", "a line longer than 1048576 bytes"),
    ] {
        let lines = lines_naming(&stderr, name);
        assert_eq!(lines.len(), 1, "one line for {name}:\n{stderr}");
        assert!(
            lines[0].contains(what) && lines[0].contains("import.max_file_bytes"),
            "{}",
            lines[0]
        );
    }
}
