//! Sealed days with the real binary: a sweep over day summaries finds what
//! a sweep from the spans finds, signal for signal — with late spans, a
//! turn across midnight, MCP client/server pairs and a re-import — and a
//! sweep killed while sealing leaves a day that is read and sealed again.

use std::path::{Path, PathBuf};

use crate::common::{repo, run};
use crate::sweep::{picture, span, str_v, write_doc};

const NOW: &str = "2026-08-13";

fn sweep(data: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "sweep",
        "--data-dir",
        data.to_str().unwrap(),
        "--now",
        NOW,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = run(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    repo().join("fixtures").join(name)
}

const S: u64 = 1_000_000_000;
/// 2026-07-30T00:00:00Z
const MIDNIGHT: u64 = 1_785_369_600 * S;

fn tool(name: &str, args: &str) -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("gen_ai.operation.name", str_v("execute_tool")),
        ("gen_ai.tool.name", str_v(name)),
        ("gen_ai.tool.call.arguments", str_v(args)),
    ]
}

/// A turn begun at 23:58 on 07-29 that hammers a dead feed past midnight.
fn midnight_turn(dir: &Path) -> PathBuf {
    let trace = "a1".repeat(16);
    let mut spans = vec![span(
        &trace,
        0xaa,
        None,
        "invoke_agent travel-agent",
        (MIDNIGHT - 120 * S, MIDNIGHT + 600 * S),
        &[("gen_ai.operation.name", str_v("invoke_agent"))],
        false,
    )];
    for i in 0..9u64 {
        let at = MIDNIGHT - 60 * S + i * 15 * S;
        let mut attrs = tool("search_flights", r#"{"from":"LIS","to":"BER"}"#);
        attrs.push((
            "http.response.status_code",
            serde_json::json!({"intValue": "503"}),
        ));
        spans.push(span(
            &trace,
            1 + i,
            Some(0xaa),
            "execute_tool search_flights",
            (at, at + 2 * S),
            &attrs,
            true,
        ));
    }
    write_doc(dir, "midnight.json", vec![("travel-agent", spans)])
}

/// Six failing MCP `tools/call` requests, each as a client span and its
/// server child, on 07-30.
fn mcp_pairs(dir: &Path) -> PathBuf {
    let t0 = MIDNIGHT + 3 * 3600 * S;
    let trace = "b2".repeat(16);
    let mut client = vec![span(
        &trace,
        0xaa,
        None,
        "invoke_agent ops",
        (t0, t0 + 60 * S),
        &[("gen_ai.operation.name", str_v("invoke_agent"))],
        false,
    )];
    let mut server = Vec::new();
    for i in 0..6u64 {
        let at = t0 + i * S;
        let mut common = tool("query_db", r#"{"sql":"select 1"}"#);
        common.push(("mcp.method.name", str_v("tools/call")));
        common.push(("error.type", str_v("tool_error")));
        client.push(span(
            &trace,
            10 + i,
            Some(0xaa),
            "tools/call query_db",
            (at, at + S / 2),
            &common,
            true,
        ));
        server.push(span(
            &trace,
            100 + i,
            Some(10 + i),
            "tools/call query_db",
            (at + S / 100, at + S / 2 - S / 100),
            &common,
            true,
        ));
    }
    write_doc(
        dir,
        "mcp.json",
        vec![("agent", client), ("db-mcp-server", server)],
    )
}

/// Spans that arrive late for 07-30, a day already sealed: a new turn that
/// retries a booking's 400 and calls `charge_card` again after it worked.
fn late_spans(dir: &Path) -> PathBuf {
    let t0 = MIDNIGHT + 9 * 3600 * S;
    let trace = "c3".repeat(16);
    let mut spans = vec![span(
        &trace,
        0xaa,
        None,
        "invoke_agent booking",
        (t0, t0 + 120 * S),
        &[("gen_ai.operation.name", str_v("invoke_agent"))],
        false,
    )];
    for i in 0..4u64 {
        let at = t0 + i * 5 * S;
        let mut attrs = tool("book_flight", r#"{"seat":"12A"}"#);
        attrs.push((
            "http.response.status_code",
            serde_json::json!({"intValue": "400"}),
        ));
        spans.push(span(
            &trace,
            1 + i,
            Some(0xaa),
            "execute_tool book_flight",
            (at, at + S),
            &attrs,
            true,
        ));
    }
    for i in 0..2u64 {
        let at = t0 + 60 * S + i * 10 * S;
        let attrs = tool("charge_card", r#"{"amount":120}"#);
        spans.push(span(
            &trace,
            20 + i,
            Some(0xaa),
            "execute_tool charge_card",
            (at, at + S),
            &attrs,
            false,
        ));
    }
    write_doc(dir, "late.json", vec![("booking", spans)])
}

fn import(data: &Path, files: &[&Path]) {
    let out = crate::common::import_files(data, files);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kinds(report: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn a_sweep_over_sealed_days_finds_what_a_sweep_of_the_spans_finds() {
    let dir = tempfile::tempdir().unwrap();
    let (history, looped) = (
        fixture("search_flights_history.json"),
        fixture("fixed_loop.json"),
    );
    let (midnight, mcp, late) = (
        midnight_turn(dir.path()),
        mcp_pairs(dir.path()),
        late_spans(dir.path()),
    );
    let gate = fixture("retry_gate.json");
    let first: Vec<&Path> = vec![&history, &looped, &midnight, &mcp];
    // Later: spans for days already sealed, and the MCP file again.
    let later: Vec<&Path> = vec![&late, &gate, &mcp];

    // Sealed: the first sweep seals every final day; spans arrive late;
    // the next sweep re-seals the days they touched and reads the rest
    // from their summaries.
    let sealed = dir.path().join("sealed");
    import(&sealed, &first);
    let a0 = sweep(&sealed, &[]);
    let sealed_days = a0["days_sealed"].as_u64().unwrap();
    assert!(sealed_days > 20, "{a0:#}");
    import(&sealed, &later);
    let a1 = sweep(&sealed, &[]);
    let resealed = a1["days_sealed"].as_u64().unwrap();
    assert!((1..=8).contains(&resealed), "{resealed} days re-sealed");
    // With no stored results, every day comes from its summary.
    for f in ["state.sqlite", "state.sqlite-wal", "state.sqlite-shm"] {
        let _ = std::fs::remove_file(sealed.join(f));
    }
    // (Days not final yet are read from their spans, as every sweep does.)
    let open = a1["days_scanned"].as_u64().unwrap() - resealed;
    let a2 = sweep(&sealed, &[]);
    assert_eq!(a2["days_scanned"].as_u64().unwrap(), open, "{a2:#}");
    assert_eq!(a2["days_sealed"], 0);
    assert!(a2["days_from_summary"].as_u64().unwrap() >= sealed_days);

    // From scratch: the same files into a fresh store, every day read from
    // its spans (`--rescan` reads no summary).
    let fresh = dir.path().join("fresh");
    import(&fresh, &first);
    import(&fresh, &later);
    let b = sweep(&fresh, &["--rescan"]);
    assert_eq!(b["days_from_summary"], 0);

    assert_eq!(picture(&a1), picture(&b));
    assert_eq!(picture(&a2), picture(&b));
    // The store holds what these rules are about.
    for kind in [
        "retry_storm",
        "wasted_retries",
        "retry_after_success",
        "error_rate_spike",
    ] {
        assert!(
            kinds(&b).iter().any(|k| k == kind),
            "no {kind}: {:?}",
            kinds(&b)
        );
    }
    // The midnight turn's storm is on the day it began, once.
    let storms: Vec<&serde_json::Value> = b["signals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "retry_storm")
        .collect();
    assert!(storms.iter().any(|s| s["days"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d == "2026-07-29")));
}

#[test]
fn a_sweep_killed_while_sealing_leaves_the_day_to_be_sealed_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (history, mcp) = (
        fixture("search_flights_history.json"),
        mcp_pairs(dir.path()),
    );
    import(&data, &[&history, &mcp]);
    let before = crate::common::spans(&data).height();
    // Killed after the first summary file of the second day it seals.
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            NOW,
            "--format",
            "json",
        ],
        &[("STORMWATCH_FAULTS", "summary_write=kill@6")],
    );
    assert!(!out.status.success(), "the sweep was to be killed");
    let half: Vec<PathBuf> = std::fs::read_dir(data.join("sealed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| !d.join("manifest.json").exists())
        .collect();
    assert_eq!(half.len(), 1, "one day half sealed: {half:?}");
    // The spans are untouched; the next sweep seals every day, the half
    // one again, and finds what a sweep from the spans finds.
    assert_eq!(crate::common::spans(&data).height(), before);
    let again = sweep(&data, &[]);
    assert!(half[0].join("manifest.json").exists());
    for f in ["state.sqlite", "state.sqlite-wal", "state.sqlite-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let from_summaries = sweep(&data, &[]);
    assert_eq!(from_summaries["days_sealed"], 0, "{from_summaries:#}");
    assert!(from_summaries["days_from_summary"].as_u64().unwrap() > 10);
    let scratch = sweep(&data, &["--rescan"]);
    assert_eq!(picture(&again), picture(&scratch));
    assert_eq!(picture(&from_summaries), picture(&scratch));
}
