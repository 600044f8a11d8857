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
//!
//! A write path that fails is not ready either, though 64 KiB may still fit
//! (a disk with 1 MiB left refuses every 2 MiB export while the probe
//! passes). The store records its last failures ([`crate::store::WritePath`]): the WAL's
//! group commit (every acknowledgement waits on one) and the flush to
//! Parquet, each cleared by the next success. While the last WAL write
//! failed, the probe is a copy of it: its size (64 KiB to 8 MiB), through
//! the WAL's own fault points (`wal_write`, `wal_fsync`), and `/readyz` is
//! ready again only once such a probe passed after that failure — so a
//! server that nobody sends to (a balancer took it out) still finds out
//! that space came back. A failing flush is not ready until a retry of the
//! flusher's (which it makes on its own) succeeds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use crate::store::{Failing, Layout, Store};

/// Bytes the readiness probe writes to the WAL's filesystem.
const PROBE_BYTES: usize = 64 << 10;

/// The most a probe copying a failed WAL write writes.
const MIRROR_MAX_BYTES: usize = 8 << 20;

/// How long one probe's result answers `/readyz`.
pub const PROBE_TTL: Duration = Duration::from_secs(1);

/// How long a request waits for a probe before answering not ready.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

/// One check of `/readyz`: its failure's text is the check's value in the
/// answer.
type Check = Result<(), NotReady>;

/// Why a check of `/readyz` fails. (`Clone`: a probe's result answers every
/// request for [`PROBE_TTL`].)
#[derive(Debug, Clone, thiserror::Error)]
enum NotReady {
    /// The WAL's check failed before this one could run.
    #[error("not checked")]
    NotChecked,
    #[error("the filesystem probe has not finished in {} s: the WAL's disk is not answering", PROBE_WAIT.as_secs())]
    ProbeWaited,
    #[error("the probe failed: {0}")]
    ProbeTask(#[source] Arc<tokio::task::JoinError>),
    #[error("a {} synced write did not finish in {} s", size(*.0), PROBE_WAIT.as_secs())]
    WriteWaited(usize),
    #[error("a synced write of {} (the size of the WAL write that failed last, within {} to {}) failed: {source}", size(*.bytes), size(PROBE_BYTES), size(MIRROR_MAX_BYTES))]
    MirrorWrite {
        bytes: usize,
        source: Arc<std::io::Error>,
    },
    /// The probe's own write, or the span directory's listing, failed.
    #[error(transparent)]
    Io(Arc<std::io::Error>),
    #[error("the last WAL write ({}) failed {ago_secs} s ago, failing for {for_secs} s, none succeeded since: {error}", size(*.bytes))]
    WalWrites {
        bytes: usize,
        ago_secs: u64,
        for_secs: u64,
        error: String,
    },
    #[error("flushes to Parquet have failed for {for_secs} s (the WAL keeps the acknowledged spans; the flusher retries): {error}")]
    Flushes { for_secs: u64, error: String },
    /// The store refuses writes (its flusher is gone).
    #[error(transparent)]
    Refused(Arc<crate::store::StoreError>),
}

/// The filesystem checks' results, and when they were made.
#[derive(Debug, Clone)]
struct Probed {
    at: Instant,
    /// The probe copied a failed WAL write of this many bytes.
    mirrored: Option<usize>,
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

    /// The WAL's and the span directory's checks, and when they ran:
    /// cached, or probed now. `mirror`: the size of a failed WAL write the
    /// probe is to copy (a cached plain probe does not answer for it).
    async fn disk(&self, mirror: Option<usize>) -> (Check, Check, Option<Instant>) {
        let not_checked = || Err(NotReady::NotChecked);
        let lock = Arc::clone(&self.last).lock_owned();
        let Ok(mut guard) = tokio::time::timeout(PROBE_WAIT, lock).await else {
            return (Err(NotReady::ProbeWaited), not_checked(), None);
        };
        let fresh =
            |p: &&Probed| p.at.elapsed() < PROBE_TTL && p.mirrored.is_some() == mirror.is_some();
        if let Some(p) = guard.as_ref().filter(fresh) {
            return (p.wal.clone(), p.spans.clone(), Some(p.at));
        }
        self.probes.fetch_add(1, Ordering::Relaxed);
        let layout = self.store.layout().clone();
        let bytes = mirror.map_or(PROBE_BYTES, |b| b.clamp(PROBE_BYTES, MIRROR_MAX_BYTES));
        let task = tokio::task::spawn_blocking(move || {
            let (wal, spans) = probe(&layout, bytes, mirror.is_some());
            let at = Instant::now();
            *guard = Some(Probed {
                at,
                mirrored: mirror,
                wal: wal.clone(),
                spans: spans.clone(),
            });
            (wal, spans, Some(at))
        });
        match tokio::time::timeout(PROBE_WAIT, task).await {
            Ok(Ok(checks)) => checks,
            Ok(Err(e)) => (Err(NotReady::ProbeTask(Arc::new(e))), not_checked(), None),
            Err(_) => (Err(NotReady::WriteWaited(bytes)), not_checked(), None),
        }
    }
}

/// `bytes` written and synced; `as_wal`: through the WAL's fault points,
/// not the probe's own.
fn write_synced(path: &std::path::Path, bytes: &[u8], as_wal: bool) -> std::io::Result<()> {
    use std::io::Write;
    let point = |wal, own| crate::faults::check(if as_wal { wal } else { own });
    point("wal_write", "readyz_probe")?;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    if as_wal {
        crate::faults::check("wal_fsync")?;
    }
    f.sync_all()
}

/// `bytes` (as much as a small request's WAL record, or as the WAL write
/// that failed last) written and synced, so a disk too full for a write
/// answers not ready; and the span directory listed.
fn probe(layout: &Layout, bytes: usize, as_wal: bool) -> (Check, Check) {
    let probe = layout.wal_dir().join(".ready-probe");
    let wal = write_synced(&probe, &vec![0u8; bytes], as_wal).map_err(|e| {
        let source = Arc::new(e);
        if as_wal {
            NotReady::MirrorWrite { bytes, source }
        } else {
            NotReady::Io(source)
        }
    });
    let _ = std::fs::remove_file(&probe);
    let spans = std::fs::read_dir(layout.spans_dir()).map(|_| ());
    (wal, spans.map_err(|e| NotReady::Io(Arc::new(e))))
}

/// A byte count in KiB or MiB.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// Whether the WAL's last group commit failed with no success and no
/// passing probe of its size since.
fn wal_writes(failing: Option<&Failing>, probed: Option<Instant>, probe_ok: bool) -> Check {
    let Some(f) = failing else {
        return Ok(());
    };
    if probe_ok && probed.is_some_and(|at| at > f.at) {
        // A write of its size passed since: the next one should too.
        return Ok(());
    }
    Err(NotReady::WalWrites {
        bytes: f.bytes,
        ago_secs: f.at.elapsed().as_secs(),
        for_secs: f.since.elapsed().as_secs(),
        error: f.error.clone(),
    })
}

/// Whether flushes to Parquet are failing (the flusher retries on its own).
fn flushes(failing: Option<&Failing>) -> Check {
    match failing {
        None => Ok(()),
        Some(f) => Err(NotReady::Flushes {
            for_secs: f.since.elapsed().as_secs(),
            error: f.error.clone(),
        }),
    }
}

pub fn router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/readyz", get(ready))
        .with_state(readiness)
}

async fn ready(State(r): State<Arc<Readiness>>) -> (StatusCode, Json<serde_json::Value>) {
    let path = r.store.stats().write_path();
    let (wal, spans, probed) = r.disk(path.wal.as_ref().map(|f| f.bytes)).await;
    let wal_writes = wal_writes(path.wal.as_ref(), probed, wal.is_ok());
    let flushes = flushes(path.flush.as_ref());
    let writes = match r.store.refusal() {
        Some(e) => Err(NotReady::Refused(Arc::new(e))),
        None => Ok(()),
    };
    let checks = [&writes, &wal, &wal_writes, &flushes, &spans];
    let ok = checks.iter().all(|c| c.is_ok());
    let say = |c: Check| c.err().map_or_else(|| "ok".into(), |e| e.to_string());
    let body = serde_json::json!({
        "ready": ok,
        "store_accepting_writes": say(writes),
        "wal_writable": say(wal),
        "wal_writes": say(wal_writes),
        "flushes": say(flushes),
        "store_readable": say(spans),
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

    /// A failed WAL write keeps `/readyz` not ready until a probe of its
    /// size passes after it; a failing flush until a flush succeeds.
    #[test]
    fn a_failed_write_is_not_ready_until_a_later_probe_passes() {
        use crate::store::{Failing, WritePath};
        let failed = |at: Instant| Failing {
            since: at,
            at,
            error: "No space left on device (os error 28)".into(),
            bytes: 3 << 20,
        };
        let t0 = Instant::now();
        let f = failed(t0);
        assert!(matches!(wal_writes(None, None, true), Ok(())));
        let e = wal_writes(Some(&f), None, true).unwrap_err().to_string();
        assert!(
            e.starts_with("the last WAL write (3.0 MiB) failed 0 s ago"),
            "{e}"
        );
        assert!(
            e.ends_with("none succeeded since: No space left on device (os error 28)"),
            "{e}"
        );
        // A probe from before the failure, or one that failed, does not count.
        assert!(wal_writes(Some(&f), Some(t0 - Duration::from_millis(1)), true).is_err());
        assert!(wal_writes(Some(&f), Some(t0 + Duration::from_millis(1)), false).is_err());
        assert!(matches!(
            wal_writes(Some(&f), Some(t0 + Duration::from_millis(1)), true),
            Ok(())
        ));
        // A success clears the record; failures in a row keep their start.
        let mut w = WritePath::default();
        WritePath::note(&mut w.wal, Err(("one", 10)));
        let since = w.wal.as_ref().unwrap().since;
        WritePath::note(&mut w.wal, Err(("two", 20)));
        let now = w.wal.as_ref().unwrap();
        assert_eq!(
            (now.since, now.error.as_str(), now.bytes),
            (since, "two", 20)
        );
        WritePath::note(&mut w.wal, Ok(()));
        assert_eq!(w.wal, None);
        assert!(matches!(flushes(None), Ok(())));
        assert!(flushes(Some(&f))
            .unwrap_err()
            .to_string()
            .starts_with("flushes to Parquet have failed for 0 s"));
        assert_eq!(
            (size(64 << 10), size(3 << 20)),
            ("64 KiB".into(), "3.0 MiB".into())
        );
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
