//! Tests of the part set: what a reader sees while a commit runs, part
//! names that survive a WAL reset, and a long WAL replayed in chunks.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use polars::prelude::*;
use prost::Message;

use super::commit::{self, Intent, Step};
use super::tests::{count, put, quick, request};
use super::*;
use crate::model::day_from_str;

/// Every stored (trace id, span id) a reader sees, and how many rows.
fn keys_seen(dir: &Path) -> (usize, usize) {
    let df = Reader::open(dir)
        .unwrap()
        .collect_spans(.., |lf| lf.select([col("trace_id"), col("span_id")]))
        .unwrap();
    let keys: HashSet<_> = frame::keys(&df).unwrap().into_iter().collect();
    (df.height(), keys.len())
}

/// Merge every part of `day` into one, as compaction would, and apply the
/// change with `on` watching each step.
fn merge_day(catalog: &Catalog, day: i32, on: &mut dyn FnMut(Step)) {
    let (_, intent) = merge_intent(catalog.layout(), day);
    commit::apply_observed(catalog, &intent, on).unwrap();
}

/// Every live part of `day` merged into one temporary part, as compaction
/// does: the sources, and the intent that renames the merged part in and
/// replaces them.
pub(super) fn merge_intent(layout: &Layout, day: i32) -> (Vec<PathBuf>, Intent) {
    let parts = layout.parts(day).unwrap();
    let mut df = parquet::scan_parts(&parts).unwrap().collect().unwrap();
    let tag = format!("{}-c", stage::new_part_tag());
    let rename = stage::write_tmp_part(layout, day, &tag, &mut df).unwrap();
    let intent = Intent {
        renames: vec![rename],
        deletes: parts.iter().map(|p| layout.relative(p)).collect(),
        ..Intent::default()
    };
    (parts, intent)
}

#[test]
fn a_reader_listing_mid_compaction_sees_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    for seed in 1..=3 {
        put(&store, "2026-08-01", seed, 10, "t");
        store.flush().unwrap();
    }
    store.close().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    let day = day_from_str("2026-08-01").unwrap();
    assert_eq!(layout.parts(day).unwrap().len(), 3);
    // Once as the store left it, once as a day written before manifests.
    for legacy in [false, true] {
        if legacy {
            std::fs::remove_file(layout.day_dir(day).join(manifest::FILE)).unwrap();
            assert_eq!(layout.parts(day).unwrap().len(), 1, "listed without one");
        }
        let before = layout.day_version(day).unwrap();
        let mut seen = Vec::new();
        merge_day(&catalog, day, &mut |step| {
            let on_disk = manifest::list_dir(&layout.day_dir(day)).unwrap().len();
            seen.push((step, on_disk, keys_seen(dir.path())));
        });
        let on_disk = if legacy { 2 } else { 4 };
        assert_eq!(
            seen,
            vec![
                // The merged part is in place beside its sources ...
                (Step::Renamed, on_disk, (30, 30)),
                // ... which stay, retired, until no reader can hold them.
                (Step::Published, on_disk, (30, 30)),
                (Step::Done, on_disk, (30, 30)),
            ],
            "legacy: {legacy}"
        );
        assert_eq!(
            retire::reclaim(&catalog, std::time::Duration::ZERO).unwrap(),
            on_disk - 1
        );
        assert_eq!(manifest::list_dir(&layout.day_dir(day)).unwrap().len(), 1);
        assert_eq!(layout.parts(day).unwrap().len(), 1);
        assert!(manifest::read(&layout.day_dir(day)).unwrap().is_some());
        assert_ne!(layout.day_version(day).unwrap(), before);
    }
    assert_eq!(layout.day_version(day - 1).unwrap(), "");
}

#[test]
fn repeated_compactions_never_show_a_reader_a_row_twice() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        compact_parts: 2,
        ..quick()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    let (stop, reads) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let reader = {
        let (path, stop, reads) = (
            dir.path().to_path_buf(),
            Arc::clone(&stop),
            Arc::clone(&reads),
        );
        std::thread::spawn(move || {
            let reader = Reader::open(&path).unwrap();
            while !stop.load(Ordering::Relaxed) {
                // A read racing a deletion fails and is retried; never doubles.
                let Ok(df) =
                    reader.collect_spans(.., |lf| lf.select([col("trace_id"), col("span_id")]))
                else {
                    continue;
                };
                let keys: HashSet<_> = frame::keys(&df).unwrap().into_iter().collect();
                assert_eq!(df.height(), keys.len(), "a row read twice");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for seed in 1..=40u8 {
        put(&store, "2026-08-02", seed, 5, "t");
        store.flush().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(store.stats().compactions.load(Ordering::Relaxed) >= 19);
    assert!(reads.load(Ordering::Relaxed) > 0);
    store.close().unwrap();
    assert_eq!(keys_seen(dir.path()), (200, 200));
}

#[test]
fn a_reset_wal_never_overwrites_a_part() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    for seed in [1, 2, 3] {
        let store = Store::open(dir.path(), quick()).unwrap();
        put(&store, "2026-08-03", seed, 7, "t");
        store.close().unwrap();
        // The WAL directory deleted (its numbering starts again at 1).
        std::fs::remove_dir_all(layout.wal_dir()).unwrap();
    }
    let parts = layout.parts(day_from_str("2026-08-03").unwrap()).unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(keys_seen(dir.path()), (21, 21));
}

#[test]
fn a_long_wal_replays_in_bounded_chunks_with_every_span_once() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.create().unwrap();
    // 24 requests of 50 spans over two days in four segments, each sent twice.
    let mut wal = wal::Wal::create(&layout.wal_dir(), 0).unwrap();
    for seed in 1..=24u8 {
        let day = if seed % 2 == 0 {
            "2026-08-05"
        } else {
            "2026-08-06"
        };
        let r = request(day, seed, 50, "t").encode_to_vec();
        wal.append_sync(&[&r, &r]).unwrap();
        if seed % 6 == 0 {
            wal.rotate().unwrap();
        }
    }
    drop(wal);
    let segments = wal::list(&layout.wal_dir()).unwrap();
    let saved = dir.path().join("wal-copy");
    std::fs::create_dir(&saved).unwrap();
    for &seq in &segments {
        let from = wal::segment_path(&layout.wal_dir(), seq);
        std::fs::copy(&from, saved.join(from.file_name().unwrap())).unwrap();
    }
    let opts = StoreOptions {
        flush_rows: 120,
        compact_parts: 1000,
        ..quick()
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let rec = store.recovery();
    assert_eq!((rec.records, rec.spans), (48, 1200));
    assert!(rec.flushes >= 8, "{rec:?}");
    // The limit is checked after each request: at most one request over.
    let peak = store.stats().memtable_rows_peak.load(Ordering::Relaxed);
    assert!((120..170).contains(&peak), "peak {peak}");
    // The segment being read when the replay ended stays until it is committed.
    let kept = wal::list(&layout.wal_dir()).unwrap();
    assert!(kept.contains(&segments[3]), "{kept:?}");
    assert!(!kept.contains(&segments[0]), "{kept:?}");
    store.close().unwrap();
    assert_eq!(keys_seen(dir.path()), (1200, 1200));
    // A crash after chunks were committed replays their records again:
    // dedup against the parts drops them all.
    for entry in std::fs::read_dir(&saved).unwrap().flatten() {
        std::fs::copy(entry.path(), layout.wal_dir().join(entry.file_name())).unwrap();
    }
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.recovery().spans, 0);
    store.close().unwrap();
    assert_eq!(count(dir.path()), 1200);
}

/// Every span of `dir`, all columns, in key order.
fn all_rows(dir: &Path) -> DataFrame {
    super::tests::all_spans(dir)
        .sort(["trace_id", "span_id"], Default::default())
        .unwrap()
}

#[test]
fn compaction_copies_flush_outputs_whole_and_drops_repeated_spans() {
    let day = day_from_str("2026-08-05").unwrap();
    let (merged, plain) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, compact_parts) in [(&merged, 4), (&plain, 100)] {
        {
            let store = Store::open(dir.path(), quick()).unwrap();
            for seed in 10..12 {
                put(&store, "2026-08-05", seed, 11, "search_flights");
                store.flush().unwrap();
            }
            store.close().unwrap();
        }
        // A third part repeating the first one's spans (as an older
        // version's lost dedup could have left): the merge drops them.
        let catalog = Catalog::new(Layout::new(dir.path()));
        let layout = catalog.layout().clone();
        let first = layout.parts(day).unwrap()[0].clone();
        let mut df = parquet::scan_parts(&[first]).unwrap().collect().unwrap();
        let rename = stage::write_tmp_part(&layout, day, &stage::new_part_tag(), &mut df).unwrap();
        let intent = Intent {
            renames: vec![rename],
            ..Intent::default()
        };
        commit::commit(&catalog, &intent).unwrap();
        drop(catalog);
        let opts = StoreOptions {
            compact_parts,
            ..quick()
        };
        let store = Store::open(dir.path(), opts).unwrap();
        put(&store, "2026-08-05", 12, 11, "search_flights");
        store.flush().unwrap();
        store.close().unwrap();
    }
    let parts = Layout::new(merged.path()).parts(day).unwrap();
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert!(parts[0].to_string_lossy().ends_with("-c.parquet"));
    assert_eq!(Layout::new(plain.path()).parts(day).unwrap().len(), 4);
    // The same rows, every column alike, each span once.
    let (m, p) = (all_rows(merged.path()), all_rows(plain.path()));
    assert_eq!(m.height(), 33);
    assert_eq!(p.height(), 44, "the unmerged day still holds the repeats");
    let p = p
        .lazy()
        .unique_stable_generic(
            Some(vec![col("trace_id"), col("span_id")]),
            UniqueKeepStrategy::First,
        )
        .collect()
        .unwrap();
    assert!(m.equals_missing(&p), "{m}\n{p}");
    // Row groups copied whole keep their statistics.
    let bytes = std::fs::read(&parts[0]).unwrap();
    let meta =
        polars_parquet::parquet::read::read_metadata(&mut std::io::Cursor::new(bytes)).unwrap();
    assert_eq!(meta.num_rows, 33);
    for rg in &meta.row_groups {
        for c in rg.parquet_columns() {
            assert!(
                c.statistics(&meta.footer_buf).is_some_and(|s| s.is_ok()),
                "{:?}",
                c.descriptor()
            );
        }
    }
}
