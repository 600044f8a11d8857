//! The seeds' fixtures go through `stormwatch import` and come out of the
//! daily rollup with the seed's own numbers (fixtures/manifest.json).

use std::collections::BTreeMap;

use polars::prelude::*;
use stormwatch::store::Reader;

use crate::common::{repo, run, spans};

fn manifest() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(repo().join("fixtures/manifest.json")).unwrap()).unwrap()
}

#[test]
fn fixtures_import_and_the_rollup_has_the_seed_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let fx = repo().join("fixtures");
    let files = [
        "search_flights_history.json",
        "storms_jul29.json",
        "fixed_loop.json",
        "retry_gate.json",
    ];
    let mut args = vec![
        "import".to_string(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    args.extend(files.iter().map(|f| fx.join(f).display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let m = manifest();
    let entries = m["files"].as_array().unwrap();
    let by_file = |name: &str| entries.iter().find(|e| e["file"] == name).unwrap();
    // storms_jul29.json repeats spans of the history file: stored once.
    let unique: u64 = [
        "search_flights_history.json",
        "fixed_loop.json",
        "retry_gate.json",
    ]
    .iter()
    .map(|f| by_file(f)["spans"].as_u64().unwrap())
    .sum();
    let storms = by_file("storms_jul29.json")["spans"].as_u64().unwrap();
    assert!(
        stdout.contains(&format!("{unique} span(s) stored, {storms} already stored")),
        "{stdout}"
    );
    assert_eq!(spans(&data).height() as u64, unique);

    let rollup = Reader::open(&data)
        .unwrap()
        .tool_daily()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    let tool = rollup.column("tool_name").unwrap().str().unwrap();
    let day = rollup.column("day").unwrap().str().unwrap();
    let calls = rollup
        .column("calls")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap();
    let errors = rollup
        .column("errors")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap();
    let p50 = rollup
        .column("p50_ns")
        .unwrap()
        .cast(&DataType::Float64)
        .unwrap();
    let mut got: BTreeMap<(String, String), (i64, i64, f64)> = BTreeMap::new();
    for i in 0..rollup.height() {
        let e = got
            .entry((tool.get(i).unwrap().into(), day.get(i).unwrap().into()))
            .or_default();
        e.0 += calls.i64().unwrap().get(i).unwrap();
        e.1 += errors.i64().unwrap().get(i).unwrap();
        e.2 = p50.f64().unwrap().get(i).unwrap();
    }
    let mut want = BTreeMap::new();
    for f in [
        "search_flights_history.json",
        "fixed_loop.json",
        "retry_gate.json",
    ] {
        for (t, days) in by_file(f)["by_tool_day"].as_object().unwrap() {
            for (d, v) in days.as_object().unwrap() {
                let e = want.entry((t.clone(), d.clone())).or_insert((0i64, 0i64));
                e.0 += v["calls"].as_i64().unwrap();
                e.1 += v["errors"].as_i64().unwrap();
            }
        }
    }
    let got_counts: BTreeMap<_, _> = got.iter().map(|(k, v)| (k.clone(), (v.0, v.1))).collect();
    assert_eq!(got_counts, want);
    // The seed's table, verbatim: Jul 29 is 62 calls, 53 errors, p50 5.12 s.
    let jul29 = got[&("search_flights".to_string(), "2026-07-29".to_string())];
    assert_eq!((jul29.0, jul29.1), (62, 53));
    assert!((jul29.2 / 1e9 - 5.12).abs() < 0.005, "p50 {}", jul29.2);
    let jul28 = got[&("search_flights".to_string(), "2026-07-28".to_string())];
    assert_eq!((jul28.0, jul28.1), (9, 1));
    assert!((jul28.2 / 1e9 - 0.58).abs() < 0.005, "p50 {}", jul28.2);
}

#[test]
fn the_fixture_generator_reproduces_the_committed_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .arg(repo().join("scripts/gen_fixtures.py"))
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "search_flights_history.json",
        "storms_jul29.json",
        "fixed_loop.json",
        "retry_gate.json",
        "manifest.json",
    ] {
        let committed = std::fs::read(repo().join("fixtures").join(f)).unwrap();
        let fresh = std::fs::read(dir.path().join(f)).unwrap();
        assert!(
            committed == fresh,
            "fixtures/{f} differs from what scripts/gen_fixtures.py generates"
        );
    }
}

#[test]
fn serve_demo_loads_the_bundled_incident() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let server = crate::common::Server::start(&data, &["--demo"], &[]);
    let log = server.stop();
    assert!(log.contains("demo incident loaded"), "{log}");
    let rollup = Reader::open(&data).unwrap().tool_daily().unwrap().unwrap();
    let jul29 = rollup
        .map(|lf| {
            lf.filter(
                col("day")
                    .eq(lit("2026-07-29"))
                    .and(col("tool_name").eq(lit("search_flights"))),
            )
        })
        .collect()
        .unwrap();
    let calls = jul29
        .column("calls")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap();
    assert_eq!(calls.i64().unwrap().get(0), Some(62));
    // Loading again (a restart with --demo) stores nothing twice.
    let before = spans(&data).height();
    let server = crate::common::Server::start(&data, &["--demo"], &[]);
    server.stop();
    assert_eq!(spans(&data).height(), before);
}

#[test]
fn the_error_spike_rule_flags_the_seed_days_through_the_real_rollup() {
    use std::collections::BTreeSet;
    use stormwatch::detect::{daily_rows, judge, SpikeParams};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = repo().join("fixtures/search_flights_history.json");
    crate::common::import_files(&data, &[&file]);
    let rollup = Reader::open(&data)
        .unwrap()
        .tool_daily()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    let rows = daily_rows(&rollup).unwrap();
    let today = stormwatch::model::day_from_str("2026-08-06").unwrap();
    let verdicts = judge(&rows, today, &BTreeSet::new(), &SpikeParams::default());
    let flagged: Vec<String> = verdicts
        .iter()
        .filter(|v| v.flagged)
        .map(|v| format!("{} {}", v.tool, stormwatch::model::day_to_string(v.day)))
        .collect();
    assert_eq!(
        flagged,
        [
            "search_flights 2026-07-29",
            "search_flights 2026-08-04",
            "search_flights 2026-08-05"
        ]
    );
    let jul29 = verdicts.iter().find(|v| v.flagged).unwrap();
    assert_eq!((jul29.calls, jul29.errors), (62, 53));
    assert_eq!(
        jul29
            .classes
            .get(&stormwatch::model::ErrorClass::Unavailable),
        Some(&53)
    );
    assert!(
        jul29.volume_ratio.unwrap() > 5.0 && jul29.p50_ratio.unwrap() > 4.0,
        "{jul29:?}"
    );
}
