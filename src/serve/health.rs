//! `/healthz` (the process answers) and `/readyz` (the store takes writes —
//! its flusher runs —, the WAL's filesystem takes a 64 KiB synced write, and
//! the store is readable).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use crate::store::Store;

/// Bytes the readiness probe writes to the WAL's filesystem.
const PROBE_BYTES: usize = 64 << 10;

fn write_synced(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

pub fn router(store: Arc<Store>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/readyz", get(ready))
        .with_state(store)
}

async fn ready(State(store): State<Arc<Store>>) -> (StatusCode, Json<serde_json::Value>) {
    let layout = store.layout().clone();
    let checks = tokio::task::spawn_blocking(move || {
        // As much as a small request's WAL record, written and synced, so
        // a disk too full for a write answers not ready.
        let probe = layout.wal_dir().join(".ready-probe");
        let wal = write_synced(&probe, &[0u8; PROBE_BYTES]);
        let _ = std::fs::remove_file(&probe);
        let spans = std::fs::read_dir(layout.spans_dir()).map(|_| ());
        (
            wal.map_err(|e| e.to_string()),
            spans.map_err(|e| e.to_string()),
        )
    })
    .await;
    let (wal, spans) = match checks {
        Ok(c) => c,
        Err(e) => (Err(e.to_string()), Err("not checked".to_string())),
    };
    let writes = match store.refusal() {
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
