//! The network surface of `stormwatch serve`: the OTLP/HTTP receiver on its
//! own port (4318 by default, where SDKs send without configuration) and the
//! HTTP server for health, metrics, the dashboard and its API. Holds no
//! detection logic.
//!
//! Nothing that can block runs on the async workers: no polars work and no
//! SQLite call (`state.sqlite` may be locked by a sweep's IMMEDIATE
//! transaction or another process for seconds). Every such call is in
//! `spawn_blocking`, a sweep's blocking task, or a thread of the store's.

pub mod auth;
pub mod grpc;
pub mod health;
pub mod metrics;
pub mod otlp;
pub mod response;
pub mod scheduler;
pub mod session;

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;

use crate::store::Store;

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub otlp_addr: SocketAddr,
    /// The OTLP/gRPC receiver's address (`None`: no gRPC receiver).
    pub otlp_grpc_addr: Option<SocketAddr>,
    pub http_addr: SocketAddr,
    pub max_body_bytes: usize,
    pub max_inflight_bytes: usize,
    pub shutdown_timeout: Duration,
    /// Deliver queued alerts while serving.
    pub alerting: Option<crate::alert::Alerting>,
    /// The overview's panel file (`dashboards/overview.toml`).
    pub panels: std::path::PathBuf,
    /// The pipeline's config, for the scheduled sweeps.
    pub config: crate::config::Config,
    /// Seconds between scheduled sweeps (`None`: no schedule).
    pub sweep_interval: Option<Duration>,
    /// Sweep as of this time instead of the clock (the demo's).
    pub sweep_now_ns: Option<i64>,
    pub ingest_token: Option<Arc<auth::Token>>,
    pub api_token: Option<Arc<auth::Token>>,
    /// Allow non-loopback listeners without a token.
    pub insecure: bool,
    /// The dashboard's address as people reach it (`https://…` makes the
    /// session cookie `Secure`; its host passes the loopback guard).
    pub public_url: String,
}

/// The host (with port, as a `Host` header carries it) of a URL.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| host.to_string())
}

/// Behind a loopback listener without a token: only localhost names.
fn guard(app: Router, addr: SocketAddr, token: bool, public_host: &Option<String>) -> Router {
    if token || !addr.ip().is_loopback() {
        return app;
    }
    app.layer(axum::middleware::from_fn_with_state(
        Arc::new(public_host.clone()),
        auth::loopback_only,
    ))
}

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
    let reads = Arc::new(crate::dash::cache::Reads::new(reader));
    let mcp_ctx = Arc::new(crate::mcp::Context::new(
        Arc::clone(&reads),
        spike.clone(),
        Arc::new(McpSweeps(Arc::clone(&sweeper))),
    ));
    let app = crate::dash::router(reads, panels, spike)?
        .merge(metrics::router(metrics))
        .route(
            "/api/sweep",
            axum::routing::post(sweep_now).with_state(sweeper),
        )
        .nest_service(
            "/mcp",
            crate::mcp::http_service(mcp_ctx, mcp.hosts, mcp.origins),
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
}

impl McpGuard {
    /// For the HTTP listener at `addr`, reached as `public_url`.
    pub fn new(addr: SocketAddr, public_url: &str) -> McpGuard {
        let public = url_host(public_url);
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
        McpGuard { hosts, origins }
    }
}

/// The server's scheduler runs the MCP server's sweeps, so they take
/// turns with the scheduled ones.
struct McpSweeps(Arc<scheduler::Sweeper>);

impl crate::mcp::Sweeps for McpSweeps {
    fn sweep(
        &self,
        dry_run: bool,
    ) -> crate::mcp::BoxFuture<'_, Result<Option<crate::sweep::SweepReport>, String>> {
        Box::pin(async move {
            self.0
                .sweep_report(scheduler::Trigger::Mcp, dry_run)
                .await
                .map(|(_, report)| report)
                .map_err(|e| e.to_string())
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
    }
}

/// Serve until `shutdown` resolves, then stop accepting, let in-flight
/// requests finish, and close the store (final flush), all within the timeout.
pub async fn run(
    store: Arc<Store>,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    auth::check_bind(
        opts.otlp_addr,
        opts.ingest_token.as_deref(),
        "OTLP ingest",
        "--ingest-token (STORMWATCH_INGEST_TOKEN)",
        opts.insecure,
    )
    .map_err(anyhow::Error::msg)?;
    if let Some(addr) = opts.otlp_grpc_addr {
        auth::check_bind(
            addr,
            opts.ingest_token.as_deref(),
            "OTLP/gRPC ingest",
            "--ingest-token (STORMWATCH_INGEST_TOKEN)",
            opts.insecure,
        )
        .map_err(anyhow::Error::msg)?;
    }
    auth::check_bind(
        opts.http_addr,
        opts.api_token.as_deref(),
        "the dashboard and API",
        "--api-token (STORMWATCH_API_TOKEN)",
        opts.insecure,
    )
    .map_err(anyhow::Error::msg)?;
    let otlp_state = Arc::new(otlp::OtlpState {
        token: opts.ingest_token.clone(),
        ..otlp::OtlpState::new(
            Arc::clone(&store),
            opts.max_body_bytes,
            opts.max_inflight_bytes,
        )
    });
    let public_host = url_host(&opts.public_url);
    let otlp_app = guard(
        otlp::router(Arc::clone(&otlp_state)),
        opts.otlp_addr,
        opts.ingest_token.is_some(),
        &public_host,
    );
    let grpc_service = opts.otlp_grpc_addr.map(|addr| {
        let loopback_only =
            (opts.ingest_token.is_none() && addr.ip().is_loopback()).then(|| public_host.clone());
        grpc::TraceService::new(Arc::clone(&otlp_state), loopback_only)
    });
    let alert_stats = Arc::new(crate::alert::stats::Stats::default());
    let sweeper = Arc::new(scheduler::Sweeper::new(
        Arc::clone(&store),
        opts.config.clone(),
        opts.alerting.clone(),
        opts.sweep_now_ns,
    ));
    let sources = metrics::Sources {
        store: Arc::clone(&store),
        otlp: otlp_state,
        sweeper: Arc::clone(&sweeper),
        alerts: Arc::clone(&alert_stats),
        http: Arc::default(),
        readiness: Arc::new(health::Readiness::new(Arc::clone(&store))),
    };
    let http_app = guard(
        http_router(
            Arc::clone(&store),
            &opts.panels,
            opts.config.detect.error_spike.clone(),
            Arc::clone(&sweeper),
            sources,
            opts.api_token.clone(),
            McpGuard::new(opts.http_addr, &opts.public_url),
        )?,
        opts.http_addr,
        opts.api_token.is_some(),
        &public_host,
    );
    let otlp_listener = tokio::net::TcpListener::bind(opts.otlp_addr)
        .await
        .with_context(|| {
            format!(
                "cannot listen for OTLP/HTTP on {} (--otlp-addr)",
                opts.otlp_addr
            )
        })?;
    let grpc_listener = match opts.otlp_grpc_addr {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!("cannot listen for OTLP/gRPC on {addr} (--otlp-grpc-addr; `none` turns the gRPC receiver off)")
        })?),
        None => None,
    };
    let http_listener = tokio::net::TcpListener::bind(opts.http_addr)
        .await
        .with_context(|| format!("cannot listen for HTTP on {}", opts.http_addr))?;
    let grpc_addr = grpc_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let grpc_hint = match grpc_addr {
        Some(a) => format!(", OTLP/gRPC exporters to http://{a}"),
        None => " (the OTLP/gRPC receiver is off)".to_string(),
    };
    tracing::info!(
        otlp = %otlp_listener.local_addr()?,
        otlp_grpc = %grpc_addr.map_or("off".to_string(), |a| a.to_string()),
        http = %http_listener.local_addr()?,
        data_dir = %store.layout().root().display(),
        "stormwatch is listening; OTLP/HTTP exporters can send to http://{}/v1/traces{}",
        otlp_listener.local_addr()?,
        grpc_hint
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let otlp = tokio::spawn(
        axum::serve(otlp_listener, otlp_app)
            .with_graceful_shutdown(wait(stop_rx.clone()))
            .into_future(),
    );
    let grpc = match (grpc_listener, grpc_service) {
        (Some(listener), Some(service)) => Some(tokio::spawn(
            grpc::server()
                .add_routes(grpc::routes(service))
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                    wait(stop_rx.clone()),
                ),
        )),
        _ => None,
    };
    let http = tokio::spawn(
        axum::serve(http_listener, http_app)
            .with_graceful_shutdown(wait(stop_rx.clone()))
            .into_future(),
    );
    let schedule = opts.sweep_interval.map(|every| {
        tracing::info!(every_s = every.as_secs(), "sweeps scheduled");
        tokio::spawn(Arc::clone(&sweeper).run_schedule(every, stop_rx.clone()))
    });
    let mut senders = tokio::task::JoinSet::new();
    // The senders' connection, kept here so that it is closed on a blocking
    // thread once they stopped (closing may checkpoint the WAL).
    let mut outbox_db = None;
    if let Some(a) = &opts.alerting {
        let path = store.layout().state_db();
        let db = tokio::task::spawn_blocking(move || crate::alert::commands::open(&path))
            .await
            .context("opening the alert outbox")?
            .context("opening the alert outbox")?;
        let sender = crate::alert::Sender {
            stats: alert_stats,
            ..crate::alert::commands::sender(db, &a.cfg)
        };
        outbox_db = Some(Arc::clone(&sender.db));
        for t in a.targets.clone() {
            let s = sender.clone();
            senders.spawn(async move {
                let name = t.name.clone();
                if let Err(e) = s
                    .run(
                        t,
                        crate::alert::Mode::Forever {
                            poll: Duration::from_secs(5),
                        },
                    )
                    .await
                {
                    tracing::error!(target = %name, error = %e, "alert sender stopped");
                }
            });
        }
        tracing::info!(targets = a.targets.len(), "alert sender running");
    }
    wait(stop_rx).await;
    // Undelivered alerts stay in the outbox for the next start.
    senders.abort_all();
    while senders.join_next().await.is_some() {}
    if let Some(db) = outbox_db {
        let _ = tokio::task::spawn_blocking(move || drop(db)).await;
    }
    tracing::info!("shutting down: finishing in-flight requests and flushing");
    // One deadline for all of it: requests, a running sweep, the final flush.
    let deadline = tokio::time::Instant::now() + opts.shutdown_timeout;
    let drained = tokio::time::timeout_at(deadline, async {
        let _ = otlp.await;
        if let Some(g) = grpc {
            if let Ok(Err(e)) = g.await {
                tracing::error!(error = %e, "the OTLP/gRPC server stopped with an error");
            }
        }
        let _ = http.await;
        if let Some(s) = schedule {
            let _ = s.await;
        }
        // A sweep in progress finishes (its state commit is one transaction).
        sweeper.wait_idle().await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!(timeout_s = opts.shutdown_timeout.as_secs(), "in-flight requests did not finish in time; closing anyway (unacknowledged requests are retried by exporters)");
    }
    let closing = tokio::task::spawn_blocking(move || store.close());
    // The flush gets what is left, and at least a second to try.
    let flush_by = deadline.max(tokio::time::Instant::now() + Duration::from_secs(1));
    match tokio::time::timeout_at(flush_by, closing).await {
        Ok(Ok(Ok(()))) => tracing::info!("store flushed and closed"),
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "final flush failed; the spans stay in the WAL and are recovered on the next start"),
        Ok(Err(e)) => tracing::error!(error = %e, "closing the store panicked"),
        Err(_) => tracing::error!("final flush did not finish in time; the spans stay in the WAL and are recovered on the next start"),
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
