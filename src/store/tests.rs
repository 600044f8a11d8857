//! Tests of the store end to end: acknowledged spans read back once, dedup across reopens, retention.

use std::io::Write;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use polars::prelude::*;
use prost::Message;

use super::*;
use crate::model::{day_from_str, NANOS_PER_DAY};

fn kv(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// `n` tool spans on `day` ('YYYY-MM-DD'), ids from `seed`.
pub(super) fn request(day: &str, seed: u8, n: usize, tool: &str) -> ExportTraceServiceRequest {
    let start = i64::from(day_from_str(day).unwrap()) * NANOS_PER_DAY + 3_600_000_000_000;
    let spans = (0..n)
        .map(|i| Span {
            trace_id: vec![seed; 16],
            span_id: (i as u64 + 1).to_be_bytes().to_vec(),
            name: format!("execute_tool {tool}"),
            start_time_unix_nano: (start + i as i64 * 1_000_000) as u64,
            end_time_unix_nano: (start + i as i64 * 1_000_000 + 500_000) as u64,
            attributes: vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", tool),
            ],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Submit `request(day, seed, n, tool)` and wait for its acknowledgement.
pub(super) fn put(store: &Store, day: &str, seed: u8, n: usize, tool: &str) -> Ack {
    store
        .submit(crate::ingest::prepare(&request(day, seed, n, tool)))
        .unwrap()
        .wait()
        .unwrap()
}

pub(super) fn quick() -> StoreOptions {
    StoreOptions {
        flush_interval: Duration::from_secs(3600),
        // No reader in another process here: what no pin holds goes at once.
        retired_grace: Duration::ZERO,
        ..StoreOptions::default()
    }
}

/// Every span of `dir`, all columns, as read.
pub(super) fn all_spans(dir: &std::path::Path) -> DataFrame {
    Reader::open(dir)
        .unwrap()
        .all_spans()
        .unwrap()
        .collect()
        .unwrap()
}

pub(super) fn count(dir: &std::path::Path) -> usize {
    all_spans(dir).height()
}

#[test]
fn acknowledged_spans_are_readable_after_flush_and_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    let a = put(&store, "2026-07-29", 1, 10, "search_flights");
    assert_eq!(
        a,
        Ack {
            stored: 10,
            duplicates: 0
        }
    );
    // A redelivery of the same spans is acknowledged and dropped.
    let b = put(&store, "2026-07-29", 1, 10, "search_flights");
    assert_eq!(
        b,
        Ack {
            stored: 0,
            duplicates: 10
        }
    );
    store.flush().unwrap();
    assert_eq!(count(dir.path()), 10);
    // After a flush, dedup still knows the keys (read back from Parquet).
    let c = put(&store, "2026-07-29", 1, 12, "search_flights");
    assert_eq!(
        c,
        Ack {
            stored: 2,
            duplicates: 10
        }
    );
    store.close().unwrap();
    assert_eq!(count(dir.path()), 12);
    assert!(wal::list(&Layout::new(dir.path()).wal_dir()).unwrap().len() <= 1);
}

#[test]
fn a_reopened_store_dedups_against_parquet() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), quick()).unwrap();
        put(&store, "2026-07-29", 2, 5, "t");
        store.close().unwrap();
    }
    let store = Store::open(dir.path(), quick()).unwrap();
    let ack = put(&store, "2026-07-29", 2, 5, "t");
    assert_eq!(ack.duplicates, 5);
    store.close().unwrap();
    assert_eq!(count(dir.path()), 5);
}

#[test]
fn the_wal_is_replayed_and_a_torn_tail_cut() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.create().unwrap();
    // Two acknowledged records, then a torn third (as a crash mid-write leaves).
    let mut wal = wal::Wal::create(&layout.wal_dir(), 0).unwrap();
    let r1 = request("2026-07-30", 3, 4, "t").encode_to_vec();
    let r2 = request("2026-07-31", 4, 3, "t").encode_to_vec();
    wal.append_sync(&[&r1, &r2]).unwrap();
    drop(wal);
    let path = wal::segment_path(&layout.wal_dir(), 1);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, 9, 9]).unwrap();
    drop(f);
    let store = Store::open(dir.path(), quick()).unwrap();
    let rec = store.recovery();
    assert_eq!((rec.records, rec.spans, rec.torn_tails), (2, 7, 1));
    store.close().unwrap();
    assert_eq!(count(dir.path()), 7);
    assert_eq!(Reader::open(dir.path()).unwrap().days().unwrap().len(), 2);
    // The replayed segment is gone once flushed; a second open replays nothing.
    let store = Store::open(dir.path(), quick()).unwrap();
    assert_eq!(store.recovery().records, 0);
    store.close().unwrap();
    assert_eq!(count(dir.path()), 7);
}

#[test]
fn an_interrupted_commit_is_finished_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), quick()).unwrap();
        put(&store, "2026-07-29", 5, 6, "t");
        store.close().unwrap();
    }
    let layout = Layout::new(dir.path());
    let day = day_from_str("2026-07-29").unwrap();
    let part = layout.parts(day).unwrap().remove(0);
    // Pretend a compaction wrote its new part and intent, then crashed before renaming.
    let tmp = part.with_file_name(".part-x.parquet.tmp");
    std::fs::copy(&part, &tmp).unwrap();
    let intent = commit::Intent {
        renames: vec![(
            layout.relative(&tmp),
            layout.relative(&part.with_file_name("part-x.parquet")),
        )],
        deletes: vec![layout.relative(&part)],
        ..Default::default()
    };
    std::fs::write(layout.intent(), serde_json::to_vec(&intent).unwrap()).unwrap();
    // And an uncommitted temporary file that must vanish.
    std::fs::write(part.with_file_name(".part-y.parquet.tmp"), b"junk").unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    assert!(store.recovery().finished_commit);
    store.close().unwrap();
    let parts = layout.parts(day).unwrap();
    assert_eq!(parts.len(), 1);
    assert!(parts[0].ends_with("part-x.parquet"));
    assert_eq!(count(dir.path()), 6);
    assert!(!part.with_file_name(".part-y.parquet.tmp").exists());
}

#[test]
fn flush_outputs_are_merged_and_the_rollup_counts_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        compact_parts: 3,
        ..quick()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    for seed in 10..16 {
        put(&store, "2026-08-04", seed, 11, "search_flights");
        store.flush().unwrap();
    }
    let layout = store.layout().clone();
    let parts = layout.parts(day_from_str("2026-08-04").unwrap()).unwrap();
    // Six flushes, merged three at a time; a merged part is not merged again.
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(
        parts
            .iter()
            .all(|p| p.to_string_lossy().ends_with("-c.parquet")),
        "{parts:?}"
    );
    store.close().unwrap();
    assert_eq!(count(dir.path()), 66);
    let rollup = Reader::open(dir.path())
        .unwrap()
        .tool_daily()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(rollup.height(), 1);
    let calls = rollup
        .column("calls")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap();
    assert_eq!(calls.i64().unwrap().get(0), Some(66));
    let day = rollup
        .column("day")
        .unwrap()
        .str()
        .unwrap()
        .get(0)
        .map(str::to_string);
    assert_eq!(day.as_deref(), Some("2026-08-04"));
}

#[test]
fn retention_drops_old_days() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), quick()).unwrap();
        put(&store, "2020-01-01", 20, 3, "t");
        store.close().unwrap();
    }
    assert_eq!(count(dir.path()), 3);
    // A day's summary goes with it.
    let summary = Layout::new(dir.path()).summary_dir(day_from_str("2020-01-01").unwrap());
    std::fs::create_dir_all(&summary).unwrap();
    std::fs::write(summary.join("manifest.json"), b"{}").unwrap();
    let store = Store::open(
        dir.path(),
        StoreOptions {
            retention_days: Some(30),
            ..quick()
        },
    )
    .unwrap();
    // The flusher runs retention on start; give it a moment.
    for _ in 0..100 {
        if Reader::open(dir.path()).unwrap().days().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    store.close().unwrap();
    assert_eq!(count(dir.path()), 0);
    assert!(!summary.exists());
}

#[test]
fn a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    assert!(matches!(
        Store::open(dir.path(), quick()),
        Err(StoreError::Locked { .. })
    ));
    store.close().unwrap();
}

#[test]
fn a_nested_span_of_the_same_tool_is_the_same_call() {
    // a: book; b inside a (its MCP server span, overlapping); c: other, a
    // root; d: other, its parent never arrived; e: book under a but after
    // it ended (a second call, not the same one); f inside b (a third layer).
    let df = df! {
        "trace_id" => ["t", "t", "t", "t", "t", "t"],
        "span_id" => ["a", "b", "c", "d", "e", "f"],
        "parent_span_id" => [None, Some("a"), None, Some("x"), Some("a"), Some("b")],
        "tool_name" => ["book", "book", "other", "other", "book", "book"],
        "start_ns" => [0i64, 10, 0, 0, 200, 20],
        "end_ns" => [100i64, 90, 50, 50, 300, 80],
    }
    .unwrap();
    let dup = crate::spans::nested_duplicates(&df).unwrap();
    assert_eq!(dup, vec![None, Some(0), None, None, None, Some(0)]);
}

#[test]
fn damage_before_the_tail_refuses_to_open_and_names_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.create().unwrap();
    let mut wal = wal::Wal::create(&layout.wal_dir(), 0).unwrap();
    let r1 = request("2026-07-30", 30, 2, "t").encode_to_vec();
    let r2 = request("2026-07-30", 31, 2, "t").encode_to_vec();
    wal.append_sync(&[&r1, &r2]).unwrap();
    drop(wal);
    // Flip a byte inside the first (acknowledged) record of the group.
    let path = wal::segment_path(&layout.wal_dir(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[wal::SEGMENT_HEADER + wal::GROUP_HEADER + wal::RECORD_HEADER + 2] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let err = Store::open(dir.path(), quick())
        .err()
        .expect("a damaged WAL must not open");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("is damaged at byte {}", wal::SEGMENT_HEADER))
            && msg.contains("move the file out of"),
        "{msg}"
    );
    // Nothing was cut: the file is as it was.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}
