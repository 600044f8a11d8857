//! Silent tools through the real binary (docs/detection.md §4.8): twelve
//! days of an agent's turns, imported and swept. `search_flights`, called
//! twice a turn, stops being called on Aug 6 while the agent's turns go on
//! (`tool_silent`, Aug 6–8); `book_flight` fails from Aug 5 09:03 on and
//! keeps being called (`no_success` on Aug 8, naming that success); a tool
//! first called on Aug 6 and one called three times a day that skips a day
//! are nothing. The same findings from a fresh state, read from the sealed
//! summaries.

use std::path::Path;

use serde_json::{json, Value};
use stormwatch::model::{day_from_str, NANOS_PER_DAY};

use crate::common::run;
use crate::sweep::{by_kind, span, str_v, sweep_json};

const TURNS_PER_DAY: u64 = 60;

fn ns(day: i32, secs: u64) -> u64 {
    (i64::from(day) * NANOS_PER_DAY) as u64 + secs * 1_000_000_000
}

fn tool(name: &str, trace: &str, id: u64, at: u64, attrs: &[(&str, Value)], error: bool) -> Value {
    let mut a = vec![
        ("gen_ai.operation.name", str_v("execute_tool")),
        ("gen_ai.tool.name", str_v(name)),
    ];
    a.extend(attrs.iter().cloned());
    span(
        trace,
        id,
        Some(1),
        &format!("execute_tool {name}"),
        (at, at + 300_000_000),
        &a,
        error,
    )
}

/// The history as one OTLP/JSON file; the trace of the last successful
/// `book_flight` call.
fn history(dir: &Path) -> (std::path::PathBuf, String) {
    let first = day_from_str("2026-07-28").unwrap();
    let (aug5, aug6) = (
        day_from_str("2026-08-05").unwrap(),
        day_from_str("2026-08-06").unwrap(),
    );
    let mut spans = Vec::new();
    let mut last_ok = String::new();
    for day in first..first + 12 {
        let quiet_skip = day == aug6 + 1;
        for t in 0..TURNS_PER_DAY {
            // Turns every 20 minutes from 00:03.
            let start = ns(day, 180 + t * 1200);
            let trace = format!("{:08x}{:024x}", day, t);
            spans.push(span(
                &trace,
                1,
                None,
                "invoke_agent travel",
                (start, start + 60_000_000_000),
                &[("gen_ai.operation.name", str_v("invoke_agent"))],
                false,
            ));
            let mut id = 2;
            let mut call = |name: &str, at: u64, attrs: &[(&str, Value)], error: bool| {
                spans.push(tool(name, &trace, id, start + at, attrs, error));
                id += 1;
            };
            if day < aug6 {
                call("search_flights", 1_000_000_000, &[], false);
                call(
                    "search_flights",
                    5_000_000_000,
                    &[("gen_ai.tool.call.arguments", str_v("{\"to\":\"LIS\"}"))],
                    false,
                );
            } else {
                call("get_weather", 1_000_000_000, &[], false);
            }
            if t < 3 && !quiet_skip {
                call("convert_currency", 8_000_000_000, &[], false);
            }
            if t % 4 == 3 {
                // 15 a day. From Aug 5 09:03 on, every call fails.
                let at = start + 20_000_000_000;
                let fails = day > aug5 || (day == aug5 && at > ns(aug5, 9 * 3600 + 3 * 60 + 30));
                if !fails && day == aug5 {
                    last_ok = trace.clone();
                }
                let attrs: Vec<(&str, Value)> = if fails {
                    vec![("http.response.status_code", json!({"intValue": "503"}))]
                } else {
                    vec![]
                };
                call("book_flight", 20_000_000_000, &attrs, fails);
            }
        }
    }
    let file = crate::sweep::write_doc(dir, "silent.json", vec![("travel-agent", spans)]);
    (file, last_ok)
}

fn import(data: &Path, file: &Path) {
    let out = run(
        &[
            "import",
            "--data-dir",
            data.to_str().unwrap(),
            "--retention-days",
            "0",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sweep(data: &Path) -> Value {
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            "2026-08-09T06:00:00Z",
            "--since",
            "12d",
            "--format",
            "json",
        ],
        &[("STORMWATCH_RETENTION_DAYS", "0")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_tool_that_went_quiet_and_one_with_no_success_are_named_with_their_last_success() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (file, last_ok_trace) = history(dir.path());
    import(&data, &file);
    let report = sweep(&data);
    let _ = sweep_json; // (the fixtures' helper; this store needs --since)

    let silent = by_kind(&report, "tool_silent");
    assert_eq!(silent.len(), 1, "{:#}", report["signals"]);
    let s = silent[0];
    assert_eq!(s["tool"], "search_flights");
    assert_eq!(s["days"], json!(["2026-08-06", "2026-08-07", "2026-08-08"]));
    let title = s["title"].as_str().unwrap();
    assert!(
        title.starts_with("Silent tool: search_flights called 0 times on 2026-08-08 where its share of 60 turns predicts 120"),
        "{title}"
    );
    let e = &s["evidence"][0];
    assert_eq!(s["evidence"].as_array().unwrap().len(), 1);
    assert_eq!(e["outcome"], "last_success");
    assert_eq!(
        (&e["day"], &e["calls"], &e["failures"]),
        (&json!("2026-08-05"), &json!(1), &json!(0))
    );
    let daily = e["daily"].as_array().unwrap();
    assert_eq!(
        daily.last().unwrap(),
        &json!({"day": "2026-08-08", "calls": 0, "successes": 0, "turns": 60})
    );
    assert!(daily
        .iter()
        .any(|d| d == &json!({"day": "2026-08-05", "calls": 120, "successes": 120, "turns": 60})));
    assert_eq!(s["severity"], "warning");

    let none = by_kind(&report, "no_success");
    assert_eq!(none.len(), 1, "{:#}", report["signals"]);
    let n = none[0];
    assert_eq!(n["tool"], "book_flight");
    assert_eq!(n["days"], json!(["2026-08-08"]));
    assert_eq!(
        n["title"],
        "No success: book_flight has not succeeded since 2026-08-05T09:03Z, 3.6 days; 45 failed calls from 2026-08-06 on (unavailable)"
    );
    assert_eq!(n["evidence"][0]["trace_id"], last_ok_trace.as_str());
    assert_eq!(n["severity"], "critical");
    let remedy = n["remedy"]["summary"].as_str().unwrap();
    assert!(remedy.contains("last success"), "{remedy}");

    // Nothing for the new tool, the quiet one, or per-turn rules.
    for sig in report["signals"].as_array().unwrap() {
        assert!(
            !["get_weather", "convert_currency"].contains(&sig["tool"].as_str().unwrap()),
            "{sig:#}"
        );
        assert!(
            !["retry_storm", "wasted_retries", "tool_loop"]
                .contains(&sig["kind"].as_str().unwrap()),
            "{sig:#}"
        );
    }
    // The spike of book_flight and its no_success are one incident.
    let incidents = report["incidents"].as_array().unwrap();
    let book: Vec<&Value> = incidents
        .iter()
        .filter(|i| i["members"].to_string().contains(n["id"].as_str().unwrap()))
        .collect();
    assert_eq!(book.len(), 1, "{incidents:#?}");

    // The tool page lists the silent days; the API and the signal's page
    // carry them (the schedule off: only this sweep's state).
    let config = dir.path().join("stormwatch.toml");
    std::fs::write(&config, "[sweep]\ninterval_secs = 0\n").unwrap();
    let server = crate::common::Server::start(&data, &["--config", config.to_str().unwrap()], &[]);
    let get = |path: &str| {
        reqwest_blocking::blocking::get(format!("http://{}{path}", server.http))
            .unwrap()
            .text()
            .unwrap()
    };
    let page = get("/tools/search_flights?from=2026-07-28&to=2026-08-08");
    assert!(page.contains("<h2>Silent days</h2>"), "{page}");
    for day in ["2026-08-06", "2026-08-07", "2026-08-08"] {
        assert!(
            page.contains(&format!("data-kind=\"tool_silent\" data-day=\"{day}\"")),
            "{day}: {page}"
        );
    }
    let page = get("/tools/book_flight?from=2026-07-28&to=2026-08-08");
    assert!(page.contains(&format!("/traces/{last_ok_trace}")), "{page}");
    assert!(
        page.contains("data-kind=\"no_success\" data-day=\"2026-08-08\""),
        "{page}"
    );
    let api: Value = serde_json::from_str(&get("/api/signals?kind=no_success")).unwrap();
    assert_eq!(
        api.to_string()
            .matches("book_flight has not succeeded since 2026-08-05T09:03Z")
            .count(),
        1,
        "{api:#}"
    );
    assert!(!get("/tools/get_weather?from=2026-07-28&to=2026-08-08").contains("Silent days"));
    server.stop();

    // From a fresh state the sealed days' summaries carry the turns.
    std::fs::remove_file(data.join("state.sqlite")).unwrap();
    let again = sweep(&data);
    assert!(
        again["days_from_summary"].as_u64().unwrap() > 0,
        "{again:#}"
    );
    for kind in ["tool_silent", "no_success"] {
        let a: Vec<(&Value, &Value, &Value)> = by_kind(&report, kind)
            .iter()
            .map(|s| (&s["title"], &s["days"], &s["evidence"]))
            .collect();
        let b: Vec<(&Value, &Value, &Value)> = by_kind(&again, kind)
            .iter()
            .map(|s| (&s["title"], &s["days"], &s["evidence"]))
            .collect();
        assert_eq!(a, b, "{kind}");
    }
}
