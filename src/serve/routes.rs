//! The HTTP server's routes: a detect node's (health, the dashboard and
//! its API, `/metrics`, `POST /api/sweep`, `/mcp`) and an ingest node's
//! (health and `/metrics` only).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;

use super::{auth, health, metrics, scheduler};
use crate::store::Store;

/// The HTTP server's routes: health, the dashboard and its API, `/metrics`
/// and `POST /api/sweep`; all but health behind the API token when set.
/// `spike` is the sweeps' `[detect.error_spike]`, whose verdicts the tool
/// page draws.
pub fn http_router(
    store: Arc<Store>,
    panels: &std::path::Path,
    spike: crate::detect::SpikeParams,
    sweeper: Arc<scheduler::Sweeper>,
    metrics: metrics::Sources,
    token: Option<Arc<auth::Token>>,
    mcp: McpGuard,
) -> anyhow::Result<Router> {
    let reader = store.reader();
    let counts = Arc::clone(&metrics.http);
    let readiness = Arc::clone(&metrics.readiness);
    let mut reads = crate::read::cache::Reads::new(reader);
    if let Some(l) = sweeper.leader() {
        let l = Arc::clone(l);
        reads.by_hand = Some(Arc::new(move || match l.acting() {
            Some(_) => Ok(()),
            None => Err(crate::read::cache::Refused {
                holder: l.holder_seen(),
            }),
        }));
    }
    let reads = Arc::new(reads);
    let mcp_ctx = Arc::new(crate::mcp::Context::new(
        Arc::clone(&reads),
        spike.clone(),
        Arc::new(McpSweeps(Arc::clone(&sweeper))),
        crate::mcp::QueryLimits::from_config(&mcp.limits),
    ));
    let app = crate::dash::router(reads, panels, spike)?
        .merge(metrics::router(metrics))
        .route(
            "/api/sweep",
            axum::routing::post(sweep_now).with_state(sweeper),
        )
        .nest_service(
            "/mcp",
            crate::mcp::http_service(mcp_ctx, mcp.hosts, mcp.origins, &mcp.limits),
        );
    let app = match token {
        Some(t) => app
            .merge(auth::login_router(Arc::clone(&t)))
            .layer(axum::middleware::from_fn_with_state(t, auth::require)),
        None => app,
    };
    Ok(health::router(Arc::clone(&readiness))
        .merge(app)
        .layer(axum::middleware::from_fn_with_state(
            counts,
            metrics::count_responses,
        ))
        // CSP, framing, nosniff, referrer: on every answer of this listener.
        .layer(axum::middleware::map_response(crate::dash::headers::secure)))
}

/// Which `Host` and `Origin` values `/mcp` accepts (MCP's own guard
/// against DNS rebinding, beside the token and the loopback guard).
pub struct McpGuard {
    /// `None`: any host (a non-loopback listener, which needs the token).
    pub hosts: Option<Vec<String>>,
    /// Browser origins allowed; any other `Origin` is refused.
    pub origins: Vec<String>,
    /// Sessions, idle time and calls in flight; `query`'s memory and time
    /// (`[mcp]`).
    pub limits: crate::mcp::McpConfig,
}

impl McpGuard {
    /// For the HTTP listener at `addr`, reached as `public_url`, within
    /// `limits`.
    pub fn new(addr: SocketAddr, public_url: &str, limits: crate::mcp::McpConfig) -> McpGuard {
        let public = auth::url_host(public_url);
        let port = addr.port();
        let mut origins = vec![
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ];
        if let (Some((scheme, _)), Some(host)) = (public_url.split_once("://"), &public) {
            origins.push(format!("{scheme}://{host}"));
        }
        let hosts = addr.ip().is_loopback().then(|| {
            let mut h = vec![
                "localhost".to_string(),
                "127.0.0.1".to_string(),
                "::1".to_string(),
            ];
            h.extend(public.clone());
            h
        });
        McpGuard {
            hosts,
            origins,
            limits,
        }
    }
}

/// The server's scheduler runs the MCP server's sweeps, so they take
/// turns with the scheduled ones.
struct McpSweeps(Arc<scheduler::Sweeper>);

impl crate::mcp::Sweeps for McpSweeps {
    fn sweep(
        &self,
        dry_run: bool,
    ) -> crate::mcp::BoxFuture<'_, Result<Option<crate::sweep::SweepReport>, crate::mcp::SweepsError>>
    {
        Box::pin(async move {
            self.0
                .sweep_report(scheduler::Trigger::Mcp, dry_run)
                .await
                .map(|(_, report)| report)
                .map_err(|e| crate::mcp::SweepsError::Runner(Box::new(e)))
        })
    }
}

/// `POST /api/sweep`: sweep now and answer its summary; 409 while one runs.
async fn sweep_now(
    axum::extract::State(sweeper): axum::extract::State<Arc<scheduler::Sweeper>>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let error = |status: StatusCode, message: String| {
        (status, axum::Json(serde_json::json!({"error": message}))).into_response()
    };
    if crate::dash::cross_site(&headers) {
        return error(
            StatusCode::FORBIDDEN,
            "sweeps are started from this dashboard or an API client, not from another site".into(),
        );
    }
    // In a task of its own, so a client that hangs up does not cut the
    // sweep's bookkeeping short.
    let run = tokio::spawn(async move { sweeper.sweep_now(scheduler::Trigger::Api).await });
    let Ok(result) = run.await else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the sweep task failed".into(),
        );
    };
    match result {
        Ok(summary) => axum::Json(summary).into_response(),
        Err(e @ scheduler::ScheduleError::Busy { .. }) => {
            let mut resp = error(StatusCode::CONFLICT, e.to_string());
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("10"),
            );
            resp
        }
        Err(e @ scheduler::ScheduleError::Failed(_)) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
        Err(e @ scheduler::ScheduleError::Standby { .. }) => {
            error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
    }
}

/// An ingest node's HTTP routes: health and `/metrics` (behind the API
/// token when set); the dashboard lives on the detect role.
pub fn ingest_router(metrics: metrics::Sources, token: Option<Arc<auth::Token>>) -> Router {
    let counts = Arc::clone(&metrics.http);
    let readiness = Arc::clone(&metrics.readiness);
    let app = metrics::router(metrics);
    let app = match token {
        Some(t) => app.layer(axum::middleware::from_fn_with_state(t, auth::require)),
        None => app,
    };
    health::router(readiness)
        .merge(app)
        .layer(axum::middleware::from_fn_with_state(
            counts,
            metrics::count_responses,
        ))
        .layer(axum::middleware::map_response(crate::dash::headers::secure))
}
