//! `/healthz` (the process answers) and `/readyz` (the store takes writes —
//! its flusher runs —, the WAL's filesystem takes a 64 KiB synced write, and
//! the store is readable).
//!
//! `/readyz` is open (load balancers and probes carry no token), and its disk
//! check writes and fsyncs 64 KiB. Done on every request, anyone who reaches
//! the port could make the server fsync as fast as they can send. So the
//! filesystem checks are a [`Readiness`] probe with a cache:
//!
//! - one probe's result answers every request for [`PROBE_TTL`] (1 s) after
//!   it finished;
//! - a request that finds the result older runs the probe, on a blocking
//!   thread; requests arriving meanwhile wait for that same probe (one in
//!   flight, never N), and get its result;
//! - so at most one probe starts a second, however many requests come: that
//!   is the rate limit. A request beyond it is answered from the cache, not
//!   refused with a 429: a load balancer or kubelet reads any non-2xx as
//!   "not ready" and would take a healthy instance out of rotation because
//!   someone else floods it, while a cached answer costs no IO and is at most
//!   a second old. A disk that starts failing still turns `/readyz` 503
//!   within about a second;
//! - a probe that has not finished within [`PROBE_WAIT`] (2 s: a disk that
//!   takes that long for 64 KiB is not ready) answers 503 to the requests
//!   waiting for it, and no second probe starts until it returns, so a hung
//!   disk does not pile up blocked threads.
//!
//! The store's own refusal (its flusher gone) costs no IO and is read on
//! every request. `stormwatch_readyz_probes_total` counts the probes run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use crate::store::{Layout, Store};

/// Bytes the readiness probe writes to the WAL's filesystem.
const PROBE_BYTES: usize = 64 << 10;

/// How long one probe's result answers `/readyz`.
pub const PROBE_TTL: Duration = Duration::from_secs(1);

/// How long a request waits for a probe before answering not ready.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

type Check = Result<(), String>;

/// The filesystem checks' results, and when they were made.
#[derive(Debug, Clone)]
struct Probed {
    at: Instant,
    wal: Check,
    spans: Check,
}

/// The store's readiness, its filesystem checks cached (see the module doc).
pub struct Readiness {
    store: Arc<Store>,
    /// The last probe's result. Held while a probe runs (the guard moves
    /// into the blocking task), which is what makes callers share it.
    last: Arc<tokio::sync::Mutex<Option<Probed>>>,
    probes: AtomicU64,
}

impl Readiness {
    pub fn new(store: Arc<Store>) -> Readiness {
        Readiness {
            store,
            last: Arc::default(),
            probes: AtomicU64::new(0),
        }
    }

    /// Filesystem probes run so far.
    pub fn probes(&self) -> u64 {
        self.probes.load(Ordering::Relaxed)
    }

    /// The WAL's and the span directory's checks: cached, or probed now.
    async fn disk(&self) -> (Check, Check) {
        let not_checked = || Err("not checked".to_string());
        let lock = Arc::clone(&self.last).lock_owned();
        let Ok(mut guard) = tokio::time::timeout(PROBE_WAIT, lock).await else {
            return (
                Err(format!(
                    "the filesystem probe has not finished in {} s: the WAL's disk is not answering",
                    PROBE_WAIT.as_secs()
                )),
                not_checked(),
            );
        };
        if let Some(p) = guard.as_ref().filter(|p| p.at.elapsed() < PROBE_TTL) {
            return (p.wal.clone(), p.spans.clone());
        }
        self.probes.fetch_add(1, Ordering::Relaxed);
        let layout = self.store.layout().clone();
        let task = tokio::task::spawn_blocking(move || {
            let (wal, spans) = probe(&layout);
            *guard = Some(Probed {
                at: Instant::now(),
                wal: wal.clone(),
                spans: spans.clone(),
            });
            (wal, spans)
        });
        match tokio::time::timeout(PROBE_WAIT, task).await {
            Ok(Ok(checks)) => checks,
            Ok(Err(e)) => (Err(format!("the probe failed: {e}")), not_checked()),
            Err(_) => (
                Err(format!(
                    "a 64 KiB synced write did not finish in {} s",
                    PROBE_WAIT.as_secs()
                )),
                not_checked(),
            ),
        }
    }
}

fn write_synced(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    crate::faults::check("readyz_probe")?;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// As much as a small request's WAL record, written and synced, so a disk
/// too full for a write answers not ready; and the span directory listed.
fn probe(layout: &Layout) -> (Check, Check) {
    let probe = layout.wal_dir().join(".ready-probe");
    let wal = write_synced(&probe, &[0u8; PROBE_BYTES]);
    let _ = std::fs::remove_file(&probe);
    let spans = std::fs::read_dir(layout.spans_dir()).map(|_| ());
    (
        wal.map_err(|e| e.to_string()),
        spans.map_err(|e| e.to_string()),
    )
}

pub fn router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/readyz", get(ready))
        .with_state(readiness)
}

async fn ready(State(r): State<Arc<Readiness>>) -> (StatusCode, Json<serde_json::Value>) {
    let (wal, spans) = r.disk().await;
    let writes = match r.store.refusal() {
        Some(e) => Err(e.to_string()),
        None => Ok(()),
    };
    let ok = wal.is_ok() && spans.is_ok() && writes.is_ok();
    let body = serde_json::json!({
        "ready": ok,
        "store_accepting_writes": writes.err().unwrap_or_else(|| "ok".into()),
        "wal_writable": wal.err().unwrap_or_else(|| "ok".into()),
        "store_readable": spans.err().unwrap_or_else(|| "ok".into()),
    });
    (
        if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(body),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    fn store(dir: &std::path::Path) -> Arc<Store> {
        Arc::new(Store::open(dir, crate::store::StoreOptions::default()).unwrap())
    }

    async fn get_ready(app: &Router) -> (StatusCode, serde_json::Value) {
        let req = axum::http::Request::get("/readyz")
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    /// Concurrent requests share one probe; the next second's requests one
    /// more; a broken WAL directory turns ready 503 within the second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_requests_share_one_probe_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let readiness = Arc::new(Readiness::new(Arc::clone(&store)));
        let app = router(Arc::clone(&readiness));
        let started = Instant::now();
        let answers = futures_join((0..64).map(|_| {
            let app = app.clone();
            async move { get_ready(&app).await }
        }))
        .await;
        assert!(answers.iter().all(|(s, _)| *s == StatusCode::OK));
        if started.elapsed() < PROBE_TTL {
            assert_eq!(readiness.probes(), 1, "64 concurrent requests, one probe");
        }
        tokio::time::sleep(PROBE_TTL + Duration::from_millis(50)).await;
        for _ in 0..20 {
            assert_eq!(get_ready(&app).await.0, StatusCode::OK);
        }
        assert!(readiness.probes() <= 3, "{}", readiness.probes());
        assert!(
            readiness.probes() >= 2,
            "a second later the disk is probed again"
        );
        // The WAL's directory gone: not ready as soon as the cached answer
        // runs out, saying why.
        std::fs::remove_dir_all(store.layout().wal_dir()).unwrap();
        let broke = Instant::now();
        let (status, body) = loop {
            let (status, body) = get_ready(&app).await;
            if status != StatusCode::OK {
                break (status, body);
            }
            assert!(
                broke.elapsed() < PROBE_TTL + Duration::from_millis(500),
                "still ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["ready"], false);
        assert!(
            body["wal_writable"]
                .as_str()
                .unwrap()
                .contains("No such file"),
            "{body}"
        );
        std::fs::create_dir_all(store.layout().wal_dir()).unwrap();
    }

    async fn futures_join<F: std::future::Future + Send + 'static>(
        futs: impl Iterator<Item = F>,
    ) -> Vec<F::Output>
    where
        F::Output: Send + 'static,
    {
        let handles: Vec<_> = futs.map(tokio::spawn).collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }
}
