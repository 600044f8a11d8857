//! `stormwatch sweep` and `stormwatch signals` on the seeds' fixtures, with
//! the real binary: the JSON contract, grouping, idempotency, exit codes.

use std::path::Path;

use crate::common::{repo, run};

pub(crate) fn import(data: &Path, files: &[&str]) {
    let paths: Vec<std::path::PathBuf> = files
        .iter()
        .map(|f| repo().join("fixtures").join(f))
        .collect();
    let paths: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    crate::common::import_files(data, &paths);
}

pub(crate) fn sweep_json(data: &Path, now: &str) -> serde_json::Value {
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            now,
            "--format",
            "json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn by_kind<'a>(report: &'a serde_json::Value, kind: &str) -> Vec<&'a serde_json::Value> {
    report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == kind)
        .collect()
}

#[test]
fn the_four_jul_29_storms_are_one_signal_with_four_evidence_traces() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    import(&data, &["storms_jul29.json"]);
    let report = sweep_json(&data, "2026-07-30");
    let storms = by_kind(&report, "retry_storm");
    assert_eq!(storms.len(), 1, "{report:#}");
    let s = storms[0];
    assert_eq!(s["key"], "v1:retry_storm:search_flights:unavailable");
    assert_eq!(s["error_class"], "unavailable");
    assert_eq!(s["findings"], 4);
    assert_eq!(s["state"], "new");
    let evidence = s["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 4);
    assert_eq!(evidence[0]["calls"], 15, "worst first");
    for e in evidence {
        assert_eq!(e["rhythm"], "no_backoff");
        assert_eq!(e["outcome"], "gave_up");
        assert!(e["wasted_seconds"].as_f64().unwrap() > 40.0);
        assert!(e["turn_id"]
            .as_str()
            .unwrap()
            .starts_with(e["trace_id"].as_str().unwrap()));
    }
    assert!(s["id"].as_str().unwrap().starts_with("SW-"));
    assert_eq!(s["days"], serde_json::json!(["2026-07-29"]));
}

#[test]
fn the_seed_history_sweep_is_stable_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    import(
        &data,
        &[
            "search_flights_history.json",
            "fixed_loop.json",
            "retry_gate.json",
        ],
    );
    let first = sweep_json(&data, "2026-08-13");
    let spikes: Vec<_> = by_kind(&first, "error_rate_spike")
        .into_iter()
        .filter(|s| s["tool"] == "search_flights")
        .collect();
    assert_eq!(spikes.len(), 1);
    assert_eq!(
        spikes[0]["days"],
        serde_json::json!(["2026-07-29", "2026-08-04", "2026-08-05"])
    );
    assert_eq!(
        spikes[0]["title"],
        "Error-rate spike: search_flights 85% vs 6% trailing week (53/62 calls, unavailable)"
    );
    // A spike's evidence: the turn where the tool failed most, each day.
    let ev = spikes[0]["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert_eq!(
        (ev[0]["day"].as_str(), ev[0]["failures"].as_u64()),
        (Some("2026-07-29"), Some(15))
    );
    let wasted: Vec<_> = by_kind(&first, "wasted_retries")
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(wasted.len(), 2, "{wasted:?}");
    assert!(wasted.contains(&"v1:wasted_retries:quote_price:invalid_request".to_string()));
    assert!(wasted.contains(&"v1:wasted_retries:book_flight:not_found".to_string()));
    let doubles = by_kind(&first, "retry_after_success");
    assert_eq!(doubles.len(), 1);
    assert_eq!(doubles[0]["tool"], "book_flight");
    // The fixed loop (search_flights on Aug 10) adds no storm: the only storm
    // signal is the no-backoff one of Jul 29 and Aug 4-5.
    let storms = by_kind(&first, "retry_storm");
    assert_eq!(storms.len(), 1);
    assert_eq!(
        storms[0]["days"],
        serde_json::json!(["2026-07-29", "2026-08-04", "2026-08-05"])
    );
    assert_eq!(
        first["changes"].as_array().unwrap().len(),
        first["signals"].as_array().unwrap().len()
    );

    // Again on the same data: the same ids, no state change.
    let second = sweep_json(&data, "2026-08-13");
    let ids = |r: &serde_json::Value| {
        let mut v: Vec<String> = r["signals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(second["changes"], serde_json::json!([]));
    assert!(second["signals"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["state"] == "new"));
}

#[test]
fn fail_on_mute_and_the_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // An empty store is an error that says so.
    std::fs::create_dir_all(&data).unwrap();
    let out = run(&["sweep", "--data-dir", data.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no spans yet"));
    let out = run(
        &[
            "sweep",
            "--data-dir",
            dir.path().join("missing").to_str().unwrap(),
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("no such directory").count(), 1, "{err}");

    import(&data, &["storms_jul29.json"]);
    let d = data.to_str().unwrap();
    let out = run(
        &[
            "sweep",
            "--data-dir",
            d,
            "--now",
            "2026-07-30",
            "--fail-on",
            "new",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "Retry storm: search_flights ×15 in one turn (unavailable, no backoff, 4 turns)"
        ),
        "{text}"
    );

    let list = run(
        &["signals", "list", "--data-dir", d, "--format", "json"],
        &[],
    );
    let all: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    // The storm, and the day's error-rate spike of a tool on its first day.
    let kinds: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    let ids: Vec<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    for id in &ids {
        let out = run(
            &["signals", "mute", id, "--until-escalates", "--data-dir", d],
            &[],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let id = ids[0].clone();
    let show = run(
        &["signals", "show", &id, "--data-dir", d, "--format", "json"],
        &[],
    );
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["state"], "muted");
    assert_eq!(shown["history"].as_array().unwrap().len(), 2);
    // Muted signals are not open: --fail-on any passes.
    let out = run(
        &[
            "sweep",
            "--data-dir",
            d,
            "--now",
            "2026-07-30",
            "--fail-on",
            "any",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let out = run(&["signals", "show", "SW-NOPE", "--data-dir", d], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no signal SW-NOPE"));
}

#[test]
fn a_storm_across_midnight_is_one_finding_of_the_day_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let midnight: u64 = 1_785_369_600 * 1_000_000_000; // 2026-07-30T00:00:00Z
    let trace = "ab".repeat(16);
    let mut spans = vec![serde_json::json!({
        "traceId": trace, "spanId": "00000000000000aa", "name": "invoke_agent travel-agent",
        "startTimeUnixNano": (midnight - 10_000_000_000).to_string(), "endTimeUnixNano": (midnight + 10_000_000_000).to_string(),
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]
    })];
    for i in 0..8u64 {
        let start = midnight - 9_000_000_000 + i * 2_000_000_000;
        spans.push(serde_json::json!({
            "traceId": trace, "spanId": format!("{:016x}", i + 1), "parentSpanId": "00000000000000aa",
            "name": "execute_tool search_flights",
            "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 1_950_000_000).to_string(),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "search_flights"}},
                {"key": "http.response.status_code", "value": {"intValue": "503"}}
            ],
            "status": {"code": 2}
        }));
    }
    let doc = serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]});
    let file = dir.path().join("midnight.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    crate::common::import_files(&data, &[&file]);
    let report = sweep_json(&data, "2026-07-31");
    let storms = by_kind(&report, "retry_storm");
    assert_eq!(storms.len(), 1, "{report:#}");
    assert_eq!(storms[0]["findings"], 1);
    assert_eq!(storms[0]["days"], serde_json::json!(["2026-07-29"]));
    assert_eq!(storms[0]["evidence"][0]["calls"], 8);
}

/// One OTLP/JSON span.
pub(crate) fn span(
    trace: &str,
    id: u64,
    parent: Option<u64>,
    name: &str,
    (start, end): (u64, u64),
    attrs: &[(&str, serde_json::Value)],
    error: bool,
) -> serde_json::Value {
    let mut s = serde_json::json!({
        "traceId": trace, "spanId": format!("{id:016x}"), "name": name,
        "startTimeUnixNano": start.to_string(), "endTimeUnixNano": end.to_string(),
        "attributes": attrs.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect::<Vec<_>>(),
    });
    if let Some(p) = parent {
        s["parentSpanId"] = format!("{p:016x}").into();
    }
    if error {
        s["status"] = serde_json::json!({"code": 2});
    }
    s
}

pub(crate) fn str_v(v: &str) -> serde_json::Value {
    serde_json::json!({ "stringValue": v })
}

pub(crate) fn write_doc(
    dir: &Path,
    name: &str,
    resources: Vec<(&str, Vec<serde_json::Value>)>,
) -> std::path::PathBuf {
    let doc = serde_json::json!({"resourceSpans": resources.into_iter().map(|(service, spans)| serde_json::json!({
        "resource": {"attributes": [{"key": "service.name", "value": str_v(service)}]},
        "scopeSpans": [{"spans": spans}]
    })).collect::<Vec<_>>()});
    let file = dir.join(name);
    std::fs::write(&file, doc.to_string()).unwrap();
    file
}

#[test]
fn a_turn_begun_at_2330_whose_storm_starts_at_0110_is_found_on_its_day() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let midnight: u64 = 1_785_369_600 * 1_000_000_000; // 2026-07-30T00:00:00Z
    let s = 1_000_000_000u64;
    let trace = "cd".repeat(16);
    let agent = [
        ("gen_ai.operation.name", str_v("invoke_agent")),
        ("session.id", str_v("sess-late")),
    ];
    let mut spans = vec![span(
        &trace,
        0xaa,
        None,
        "invoke_agent travel-agent",
        (midnight - 1800 * s, midnight + 4500 * s),
        &agent,
        false,
    )];
    // A healthy call at 23:31, then the loop at 01:10, ten 503s back to back.
    let tool = [
        ("gen_ai.operation.name", str_v("execute_tool")),
        ("gen_ai.tool.name", str_v("search_flights")),
    ];
    spans.push(span(
        &trace,
        1,
        Some(0xaa),
        "execute_tool search_flights",
        (midnight - 1740 * s, midnight - 1739 * s),
        &tool,
        false,
    ));
    for i in 0..10u64 {
        let start = midnight + 4200 * s + i * 2 * s;
        let mut attrs = tool.to_vec();
        attrs.push((
            "http.response.status_code",
            serde_json::json!({"intValue": "503"}),
        ));
        spans.push(span(
            &trace,
            10 + i,
            Some(0xaa),
            "execute_tool search_flights",
            (start, start + 1_900_000_000),
            &attrs,
            true,
        ));
    }
    let file = write_doc(dir.path(), "late.json", vec![("travel-agent", spans)]);
    crate::common::import_files(&data, &[&file]);
    let report = sweep_json(&data, "2026-08-01");
    let storms = by_kind(&report, "retry_storm");
    assert_eq!(storms.len(), 1, "{report:#}");
    assert_eq!(storms[0]["days"], serde_json::json!(["2026-07-29"]));
    let e = &storms[0]["evidence"][0];
    assert_eq!(e["calls"], 10);
    assert_eq!(e["day"], "2026-07-29");
    // The session comes from the agent span; the tool spans carry none.
    assert_eq!(e["session_id"], "sess-late");
    // Reused from the kept day result, the same picture.
    let again = sweep_json(&data, "2026-08-01");
    assert_eq!(picture(&report), picture(&again));
    assert!(again["days_reused"].as_u64().unwrap() >= 1, "{again:#}");
}

#[test]
fn an_mcp_client_and_server_span_pair_is_counted_once_everywhere() {
    // Six tools/call requests, each recorded by the client (agent service)
    // and by the MCP server (its own service), as the OTel MCP conventions
    // write them: the server span a child of the client span. All fail.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t0: u64 = 1_785_369_600 * 1_000_000_000 + 3600 * 1_000_000_000;
    let ms = 1_000_000u64;
    let trace = "ef".repeat(16);
    let mut client = vec![span(
        &trace,
        0xaa,
        None,
        "invoke_agent ops",
        (t0, t0 + 60_000 * ms),
        &[("gen_ai.operation.name", str_v("invoke_agent"))],
        false,
    )];
    let mut server = Vec::new();
    for i in 0..6u64 {
        let at = t0 + i * 1000 * ms;
        let common = [
            ("mcp.method.name", str_v("tools/call")),
            ("gen_ai.operation.name", str_v("execute_tool")),
            ("gen_ai.tool.name", str_v("query_db")),
            ("gen_ai.tool.call.arguments", str_v(r#"{"sql":"select 1"}"#)),
            ("error.type", str_v("tool_error")),
            (
                "gen_ai.tool.call.result",
                str_v(
                    r#"{"content":[{"type":"text","text":"upstream 503 Service Unavailable"}],"isError":true}"#,
                ),
            ),
        ];
        client.push(span(
            &trace,
            10 + i,
            Some(0xaa),
            "tools/call query_db",
            (at, at + 500 * ms),
            &common,
            true,
        ));
        server.push(span(
            &trace,
            100 + i,
            Some(10 + i),
            "tools/call query_db",
            (at + 5 * ms, at + 495 * ms),
            &common,
            true,
        ));
    }
    let file = write_doc(
        dir.path(),
        "mcp.json",
        vec![("agent", client), ("db-mcp-server", server)],
    );
    crate::common::import_files(&data, &[&file]);
    // The rollup: six calls, six errors, all unavailable.
    let rollup = stormwatch::store::Reader::open(&data)
        .unwrap()
        .tool_daily()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    let col = |n: &str| -> i64 {
        let c = rollup
            .column(n)
            .unwrap()
            .cast(&polars::prelude::DataType::Int64)
            .unwrap();
        c.i64().unwrap().iter().flatten().sum()
    };
    assert_eq!(
        (col("calls"), col("errors"), col("unavailable")),
        (6, 6, 6),
        "{rollup}"
    );
    // The sweep: one storm of six rounds, not twelve.
    let report = sweep_json(&data, "2026-08-01");
    let storms = by_kind(&report, "retry_storm");
    assert_eq!(storms.len(), 1, "{report:#}");
    assert_eq!(storms[0]["error_class"], "unavailable");
    assert_eq!(storms[0]["evidence"][0]["calls"], 6);
}

#[test]
fn a_spike_swept_every_five_minutes_stays_open_until_two_quiet_days_pass() {
    // The seed history (spikes on Aug 4 and 5), then healthy search_flights
    // traffic every 10 minutes from Aug 6 to Aug 8; swept as serve does,
    // every 5 minutes through the evening of Aug 6, the data keeping up.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    import(&data, &["search_flights_history.json"]);
    let aug6: u64 = 1_786_060_800 * 1_000_000_000; // 2026-08-06T00:00:00Z
    let s = 1_000_000_000u64;
    let tool = [
        ("gen_ai.operation.name", str_v("execute_tool")),
        ("gen_ai.tool.name", str_v("search_flights")),
    ];
    let mut spans = Vec::new();
    for k in 0..(3 * 144u64) {
        let at = aug6 + k * 600 * s;
        let trace = format!("{:032x}", 0xfeed_0000 + k);
        spans.push(span(
            &trace,
            1,
            None,
            "execute_tool search_flights",
            (at, at + s),
            &tool,
            false,
        ));
    }
    let file = write_doc(dir.path(), "calm.json", vec![("travel-agent", spans)]);
    crate::common::import_files(&data, &[&file]);
    let spike_state = |now: &str| -> (String, usize) {
        let r = sweep_json(&data, now);
        let spike = by_kind(&r, "error_rate_spike")
            .into_iter()
            .find(|s| s["tool"] == "search_flights")
            .expect("the spike signal")
            .clone();
        let changes = r["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] == spike["id"])
            .count();
        (spike["state"].as_str().unwrap().to_string(), changes)
    };
    assert_eq!(spike_state("2026-08-06T18:00:00Z"), ("new".to_string(), 1));
    for m in (5..360).step_by(5) {
        let now = format!("2026-08-06T{:02}:{:02}:00Z", 18 + m / 60, m % 60);
        assert_eq!(spike_state(&now), ("new".to_string(), 0), "at {now}");
    }
    // One complete quiet day (Aug 6) is not two.
    assert_eq!(spike_state("2026-08-07T12:00:00Z").0, "new");
    // Aug 6 and 7 complete and quiet: resolved, once.
    assert_eq!(
        spike_state("2026-08-08T00:30:00Z"),
        ("resolved".to_string(), 1)
    );
    assert_eq!(
        spike_state("2026-08-08T00:35:00Z"),
        ("resolved".to_string(), 0)
    );
}

/// The parts of a signal that must not depend on how a sweep got there.
pub(crate) fn picture(report: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            serde_json::json!({
                "key": s["key"], "findings": s["findings"], "days": s["days"],
                "evidence": s["evidence"], "title": s["title"],
            })
        })
        .collect();
    v.sort_by_key(|s| s["key"].as_str().unwrap().to_string());
    v
}

#[test]
fn an_incremental_sweep_reads_only_changed_days_and_finds_what_a_full_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    import(&data, &["search_flights_history.json", "fixed_loop.json"]);
    let first = sweep_json(&data, "2026-08-13");
    let read = first["days_scanned"].as_u64().unwrap();
    assert!(read > 20, "{}", first["days_scanned"]);
    assert_eq!(first["days_reused"], 0);

    // Nothing changed: nothing is read, the answer is the same.
    let again = sweep_json(&data, "2026-08-13");
    assert_eq!(again["days_scanned"], 0);
    assert_eq!(again["days_reused"].as_u64().unwrap(), read);
    assert_eq!(picture(&again), picture(&first));

    // New spans on a few days: those days and their neighbours are read
    // again, and the answer is what a sweep from scratch gives.
    import(&data, &["retry_gate.json"]);
    let incremental = sweep_json(&data, "2026-08-13");
    let reread = incremental["days_scanned"].as_u64().unwrap();
    assert!((1..=6).contains(&reread), "{reread} days read again");
    let fresh_dir = data.parent().unwrap().join("fresh");
    import(
        &fresh_dir,
        &[
            "search_flights_history.json",
            "fixed_loop.json",
            "retry_gate.json",
        ],
    );
    let full = sweep_json(&fresh_dir, "2026-08-13");
    assert_eq!(full["days_reused"], 0);
    assert_eq!(picture(&incremental), picture(&full));
    assert!(!by_kind(&incremental, "wasted_retries").is_empty());

    // A day whose turns may still be running keeps a provisional result:
    // reused at the same `now`, read again once its turns could settle.
    let open_dir = data.parent().unwrap().join("open");
    import(&open_dir, &["search_flights_history.json"]);
    let open = sweep_json(&open_dir, "2026-08-05T12:00:00Z");
    let same = sweep_json(&open_dir, "2026-08-05T12:00:00Z");
    assert_eq!(same["days_scanned"], 0, "{same:#}");
    assert_eq!(picture(&same), picture(&open));
    let later = sweep_json(&open_dir, "2026-08-06T12:00:00Z");
    assert!(later["days_scanned"].as_u64().unwrap() >= 1, "{later:#}");
}

/// The demo's data (`serve --demo`): the July 29 airline outage is one
/// incident of `search_flights` holding its storm and its spike (its wasted
/// retries are in the impact: `unavailable` is retryable, so they are the
/// storm's, not a signal of their own), each member saying why it joined;
/// the booking retried after success is an incident of its own (another
/// cause), apart from the booking's failures.
#[test]
fn the_demo_outage_is_one_incident_and_the_retried_booking_another() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    import(
        &data,
        &[
            "search_flights_history.json",
            "fixed_loop.json",
            "retry_gate.json",
        ],
    );
    let out = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            "2026-08-13T06:00:00Z",
            "--since",
            "40d",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let incidents = report["incidents"].as_array().unwrap();
    let id_of = |kind: &str, tool: &str| -> String {
        by_kind(&report, kind)
            .into_iter()
            .find(|s| s["tool"] == tool)
            .unwrap_or_else(|| panic!("no {kind} of {tool}: {report:#}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let storm = id_of("retry_storm", "search_flights");
    let spike = id_of("error_rate_spike", "search_flights");
    let holding = |id: &str| -> Vec<&serde_json::Value> {
        incidents
            .iter()
            .filter(|i| {
                i["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["signal_id"] == id)
            })
            .collect()
    };
    let outage = holding(&storm);
    assert_eq!(outage.len(), 1, "{incidents:#?}");
    let outage = outage[0];
    assert_eq!(
        holding(&spike),
        vec![outage],
        "{spike} is in the outage's incident"
    );
    assert_eq!(outage["key"], "inc1:tool:search_flights");
    assert!(outage["id"].as_str().unwrap().starts_with("INC-"));
    assert_eq!(outage["state"], "open");
    assert_eq!(outage["severity"], "critical");
    let title = outage["title"].as_str().unwrap();
    assert!(
        title.starts_with("search_flights failing since 2026-07-29 ")
            && title.contains("(unavailable)"),
        "{title}"
    );
    let members = outage["members"].as_array().unwrap();
    assert!(members.iter().any(|m| m["reason"] == "first finding"));
    for m in members.iter().filter(|m| m["reason"] != "first finding") {
        assert!(
            m["reason"]
                .as_str()
                .unwrap()
                .starts_with("same tool search_flights as SW-"),
            "{m}"
        );
    }
    assert_eq!(members.len(), 2, "{outage:#}");
    assert!(outage["impact"]["failed_calls"].as_u64().unwrap() > 0);
    assert!(outage["impact"]["wasted_calls"].as_u64().unwrap() > 0);
    assert!(
        outage["impact"]["turns"].as_u64().unwrap() >= 4,
        "the four storms' turns"
    );
    assert!(!outage["evidence"].as_array().unwrap().is_empty());
    assert!(outage["remedy"]["summary"].is_string());
    let whats: Vec<&str> = outage["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["what"].as_str().unwrap())
        .collect();
    assert!(
        whats.contains(&"first_finding")
            && whats.contains(&"peak")
            && whats.contains(&"last_finding"),
        "{whats:?}"
    );
    // The booking retried after success: its own incident.
    for after in by_kind(&report, "retry_after_success") {
        let own = holding(after["id"].as_str().unwrap());
        assert_eq!(own.len(), 1);
        assert_ne!(own[0]["id"], outage["id"]);
        assert_eq!(own[0]["members"].as_array().unwrap().len(), 1);
        assert!(own[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("inc1:signal:v1:retry_after_success:"));
        // Its impact is its own repeated call, not the tool's failing day.
        assert_eq!(own[0]["impact"]["failed_calls"], 0, "{:#}", own[0]);
        assert_eq!(own[0]["impact"]["wasted_calls"], 1, "{:#}", own[0]);
    }
    assert!(
        !by_kind(&report, "retry_after_success").is_empty(),
        "{report:#}"
    );
    // The text report leads with it.
    let text = run(
        &[
            "sweep",
            "--data-dir",
            data.to_str().unwrap(),
            "--now",
            "2026-08-13T06:00:00Z",
            "--since",
            "40d",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(outage["id"].as_str().unwrap()) && text.contains(title),
        "{text}"
    );
}
