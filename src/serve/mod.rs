//! The network surface of `stormwatch serve`: the OTLP/HTTP receiver on its
//! own port (4318 by default, where SDKs send without configuration) and the
//! HTTP server for health, metrics, the dashboard and its API. Holds no
//! detection logic.
//!
//! Nothing that can block runs on the async workers: no polars work and no
//! SQLite call (`state.sqlite` may be locked by a sweep's IMMEDIATE
//! transaction or another process for seconds). Every such call is in
//! `spawn_blocking`, a sweep's blocking task, or a thread of the store's;
//! export bodies are decoded on `decoders`' threads.

pub mod admission;
pub mod auth;
pub mod conn;
pub mod decoders;
pub mod grpc;
pub mod grpc_message;
pub mod health;
pub mod metrics;
pub mod otlp;
pub mod response;
pub mod routes;
pub mod scheduler;
pub mod session;

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;

use crate::store::Store;
use routes::ingest_router;
pub use routes::{http_router, McpGuard};

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
    /// Over a shared store: how often the detect state is shipped or read.
    pub state_sync: Duration,
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

/// Serve until `shutdown` resolves, then stop accepting, let in-flight
/// requests finish, and close the store (final flush), all within the timeout.
pub async fn run(
    stores: Stores,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Stores {
        ingest,
        detect,
        leader,
    } = stores;
    // The store behind health and metrics: the one acknowledgements depend
    // on, if this node takes spans.
    let store = match (&ingest, &detect) {
        (Some(s), _) | (None, Some(s)) => Arc::clone(s),
        (None, None) => anyhow::bail!("a node needs a role: ingest, detect or both"),
    };
    if ingest.is_some() {
        auth::check_bind(
            opts.otlp_addr,
            opts.ingest_token.as_deref(),
            "OTLP ingest",
            "--ingest-token (STORMWATCH_INGEST_TOKEN)",
            opts.insecure,
        )
        .map_err(anyhow::Error::msg)?;
    }
    if let Some(addr) = opts.otlp_grpc_addr.filter(|_| ingest.is_some()) {
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
        ..otlp::OtlpState::with_admission(
            Arc::clone(&store),
            opts.max_body_bytes,
            opts.max_inflight_bytes,
            &opts.config.admission,
        )
    });
    let conn_limits = conn::ConnLimits::from_config(&opts.config.admission);
    let connections = Arc::new(conn::Connections::default());
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
    let detect_store = detect.clone().unwrap_or_else(|| Arc::clone(&store));
    let mut sweeper = scheduler::Sweeper::new(
        Arc::clone(&detect_store),
        opts.config.clone(),
        opts.alerting.clone(),
        opts.sweep_now_ns,
    );
    if let Some(l) = &leader {
        sweeper = sweeper.with_leader(Arc::clone(l));
    }
    if let (Some(i), Some(_)) = (&ingest, &detect) {
        // `--role all` over a shared store: what it acknowledged reaches
        // the shared store before its copy is pulled for the sweep.
        sweeper = sweeper.with_ingest(Arc::clone(i));
    }
    let sweeper = Arc::new(sweeper);
    let sources = metrics::Sources {
        store: Arc::clone(&store),
        otlp: otlp_state,
        sweeper: Arc::clone(&sweeper),
        alerts: Arc::clone(&alert_stats),
        http: Arc::default(),
        readiness: Arc::new(health::Readiness::new(Arc::clone(&store))),
        connections: Arc::clone(&connections),
    };
    let http_app = if detect.is_some() {
        http_router(
            Arc::clone(&detect_store),
            &opts.panels,
            opts.config.detect.error_spike.clone(),
            Arc::clone(&sweeper),
            sources,
            opts.api_token.clone(),
            McpGuard::new(opts.http_addr, &opts.public_url, opts.config.mcp.clone()),
        )?
    } else {
        ingest_router(sources, opts.api_token.clone())
    };
    let http_app = guard(
        http_app,
        opts.http_addr,
        opts.api_token.is_some(),
        &public_host,
    );
    let otlp_listener = match &ingest {
        Some(_) => Some(
            tokio::net::TcpListener::bind(opts.otlp_addr)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen for OTLP/HTTP on {} (--otlp-addr)",
                        opts.otlp_addr
                    )
                })?,
        ),
        None => None,
    };
    let grpc_listener = match opts.otlp_grpc_addr.filter(|_| ingest.is_some()) {
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
    // Alerts never go to this server's own listeners.
    let mut own = vec![("dashboard", http_listener.local_addr()?)];
    if let Some(l) = &otlp_listener {
        own.push(("OTLP/HTTP", l.local_addr()?));
    }
    own.extend(grpc_addr.map(|a| ("OTLP/gRPC", a)));
    let hosts = Arc::new(crate::alert::hosts::Guard {
        policy: opts
            .alerting
            .as_ref()
            .map(|a| crate::alert::hosts::HostPolicy::of(&a.cfg))
            .unwrap_or_default(),
        own,
    });
    if let Some(a) = opts.alerting.as_ref().filter(|_| detect.is_some()) {
        check_targets(&hosts, &a.targets).await?;
    }
    let grpc_hint = match grpc_addr {
        Some(a) => format!(", OTLP/gRPC exporters to http://{a}"),
        None => " (the OTLP/gRPC receiver is off)".to_string(),
    };
    match &otlp_listener {
        Some(l) => tracing::info!(
            otlp = %l.local_addr()?,
            otlp_grpc = %grpc_addr.map_or("off".to_string(), |a| a.to_string()),
            http = %http_listener.local_addr()?,
            data_dir = %store.layout().root().display(),
            detect = detect.is_some(),
            "stormwatch is listening; OTLP/HTTP exporters can send to http://{}/v1/traces{}",
            l.local_addr()?,
            grpc_hint
        ),
        None => tracing::info!(
            http = %http_listener.local_addr()?,
            data_dir = %store.layout().root().display(),
            "stormwatch is listening as the detect role (no OTLP receivers); the dashboard is at http://{}/",
            http_listener.local_addr()?,
        ),
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    // Every connection is guarded: a cap per peer, header and idle time
    // limits (`conn`); the apps see each request in flight.
    let guarded =
        |l, port| conn::GuardedListener::new(l, port, conn_limits, Arc::clone(&connections));
    let tracked = |app: Router| {
        app.layer(axum::middleware::from_fn(conn::track))
            .into_make_service_with_connect_info::<conn::Peer>()
    };
    let otlp = otlp_listener.map(|l| {
        tokio::spawn(
            axum::serve(guarded(l, conn::Port::OtlpHttp), tracked(otlp_app))
                .with_graceful_shutdown(wait(stop_rx.clone()))
                .into_future(),
        )
    });
    let grpc = match (grpc_listener, grpc_service) {
        (Some(listener), Some(service)) => Some(tokio::spawn(
            grpc::server()
                .add_routes(grpc::routes(service))
                .serve_with_incoming_shutdown(
                    guarded(listener, conn::Port::OtlpGrpc).into_incoming(),
                    wait(stop_rx.clone()),
                ),
        )),
        _ => None,
    };
    let http = tokio::spawn(
        axum::serve(guarded(http_listener, conn::Port::Http), tracked(http_app))
            .with_graceful_shutdown(wait(stop_rx.clone()))
            .into_future(),
    );
    let schedule = opts
        .sweep_interval
        .filter(|_| detect.is_some())
        .map(|every| {
            tracing::info!(every_s = every.as_secs(), "sweeps scheduled");
            tokio::spawn(Arc::clone(&sweeper).run_schedule(every, stop_rx.clone()))
        });
    let keeper = leader
        .as_ref()
        .map(|l| tokio::spawn(Arc::clone(l).run(opts.state_sync, stop_rx.clone())));
    let mut senders = tokio::task::JoinSet::new();
    // The senders' connection, kept here so that it is closed on a blocking
    // thread once they stopped (closing may checkpoint the WAL).
    let mut outbox_db = None;
    if let Some(a) = opts.alerting.as_ref().filter(|_| detect.is_some()) {
        let path = detect_store.layout().state_db();
        let db = tokio::task::spawn_blocking(move || crate::alert::commands::open(&path))
            .await
            .context("opening the alert outbox")?
            .context("opening the alert outbox")?;
        let sender = crate::alert::Sender {
            stats: alert_stats,
            gate: leader
                .clone()
                .map(|l| l as Arc<dyn crate::alert::sender::Gate>),
            hosts: Arc::clone(&hosts),
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
        if let Some(o) = otlp {
            let _ = o.await;
        }
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
        // The holder ships its state a last time and releases the lease.
        if let Some(k) = keeper {
            let _ = k.await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(timeout_s = opts.shutdown_timeout.as_secs(), "in-flight requests did not finish in time; closing anyway (unacknowledged requests are retried by exporters)");
    }
    drop(store);
    drop(detect_store);
    let closing = tokio::task::spawn_blocking(move || {
        // Both stores close (an `all` node over a shared store has two);
        // the first error is the one reported.
        let a = ingest.map_or(Ok(()), |s| s.close());
        let b = detect.map_or(Ok(()), |s| s.close());
        a.and(b)
    });
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

/// Every alert target checked against the host lists and this server's
/// listeners before anything is served: a refused one stops the start,
/// naming it (never its URL); one whose name does not resolve now is
/// checked again at each attempt.
async fn check_targets(
    hosts: &crate::alert::hosts::Guard,
    targets: &[crate::alert::Target],
) -> anyhow::Result<()> {
    use crate::alert::hosts::HostError;
    for t in targets {
        match hosts.check(&t.url).await {
            Ok(()) => {}
            Err(HostError::Unresolved(e)) => tracing::warn!(
                target = %t.name,
                error = %e,
                "alert target's host does not resolve now; it is checked again before each attempt"
            ),
            Err(HostError::Refused(why)) => anyhow::bail!(
                "alert target {:?}: refused: {why} (docs/alerting.md, \"Target hosts\")",
                t.name
            ),
        }
    }
    Ok(())
}

/// The stores a node serves: what it takes spans into (ingest), what it
/// detects on (detect; over a shared store, a copy of it), and the lease
/// and state keeper of a detect role over a shared store.
pub struct Stores {
    pub ingest: Option<Arc<Store>>,
    pub detect: Option<Arc<Store>>,
    pub leader: Option<Arc<crate::cluster::leader::Leader>>,
}

impl Stores {
    /// One store that takes spans and detects on them (no shared store).
    pub fn single(store: Arc<Store>) -> Stores {
        Stores {
            ingest: Some(Arc::clone(&store)),
            detect: Some(store),
            leader: None,
        }
    }
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
