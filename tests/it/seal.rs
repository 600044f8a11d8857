//! Seal compaction with the real binary: `kill -9` inside a seal
//! compaction (outputs written but not committed; committed but the
//! manifest and scratch files not yet seen to), restart: every acknowledged
//! span present once, and the day sealed into at most four sorted parts.

use std::time::{Duration, Instant};

use stormwatch::store::layout::{is_seal_output, Layout};

use crate::common::Server;
use crate::crash::{stored_batches, SPANS_PER_BATCH};

fn post(client: &reqwest_blocking::blocking::Client, server: &Server, id: u64) -> u16 {
    client
        .post(server.traces_url())
        .header("content-type", "application/x-protobuf")
        .body(crate::crash::batch(id))
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap()
        .status()
        .as_u16()
}

/// The day's parts once every one of them is a seal output.
fn wait_sealed(data: &std::path::Path, server: &Server) -> Vec<std::path::PathBuf> {
    let layout = Layout::new(data);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let days = layout.days().unwrap();
        if let [day] = days[..] {
            let parts = layout.parts(day).unwrap();
            if !parts.is_empty() && parts.iter().all(|p| is_seal_output(p)) {
                return parts;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the day was never sealed; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_during_a_seal_compaction_loses_and_doubles_nothing() {
    for point in ["seal_compact_before_commit", "seal_compact_after_commit"] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let config = dir.path().join("stormwatch.toml");
        // The batches' day ended long ago: it is sealed one quiet second after its last flush.
        std::fs::write(
            &config,
            "[store]\nflush_interval_secs = 1\nseal_after_secs = 1\n",
        )
        .unwrap();
        let cfg = ["--config", config.to_str().unwrap()];
        let fault = format!("{point}=kill");
        let mut server = Server::start(&data, &cfg, &[("STORMWATCH_FAULTS", &fault)]);
        let client = reqwest_blocking::blocking::Client::new();
        for id in 0..20 {
            assert_eq!(post(&client, &server, 700 + id), 200);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "{point}: the seal compaction never reached the kill point; log:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = server.log_text();
        assert!(
            log.contains("injected fault: killing the process") && log.contains(point),
            "{log}"
        );
        drop(server);

        let server = Server::start(&data, &cfg, &[]);
        let parts = wait_sealed(&data, &server);
        server.stop();
        assert!(parts.len() <= 4, "{parts:?}");
        assert_eq!(
            stored_batches(&data),
            (700..720).map(|id| (id, SPANS_PER_BATCH)).collect(),
            "{point}: every acknowledged span once"
        );
        let day = parts[0].parent().unwrap();
        let left: Vec<String> = std::fs::read_dir(day)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{point}: scratch left behind: {left:?}");
    }
}
