//! The gRPC twin of `crash::kill_9_mid_stream_loses_no_acknowledged_span_and_doubles_none`:
//! concurrent tonic clients (the generated `TraceServiceClient` of
//! opentelemetry-proto, plain and gzip) export over OTLP/gRPC, the server is
//! killed with SIGKILL mid-stream (flushes and compactions running), then
//! restarted, and the clients redeliver. Every span whose `Export` returned
//! OK is present exactly once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;

use crate::common::Server;
use crate::crash::{
    assert_every_span_once, kill_trial_store, redelivery, request_of, wait_for_acks,
    SPANS_PER_BATCH,
};

async fn client(url: String, gzip: bool) -> Option<TraceServiceClient<Channel>> {
    let channel = Channel::from_shared(url)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .ok()?;
    let c = TraceServiceClient::new(channel);
    Some(if gzip {
        c.send_compressed(CompressionEncoding::Gzip)
    } else {
        c
    })
}

/// Export batch `id`; true when the server answered OK.
async fn export(c: &mut TraceServiceClient<Channel>, id: u64) -> bool {
    c.export(request_of(id, SPANS_PER_BATCH)).await.is_ok()
}

#[test]
fn kill_9_mid_grpc_stream_loses_no_acknowledged_span_and_doubles_none() {
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = kill_trial_store(dir.path());
    let cfg = ["--config", config.to_str().unwrap()];
    let server = Server::start(&data, &cfg, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let unacked = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4u64)
        .map(|t| {
            let (url, acked, unacked, stop) = (
                server.grpc_url(),
                Arc::clone(&acked),
                Arc::clone(&unacked),
                Arc::clone(&stop),
            );
            rt.spawn(async move {
                // Two clients compress, two do not.
                let mut c = client(url, t % 2 == 1)
                    .await
                    .expect("connect to the gRPC receiver");
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = t * 1_000_000 + n;
                    n += 1;
                    if export(&mut c, id).await {
                        acked.lock().unwrap().insert(id);
                    } else {
                        unacked.lock().unwrap().insert(id);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        // The connection is gone (the kill): back off a little.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect();
    wait_for_acks(&acked, 60);
    server.kill();
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for c in clients {
            c.await.unwrap();
        }
    });
    let acked = acked.lock().unwrap().clone();
    let unacked = unacked.lock().unwrap().clone();
    assert!(
        acked.len() >= 60,
        "only {} batches acknowledged before the kill",
        acked.len()
    );

    // Restart; the exporters redeliver what was not acknowledged, and (a
    // lost response) a few batches that were.
    let server = Server::start(&data, &cfg, &[]);
    let resend = redelivery(&acked, &unacked);
    rt.block_on(async {
        let mut c = client(server.grpc_url(), true)
            .await
            .expect("connect after the restart");
        for id in &resend {
            assert!(export(&mut c, *id).await, "redelivery of batch {id} failed");
        }
    });
    let metrics = server.metrics();
    server.stop();
    assert_eq!(
        crate::common::sample(
            &metrics,
            "stormwatch_spans_accepted_total{transport=\"grpc\"}"
        ),
        (resend.len() * SPANS_PER_BATCH) as f64,
        "the redelivery went over gRPC: {metrics}"
    );
    eprintln!(
        "kill -9 over gRPC: {} acknowledged, {} unacknowledged, {} redelivered",
        acked.len(),
        unacked.len(),
        resend.len()
    );
    let expected: BTreeSet<u64> = acked.union(&resend).copied().collect();
    assert_every_span_once(&data, &expected);
}
