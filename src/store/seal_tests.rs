//! Seal compaction: sorted outputs in full row groups, at most four files,
//! every span once, re-seals, the summary manifest, the trace lookup's
//! statistics, the flusher's trigger. The helpers build synthetic days (the
//! dashboard's tests use them too).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use polars::prelude::*;

use super::commit::{self, Intent};
use super::layout::is_seal_output;
use super::seal::{seal_compact, ManifestUpdate, SealOptions, MAX_OUTPUTS};
use std::sync::Arc;

use super::{parquet, rowgroup, Catalog, Layout, Reader, Store, StoreOptions};
use crate::model::{day_from_str, NANOS_PER_DAY};

/// A well-mixed 64-bit number from `x` (splitmix64).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The trace id of trace `t`.
pub(crate) fn trace_hex(t: u64) -> String {
    format!("{:016x}{:016x}", mix(t), mix(t ^ 0x5eed))
}

/// Spans `from..to` of a synthetic day: eight spans a trace (trace `i / 8`),
/// starts spread over the day and not in trace order, `name` to tell copies apart.
pub(crate) fn spans(day: i32, from: u64, to: u64, name: &str) -> DataFrame {
    let n = (to - from) as usize;
    let base = i64::from(day) * NANOS_PER_DAY;
    let ids: Vec<u64> = (from..to).collect();
    let df = df! {
        "trace_id" => ids.iter().map(|i| trace_hex(i / 8)).collect::<Vec<_>>(),
        "span_id" => ids.iter().map(|i| format!("{:016x}", i + 1)).collect::<Vec<_>>(),
        "name" => vec![name; n],
        "start_ns" => ids.iter().map(|i| base + (mix(*i) % (NANOS_PER_DAY as u64 - 1_000_000)) as i64).collect::<Vec<_>>(),
        "is_tool_call" => vec![true; n],
        "tool_name" => vec!["search_flights"; n],
        "error_class" => vec!["ok"; n],
    }
    .unwrap();
    let columns: Vec<String> = super::frame::schema()
        .iter_names()
        .map(|c| c.to_string())
        .collect();
    let mut df = rowgroup::conform(df, &columns).unwrap();
    let end = (df.column("start_ns").unwrap().i64().unwrap() + 500_000)
        .with_name("end_ns".into())
        .into_column();
    df.with_column(end).unwrap();
    df
}

/// Commit `df` as a new (flush-like) part of `day`.
pub(crate) fn write_part(catalog: &Catalog, day: i32, tag: &str, mut df: DataFrame) {
    let rename = super::stage::write_tmp_part(catalog.layout(), day, tag, &mut df).unwrap();
    let intent = Intent {
        renames: vec![rename],
        ..Intent::default()
    };
    commit::commit(catalog, &intent).unwrap();
}

/// Every stored (trace_id/span_id) of `day` with its name; panics on a repeat.
fn stored(catalog: &Arc<Catalog>, day: i32) -> BTreeMap<String, String> {
    let df = Reader::new(Arc::clone(catalog))
        .collect_spans(day..=day, |lf| lf)
        .unwrap();
    let (t, s, n) = (
        df.column("trace_id").unwrap().str().unwrap(),
        df.column("span_id").unwrap().str().unwrap(),
        df.column("name").unwrap().str().unwrap(),
    );
    let mut out = BTreeMap::new();
    for i in 0..df.height() {
        let key = format!("{}/{}", t.get(i).unwrap(), s.get(i).unwrap());
        let name = n.get(i).unwrap().to_string();
        assert!(
            out.insert(key.clone(), name).is_none(),
            "{key} stored twice"
        );
    }
    out
}

const DAY: &str = "2026-07-20";

#[test]
fn a_sealed_day_is_at_most_four_sorted_files_of_full_row_groups_each_span_once() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let day = day_from_str(DAY).unwrap();
    for (k, from) in [0u64, 200_000, 400_000].into_iter().enumerate() {
        write_part(
            &catalog,
            day,
            &format!("{k:016}"),
            spans(day, from, from + 200_000, "first"),
        );
    }
    // A redelivery of a thousand spans in a later part: the first copy wins.
    write_part(
        &catalog,
        day,
        &format!("{:016}", 3),
        spans(day, 1_000, 2_000, "again"),
    );
    let before = stored_keys(&catalog, day);
    let opts = SealOptions {
        range_rows: 100_000,
        ..SealOptions::default()
    };
    let report = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert_eq!((report.rows, report.duplicates), (600_000, 1_000));
    assert!(report.sub_ranges >= 5, "{report:?}");
    assert_eq!(report.sources.len(), 4);
    assert_eq!(report.manifest, ManifestUpdate::Absent);
    let parts = layout.parts(day).unwrap();
    assert_eq!(parts.len(), MAX_OUTPUTS, "{parts:?}");
    assert!(parts.iter().all(|p| is_seal_output(p)), "{parts:?}");
    // Every span once, the first copy of the repeated ones.
    let after = stored(&catalog, day);
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), before);
    assert!(after.values().all(|n| n == "first"));
    // Sorted by (trace_id, start_ns) across the files in name order; row
    // groups of 64–128 k rows with statistics that do not overlap.
    let mut last: Option<(String, i64)> = None;
    let mut last_max: Option<Vec<u8>> = None;
    for part in &parts {
        let md = rowgroup::footer(part).unwrap();
        for g in 0..md.row_groups.len() {
            let rows = md.row_groups[g].num_rows();
            assert!(
                (64 * 1024..=128 * 1024).contains(&rows),
                "{part:?} group {g}: {rows} rows"
            );
            let (min, max) = rowgroup::str_range(&md, g, "trace_id").expect("trace_id statistics");
            if let Some(prev) = &last_max {
                assert!(prev <= &min, "row groups overlap");
            }
            last_max = Some(max);
        }
        let df = parquet::scan_parts(std::slice::from_ref(part))
            .unwrap()
            .collect()
            .unwrap();
        let (t, s) = (
            df.column("trace_id").unwrap().str().unwrap(),
            df.column("start_ns").unwrap().i64().unwrap(),
        );
        for i in 0..df.height() {
            let key = (t.get(i).unwrap().to_string(), s.get(i).unwrap());
            assert!(
                last.as_ref().is_none_or(|l| *l <= key),
                "out of order at {part:?} row {i}"
            );
            last = Some(key);
        }
    }
    // Nothing left to do, and no scratch file left behind (the sources,
    // retired, go once no reader holds them).
    assert_eq!(seal_compact(&catalog, day, &opts).unwrap(), None);
    super::retire::reclaim(&catalog, std::time::Duration::ZERO).unwrap();
    let names: Vec<String> = std::fs::read_dir(layout.day_dir(day))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n == "_parts.json" || n.starts_with("part-") && n.ends_with("-s.parquet")),
        "{names:?}"
    );
}

fn stored_keys(catalog: &Arc<Catalog>, day: i32) -> Vec<String> {
    let mut keys: Vec<String> = {
        let df = Reader::new(Arc::clone(catalog))
            .collect_spans(day..=day, |lf| lf)
            .unwrap();
        let (t, s) = (
            df.column("trace_id").unwrap().str().unwrap(),
            df.column("span_id").unwrap().str().unwrap(),
        );
        (0..df.height())
            .map(|i| format!("{}/{}", t.get(i).unwrap(), s.get(i).unwrap()))
            .collect()
    };
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn a_late_part_re_seals_the_day_and_the_sealed_copy_wins() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let day = day_from_str(DAY).unwrap();
    write_part(
        &catalog,
        day,
        &format!("{:016}", 0),
        spans(day, 0, 5_000, "first"),
    );
    let opts = SealOptions {
        range_rows: 1_500,
        row_group_rows: 1_000,
    };
    let first = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert!(
        first.sub_ranges > 1 && first.outputs.len() <= MAX_OUTPUTS,
        "{first:?}"
    );
    // Late spans: 2 000 new, 500 redelivered with another name.
    write_part(
        &catalog,
        day,
        &format!("{:016}", 1),
        spans(day, 4_500, 7_000, "late"),
    );
    assert!(super::seal::needs_seal(&layout, day).unwrap());
    let again = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert_eq!((again.rows, again.duplicates), (7_000, 500));
    assert_eq!(again.sources.len(), first.outputs.len() + 1);
    let parts = layout.parts(day).unwrap();
    assert!(
        parts.len() <= MAX_OUTPUTS && parts.iter().all(|p| is_seal_output(p)),
        "{parts:?}"
    );
    let after = stored(&catalog, day);
    assert_eq!(after.len(), 7_000);
    assert_eq!(after.values().filter(|n| *n == "late").count(), 2_000);
}

#[test]
fn the_summary_manifest_follows_the_seal_only_when_it_named_the_sources() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let day = day_from_str(DAY).unwrap();
    let opts = SealOptions::default();
    let manifest = layout.summary_dir(day).join("manifest.json");
    std::fs::create_dir_all(layout.summary_dir(day)).unwrap();
    let write_manifest = |parts: Vec<String>| {
        let body = serde_json::json!({"version": 1, "rows": 123, "parts": parts});
        std::fs::write(&manifest, serde_json::to_vec(&body).unwrap()).unwrap();
    };
    let rel = |layout: &Layout| -> Vec<String> {
        layout
            .parts(day)
            .unwrap()
            .iter()
            .map(|p| layout.relative(p))
            .collect()
    };
    // Built from exactly the sources: carried over, other keys kept.
    write_part(
        &catalog,
        day,
        &format!("{:016}", 0),
        spans(day, 0, 800, "a"),
    );
    write_part(
        &catalog,
        day,
        &format!("{:016}", 1),
        spans(day, 800, 1_600, "a"),
    );
    write_manifest(rel(&layout));
    let r = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert_eq!(r.manifest, ManifestUpdate::Carried);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    assert_eq!(m["parts"], serde_json::json!(rel(&layout)));
    assert_eq!(r.outputs, rel(&layout));
    assert!(
        r.outputs[0].starts_with(&format!("spans/date={DAY}/part-")),
        "{r:?}"
    );
    assert_eq!(
        (m["version"].clone(), m["rows"].clone()),
        (1.into(), 123.into())
    );
    // Built from other parts (the late one is not in it): left alone.
    write_part(
        &catalog,
        day,
        &format!("{:016}", 2),
        spans(day, 1_600, 2_000, "a"),
    );
    let stale = std::fs::read(&manifest).unwrap();
    let r = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert_eq!(r.manifest, ManifestUpdate::Stale);
    assert_eq!(std::fs::read(&manifest).unwrap(), stale);
    // Naming the sources, but a repeated row was dropped: left alone.
    write_part(&catalog, day, &format!("{:016}", 3), spans(day, 0, 10, "a"));
    write_manifest(rel(&layout));
    let named = std::fs::read(&manifest).unwrap();
    let r = seal_compact(&catalog, day, &opts).unwrap().unwrap();
    assert_eq!((r.duplicates, r.manifest), (10, ManifestUpdate::Stale));
    assert_eq!(std::fs::read(&manifest).unwrap(), named);
}

#[test]
fn a_trace_lookup_on_a_sealed_day_reads_one_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let day = day_from_str(DAY).unwrap();
    write_part(
        &catalog,
        day,
        &format!("{:016}", 0),
        spans(day, 0, 150_000, "a"),
    );
    write_part(
        &catalog,
        day,
        &format!("{:016}", 1),
        spans(day, 150_000, 300_000, "a"),
    );
    let reader = Reader::new(Arc::clone(&catalog));
    let trace = trace_hex(20_000);
    let (unsealed, _) = reader.trace_spans(day..=day, &trace).unwrap();
    assert_eq!(unsealed.height(), 8);
    seal_compact(&catalog, day, &SealOptions::default())
        .unwrap()
        .unwrap();
    let (sealed, read) = reader.trace_spans(day - 1..=day + 1, &trace).unwrap();
    let groups: usize = layout
        .parts(day)
        .unwrap()
        .iter()
        .map(|p| rowgroup::footer(p).unwrap().row_groups.len())
        .sum();
    assert!(groups >= 3, "{groups} row groups");
    assert_eq!(read.row_groups_read, 1, "{read:?}");
    assert_eq!(read.row_groups_skipped, groups - 1, "{read:?}");
    assert!(sealed.equals_missing(&unsealed), "{sealed}\n{unsealed}");
    let (none, read) = reader.trace_spans(day..=day, &"0".repeat(31)).unwrap();
    assert_eq!((none.height(), read.row_groups_read), (0, 0));
}

fn quick() -> StoreOptions {
    StoreOptions {
        flush_interval: Duration::from_secs(3600),
        compact_parts: 2,
        seal_after: None,
        retired_grace: Duration::ZERO,
        ..StoreOptions::default()
    }
}

#[test]
fn the_store_seals_on_its_flusher_and_small_part_compaction_leaves_a_sealed_day() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    let day = day_from_str(DAY).unwrap();
    let layout = store.layout().clone();
    write_part(
        store.catalog(),
        day,
        &format!("{:016}", 900),
        spans(day, 0, 3_000, "a"),
    );
    let r = store.seal_compact(day).unwrap().unwrap();
    assert_eq!(r.rows, 3_000);
    assert_eq!(store.seal_compact(day).unwrap(), None);
    // Late flushes: two parts would be merged on an unsealed day (compact_parts 2).
    for seed in 1..=2u8 {
        let req = super::tests::request(DAY, seed, 5, "search_flights");
        store
            .submit(crate::ingest::prepare(&req))
            .unwrap()
            .wait()
            .unwrap();
        store.flush().unwrap();
    }
    let parts = layout.parts(day).unwrap();
    assert_eq!(
        parts.iter().filter(|p| !is_seal_output(p)).count(),
        2,
        "{parts:?}"
    );
    store.close().unwrap();
    // With a trigger, the flusher re-seals the day by itself once it is quiet.
    let store = Store::open(
        dir.path(),
        StoreOptions {
            seal_after: Some(Duration::from_secs(1)),
            ..quick()
        },
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while super::seal::needs_seal(&layout, day).unwrap() {
        assert!(Instant::now() < deadline, "never re-sealed");
        std::thread::sleep(Duration::from_millis(50));
    }
    store.close().unwrap();
    assert_eq!(stored(&Catalog::new(layout.clone()), day).len(), 3_010);
    assert_eq!(
        store
            .stats()
            .seal_compactions
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
