//! `/healthz` (the process answers) and `/readyz` (the WAL directory is
//! writable and the store readable).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use crate::store::Store;

pub fn router(store: Arc<Store>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/readyz", get(ready))
        .with_state(store)
}

async fn ready(State(store): State<Arc<Store>>) -> (StatusCode, Json<serde_json::Value>) {
    let layout = store.layout().clone();
    let checks = tokio::task::spawn_blocking(move || {
        let probe = layout.wal_dir().join(".ready-probe");
        let wal = std::fs::write(&probe, b"ok").and_then(|()| std::fs::remove_file(&probe));
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
    let ok = wal.is_ok() && spans.is_ok();
    let body = serde_json::json!({
        "ready": ok,
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
