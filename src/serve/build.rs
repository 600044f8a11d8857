//! Building a server: the bind checks, the states and routers of the three
//! listeners, the sweeper, the alert senders' parts, and the listeners
//! themselves, bound. Nothing runs yet; [`Server::run`](super::tasks) starts
//! it. An error here stops the start before anything is served.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;

use super::routes::ingest_router;
use super::{auth, conn, grpc, health, metrics, otlp, scheduler};
use super::{http_router, McpGuard, ServeOptions, Stores};
use crate::cluster::leader;
use crate::store::Store;

/// A server built and bound, not yet running.
pub struct Server {
    /// The OTLP/HTTP listener and its app (ingest roles).
    pub(super) otlp: Option<(TcpListener, Router)>,
    /// The OTLP/gRPC listener and its service (ingest roles, unless off).
    pub(super) grpc: Option<(TcpListener, grpc::TraceService)>,
    /// The dashboard's, API's, health's and metrics' listener and app.
    pub(super) http: (TcpListener, Router),
    pub(super) conn_limits: conn::ConnLimits,
    pub(super) connections: Arc<conn::Connections>,
    pub(super) sweeper: Arc<scheduler::Sweeper>,
    /// How often to sweep (`None`: no schedule, or no detect role).
    pub(super) sweep_interval: Option<Duration>,
    /// The alert senders (detect roles with alerting).
    pub(super) senders: Option<Senders>,
    pub(super) leader: Option<Arc<leader::Leader>>,
    pub(super) state_sync: Duration,
    pub(super) shutdown_timeout: Duration,
    /// The stores, closed (final flush) at the end.
    pub(super) ingest: Option<Arc<Store>>,
    pub(super) detect: Option<Arc<Store>>,
}

/// The alert senders' shared parts: one sender per target.
pub(super) struct Senders {
    pub(super) sender: crate::alert::Sender,
    pub(super) targets: Vec<crate::alert::Target>,
}

/// The parts of a server that are not listeners.
struct Apps {
    otlp: Router,
    grpc: Option<grpc::TraceService>,
    http: Router,
    sweeper: Arc<scheduler::Sweeper>,
    alert_stats: Arc<crate::alert::stats::Stats>,
}

/// Build the server `opts` describe over `stores`, its listeners bound.
pub async fn build(stores: Stores, opts: ServeOptions) -> anyhow::Result<Server> {
    // The store behind health and metrics: the one acknowledgements depend
    // on, if this node takes spans.
    let store = match (&stores.ingest, &stores.detect) {
        (Some(s), _) | (None, Some(s)) => Arc::clone(s),
        (None, None) => anyhow::bail!("a node needs a role: ingest, detect or both"),
    };
    check_binds(&opts, stores.ingest.is_some())?;
    let conn_limits = conn::ConnLimits::from_config(&opts.config.admission);
    let connections = Arc::new(conn::Connections::default());
    let detect_store = stores.detect.clone().unwrap_or_else(|| Arc::clone(&store));
    let apps = apps(&opts, &store, &detect_store, &stores, &connections)?;
    let Stores {
        ingest,
        detect,
        leader,
    } = stores;
    let (otlp_listener, grpc_listener, http_listener) = bind(&opts, ingest.is_some()).await?;
    let grpc_addr = grpc_listener
        .as_ref()
        .map(TcpListener::local_addr)
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
            .map(|a| a.cfg.host_policy())
            .unwrap_or_default(),
        own,
    });
    if let Some(a) = opts.alerting.as_ref().filter(|_| detect.is_some()) {
        check_targets(&hosts, &a.targets).await?;
    }
    announce(
        otlp_listener.as_ref(),
        grpc_addr,
        &http_listener,
        &store,
        detect.is_some(),
    )?;
    let senders = match opts.alerting.as_ref().filter(|_| detect.is_some()) {
        Some(a) => Some(
            senders(
                a,
                &detect_store,
                apps.alert_stats,
                leader.clone(),
                Arc::clone(&hosts),
            )
            .await?,
        ),
        None => None,
    };
    Ok(Server {
        otlp: otlp_listener.map(|l| (l, apps.otlp)),
        grpc: grpc_listener.zip(apps.grpc),
        http: (http_listener, apps.http),
        conn_limits,
        connections,
        sweeper: apps.sweeper,
        sweep_interval: opts.sweep_interval.filter(|_| detect.is_some()),
        senders,
        leader,
        state_sync: opts.state_sync,
        shutdown_timeout: opts.shutdown_timeout,
        ingest,
        detect,
    })
}

/// No listener off loopback without its token (unless `--insecure`).
fn check_binds(opts: &ServeOptions, ingest: bool) -> anyhow::Result<()> {
    const INGEST_TOKEN: &str = "--ingest-token (STORMWATCH_INGEST_TOKEN)";
    if ingest {
        auth::check_bind(
            opts.otlp_addr,
            opts.ingest_token.as_deref(),
            "OTLP ingest",
            INGEST_TOKEN,
            opts.insecure,
        )?;
    }
    if let Some(addr) = opts.otlp_grpc_addr.filter(|_| ingest) {
        auth::check_bind(
            addr,
            opts.ingest_token.as_deref(),
            "OTLP/gRPC ingest",
            INGEST_TOKEN,
            opts.insecure,
        )?;
    }
    auth::check_bind(
        opts.http_addr,
        opts.api_token.as_deref(),
        "the dashboard and API",
        "--api-token (STORMWATCH_API_TOKEN)",
        opts.insecure,
    )?;
    Ok(())
}

/// The receivers' states and apps, the sweeper, and the HTTP app.
fn apps(
    opts: &ServeOptions,
    store: &Arc<Store>,
    detect_store: &Arc<Store>,
    stores: &Stores,
    connections: &Arc<conn::Connections>,
) -> anyhow::Result<Apps> {
    let otlp_state = Arc::new(otlp::OtlpState {
        token: opts.ingest_token.clone(),
        ..otlp::OtlpState::with_admission(
            Arc::clone(store),
            opts.max_body_bytes,
            opts.max_inflight_bytes,
            &opts.config.admission,
        )
    });
    let public_host = auth::url_host(&opts.public_url);
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
    let mut sweeper = scheduler::Sweeper::new(
        Arc::clone(detect_store),
        opts.config.clone(),
        opts.alerting.clone(),
        opts.sweep_now_ns,
    );
    if let Some(l) = &stores.leader {
        sweeper = sweeper.with_leader(Arc::clone(l));
    }
    if let (Some(i), Some(_)) = (&stores.ingest, &stores.detect) {
        // `--role all` over a shared store: what it acknowledged reaches
        // the shared store before its copy is pulled for the sweep.
        sweeper = sweeper.with_ingest(Arc::clone(i));
    }
    let sweeper = Arc::new(sweeper);
    let sources = metrics::Sources {
        store: Arc::clone(store),
        otlp: otlp_state,
        sweeper: Arc::clone(&sweeper),
        alerts: Arc::clone(&alert_stats),
        http: Arc::default(),
        readiness: Arc::new(health::Readiness::new(Arc::clone(store))),
        connections: Arc::clone(connections),
    };
    let http_app = if stores.detect.is_some() {
        http_router(
            Arc::clone(detect_store),
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
    Ok(Apps {
        otlp: otlp_app,
        grpc: grpc_service,
        http: http_app,
        sweeper,
        alert_stats,
    })
}

/// The three listeners, bound: OTLP/HTTP and OTLP/gRPC on ingest roles
/// (gRPC unless it is off), HTTP always.
async fn bind(
    opts: &ServeOptions,
    ingest: bool,
) -> anyhow::Result<(Option<TcpListener>, Option<TcpListener>, TcpListener)> {
    let otlp = match ingest {
        true => Some(TcpListener::bind(opts.otlp_addr).await.with_context(|| {
            format!(
                "cannot listen for OTLP/HTTP on {} (--otlp-addr)",
                opts.otlp_addr
            )
        })?),
        false => None,
    };
    let grpc = match opts.otlp_grpc_addr.filter(|_| ingest) {
        Some(addr) => Some(TcpListener::bind(addr).await.with_context(|| {
            format!("cannot listen for OTLP/gRPC on {addr} (--otlp-grpc-addr; `none` turns the gRPC receiver off)")
        })?),
        None => None,
    };
    let http = TcpListener::bind(opts.http_addr)
        .await
        .with_context(|| format!("cannot listen for HTTP on {}", opts.http_addr))?;
    Ok((otlp, grpc, http))
}

/// Log where the server listens.
fn announce(
    otlp: Option<&TcpListener>,
    grpc_addr: Option<SocketAddr>,
    http: &TcpListener,
    store: &Store,
    detect: bool,
) -> anyhow::Result<()> {
    let grpc_hint = match grpc_addr {
        Some(a) => format!(", OTLP/gRPC exporters to http://{a}"),
        None => " (the OTLP/gRPC receiver is off)".to_string(),
    };
    match otlp {
        Some(l) => tracing::info!(
            otlp = %l.local_addr()?,
            otlp_grpc = %grpc_addr.map_or("off".to_string(), |a| a.to_string()),
            http = %http.local_addr()?,
            data_dir = %store.layout().root().display(),
            detect,
            "stormwatch is listening; OTLP/HTTP exporters can send to http://{}/v1/traces{}",
            l.local_addr()?,
            grpc_hint
        ),
        None => tracing::info!(
            http = %http.local_addr()?,
            data_dir = %store.layout().root().display(),
            "stormwatch is listening as the detect role (no OTLP receivers); the dashboard is at http://{}/",
            http.local_addr()?,
        ),
    }
    Ok(())
}

/// The alert senders' parts, over the outbox in the detect store's
/// `state.sqlite` (opened on a blocking thread).
async fn senders(
    a: &crate::alert::Alerting,
    detect_store: &Store,
    stats: Arc<crate::alert::stats::Stats>,
    leader: Option<Arc<leader::Leader>>,
    hosts: Arc<crate::alert::hosts::Guard>,
) -> anyhow::Result<Senders> {
    let path = detect_store.layout().state_db();
    let db = tokio::task::spawn_blocking(move || crate::alert::commands::open(&path))
        .await
        .context("opening the alert outbox")?
        .context("opening the alert outbox")?;
    let sender = crate::alert::Sender {
        stats,
        gate: leader.map(|l| l as Arc<dyn crate::alert::sender::Gate>),
        hosts,
        ..crate::alert::commands::sender(db, &a.cfg)
    };
    Ok(Senders {
        sender,
        targets: a.targets.clone(),
    })
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
