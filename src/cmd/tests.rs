//! The commands called as functions, on real stores and real SQLite files
//! in temporary directories: what they print, their status, their errors.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::{alerts, config, coverage, import, incidents, signals, sweep, Format, Status};
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
    // The signal's own line (its incident lists it indented first).
    let storm = text
        .lines()
        .find(|l| l.contains("Retry storm: search_flights") && l.starts_with("SW-"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        storm.starts_with("SW-") && storm.contains("  [new]  "),
        "{storm}"
    );
    assert!(text.contains("4 finding(s) on 2026-07-29"), "{text}");

    assert!(
        text.contains(": 1 incident(s), 2 signal(s), 2 change(s)\n"),
        "{text}"
    );
    assert!(
        text.contains("\nINC-") && text.contains("search_flights failing since 2026-07-29 "),
        "{text}"
    );

    // The same sweep again reuses the day and changes nothing; the
    // signals are still open.
    let any = sweep::Options {
        fail_on: Some(sweep::FailOn::Any),
        ..sweep::Options::default()
    };
    let (status, text) = sweep_at(dir.path(), any.clone());
    assert_eq!(status, Status::Failure, "{text}");
    assert!(
        text.contains("(0 day(s) read, 1 unchanged): 1 incident(s), 2 signal(s), 0 change(s)\n"),
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

/// `incidents list` and `show` on the seeds' July 29 storm: the spike and
/// the storm of search_flights are one incident, shown with its cause, the
/// reason each member joined, timeline, impact, remedy and evidence; an
/// unknown id names the command that lists them.
#[test]
fn incidents_list_and_show() {
    use crate::incident::IncidentState;
    use crate::read::incidents::Which;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    storms_store(data);
    let (_, none) = output(|out| incidents::list(data, Which::Unresolved, Format::Text, out));
    assert_eq!(none, "no incidents yet (run `stormwatch sweep`)\n");
    sweep_at(data, sweep::Options::default());

    let (status, list) = output(|out| incidents::list(data, Which::Unresolved, Format::Text, out));
    assert_eq!(status, Status::Success);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 1, "{list}");
    let id = lines[0].split_whitespace().next().unwrap().to_string();
    assert!(id.starts_with("INC-"), "{list}");
    assert!(
        lines[0].contains("  open          critical  search_flights failing since 2026-07-29 ")
            && lines[0].ends_with("(2 signal(s), last seen 2026-07-29 19:46Z)"),
        "{list}"
    );
    let (_, resolved) = output(|out| {
        incidents::list(
            data,
            Which::Only(IncidentState::Resolved),
            Format::Text,
            out,
        )
    });
    assert_eq!(resolved, "no resolved incidents\n");
    let (_, json) = output(|out| incidents::list(data, Which::All, Format::Json, out));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["id"], id.as_str(), "{json}");
    assert_eq!(v[0]["tools"], serde_json::json!(["search_flights"]));
    assert_eq!(v[0]["members"].as_array().unwrap().len(), 2, "{json}");
    let (_, md) = output(|out| incidents::list(data, Which::Unresolved, Format::Markdown, out));
    assert!(
        md.starts_with("| id | state | severity | incident | signals | last seen |\n|---|"),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "| {id} | open | critical | search_flights failing since"
        )),
        "{md}"
    );

    let (status, show) = output(|out| incidents::show(data, &id, Format::Text, out));
    assert_eq!(status, Status::Success);
    let lines: Vec<&str> = show.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "{id}  [open]  critical  search_flights failing since"
        )),
        "{show}"
    );
    assert_eq!(lines[1], "cause: one tool, search_flights");
    for want in [
        "\nmembers:\n  SW-",
        "  error_rate_spike  search_flights: first finding\n",
        "  retry_storm  search_flights: same tool search_flights as SW-",
        "\ntimeline:\n  2026-07-29 19:03Z  first finding: Error-rate spike: search_flights",
        "impact: ",
        "\nwhat to do (SW-",
        "  will waiting fix it? ",
        "  when to cut it off: Cap at 3 attempts",
        "  what to change before the next attempt: ",
        "  also (SW-",
        "\nevidence:\n  trace baacbed78f2b62522a113193688fafe8  2026-07-29  15 calls, 15 failed, no_backoff, 82.5 s wasted",
        "\nhistory:\n  2026-07-30T00:00:00.000Z  - -> open  (first member)\n",
    ] {
        assert!(show.contains(want), "{want:?}: {show}");
    }
    // Lower case finds it too.
    let (_, again) = output(|out| incidents::show(data, &id.to_lowercase(), Format::Text, out));
    assert_eq!(again, show);
    let (_, json) = output(|out| incidents::show(data, &id, Format::Json, out));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["id"], id.as_str());
    assert_eq!(
        v["members"][1]["reason"]
            .as_str()
            .unwrap()
            .split(" as ")
            .next(),
        Some("same tool search_flights")
    );
    assert_eq!(v["history"][0]["to"], "open");
    let (_, md) = output(|out| incidents::show(data, &id, Format::Markdown, out));
    assert!(
        md.starts_with(&format!("## {id}: search_flights failing since")),
        "{md}"
    );
    assert!(
        md.contains("### What to do\n\n- **Will waiting fix it?** "),
        "{md}"
    );
    assert!(md.contains("### Members\n\n| signal | state |"), "{md}");

    let err = incidents::show(data, "INC-NOPE", Format::Text, &mut Vec::new()).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "no incident INC-NOPE (see `stormwatch incidents list`)"
    );
}

/// `stormwatch incidents …` as parsed from a command line.
#[test]
fn run_dispatches_incidents() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    storms_store(dir.path());
    sweep_at(dir.path(), sweep::Options::default());
    let cli = |args: &[&str]| {
        crate::cli::Cli::try_parse_from(["stormwatch", "--data-dir", data].iter().chain(args))
            .unwrap()
    };
    let (status, json) = output(|out| {
        super::run(
            &cli(&["incidents", "list", "--state", "all", "--format", "json"]),
            out,
        )
    });
    assert_eq!(status, Status::Success);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let id = v[0]["id"].as_str().unwrap();
    let (_, md) = output(|out| {
        super::run(
            &cli(&["incidents", "show", id, "--format", "markdown"]),
            out,
        )
    });
    assert!(md.starts_with(&format!("## {id}: ")), "{md}");
    let (_, resolved) =
        output(|out| super::run(&cli(&["incidents", "list", "--state", "resolved"]), out));
    assert_eq!(resolved, "no resolved incidents\n");
    assert!(crate::cli::Cli::try_parse_from([
        "stormwatch",
        "incidents",
        "list",
        "--state",
        "sleeping"
    ])
    .is_err());
}
