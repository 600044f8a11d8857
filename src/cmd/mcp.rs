//! `stormwatch mcp --stdio`: the MCP tools over stdin/stdout, on the data
//! dir (stdout is the protocol's, so this command prints nothing else).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use super::Status;
use crate::config::Config;

/// Serve MCP on stdin/stdout until the client closes it; `now` is
/// `run_sweep`'s "now" (the clock when `None`).
pub fn stdio(
    data_dir: &Path,
    config: &Config,
    public_url: Option<&str>,
    stdio: bool,
    now: Option<&str>,
) -> anyhow::Result<Status> {
    if !stdio {
        anyhow::bail!(
            "`stormwatch mcp` speaks MCP over stdin/stdout: pass --stdio (for MCP over HTTP, `stormwatch serve` answers at POST /mcp)"
        );
    }
    let now = now
        .map(crate::time::parse_now)
        .transpose()
        .context("--now")?;
    let reader = crate::store::Reader::open(data_dir)?;
    let sweeps = crate::mcp::DirectSweeps::new(
        reader.clone(),
        config.clone(),
        crate::alert::commands::alerting(&config.alert, public_url, false)?,
        now,
    );
    let ctx = Arc::new(crate::mcp::Context::new(
        Arc::new(crate::read::cache::Reads::new(reader)),
        config.detect.error_spike.clone(),
        Arc::new(sweeps),
        crate::mcp::QueryLimits::from_config(&config.mcp),
    ));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(crate::mcp::serve_stdio(ctx))?;
    Ok(Status::Success)
}
