//! The network surface of `stormwatch serve`: the OTLP/HTTP receiver on its
//! own port (4318 by default, where SDKs send without configuration), the
//! OTLP/gRPC receiver (4317), and the HTTP server for health, metrics, the
//! dashboard, its API and MCP. Holds no detection logic.
//!
//! Nothing that can block runs on the async workers: no polars work and no
//! SQLite call (`state.sqlite` may be locked by a sweep's IMMEDIATE
//! transaction or another process for seconds). Every such call is in
//! `spawn_blocking`, a sweep's blocking task, or a thread of the store's;
//! export bodies are decoded on `decoders`' threads.

pub mod admission;
pub mod auth;
mod build;
pub mod conn;
pub mod decoders;
pub mod grpc;
pub mod grpc_message;
pub mod grpc_status;
pub mod health;
pub mod metrics;
pub mod otlp;
pub mod response;
pub mod routes;
pub mod scheduler;
pub mod session;
mod tasks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::Store;
pub use build::{build, Server};
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

/// Serve until `shutdown` resolves, then stop accepting, let in-flight
/// requests finish, and close the store (final flush), all within the
/// timeout: [`build`] the server, then [`Server::run`] it.
pub async fn run(
    stores: Stores,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let server = build(stores, opts).await?;
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        cancel.cancel();
    });
    server.run(stop).await
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
