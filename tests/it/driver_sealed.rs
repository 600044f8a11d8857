//! Who is knocking, read back from a sealed day (docs/detection.md §4.2,
//! "Driver"): a day's summary keeps its turns' model calls
//! (`models.parquet`), so a sweep that reads the summary instead of the
//! spans gives every storm the driver, round trips and tokens the spans
//! gave.

use std::path::Path;

use crate::common::{import_files, repo};
use crate::driver::{last_end, sweep_at};

/// Every storm's (tool, trace, driver evidence) in a report.
fn drivers(report: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let mut out: Vec<(String, String, serde_json::Value)> = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "retry_storm")
        .flat_map(|s| {
            s["evidence"].as_array().unwrap().iter().map(|e| {
                (
                    s["tool"].as_str().unwrap().to_string(),
                    e["trace_id"].as_str().unwrap().to_string(),
                    e["driver"].clone(),
                )
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

#[test]
fn a_sealed_day_keeps_its_model_calls_and_the_drivers_they_give() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let files: Vec<std::path::PathBuf> = [
        "pydantic-ai-storm",
        "pydantic-ai-mcp-retry",
        "langgraph-storm",
    ]
    .iter()
    .map(|f| repo().join("fixtures/frameworks").join(format!("{f}.json")))
    .collect();
    let paths: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    import_files(&data, &paths);
    // Two days after the last span: every day final, sealed by the first sweep.
    let now = last_end(&data) + 2 * 86_400_000_000_000;
    let first = sweep_at(&data, now);
    assert!(first["days_sealed"].as_u64().unwrap() >= 1, "{first:#}");
    for f in ["state.sqlite", "state.sqlite-wal", "state.sqlite-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let again = sweep_at(&data, now);
    assert!(
        again["days_from_summary"].as_u64().unwrap() >= 1,
        "{again:#}"
    );
    let (a, b) = (drivers(&first), drivers(&again));
    assert_eq!(a, b);
    let kinds: Vec<&str> = a
        .iter()
        .map(|(_, _, d)| d["driver"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["code", "model", "model"], "{a:#?}");
    assert!(a
        .iter()
        .any(|(_, _, d)| d["model_calls"].as_u64() > Some(0)));
}
