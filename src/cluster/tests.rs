//! The shared store's pieces against an in-memory object store: the lease
//! (one holder, a standby that waits a whole ttl, generations, release),
//! `_sealed.json`'s live set, and a copy pulled from it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::client::{Put, Remote};
use super::keys::day_dir;
use super::lease::{Lease, Status};
use super::ledger::{self, read_day};
use crate::store::{Catalog, Layout};

const TTL: Duration = Duration::from_millis(600);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn one_node_holds_the_lease_and_a_standby_takes_it_only_after_a_whole_ttl() {
    let rt = rt();
    let remote = Remote::in_memory("lease");
    let a = Lease::new(remote.clone(), "a", TTL);
    let b = Lease::new(remote.clone(), "b", TTL);
    assert_eq!(rt.block_on(a.tick()).unwrap(), Status::Held(1));
    assert_eq!(a.held(), Some(1));
    // b sees a's lease and stands by, renewal after renewal.
    for _ in 0..4 {
        assert!(matches!(
            rt.block_on(b.tick()).unwrap(),
            Status::Standby { ref holder, generation: 1 } if holder == "a"
        ));
        assert_eq!(rt.block_on(a.tick()).unwrap(), Status::Held(1));
        std::thread::sleep(TTL / 3);
    }
    assert_eq!(b.held(), None);
    // a stops renewing: it stops acting before the ttl is out ...
    std::thread::sleep(TTL - TTL / 5);
    assert_eq!(
        a.held(),
        None,
        "a holder stops acting a margin before its ttl"
    );
    // ... and b takes over only once the version it saw stood a whole ttl.
    assert!(matches!(
        rt.block_on(b.tick()).unwrap(),
        Status::Standby { .. }
    ));
    std::thread::sleep(TTL);
    assert_eq!(rt.block_on(b.tick()).unwrap(), Status::Held(2));
    // a's late renewal fails: the generation moved on.
    assert_eq!(rt.block_on(a.tick()).unwrap(), Status::Unknown);
    assert_eq!(a.held(), None);
    assert_eq!(b.held(), Some(2));
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let rt = rt();
    let remote = Remote::in_memory("release");
    let a = Lease::new(remote.clone(), "a", Duration::from_secs(30));
    let b = Lease::new(remote.clone(), "b", Duration::from_secs(30));
    assert_eq!(rt.block_on(a.tick()).unwrap(), Status::Held(1));
    assert!(matches!(
        rt.block_on(b.tick()).unwrap(),
        Status::Standby { .. }
    ));
    rt.block_on(a.release()).unwrap();
    assert_eq!(a.held(), None);
    assert_eq!(rt.block_on(b.tick()).unwrap(), Status::Held(2));
}

#[test]
fn two_nodes_racing_for_a_free_lease_get_one_holder() {
    let rt = rt();
    let remote = Remote::in_memory("race");
    let nodes: Vec<Arc<Lease>> = (0..8)
        .map(|i| Arc::new(Lease::new(remote.clone(), &format!("n{i}"), TTL)))
        .collect();
    let held: Vec<Status> = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for n in &nodes {
            let n = Arc::clone(n);
            set.spawn(async move { n.tick().await.unwrap() });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            out.push(r.unwrap());
        }
        out
    });
    assert_eq!(
        held.iter().filter(|s| matches!(s, Status::Held(_))).count(),
        1,
        "{held:?}"
    );
    assert_eq!(nodes.iter().filter(|n| n.held().is_some()).count(), 1);
}

fn put(rt: &tokio::runtime::Runtime, remote: &Remote, name: &str, body: &str) {
    rt.block_on(remote.put(name, Bytes::from(body.to_string())))
        .unwrap();
}

#[test]
fn a_days_live_set_drops_what_a_seal_replaced_and_outputs_it_does_not_name() {
    let rt = rt();
    let remote = Remote::in_memory("sealed");
    let day = 20_000;
    let dir = day_dir(day);
    put(&rt, &remote, &format!("{dir}/part-a-1.parquet"), "a1");
    put(&rt, &remote, &format!("{dir}/part-b-1.parquet"), "b1");
    // A seal still uploading: its output is not live yet.
    put(
        &rt,
        &remote,
        &format!("{dir}/part-0000000000000000001-0-s.parquet"),
        "s",
    );
    let read = rt.block_on(read_day(&remote, day)).unwrap();
    assert_eq!(read.live, ["part-a-1.parquet", "part-b-1.parquet"]);
    // Published: the output replaces both node parts.
    let inputs = read.live.clone();
    let outputs = vec!["part-0000000000000000001-0-s.parquet".to_string()];
    assert!(rt
        .block_on(ledger::publish(
            &remote, day, &read, &inputs, &outputs, 1, 1_000
        ))
        .unwrap());
    // A late part lands after the seal: live beside the output.
    put(&rt, &remote, &format!("{dir}/part-a-2.parquet"), "a2");
    let after = rt.block_on(read_day(&remote, day)).unwrap();
    assert_eq!(
        after.live,
        ["part-0000000000000000001-0-s.parquet", "part-a-2.parquet"]
    );
    // A second publisher over the old version loses, and writes nothing.
    assert!(!rt
        .block_on(ledger::publish(&remote, day, &read, &inputs, &[], 1, 2_000))
        .unwrap());
    // Upkeep deletes the replaced parts once the grace passed, not before.
    assert_eq!(
        rt.block_on(ledger::reclaim(&remote, day, 5_000, 3_000))
            .unwrap(),
        0
    );
    assert_eq!(
        rt.block_on(ledger::reclaim(&remote, day, 5_000, 7_000))
            .unwrap(),
        2
    );
    let listed: Vec<String> = rt
        .block_on(remote.list(&dir))
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert!(!listed
        .iter()
        .any(|n| n.contains("part-a-1") || n.contains("part-b-1")));
    let last = rt.block_on(read_day(&remote, day)).unwrap();
    assert_eq!(last.live, after.live);
    assert!(last.ledger.replaced.iter().all(|r| r.deleted));
    // A node that crashed before it knew its upload landed uploads a
    // replaced part again: it is not live, and the next upkeep deletes it.
    put(&rt, &remote, &format!("{dir}/part-a-1.parquet"), "a1");
    let again = rt.block_on(read_day(&remote, day)).unwrap();
    assert_eq!(again.live, after.live);
    assert_eq!(
        rt.block_on(ledger::reclaim(&remote, day, 5_000, 8_000))
            .unwrap(),
        1
    );
    assert_eq!(
        rt.block_on(ledger::reclaim(&remote, day, 5_000, 9_000))
            .unwrap(),
        0
    );
}

#[test]
fn conditional_puts_create_once_and_update_only_over_the_version_read() {
    let rt = rt();
    let remote = Remote::in_memory("cas");
    let Put::Done(v1) = rt
        .block_on(remote.put_if("doc", Bytes::from_static(b"1"), None))
        .unwrap()
    else {
        panic!("the first create wins");
    };
    assert_eq!(
        rt.block_on(remote.put_if("doc", Bytes::from_static(b"x"), None))
            .unwrap(),
        Put::Lost
    );
    assert!(matches!(
        rt.block_on(remote.put_if("doc", Bytes::from_static(b"2"), Some(v1.clone())))
            .unwrap(),
        Put::Done(_)
    ));
    assert_eq!(
        rt.block_on(remote.put_if("doc", Bytes::from_static(b"3"), Some(v1)))
            .unwrap(),
        Put::Lost
    );
    let (body, _) = rt.block_on(remote.get("doc")).unwrap().unwrap();
    assert_eq!(&body[..], b"2");
}

#[test]
fn a_copy_pulls_new_parts_and_drops_what_the_shared_store_sealed_away() {
    let rt = rt();
    let remote = Remote::in_memory("copy");
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.create().unwrap();
    let catalog = Catalog::new(layout.clone());
    let day = 20_001;
    let d = day_dir(day);
    put(&rt, &remote, &format!("{d}/part-a-1.parquet"), "a1");
    put(&rt, &remote, &format!("{d}/part-b-1.parquet"), "b1");
    let (first, changed) = super::sync::pull(&remote, &catalog).unwrap();
    assert_eq!((first.fetched, first.dropped, changed), (2, 0, vec![day]));
    let names = |l: &Layout| -> Vec<String> {
        l.parts(day)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&layout), ["part-a-1.parquet", "part-b-1.parquet"]);
    assert_eq!(
        std::fs::read(layout.day_dir(day).join("part-a-1.parquet")).unwrap(),
        b"a1"
    );
    // Nothing new: nothing moves.
    let (again, changed) = super::sync::pull(&remote, &catalog).unwrap();
    assert_eq!((again.fetched, again.dropped), (0, 0));
    assert!(changed.is_empty());
    // Sealed on the shared store: the copy follows in one commit.
    let read = rt.block_on(read_day(&remote, day)).unwrap();
    let out = "part-0000000000000000009-0-s.parquet".to_string();
    put(&rt, &remote, &format!("{d}/{out}"), "sealed");
    assert!(rt
        .block_on(ledger::publish(
            &remote,
            day,
            &read,
            &read.live,
            std::slice::from_ref(&out),
            1,
            1
        ))
        .unwrap());
    let (third, _) = super::sync::pull(&remote, &catalog).unwrap();
    assert_eq!((third.fetched, third.dropped), (1, 2));
    assert_eq!(names(&layout), [out]);
    // A day gone from the shared store (its retention) goes from the copy.
    for o in rt.block_on(remote.list(&d)).unwrap() {
        rt.block_on(remote.delete(&o.name)).unwrap();
    }
    let (fourth, _) = super::sync::pull(&remote, &catalog).unwrap();
    assert_eq!(fourth.dropped, 1);
    assert!(layout.parts(day).unwrap().is_empty());
}
