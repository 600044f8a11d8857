//! Tests of deferred deletion: a read that listed its files before a
//! compaction or a rollup refresh committed collects what it listed; the
//! replaced files go once no reader that could hold them is left (and, for
//! readers in other processes, the grace passed); a restart deletes what a
//! crash left retired; the rollup's plain names stay readable by an earlier
//! version, and what one wrote there is adopted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Status};
use polars::prelude::*;

use super::commit::{self, Intent};
use super::seal_tests::{spans, write_part};
use super::tests::{count, put, quick, request};
use super::tests_parts::merge_intent;
use super::*;
use crate::model::{day_from_str, day_to_string};

const DAY: &str = "2026-08-10";

fn day() -> i32 {
    day_from_str(DAY).unwrap()
}

/// `n` failed calls of `search_flights` on `day`, logged as `name`.
fn failing(day: i32, seed: u8, n: usize, name: &str) -> ExportTraceServiceRequest {
    let mut r = request(&day_to_string(day), seed, n, "search_flights");
    for s in &mut r.resource_spans[0].scope_spans[0].spans {
        s.status = Some(Status {
            code: StatusCode::Error as i32,
            message: format!("{name}: the upstream did not answer"),
        });
        s.attributes.push(KeyValue {
            key: "error.type".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(name.into())),
            }),
            ..Default::default()
        });
    }
    r
}

fn submit(store: &Store, r: &ExportTraceServiceRequest) {
    store
        .submit(crate::ingest::prepare(r))
        .unwrap()
        .wait()
        .unwrap();
}

/// The file names in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Merge every live part of `day` into one, as compaction does.
fn merge(catalog: &Catalog, day: i32) -> Vec<PathBuf> {
    let (parts, intent) = merge_intent(catalog.layout(), day);
    commit::commit(catalog, &intent).unwrap();
    parts
}

#[test]
fn a_read_listed_before_a_compaction_collects_the_parts_it_listed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        compact_parts: 3,
        ..quick()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    let layout = store.layout().clone();
    for seed in 1..=2 {
        put(&store, DAY, seed, 10, "t");
        store.flush().unwrap();
    }
    let listed = layout.parts(day()).unwrap();
    assert_eq!(listed.len(), 2);
    // A sweep's read: the parts listed and the scan planned (a footer read) ...
    let mut scan = store.reader().spans(day()..=day()).unwrap();
    scan.collect_schema().unwrap();
    // ... then a third flush, and the three parts merged and committed.
    put(&store, DAY, 3, 10, "t");
    store.flush().unwrap();
    let live = layout.parts(day()).unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(live[0].to_string_lossy().ends_with("-c.parquet"));
    // The read's parts left the live set but are on disk, retired.
    assert!(listed.iter().all(|p| p.exists() && !live.contains(p)));
    let m = manifest::read(&layout.day_dir(day())).unwrap().unwrap();
    assert_eq!(m.retired.len(), 3, "{m:?}");
    // It reads what it listed.
    let df = scan.collect().unwrap();
    assert_eq!(df.height(), 20);
    // Once it is done, the replaced parts go.
    retire::reclaim(store.catalog(), Duration::ZERO).unwrap();
    assert!(listed.iter().all(|p| !p.exists()), "{listed:?}");
    assert_eq!(manifest::list_dir(&layout.day_dir(day())).unwrap().len(), 1);
    let m = manifest::read(&layout.day_dir(day())).unwrap().unwrap();
    assert!(m.retired.is_empty(), "{m:?}");
    store.close().unwrap();
    assert_eq!(count(dir.path()), 30);
}

#[test]
fn a_read_of_the_rollup_before_a_refresh_collects_the_generation_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    let layout = store.layout().clone();
    submit(&store, &failing(day(), 1, 10, "TimeoutError"));
    store.flush().unwrap();
    let reader = store.reader();
    // The sweep's remedy read: the error names planned (the footer read) ...
    let mut scan = reader.tool_error_names().unwrap().unwrap();
    scan.collect_schema().unwrap();
    // ... then a refresh writes the rollup anew, with more days and names.
    for d in 1..=30u8 {
        let name = format!("UpstreamError{d}");
        submit(&store, &failing(day() + i32::from(d), d + 1, 5, &name));
    }
    store.flush().unwrap();
    let df = scan.collect().unwrap();
    assert_eq!(df.height(), 1, "{df}");
    let name = df.column("error_type").unwrap().str().unwrap().get(0);
    assert_eq!(name, Some("TimeoutError"));
    let now = reader
        .tool_error_names()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(now.height(), 31);
    // The generation it read goes once it is done: the current one, its
    // plain-named links and the manifest are left.
    retire::reclaim(store.catalog(), Duration::ZERO).unwrap();
    let current = rollup_set::read(&layout).unwrap().unwrap();
    let mut want = vec![
        "current.json".to_string(),
        current.tool_daily.clone().unwrap(),
        current.tool_error_names.clone().unwrap(),
        "tool_daily.parquet".to_string(),
        "tool_error_names.parquet".to_string(),
    ];
    want.sort();
    let mut have = files(&layout.rollups_dir());
    have.retain(|n| n != "dirty.json");
    assert_eq!(have, want);
    assert!(current.retired.is_empty(), "{current:?}");
    store.close().unwrap();
}

#[test]
fn a_retired_part_goes_once_no_pin_older_than_its_retirement_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let d = day();
    write_part(&catalog, d, "1-a", spans(d, 0, 100, "x"));
    write_part(&catalog, d, "2-b", spans(d, 100, 200, "x"));
    let before = layout.day_version(d).unwrap();
    // A read that may have listed the two parts, and another reader of the
    // same catalog (as every reader a store hands out is).
    let early = Reader::new(Arc::clone(&catalog)).pin();
    let other = Reader::new(Arc::clone(&catalog)).pin();
    let sources = merge(&catalog, d);
    // A read that began after the commit lists the merged part only.
    let late = Reader::new(Arc::clone(&catalog)).pin();
    let version = layout.day_version(d).unwrap();
    assert_ne!(version, before);
    assert_eq!(retire::reclaim(&catalog, Duration::ZERO).unwrap(), 0);
    drop(early);
    assert_eq!(retire::reclaim(&catalog, Duration::ZERO).unwrap(), 0);
    assert!(sources.iter().all(|p| p.exists()));
    drop(other);
    // The grace for readers in other processes holds them still ...
    assert_eq!(
        retire::reclaim(&catalog, Duration::from_secs(3600)).unwrap(),
        0
    );
    let m = manifest::read(&layout.day_dir(d)).unwrap().unwrap();
    let now = retire::now_ms();
    assert!(m
        .retired
        .iter()
        .all(|r| (now - 60_000..=now).contains(&r.at_ms)));
    // ... and once it is over they go, whatever `late` holds.
    assert_eq!(retire::reclaim(&catalog, Duration::ZERO).unwrap(), 2);
    assert!(sources.iter().all(|p| !p.exists()));
    // Deleting retired files changes no fingerprint.
    assert_eq!(layout.day_version(d).unwrap(), version);
    assert_eq!(
        Reader::new(Arc::clone(&catalog))
            .all_spans()
            .unwrap()
            .collect()
            .unwrap()
            .height(),
        200
    );
    drop(late);
}

#[test]
fn readers_of_one_catalog_pin_in_one_count_and_its_commits_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    catalog.layout().create().unwrap();
    let d = day();
    write_part(&catalog, d, "1-a", spans(d, 0, 100, "x"));
    write_part(&catalog, d, "2-b", spans(d, 100, 200, "x"));
    // Two readers of the catalog: a pin of one taken before a commit holds
    // what the commit retires; a pin of the other taken after it does not.
    let (a, b) = (
        Reader::new(Arc::clone(&catalog)),
        Reader::new(Arc::clone(&catalog)),
    );
    let before = a.pin();
    let sources = merge(&catalog, d);
    let after = b.pin();
    assert_eq!(retire::pending(&catalog), 2);
    assert_eq!(retire::reclaim(&catalog, Duration::ZERO).unwrap(), 0);
    drop(before);
    assert_eq!(retire::reclaim(&catalog, Duration::ZERO).unwrap(), 2);
    assert!(sources.iter().all(|p| !p.exists()));
    drop(after);
    // A commit through one handle waits while another holds the lock.
    write_part(&catalog, d, "3-c", spans(d, 200, 300, "x"));
    let held = catalog.exclusive();
    let other = Arc::clone(&catalog);
    let (done, committed) = std::sync::mpsc::channel();
    let merging = std::thread::spawn(move || {
        merge(&other, d);
        done.send(()).unwrap();
    });
    assert!(committed.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(catalog.layout().parts(d).unwrap().len(), 2);
    drop(held);
    committed.recv_timeout(Duration::from_secs(30)).unwrap();
    merging.join().unwrap();
    assert_eq!(catalog.layout().parts(d).unwrap().len(), 1);
}

#[test]
fn a_day_retention_emptied_goes_once_its_parts_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(Layout::new(dir.path()));
    let layout = catalog.layout().clone();
    layout.create().unwrap();
    let d = day();
    write_part(&catalog, d, "1-a", spans(d, 0, 50, "x"));
    let pin = Reader::new(Arc::clone(&catalog)).pin();
    let parts = layout.parts(d).unwrap();
    let intent = Intent {
        deletes: parts.iter().map(|p| layout.relative(p)).collect(),
        ..Intent::default()
    };
    commit::commit(&catalog, &intent).unwrap();
    // No live part, but the retired one is on disk and named as such: a
    // listing of the directory must not bring it back.
    assert!(layout.parts(d).unwrap().is_empty());
    assert_eq!(layout.day_version(d).unwrap(), "");
    assert!(parts[0].exists());
    drop(pin);
    retire::reclaim(&catalog, Duration::ZERO).unwrap();
    assert!(!layout.day_dir(d).exists());
    assert!(layout.days().unwrap().is_empty());
}

#[test]
fn a_restart_deletes_the_files_a_crash_left_retired() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        compact_parts: 2,
        ..quick()
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let layout = store.layout().clone();
    submit(&store, &failing(day(), 1, 10, "TimeoutError"));
    store.flush().unwrap();
    // A read in flight when the process dies ...
    let pin = store.reader().pin();
    // ... while a compaction and a rollup refresh replace files.
    submit(&store, &failing(day(), 2, 10, "RateLimited"));
    store.flush().unwrap();
    let parts = manifest::read(&layout.day_dir(day())).unwrap().unwrap();
    assert_eq!(parts.retired.len(), 2, "{parts:?}");
    let rollups = rollup_set::read(&layout).unwrap().unwrap();
    assert_eq!(rollups.retired.len(), 2, "{rollups:?}");
    let left: Vec<PathBuf> = parts
        .retired
        .iter()
        .map(|r| layout.day_dir(day()).join(&r.name))
        .chain(
            rollups
                .retired
                .iter()
                .map(|r| layout.rollups_dir().join(&r.name)),
        )
        .collect();
    store.close().unwrap();
    // And a refresh cut short: a generation written, never published.
    let torn = layout.rollups_dir().join("tool_daily-99999999.parquet");
    std::fs::write(&torn, b"PAR1 torn").unwrap();
    assert!(left.iter().all(|p| p.exists()));
    // The new process knows only what is on disk (a new store: a catalog
    // of its own).
    drop(pin);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    assert!(left.iter().all(|p| !p.exists()), "{left:?}");
    assert!(!torn.exists());
    let m = manifest::read(&layout.day_dir(day())).unwrap().unwrap();
    assert!(m.retired.is_empty() && m.parts.len() == 1, "{m:?}");
    let r = rollup_set::read(&layout).unwrap().unwrap();
    assert!(r.retired.is_empty(), "{r:?}");
    let names = store
        .reader()
        .tool_error_names()
        .unwrap()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(names.height(), 2);
    store.close().unwrap();
    assert_eq!(count(dir.path()), 20);

    // Within the grace they stay, for readers of other processes, and go
    // once it passed.
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let pin = store.reader().pin();
    for seed in 3..=4 {
        submit(&store, &failing(day(), seed, 10, "TimeoutError"));
        store.flush().unwrap();
    }
    store.close().unwrap();
    drop(pin);
    let m = manifest::read(&layout.day_dir(day())).unwrap().unwrap();
    assert_eq!(m.retired.len(), 2, "{m:?}");
    let graced = StoreOptions {
        retired_grace: Duration::from_millis(1500),
        ..opts
    };
    let store = Store::open(dir.path(), graced).unwrap();
    let kept: Vec<PathBuf> = m
        .retired
        .iter()
        .map(|r| layout.day_dir(day()).join(&r.name))
        .collect();
    assert!(kept.iter().all(|p| p.exists()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while kept.iter().any(|p| p.exists()) {
        assert!(Instant::now() < deadline, "not deleted after the grace");
        std::thread::sleep(Duration::from_millis(50));
    }
    store.close().unwrap();
    assert_eq!(count(dir.path()), 40);
}

/// `df` written over `path` as an earlier version's refresh did: a
/// temporary file renamed over it.
fn write_over(path: &Path, df: &mut DataFrame) {
    let tmp = path.with_extension("parquet.tmp");
    parquet::write_file(&tmp, df).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn identity(p: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    (m.dev(), m.ino())
}

fn daily(reader: &Reader) -> DataFrame {
    reader.tool_daily().unwrap().unwrap().collect().unwrap()
}

#[test]
fn the_rollup_keeps_its_plain_names_for_an_earlier_version_and_adopts_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let store = Store::open(dir.path(), quick()).unwrap();
    put(&store, DAY, 1, 10, "search_flights");
    store.flush().unwrap();
    let reader = store.reader();
    let first = rollup_set::read(&layout).unwrap().unwrap();
    let file = layout
        .rollups_dir()
        .join(first.tool_daily.as_ref().unwrap());
    // The plain name an earlier version reads is the current file, linked.
    assert_eq!(identity(&layout.tool_daily()), identity(&file));
    let rows = daily(&reader);
    assert_eq!(rows.height(), 1);
    store.close().unwrap();

    // An earlier version refreshed the rollup: a day more, under the plain name.
    let mut theirs = parquet::scan(&[layout.tool_daily()])
        .unwrap()
        .collect()
        .unwrap();
    let mut more = theirs.clone();
    more.with_column(Column::new("day".into(), ["2026-08-11"]))
        .unwrap();
    theirs.vstack_mut_owned(more).unwrap();
    write_over(&layout.tool_daily(), &mut theirs);
    let store = Store::open(dir.path(), quick()).unwrap();
    let adopted = rollup_set::read(&layout).unwrap().unwrap();
    assert_eq!(adopted.generation, first.generation + 1);
    assert_eq!(daily(&store.reader()).height(), 2);
    let file = layout
        .rollups_dir()
        .join(adopted.tool_daily.as_ref().unwrap());
    assert_eq!(identity(&layout.tool_daily()), identity(&file));
    store.close().unwrap();

    // A store from before generations: its plain-named files, no manifest.
    for name in files(&layout.rollups_dir()) {
        if name.contains('-') || name == rollup_set::MANIFEST {
            std::fs::remove_file(layout.rollups_dir().join(name)).unwrap();
        }
    }
    assert!(rollup_set::read(&layout).unwrap().is_none());
    // An earlier version's reader (and this one, read-only) reads the plain names.
    assert_eq!(daily(&Reader::open(dir.path()).unwrap()).height(), 2);
    let store = Store::open(dir.path(), quick()).unwrap();
    let migrated = rollup_set::read(&layout).unwrap().unwrap();
    assert!(migrated
        .tool_daily
        .as_ref()
        .unwrap()
        .starts_with("tool_daily-"));
    assert_eq!(daily(&store.reader()).height(), 2);
    // The next refresh is a generation of its own; the plain name follows it.
    put(&store, "2026-08-12", 2, 10, "search_flights");
    store.flush().unwrap();
    let next = rollup_set::read(&layout).unwrap().unwrap();
    assert_eq!(next.generation, migrated.generation + 1);
    assert_eq!(daily(&store.reader()).height(), 3);
    assert_eq!(
        parquet::scan(&[layout.tool_daily()])
            .unwrap()
            .collect()
            .unwrap()
            .height(),
        3
    );
    store.close().unwrap();
}
