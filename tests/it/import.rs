//! `stormwatch import`: every file layout, bad lines skipped with their
//! location, and `--follow` remembering what it took across restarts.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::common::{repo, run, spans, BIN};

fn request(seed: u8, n: usize) -> ExportTraceServiceRequest {
    let doc = serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": (0..n).map(|i| serde_json::json!({
        "traceId": format!("{seed:02x}").repeat(16),
        "spanId": format!("{:016x}", i + 1),
        "name": "execute_tool fetch_page",
        "startTimeUnixNano": "1785354394532000000",
        "endTimeUnixNano": "1785354395532000000",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                       {"key": "gen_ai.tool.name", "value": {"stringValue": "fetch_page"}}]
    })).collect::<Vec<_>>()}]}]});
    stormwatch::ingest::json::decode(doc.to_string().as_bytes()).unwrap()
}

pub(crate) fn json_line(seed: u8, n: usize) -> String {
    stormwatch::ingest::json::encode(&request(seed, n))
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn import(data: &Path, paths: &[&Path]) -> (bool, String, String) {
    import_env(data, paths, &[])
}

/// `import` with these environment variables (over `run`'s own).
fn import_env(data: &Path, paths: &[&Path], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut args = vec![
        "import".to_string(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, env);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn every_file_layout_loads_and_bad_lines_are_skipped_with_their_location() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("nested")).unwrap();
    // One pretty-printed document.
    let pretty = serde_json::to_string_pretty(
        &serde_json::from_str::<serde_json::Value>(&json_line(1, 3)).unwrap(),
    )
    .unwrap();
    std::fs::write(input.join("a.json"), pretty).unwrap();
    // JSON lines with a bad third line and a blank line.
    let jsonl = format!(
        "{}\n{}\n{{\"resourceSpans\": 12}}\n\n{}\n",
        json_line(2, 2),
        json_line(3, 2),
        json_line(4, 2)
    );
    std::fs::write(input.join("b.jsonl"), &jsonl).unwrap();
    // The same lines gzip'd, under a name that does not say JSON lines.
    std::fs::write(
        input.join("nested/c.log.gz"),
        gz(json_line(5, 4).as_bytes()),
    )
    .unwrap();
    // A bare protobuf request, and the Collector's length-framed protobuf.
    std::fs::write(input.join("d.pb"), request(6, 2).encode_to_vec()).unwrap();
    let mut framed = Vec::new();
    for seed in [7u8, 8] {
        let body = request(seed, 3).encode_to_vec();
        framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
        framed.extend_from_slice(&body);
    }
    std::fs::write(input.join("e.bin"), gz(&framed)).unwrap();
    // Hidden files are skipped.
    std::fs::write(input.join(".hidden.json"), json_line(9, 1)).unwrap();

    let data = dir.path().join("data");
    let (ok, stdout, stderr) = import(&data, &[&input]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("b.jsonl:3: skipped"), "{stderr}");
    assert!(
        stderr.contains("$.resourceSpans: expected an array"),
        "{stderr}"
    );
    assert!(stdout.contains("imported 5 file(s)"), "{stdout}");
    assert!(
        stdout.contains("21 span(s) stored") && stdout.contains("1 bad record(s) skipped"),
        "{stdout}"
    );
    assert_eq!(spans(&data).height(), 21);

    // Importing again stores nothing twice.
    let (ok, stdout, _) = import(&data, &[&input]);
    assert!(ok);
    assert!(
        stdout.contains("0 span(s) stored, 21 already stored"),
        "{stdout}"
    );
    assert_eq!(spans(&data).height(), 21);
}

#[test]
fn unreadable_paths_fail_with_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = import(
        &dir.path().join("data"),
        &[&dir.path().join("missing.json")],
    );
    assert!(!ok);
    assert!(stderr.contains("missing.json"), "{stderr}");
    // A second writer on a data dir in use is refused, naming the lock.
    let data = dir.path().join("data2");
    let server = crate::common::Server::start(&data, &[], &[]);
    let f = dir.path().join("x.json");
    std::fs::write(&f, json_line(1, 1)).unwrap();
    let (ok, _, stderr) = import(&data, &[&f]);
    assert!(!ok);
    assert!(
        stderr.contains("in use by another stormwatch process"),
        "{stderr}"
    );
    server.stop();
    // A config file with an unknown key is refused, naming the key.
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[store]\nretention = 3\n").unwrap();
    let out = run(
        &[
            "import",
            "--config",
            cfg.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            f.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown field `retention`"), "{stderr}");
}

pub(crate) fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn follower(data: &Path, watched: &Path, cfg: &Path) -> std::process::Child {
    Command::new(BIN)
        .args([
            "import",
            "--data-dir",
            data.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--follow",
            watched.to_str().unwrap(),
        ])
        .env("STORMWATCH_RETENTION_DAYS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) fn sigterm(child: std::process::Child) -> (String, String) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn follow_pulls_new_files_and_lines_and_remembers_them() {
    let dir = tempfile::tempdir().unwrap();
    let watched = dir.path().join("watched");
    std::fs::create_dir_all(&watched).unwrap();
    let data = dir.path().join("data");
    let cfg = dir.path().join("stormwatch.toml");
    std::fs::write(&cfg, "[store]\nflush_interval_secs = 1\nrollup_interval_secs = 1\n[import]\npoll_interval_ms = 100\n").unwrap();
    let stored = |data: &Path| {
        if data.join("spans").exists() {
            spans(data).height()
        } else {
            0
        }
    };

    let child = follower(&data, &watched, &cfg);
    // A file exporter's output, growing line by line; the last line half-written.
    let log = watched.join("traces.jsonl");
    let mut f = std::fs::File::create(&log).unwrap();
    writeln!(f, "{}", json_line(1, 2)).unwrap();
    f.flush().unwrap();
    wait_for("the first line", || stored(&data) == 2);
    let line2 = json_line(2, 3);
    let (head, tail) = line2.split_at(20);
    write!(f, "{head}").unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(stored(&data), 2, "a half-written line must wait");
    writeln!(f, "{tail}").unwrap();
    f.flush().unwrap();
    wait_for("the completed line", || stored(&data) == 5);
    // A whole new file lands.
    std::fs::write(watched.join("batch.json"), json_line(3, 4)).unwrap();
    wait_for("the new file", || stored(&data) == 9);
    let (stdout, _) = sigterm(child);
    assert!(stdout.contains("9 span(s) stored"), "{stdout}");

    // Restarted, it takes only what is new.
    writeln!(f, "{}", json_line(4, 1)).unwrap();
    f.flush().unwrap();
    let child = follower(&data, &watched, &cfg);
    wait_for("the line added while stopped", || stored(&data) == 10);
    std::thread::sleep(Duration::from_millis(500));
    let (stdout, _) = sigterm(child);
    assert!(
        stdout.contains("1 span(s) stored, 0 already stored"),
        "{stdout}"
    );
    let _ = repo();
}

#[test]
fn an_import_past_retention_refuses_those_spans_and_says_how_to_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let f = dir.path().join("old.json");
    // July 29 2026: past a 30-day retention from any day this test runs.
    std::fs::write(&f, json_line(1, 3)).unwrap();
    let thirty = [("STORMWATCH_RETENTION_DAYS", "30")];
    let (ok, stdout, stderr) = import_env(&data, &[&f], &thirty);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("0 span(s) stored")
            && stdout.contains("3 refused for their time (0 later than now + ingest.max_future_secs, 3 older than the retention)"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "3 span(s) were refused: they start on days older than the retention (it keeps "
        ) && stderr.contains("--retention-days 0"),
        "{stderr}"
    );
    // The partial-success reason, per record, names the bound.
    assert!(
        stderr.contains("before ") && stderr.contains("the first day the 30-day retention keeps"),
        "{stderr}"
    );
    let day = stormwatch::model::day_from_str("2026-07-29").unwrap();
    assert!(
        stormwatch::store::Layout::new(&data)
            .parts(day)
            .unwrap()
            .is_empty(),
        "no day made for refused spans"
    );
    // Beside spans of today, only the old ones are refused; with
    // --retention-days 0 (the tests' default) the old ones are kept.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string();
    let today = json_line(2, 2)
        .replace("1785354394532000000", &now_ns)
        .replace("1785354395532000000", &now_ns);
    let recent = dir.path().join("today.json");
    std::fs::write(&recent, today).unwrap();
    let (ok, stdout, stderr) = import_env(&dir.path().join("data2"), &[&f, &recent], &thirty);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("2 span(s) stored") && stdout.contains("3 refused for their time"),
        "{stdout}"
    );
    let (ok, stdout, stderr) = import_env(&dir.path().join("data3"), &[&f], &[]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("3 span(s) stored") && stdout.contains("0 refused for their time"),
        "{stdout}"
    );
}
