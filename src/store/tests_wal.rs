//! The WAL's framing under damage: what recovery cuts (only a torn final
//! group of the newest segment), what it refuses (everything else, naming
//! the file and byte, leaving the file as it was), version 1 segments read
//! back, the same through `Store::open`, and many group commits read back
//! (with a throughput figure for `append_sync`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use prost::Message;

use super::tests::{count, put, quick, request};
use super::wal::{self, Format, Wal, GROUP_HEADER, RECORD_HEADER, SEGMENT_HEADER};
use super::{Layout, Store, StoreError};

/// `n` records of `size` bytes, none of them zero (so no sector of a
/// written group reads as zeros).
fn records(n: usize, size: usize, seed: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|r| {
            (0..size)
                .map(|i| 1 + ((i * 7 + r * 13 + seed as usize) % 255) as u8)
                .collect()
        })
        .collect()
}

/// Segment 1 in `dir` holding `groups`; its path and where each group starts.
fn write_groups(dir: &Path, groups: &[Vec<Vec<u8>>]) -> (PathBuf, Vec<usize>) {
    let mut wal = Wal::create(dir, 0).unwrap();
    let mut starts = Vec::new();
    for g in groups {
        // The first group follows the segment header it is written with.
        starts.push((wal.len() as usize).max(SEGMENT_HEADER));
        let refs: Vec<&[u8]> = g.iter().map(Vec::as_slice).collect();
        wal.append_sync(&refs).unwrap();
    }
    (wal::segment_path(dir, wal.seq()), starts)
}

/// Three groups; the last spans several sectors.
fn three_groups() -> Vec<Vec<Vec<u8>>> {
    vec![records(2, 100, 1), records(3, 60, 2), records(4, 700, 3)]
}

fn flat(groups: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    groups.iter().flatten().cloned().collect()
}

/// The refusal's text, asserting it is one and the file is as it was.
fn refused(dir: &Path, path: &Path, newest: bool, bytes: &[u8]) -> String {
    std::fs::write(path, bytes).unwrap();
    let err = wal::read_segment(dir, 1, newest).expect_err("damage must be refused");
    assert!(matches!(err, StoreError::Data { .. }), "{err:?}");
    assert_eq!(
        std::fs::read(path).unwrap(),
        bytes,
        "a refusal changed the file"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string())
            && msg.contains(&format!("move the file out of {}", dir.display())),
        "{msg}"
    );
    msg
}

#[test]
fn groups_read_back_in_order_and_appends_go_on_after_a_reread() {
    let dir = tempfile::tempdir().unwrap();
    let groups = three_groups();
    assert_eq!(Wal::create(dir.path(), 5).unwrap().len(), 0);
    let empty = wal::read_segment(dir.path(), 6, false).unwrap();
    assert!(empty.records.is_empty() && empty.torn.is_none());
    let (path, starts) = write_groups(dir.path(), &groups);
    assert_eq!(starts[0], SEGMENT_HEADER);
    assert_eq!(&std::fs::read(&path).unwrap()[..4], b"SWAL");
    let seg = wal::read_segment(dir.path(), 1, true).unwrap();
    assert_eq!((seg.format, seg.torn), (Format::V2, None));
    assert_eq!(seg.records, flat(&groups));
}

#[test]
fn a_flipped_group_length_mid_segment_refuses_naming_file_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_groups(dir.path(), &three_groups());
    let clean = std::fs::read(&path).unwrap();
    // The case: the middle group's length, in the newest segment.
    let mut bytes = clean.clone();
    bytes[starts[1] + 16] ^= 0x40;
    let msg = refused(dir.path(), &path, true, &bytes);
    assert!(
        msg.contains(&format!("damaged at byte {}", starts[1]))
            && msg.contains(&format!("a valid group header at byte {}", starts[2]))
            && msg.contains(&format!("truncate -s {}", starts[1])),
        "{msg}"
    );
    // Any flipped byte of that header, a record length or a payload byte
    // inside the group, the same.
    for at in starts[1]..starts[2] {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x5a;
        let msg = refused(dir.path(), &path, true, &bytes);
        assert!(
            msg.contains(&format!("damaged at byte {}", starts[1])),
            "{at}: {msg}"
        );
    }
    let mut bytes = clean.clone();
    bytes[starts[1] + GROUP_HEADER] ^= 0x01;
    let msg = refused(dir.path(), &path, true, &bytes);
    // One count of the bytes (from the byte to the end), the records counted
    // in words that read right.
    assert!(
        msg.contains(&format!(
            "the group of 3 records at bytes {} to {} fails its checksum, and more was written after it",
            starts[1],
            starts[2] - 1
        )) && msg.contains(&format!("The {} bytes from there", clean.len() - starts[1])),
        "{msg}"
    );
    // A one-record group, and one record to keep before it.
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_groups(
        dir.path(),
        &[records(1, 100, 1), records(1, 60, 2), records(1, 80, 3)],
    );
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[starts[1] + GROUP_HEADER] ^= 0x01;
    let msg = refused(dir.path(), &path, true, &bytes);
    assert!(
        msg.contains("the group of 1 record at bytes")
            && msg.contains("keep the 1 record before it"),
        "{msg}"
    );
}

#[test]
fn a_header_fragment_mid_file_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_groups(dir.path(), &three_groups());
    let clean = std::fs::read(&path).unwrap();
    // Ten bytes of the middle group's header, then the last group whole.
    let mut bytes = clean[..starts[1] + 10].to_vec();
    bytes.extend_from_slice(&clean[starts[2]..]);
    let msg = refused(dir.path(), &path, true, &bytes);
    assert!(
        msg.contains(&format!("damaged at byte {}", starts[1]))
            && msg.contains(&format!("valid group header at byte {}", starts[1] + 10))
            && msg.contains("keep the 2 records before it"),
        "{msg}"
    );
    // A header missing its first bytes reads no better.
    let mut bytes = clean[..starts[1]].to_vec();
    bytes.extend_from_slice(&clean[starts[1] + 5..]);
    let msg = refused(dir.path(), &path, true, &bytes);
    assert!(
        msg.contains(&format!("damaged at byte {}", starts[1])),
        "{msg}"
    );
}

#[test]
fn a_torn_final_group_is_cut_back_at_every_byte_and_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let groups = three_groups();
    let (path, starts) = write_groups(dir.path(), &groups);
    let clean = std::fs::read(&path).unwrap();
    let kept = flat(&groups[..2]);
    let last = starts[2];
    for end in last..clean.len() {
        std::fs::write(&path, &clean[..end]).unwrap();
        let seg = wal::read_segment(dir.path(), 1, true).unwrap();
        assert_eq!(seg.records, kept, "cut at {end}");
        let torn = seg.torn.map(|t| (t.at, t.bytes));
        let expected = (end > last).then_some((last as u64, (end - last) as u64));
        assert_eq!(torn, expected, "cut at {end}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            &clean[..last],
            "cut at {end}"
        );
        // The cut segment reads clean again, and the next segment takes
        // appends (what recovery does next), now and then.
        if end % 97 == 0 || end + 1 == clean.len() {
            let again = wal::read_segment(dir.path(), 1, false).unwrap();
            assert_eq!((again.records, again.torn), (kept.clone(), None));
            let mut next = Wal::create(dir.path(), 1).unwrap();
            next.append_sync(&[b"after", b"the cut"]).unwrap();
            let seg2 = wal::read_segment(dir.path(), 2, true).unwrap();
            assert_eq!(seg2.records, vec![b"after".to_vec(), b"the cut".to_vec()]);
            std::fs::remove_file(wal::segment_path(dir.path(), 2)).unwrap();
        }
    }
}

#[test]
fn a_final_group_with_unwritten_sectors_is_a_tear() {
    let dir = tempfile::tempdir().unwrap();
    let groups = three_groups();
    let (path, starts) = write_groups(dir.path(), &groups);
    let clean = std::fs::read(&path).unwrap();
    let last = starts[2];
    let sector = last.div_ceil(512) * 512;
    assert!(sector + 1024 < clean.len(), "the last group spans sectors");
    let zero = |range: std::ops::Range<usize>| {
        let mut b = clean.clone();
        b[range].fill(0);
        b
    };
    // The length reached the disk, not all the data: a whole sector, the
    // piece from the group's start to its sector's end, everything from
    // the group on, or from a sector boundary to the end.
    // The file's last partial sector: the file grew past its last boundary
    // and the write never reached it.
    let tail = clean.len() / 512 * 512;
    assert!(tail > sector && tail < clean.len(), "a partial last sector");
    let cases = [
        zero(sector..sector + 512),
        zero(last..sector),
        zero(last..clean.len()),
        zero(sector + 512..clean.len()),
        zero(tail..clean.len()),
    ];
    for (i, bytes) in cases.iter().enumerate() {
        std::fs::write(&path, bytes).unwrap();
        let seg = wal::read_segment(dir.path(), 1, true).unwrap();
        let torn = seg.torn.expect("a tear");
        assert_eq!(
            (torn.at, seg.records),
            (last as u64, flat(&groups[..2])),
            "case {i}"
        );
        assert!(torn.what.contains("never written"), "{}", torn.what);
        assert_eq!(std::fs::read(&path).unwrap(), &clean[..last]);
    }
    // Zeros after the last complete group: a header that never made it.
    let mut bytes = clean.clone();
    bytes.extend_from_slice(&[0; 700]);
    std::fs::write(&path, &bytes).unwrap();
    let seg = wal::read_segment(dir.path(), 1, true).unwrap();
    assert_eq!(seg.torn.map(|t| t.at), Some(clean.len() as u64));
    assert_eq!(seg.records, flat(&groups));
    // The same zeros in a middle group are damage: a later group follows.
    let msg = refused(dir.path(), &path, true, &zero(starts[1]..starts[1] + 40));
    assert!(
        msg.contains(&format!("damaged at byte {}", starts[1])),
        "{msg}"
    );
}

/// A lost first sector (zeros, or other bytes) takes the segment header
/// with it; the groups after it are still version 2's, so the segment is
/// refused, not read as version 1 (whose zeros would pass for empty
/// records, and whose first group would pass for a tear and be cut).
#[test]
fn a_lost_first_sector_of_a_version_2_segment_is_refused_not_read_as_version_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut groups = three_groups();
    groups.push(records(2, 50, 4));
    let (path, starts) = write_groups(dir.path(), &groups);
    let clean = std::fs::read(&path).unwrap();
    assert!(starts[3] > 512);
    for fill in [0u8, 0xaa] {
        let mut bytes = clean.clone();
        bytes[..512].fill(fill);
        let msg = refused(dir.path(), &path, true, &bytes);
        assert!(
            msg.contains("damaged at byte 0")
                && msg.contains(&format!("valid group header at byte {}", starts[3]))
                && msg.contains("start of the segment was lost"),
            "{fill}: {msg}"
        );
        // With no group header left after the lost sector, still refused.
        let msg = refused(dir.path(), &path, true, &bytes[..starts[3]]);
        assert!(msg.contains("damaged at byte 0"), "{fill}: {msg}");
    }
    // A newest segment that is all zeros: its first write never reached
    // the disk (nothing in it was acknowledged); cut to nothing.
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    let seg = wal::read_segment(dir.path(), 1, true).unwrap();
    assert_eq!((seg.records.len(), seg.torn.map(|t| t.at)), (0, Some(0)));
    assert_eq!(std::fs::read(&path).unwrap().len(), 0);
    // In version 1, zeros before more records are damage, not empty records.
    let mut v1 = vec![0u8; 64];
    v1.extend(v1_segment(&records(2, 90, 3)));
    let msg = refused(dir.path(), &path, true, &v1);
    assert!(
        msg.contains("damaged at byte 0") && msg.contains("empty record"),
        "{msg}"
    );
}

/// The decision for a complete final group failing its checksum with no
/// sector zeroed (see `wal`'s doc): damage, refused, never cut.
#[test]
fn a_flipped_byte_anywhere_is_refused_even_in_the_complete_final_group() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_groups(dir.path(), &three_groups());
    let clean = std::fs::read(&path).unwrap();
    for at in 0..clean.len() {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x10;
        let msg = refused(dir.path(), &path, true, &bytes);
        let group = starts
            .iter()
            .rev()
            .find(|&&s| s <= at)
            .copied()
            .unwrap_or(0);
        assert!(
            msg.contains(&format!("damaged at byte {group}")),
            "{at}: {msg}"
        );
    }
    let mut bytes = clean.clone();
    bytes[starts[2] + GROUP_HEADER + RECORD_HEADER + 9] ^= 0xff;
    let msg = refused(dir.path(), &path, true, &bytes);
    assert!(msg.contains("damage, not a torn write"), "{msg}");
}

#[test]
fn damage_in_an_older_segment_refuses_even_where_a_tear_would_be_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_groups(dir.path(), &three_groups());
    let clean = std::fs::read(&path).unwrap();
    let torn = &clean[..starts[2] + 50];
    let msg = refused(dir.path(), &path, false, torn);
    assert!(
        msg.contains(&format!("damaged at byte {}", starts[2])) && msg.contains("older segment"),
        "{msg}"
    );
    let msg = refused(dir.path(), &path, false, &clean[..clean.len() - 1]);
    assert!(msg.contains("older segment"), "{msg}");
    // Read as the newest, the same bytes are a tear.
    std::fs::write(&path, torn).unwrap();
    assert!(wal::read_segment(dir.path(), 1, true)
        .unwrap()
        .torn
        .is_some());
}

#[test]
fn a_segment_header_cut_short_damaged_or_newer_is_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_groups(dir.path(), &three_groups());
    let clean = std::fs::read(&path).unwrap();
    // A crash as the segment was created: cut to nothing.
    std::fs::write(&path, &clean[..5]).unwrap();
    let seg = wal::read_segment(dir.path(), 1, true).unwrap();
    assert_eq!(seg.torn.map(|t| t.at), Some(0));
    assert_eq!(std::fs::read(&path).unwrap().len(), 0);
    // An empty file is an empty segment, wherever it is.
    assert!(wal::read_segment(dir.path(), 1, false)
        .unwrap()
        .records
        .is_empty());
    let mut newer = clean.clone();
    newer[4] = 3;
    let msg = refused(dir.path(), &path, true, &newer);
    assert!(msg.contains("format version 3"), "{msg}");
}

/// Records as stormwatch wrote them before version 2: `len crc payload`.
fn v1_segment(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(r).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

#[test]
fn a_version_1_segment_is_read_with_its_own_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = wal::segment_path(dir.path(), 1);
    let recs = records(3, 90, 7);
    let bytes = v1_segment(&recs);
    std::fs::write(&path, &bytes).unwrap();
    let seg = wal::read_segment(dir.path(), 1, false).unwrap();
    assert_eq!(
        (seg.format, seg.records, seg.torn),
        (Format::V1, recs.clone(), None)
    );
    // A flipped payload byte before the end refuses; a torn last record is cut.
    let mut bad = bytes.clone();
    bad[8 + 5] ^= 1;
    let msg = refused(dir.path(), &path, true, &bad);
    assert!(msg.contains("damaged at byte 0"), "{msg}");
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let seg = wal::read_segment(dir.path(), 1, true).unwrap();
    assert_eq!((seg.records.len(), seg.torn.map(|t| t.at)), (2, Some(196)));
}

#[test]
fn a_wal_left_by_the_previous_version_is_replayed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.create().unwrap();
    let reqs: Vec<Vec<u8>> = (0..3)
        .map(|i| request("2026-08-10", 40 + i, 4, "t").encode_to_vec())
        .collect();
    std::fs::write(wal::segment_path(&layout.wal_dir(), 7), v1_segment(&reqs)).unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    assert_eq!((store.recovery().records, store.recovery().spans), (3, 12));
    // The segment written from now on is version 2, empty until its first group.
    let next = wal::segment_path(&layout.wal_dir(), 8);
    assert_eq!(std::fs::metadata(&next).unwrap().len(), 0);
    put(&store, "2026-08-10", 50, 2, "t");
    assert_eq!(&std::fs::read(&next).unwrap()[..4], b"SWAL");
    store.close().unwrap();
    assert_eq!(count(dir.path()), 14);
}

/// Segment 1 of a fresh store's WAL: three groups of real requests.
fn store_with_wal(dir: &Path) -> (Layout, PathBuf, Vec<usize>) {
    let layout = Layout::new(dir);
    layout.create().unwrap();
    let groups: Vec<Vec<Vec<u8>>> = (0..3u8)
        .map(|g| {
            (0..2u8)
                .map(|i| request("2026-08-11", 60 + g * 2 + i, 3, "t").encode_to_vec())
                .collect()
        })
        .collect();
    let (path, starts) = write_groups(&layout.wal_dir(), &groups);
    (layout, path, starts)
}

#[test]
fn open_refuses_a_flipped_length_mid_wal_and_starts_once_the_operator_cuts_it() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, path, starts) = store_with_wal(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[starts[1] + 16] ^= 0x02;
    std::fs::write(&path, &bytes).unwrap();
    let err = Store::open(dir.path(), quick())
        .err()
        .expect("a damaged WAL must not open");
    assert!(matches!(err, StoreError::Data { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string())
            && msg.contains(&format!("damaged at byte {}", starts[1])),
        "{msg}"
    );
    // Nothing cut, no new segment begun; a second try refuses the same way.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(wal::list(&layout.wal_dir()).unwrap(), vec![1]);
    assert!(Store::open(dir.path(), quick()).is_err());
    // What the message says to do works: cut at the byte, and it starts.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(starts[1] as u64).unwrap();
    drop(f);
    let store = Store::open(dir.path(), quick()).unwrap();
    assert_eq!(
        (store.recovery().records, store.recovery().torn_tails),
        (2, 0)
    );
    store.close().unwrap();
    assert_eq!(count(dir.path()), 6);
}

#[test]
fn open_cuts_a_torn_final_group_and_takes_writes_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path, starts) = store_with_wal(dir.path());
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len((starts[2] as u64 + len) / 2).unwrap();
    drop(f);
    let store = Store::open(dir.path(), quick()).unwrap();
    let rec = store.recovery();
    assert_eq!((rec.records, rec.spans, rec.torn_tails), (4, 12, 1));
    put(&store, "2026-08-11", 90, 5, "t");
    store.close().unwrap();
    let store = Store::open(dir.path(), quick()).unwrap();
    assert_eq!(store.recovery().torn_tails, 0);
    store.close().unwrap();
    assert_eq!(count(dir.path()), 17);
}

/// Group commits of 8 records of 4 KiB (about one request each), each
/// fsynced, read back whole; with their rate printed. As a test, 50 groups
/// a run; as a figure, `WAL_BENCH_GROUPS=2000 cargo test --release --lib
/// wal_append_throughput -- --nocapture`.
#[test]
fn wal_append_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let groups: usize = std::env::var("WAL_BENCH_GROUPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let record: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    let batch: Vec<&[u8]> = (0..8).map(|_| record.as_slice()).collect();
    for run in 1..=3 {
        let mut wal = Wal::create(dir.path(), run * 10).unwrap();
        let started = Instant::now();
        for _ in 0..groups {
            wal.append_sync(&batch).unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let bytes = (groups * batch.len() * record.len()) as f64;
        let read = Instant::now();
        let seg = wal::read_segment(dir.path(), wal.seq(), false).unwrap();
        assert_eq!(seg.records.len(), groups * batch.len());
        println!(
            "run {run}: {groups} groups: {:.0} groups/s, {:.1} MiB/s appended (fsync each); read back {:.0} MiB/s",
            groups as f64 / secs,
            bytes / secs / (1 << 20) as f64,
            bytes / read.elapsed().as_secs_f64() / (1 << 20) as f64
        );
    }
}
