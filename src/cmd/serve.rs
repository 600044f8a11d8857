//! `stormwatch serve`: open the store (loading the demo incident first with
//! `--demo`), resolve alerting and tokens, and run the receivers and the
//! HTTP server until a shutdown signal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::Status;
use crate::config::Config;
use crate::serve::auth::Token;
use crate::store::Store;

/// `serve`'s flags, the config file aside.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--public-url`; `alert.public_url` when `None`.
    pub public_url: Option<String>,
    pub demo: bool,
    /// `--retention-days`; the config file's when `None` (everything kept
    /// with `demo`).
    pub retention_days: Option<u32>,
    pub otlp_addr: SocketAddr,
    /// `None`: no gRPC listener.
    pub otlp_grpc_addr: Option<SocketAddr>,
    pub http_addr: SocketAddr,
    pub shutdown_timeout_secs: u64,
    pub dashboard: PathBuf,
    pub ingest_token: Option<String>,
    pub api_token: Option<String>,
    pub insecure: bool,
    /// Seconds between scheduled sweeps (0 none); the config file's when `None`.
    pub sweep_interval_secs: Option<u64>,
}

/// Serve `data_dir` until a shutdown signal.
pub fn run(data_dir: &Path, config: &Config, o: Options) -> anyhow::Result<Status> {
    let retention = if o.demo && o.retention_days.is_none() {
        // The demo incident is dated July 2026: keep it whatever its age.
        Some(0)
    } else {
        o.retention_days
    };
    let store = Arc::new(Store::open(data_dir, config.store_options(retention))?);
    if o.demo {
        let stored = crate::demo::load(&store).context("loading the demo incident")?;
        tracing::info!(
            spans = stored,
            "demo incident loaded (July 7 - August 12, 2026)"
        );
        let signals = crate::demo::sweep(&store, config).context("sweeping the demo incident")?;
        tracing::info!(
            signals,
            "demo swept as of 2026-08-13; open http://{}/",
            o.http_addr
        );
    }
    let public_url = o
        .public_url
        .unwrap_or_else(|| config.alert.public_url.clone());
    let opts = crate::serve::ServeOptions {
        otlp_addr: o.otlp_addr,
        otlp_grpc_addr: o.otlp_grpc_addr,
        http_addr: o.http_addr,
        max_body_bytes: config.ingest.max_body_bytes,
        max_inflight_bytes: config.ingest.max_inflight_bytes,
        shutdown_timeout: Duration::from_secs(o.shutdown_timeout_secs),
        alerting: crate::alert::commands::alerting(&config.alert, Some(&public_url), true)?,
        panels: o.dashboard,
        config: if o.demo {
            crate::demo::sweep_config(config)
        } else {
            config.clone()
        },
        sweep_interval: match o.sweep_interval_secs.unwrap_or(config.sweep.interval_secs) {
            0 => None,
            s => Some(Duration::from_secs(s.max(10))),
        },
        // The demo's clock stands still, so its scheduled sweeps see
        // the incident as of the morning after.
        sweep_now_ns: o.demo.then_some(crate::demo::NOW_NS),
        ingest_token: Token::new(o.ingest_token.as_deref(), false)
            .map_err(anyhow::Error::msg)
            .context("--ingest-token (STORMWATCH_INGEST_TOKEN)")?,
        api_token: Token::new(o.api_token.as_deref(), public_url.starts_with("https://"))
            .map_err(anyhow::Error::msg)
            .context("--api-token (STORMWATCH_API_TOKEN)")?,
        insecure: o.insecure,
        public_url,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(crate::serve::run(
        store,
        opts,
        crate::serve::shutdown_signal(),
    ));
    // A final flush that overran the shutdown timeout is abandoned
    // here; its spans are in the WAL and recovered on the next start.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| Status::Success)
}
