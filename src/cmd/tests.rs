//! The commands called as functions, on real stores and real SQLite files
//! in temporary directories: what they print, their status, their errors.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::{alerts, config, coverage, import, signals, sweep, Format, Status};
use crate::config::Config;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// Run `f` with a fresh output buffer: its status and what it printed.
fn output(f: impl FnOnce(&mut dyn std::io::Write) -> anyhow::Result<Status>) -> (Status, String) {
    let mut out = Vec::new();
    let status = f(&mut out).unwrap();
    (status, String::from_utf8(out).unwrap())
}

/// A store holding the seeds' July 29 retry storms (kept whatever their age).
fn storms_store(data: &Path) -> String {
    let opts = import::Options {
        paths: vec![fixture("storms_jul29.json")],
        retention_days: Some(0),
        ..import::Options::default()
    };
    let (status, text) = output(|out| import::run(data, None, &Config::default(), &opts, out));
    assert_eq!(status, Status::Success);
    text
}

fn sweep_at(data: &Path, o: sweep::Options) -> (Status, String) {
    let o = sweep::Options {
        now: Some("2026-07-30".into()),
        ..o
    };
    output(|out| sweep::run(data, None, &Config::default(), None, &o, out))
}

/// The number before `label` in an import summary line.
fn count(summary: &str, label: &str) -> u64 {
    let at = summary.find(label).unwrap_or_else(|| panic!("{summary}"));
    let before = summary[..at].trim_end();
    before[before.rfind(' ').map_or(0, |i| i + 1)..]
        .parse()
        .unwrap_or_else(|_| panic!("{summary}"))
}

#[test]
fn import_counts_what_it_stored_and_a_second_import_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = storms_store(dir.path());
    assert!(first.starts_with("imported 1 file(s): "), "{first}");
    let stored = count(&first, "span(s) stored");
    assert!(stored > 0, "{first}");
    assert_eq!(count(&first, "already stored"), 0, "{first}");
    let again = storms_store(dir.path());
    assert_eq!(count(&again, "span(s) stored"), 0, "{again}");
    assert_eq!(count(&again, "already stored"), stored, "{again}");
}

#[test]
fn sweep_prints_the_storm_reuses_the_day_and_fails_while_signals_are_open() {
    let dir = tempfile::tempdir().unwrap();
    storms_store(dir.path());
    let new = sweep::Options {
        fail_on: Some(sweep::FailOn::New),
        ..sweep::Options::default()
    };
    let (status, text) = sweep_at(dir.path(), new.clone());
    assert_eq!(status, Status::Failure, "{text}");
    assert!(
        text.starts_with("stormwatch sweep at 2026-07-30T00:00:00.000Z over "),
        "{text}"
    );
    let storm = text
        .lines()
        .find(|l| l.contains("Retry storm: search_flights"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        storm.starts_with("SW-") && storm.contains("  [new]  "),
        "{storm}"
    );
    assert!(text.contains("4 finding(s) on 2026-07-29"), "{text}");

    assert!(text.contains(": 2 signal(s), 2 change(s)\n"), "{text}");

    // The same sweep again reuses the day and changes nothing; the
    // signals are still open.
    let any = sweep::Options {
        fail_on: Some(sweep::FailOn::Any),
        ..sweep::Options::default()
    };
    let (status, text) = sweep_at(dir.path(), any.clone());
    assert_eq!(status, Status::Failure, "{text}");
    assert!(
        text.contains("(0 day(s) read, 1 unchanged): 2 signal(s), 0 change(s)\n"),
        "{text}"
    );
    let rescan = sweep::Options {
        format: Format::Json,
        rescan: true,
        ..sweep::Options::default()
    };
    let (_, json) = sweep_at(dir.path(), rescan);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["days_scanned"], 1, "{json}");
    let all = report["signals"].as_array().unwrap();
    let storms: Vec<_> = all.iter().filter(|s| s["kind"] == "retry_storm").collect();
    assert_eq!(storms.len(), 1, "{json}");
    assert_eq!(
        storms[0]["key"],
        "v1:retry_storm:search_flights:unavailable"
    );

    // Muted signals are not open: --fail-on any passes.
    for s in all {
        let id = s["id"].as_str().unwrap();
        output(|out| signals::mute(dir.path(), id, None, true, out));
    }
    let (status, text) = sweep_at(dir.path(), any);
    assert_eq!(status, Status::Success, "{text}");
    assert!(
        text.contains("  [muted]  Retry storm: search_flights"),
        "{text}"
    );
}

#[test]
fn a_bad_now_is_named() {
    let dir = tempfile::tempdir().unwrap();
    storms_store(dir.path());
    let o = sweep::Options {
        now: Some("yesterday".into()),
        ..sweep::Options::default()
    };
    let err = sweep::run(
        dir.path(),
        None,
        &Config::default(),
        None,
        &o,
        &mut Vec::new(),
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("--now: ") && msg.contains("yesterday"),
        "{msg}"
    );
}

#[test]
fn signals_list_show_and_mute() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    storms_store(data);
    let (_, empty) = output(|out| signals::list(data, Format::Text, out));
    assert_eq!(empty, "no signals yet (run `stormwatch sweep`)\n");
    sweep_at(data, sweep::Options::default());

    let (status, list) = output(|out| signals::list(data, Format::Text, out));
    assert_eq!(status, Status::Success);
    let line = list
        .lines()
        .find(|l| l.contains("Retry storm: search_flights"))
        .unwrap_or_else(|| panic!("{list}"));
    let id = line.split_whitespace().next().unwrap().to_string();
    assert!(id.starts_with("SW-"), "{line}");
    assert!(
        line.starts_with(&format!("{id}  new        Retry storm")),
        "{line}"
    );

    let (_, show) = output(|out| signals::show(data, &id, Format::Text, out));
    let lines: Vec<&str> = show.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{id}  [new]  Retry storm")),
        "{show}"
    );
    assert_eq!(lines[1], "key: v1:retry_storm:search_flights:unavailable");
    assert!(lines[2].ends_with("4 finding(s) on 2026-07-29"), "{show}");
    let traces = lines.iter().filter(|l| l.starts_with("  trace ")).count();
    assert_eq!(traces, 4, "{show}");
    assert!(show.contains(" - -> new  ("), "{show}");

    let (_, muted) = output(|out| signals::mute(data, &id, None, false, out));
    assert_eq!(muted, format!("{id} muted\n"));
    let (_, json) = output(|out| signals::show(data, &id, Format::Json, out));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["state"], "muted", "{json}");
    let history = v["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{json}");
    assert_eq!(history[1]["from"], "new");
    assert_eq!(history[1]["to"], "muted");

    let err = signals::show(data, "SW-NOPE", Format::Text, &mut Vec::new()).unwrap_err();
    assert!(format!("{err:#}").contains("SW-NOPE"), "{err:#}");
}

#[test]
fn config_check_names_an_unknown_key_and_passes_the_default_file() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[sweep]\ninterval_sec = 60\n").unwrap();
    let mut out = Vec::new();
    let err = config::check(Some(&typo), None, &mut out).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("interval_sec") && msg.contains("typo.toml"),
        "{msg}"
    );
    assert!(out.is_empty(), "nothing printed on failure");

    let (_, default) = output(config::default);
    let file = dir.path().join("default.toml");
    std::fs::write(&file, &default).unwrap();
    let (status, ok) = output(|out| config::check(Some(&file), None, out));
    assert_eq!(status, Status::Success);
    assert!(
        ok.starts_with(&format!(
            "{}: ok (0 alert target(s), sweep every ",
            file.display()
        )),
        "{ok}"
    );
}

#[test]
fn alerts_list_and_retry_a_dead_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.sqlite");
    {
        let c = crate::alert::commands::open(&db).unwrap();
        let signals = ["SW-1".to_string(), "SW-2".to_string()];
        crate::alert::outbox::enqueue(&c, "oncall", &signals, "{}", 1_785_283_200_000_000_000)
            .unwrap();
        let id = crate::alert::outbox::list(&c, 10).unwrap()[0].id;
        crate::alert::outbox::finish(&c, id, 3, "dead", Some("HTTP 404"), 1).unwrap();
    }
    let (status, text) = output(|out| alerts::list(&db, 50, Format::Text, out));
    assert_eq!(status, Status::Success);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let id: i64 = lines[0].split_whitespace().next().unwrap().parse().unwrap();
    assert!(
        lines[0].contains("dead       oncall           attempts 3 ")
            && lines[0].contains("created 2026-07-29T")
            && lines[0].ends_with("signals SW-1,SW-2"),
        "{text}"
    );
    assert_eq!(lines[1], "       last error: HTTP 404");

    let (_, retried) = output(|out| alerts::retry(&db, id, out));
    assert_eq!(retried, format!("message {id} queued again\n"));
    let (_, json) = output(|out| alerts::list(&db, 50, Format::Json, out));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows[0]["status"], "pending", "{json}");
    assert_eq!(rows[0]["attempts"], 0, "{json}");

    let err = alerts::retry(&db, id + 100, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no undelivered outbox message {} (see `stormwatch alerts list`)",
            id + 100
        )
    );
    let (status, flushed) = output(|out| alerts::flush(&db, &Config::default().alert, 1, out));
    assert_eq!(status, Status::Success);
    assert_eq!(
        flushed,
        "no alert targets configured ([[alert.targets]] in the config file)\n"
    );
}

/// `run` converts the parsed command line: the same signals through it.
#[test]
fn run_dispatches_a_parsed_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    storms_store(dir.path());
    let cli = |args: &[&str]| {
        crate::cli::Cli::try_parse_from(
            [
                "stormwatch",
                "--data-dir",
                data,
                "--config",
                "/nonexistent/none.toml",
            ]
            .iter()
            .chain(args),
        )
        .unwrap()
    };
    // The config file is loaded first, and a missing one is an error.
    let err = super::run(&cli(&["signals", "list"]), &mut Vec::new()).unwrap_err();
    assert!(format!("{err:#}").contains("none.toml"), "{err:#}");

    let dir_only = |args: &[&str]| {
        crate::cli::Cli::try_parse_from(["stormwatch", "--data-dir", data].iter().chain(args))
            .unwrap()
    };
    let (status, text) = output(|out| {
        super::run(
            &dir_only(&["sweep", "--now", "2026-07-30", "--fail-on", "any"]),
            out,
        )
    });
    assert_eq!(status, Status::Failure, "{text}");
    let (_, json) =
        output(|out| super::run(&dir_only(&["signals", "list", "--format", "json"]), out));
    let all: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "v1:retry_storm:search_flights:unavailable"),
        "{json}"
    );
}

#[test]
fn coverage_names_what_a_default_adk_agent_leaves_unseen_and_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let week = crate::coverage::Span::Days(7);
    let (status, _) = output(|out| coverage::run(dir.path(), week, Format::Text, out));
    assert_eq!(status, Status::Success);
    let opts = import::Options {
        paths: vec![
            fixture("frameworks/adk-storm-default.json"),
            fixture("frameworks/adk-storm-reflect.json"),
        ],
        retention_days: Some(0),
        ..import::Options::default()
    };
    let (status, _) = output(|out| import::run(dir.path(), None, &Config::default(), &opts, out));
    assert_eq!(status, Status::Success);
    let (_, text) = output(|out| coverage::run(dir.path(), week, Format::Text, out));
    // The default run: blind for arguments, results and failures, with ADK's switch.
    let default = text
        .split("\n\n")
        .find(|b| b.starts_with("adk-storm-default "))
        .unwrap_or_else(|| panic!("{text}"));
    for gap in [
        "gap arguments (0% of the calls have it)",
        "gap results (0% of the calls that did not fail have it)",
        "gap failures (0% of the calls have it)",
    ] {
        assert!(default.contains(gap), "{gap}: {default}");
    }
    assert!(default.contains("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"));
    // With content capture on: no gap.
    let captured = text
        .split("\n\n")
        .find(|b| b.starts_with("adk-storm-reflect "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        captured.contains(
            "8 calls; arguments 100%, results - (of the calls that did not fail), 8 of 8 failures with a class"
        ),
        "{captured}"
    );
    assert!(captured.contains("no gap"), "{captured}");
    let (_, json) = output(|out| coverage::run(dir.path(), week, Format::Json, out));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["scopes"].as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(v["scopes"][0]["scope"], "gcp.vertex.agent");
}
