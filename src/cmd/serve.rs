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

/// What a node does (`--role`): the one enum, clap's value.
pub use crate::cli::Role;

/// `serve`'s flags, the config file aside.
#[derive(Debug, Clone)]
pub struct Options {
    pub role: Role,
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
    /// `--now`: the sweeps' "now" instead of the clock.
    pub now: Option<String>,
}

/// An ingest node's store over a shared one: its WAL and parts in
/// `data_dir`, each flush shipped to the shared store under the node's id
/// before its WAL segments go. It keeps its parts for dedup only (the
/// shared store's retention is the detect role's), and never seals.
pub fn open_ingest(
    data_dir: &Path,
    shared: &super::Shared,
    config: &Config,
) -> anyhow::Result<Store> {
    let mut opts = config.store_options(None);
    opts.node_id = Some(shared.node_id.clone());
    opts.retention_days = Some(opts.dedup_days as u32 + 1);
    opts.seal_after = None;
    let ship = crate::cluster::ship::Ship::new(shared.remote.clone());
    let layout = crate::store::Layout::shipping(data_dir, Arc::new(ship));
    Store::open_layout(layout, opts).with_context(|| {
        format!(
            "opening {} as an ingest node of {}",
            data_dir.display(),
            shared.remote.url()
        )
    })
}

/// A detect node's store: `data_dir` kept as a copy of the shared store
/// (pulled every `cluster.pull_interval_secs`), sealed and trimmed by the
/// lease holder. It compacts nothing of its own and applies no retention
/// to its copy (the holder trims the shared store, and the copy follows).
fn open_copy(
    data_dir: &Path,
    shared: &super::Shared,
    config: &Config,
    lease: Option<Arc<crate::cluster::lease::Lease>>,
) -> anyhow::Result<Store> {
    let mut opts = config.store_options(None);
    opts.mirror = Some(Arc::new(crate::cluster::mirror::Mirror {
        remote: shared.remote.clone(),
        lease,
        pull_every: Duration::from_secs(config.cluster.pull_interval_secs),
        retention_days: opts.retention_days,
    }));
    opts.retention_days = None;
    opts.compact_parts = usize::MAX;
    Store::open(data_dir, opts).with_context(|| {
        format!(
            "opening {} as a copy of {}",
            data_dir.display(),
            shared.remote.url()
        )
    })
}

/// Make `data_dir` a copy of the shared store as it is now (a one-shot
/// `sweep --store s3://…`): pulled, nothing sealed or trimmed there.
pub fn pull_copy(data_dir: &Path, shared: &super::Shared, config: &Config) -> anyhow::Result<()> {
    let store = open_copy(data_dir, shared, config, None)?;
    let pulled = store.pull().context("pulling from the shared store")?;
    store.close().context("closing the local copy")?;
    tracing::info!(
        store = %shared.remote.url(),
        days = pulled.days,
        fetched = pulled.fetched,
        dropped = pulled.dropped,
        "local copy of the shared store brought up to date"
    );
    Ok(())
}

/// Serve `data_dir` until a shutdown signal; over a shared store, in the
/// role `o.role`.
pub fn run(
    data_dir: &Path,
    shared: Option<super::Shared>,
    config: &Config,
    o: Options,
) -> anyhow::Result<Status> {
    let retention = if o.demo && o.retention_days.is_none() {
        // The demo incident is dated July 2026: keep it whatever its age.
        Some(0)
    } else {
        o.retention_days
    };
    for shape in &config.ingest.result_failures {
        tracing::info!(
            pointer = %shape.pointer,
            tools = %shape.tools.join(","),
            "ingest.result_failures: tool results of this shape are read as failures"
        );
    }
    let stores = open_stores(data_dir, shared.as_ref(), config, &o, retention)?;
    if o.demo {
        let store = stores
            .detect
            .as_ref()
            .expect("a local store detects on itself");
        load_demo(store, config, o.http_addr)?;
    }
    let opts = serve_options(config, o)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(crate::serve::run(
        stores,
        opts,
        crate::serve::shutdown_signal(),
    ));
    // A final flush that overran the shutdown timeout is abandoned
    // here; its spans are in the WAL and recovered on the next start.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| Status::Success)
}

/// The stores `o.role` serves: one local store, or over a shared store an
/// ingest node's store, a detect node's copy and its lease keeper, or both.
fn open_stores(
    data_dir: &Path,
    shared: Option<&super::Shared>,
    config: &Config,
    o: &Options,
    retention: Option<u32>,
) -> anyhow::Result<crate::serve::Stores> {
    let shared = match (shared, o.role) {
        (None, Role::All) => {
            return Ok(crate::serve::Stores::single(Arc::new(Store::open(
                data_dir,
                config.store_options(retention),
            )?)))
        }
        (None, role) => anyhow::bail!(
            "--role {} needs a shared store: --store s3://bucket/prefix (a local store is served by one process, --role all)",
            if role == Role::Ingest { "ingest" } else { "detect" }
        ),
        (Some(_), _) if o.demo => {
            anyhow::bail!("--demo loads a local store; run it without --store")
        }
        (Some(shared), _) => shared,
    };
    let role = o.role;
    let config = &Config {
        store: crate::config::StoreConfig {
            retention_days: retention.unwrap_or(config.store.retention_days),
            ..config.store.clone()
        },
        ..config.clone()
    };
    let ingest = match role {
        Role::Detect => None,
        // An `all` node keeps its WAL and parts apart from its copy.
        Role::All => Some(open_ingest(&data_dir.join("ingest"), shared, config)?),
        Role::Ingest => Some(open_ingest(data_dir, shared, config)?),
    };
    let (detect, leader) = if role == Role::Ingest {
        (None, None)
    } else {
        let lease = Arc::new(crate::cluster::lease::Lease::new(
            shared.remote.clone(),
            &shared.node_id,
            Duration::from_secs(config.cluster.lease_secs),
        ));
        let copy = open_copy(data_dir, shared, config, Some(Arc::clone(&lease)))?;
        let leader = crate::cluster::leader::Leader::new(
            lease,
            shared.remote.clone(),
            copy.layout().state_db(),
        );
        (Some(Arc::new(copy)), Some(Arc::new(leader)))
    };
    tracing::info!(
        store = %shared.remote.url(),
        node = %shared.node_id,
        role = ?role,
        "serving a shared store"
    );
    Ok(crate::serve::Stores {
        ingest: ingest.map(Arc::new),
        detect,
        leader,
    })
}

/// `--demo`: load the demo incident into `store` and sweep it.
fn load_demo(store: &Store, config: &Config, http_addr: SocketAddr) -> anyhow::Result<()> {
    let stored = crate::demo::load(store).context("loading the demo incident")?;
    tracing::info!(
        spans = stored,
        "demo incident loaded (July 7 - August 12, 2026)"
    );
    let signals = crate::demo::sweep(store, config).context("sweeping the demo incident")?;
    tracing::info!(
        signals,
        "demo swept as of 2026-08-13; open http://{}/",
        http_addr
    );
    Ok(())
}

/// What the server is told: `o`'s flags over the config file's values.
fn serve_options(config: &Config, o: Options) -> anyhow::Result<crate::serve::ServeOptions> {
    let public_url = o
        .public_url
        .unwrap_or_else(|| config.alert.public_url.clone());
    Ok(crate::serve::ServeOptions {
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
        sweep_now_ns: match &o.now {
            Some(now) => Some(crate::time::parse_now(now).context("--now")?),
            None => o.demo.then_some(crate::demo::NOW_NS),
        },
        ingest_token: Token::new(o.ingest_token.as_deref(), false)
            .context("--ingest-token (STORMWATCH_INGEST_TOKEN)")?,
        api_token: Token::new(o.api_token.as_deref(), public_url.starts_with("https://"))
            .context("--api-token (STORMWATCH_API_TOKEN)")?,
        insecure: o.insecure,
        public_url,
        state_sync: Duration::from_secs(config.cluster.state_sync_secs),
    })
}
