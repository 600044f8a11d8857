//! The MCP server: stormwatch's reads (incidents, tools, daily series,
//! signals with their evidence and remedies, one trace's attempts, retry storms,
//! read-only SQL) and its three state changes (sweep, mute, resolve) as MCP
//! tools, for coding agents. Built on the official Rust SDK (`rmcp`):
//! Streamable HTTP at `POST /mcp` on the dashboard's listener (both protocol
//! eras: 2025-11-25 with sessions, stateless 2026-07-28), and stdio
//! (`stormwatch mcp --stdio`). Every tool answers `structuredContent` that
//! matches its `outputSchema`, paged and held to a character budget (every
//! string of every answer, `budget`). Reads run on blocking threads, never
//! on the async ones. Over HTTP, sessions are bounded in number, idle time
//! and calls in flight (`sessions`, `[mcp]` in the config: `limits`).

mod args;
mod budget;
mod http;
mod limits;
mod page;
mod reads;
mod sandbox;
mod server;
mod sessions;
mod signal_reads;
mod sql;
mod tools;
mod trace;
pub mod worker;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::detect::{DayVerdict, SpikeParams};
use crate::read::cache::Reads;
use crate::read::data::Rollup;
use crate::signal::{Signal, StateDb};
use crate::store::Reader;
use crate::sweep::SweepReport;

pub use http::http_service;
pub use limits::McpConfig;
pub use sandbox::{Limits as QueryLimits, Sandbox};
pub use tools::Stormwatch;

/// Why a tool could not answer: said to the agent as a tool error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Argument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    State(#[from] crate::signal::StateError),
    #[error(transparent)]
    Incidents(#[from] crate::read::cache::IncidentsError),
    #[error("{context}: {source}")]
    Data {
        context: String,
        source: polars::prelude::PolarsError,
    },
    #[error(transparent)]
    Sweep(#[from] SweepsError),
}

/// Why [`Sweeps::sweep`] did not sweep.
#[derive(Debug, thiserror::Error)]
pub enum SweepsError {
    #[error("a sweep is already running; try again when it ends")]
    Busy,
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
    #[error("the sweep thread panicked: {0}")]
    Panicked(#[source] tokio::task::JoinError),
    /// The runner's own refusal or failure (the server's scheduler's).
    #[error(transparent)]
    Runner(Box<dyn std::error::Error + Send + Sync>),
}

/// Runs sweeps for `run_sweep`: the server's scheduler under `serve`, the
/// sweep itself under `mcp --stdio`.
pub trait Sweeps: Send + Sync {
    /// One sweep (a dry run changes nothing); its report, `None` when the
    /// store holds no spans yet.
    fn sweep(&self, dry_run: bool) -> BoxFuture<'_, Result<Option<SweepReport>, SweepsError>>;
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the tools read and change.
pub struct Context {
    pub reader: Reader,
    /// The caches shared with the dashboard.
    pub reads: Arc<Reads>,
    /// The error-rate spike rule's parameters, as the sweeps use them.
    pub spike: SpikeParams,
    pub state_path: PathBuf,
    pub sweeps: Arc<dyn Sweeps>,
    /// The spike rule's verdicts on the cached rollup, per tool.
    verdicts: Mutex<Option<Verdicts>>,
    /// `list_tools`' lines per window, with what they were made from.
    tool_lines: Mutex<std::collections::HashMap<(i32, i32), ToolLines>>,
    /// The traces `get_trace` judged last, for the pages that follow.
    traces: trace::TraceCache,
    /// Where `query` runs: a worker process under a memory and time limit.
    pub sandbox: Sandbox,
    /// One `query` at a time, held until its worker has exited.
    queries: Arc<tokio::sync::Semaphore>,
}

/// `list_tools`' lines, made from this rollup and these signals.
struct ToolLines {
    rollup: Arc<Rollup>,
    signals: Arc<Vec<Signal>>,
    lines: Arc<Vec<reads::ToolLine>>,
}

/// Verdicts as of a rollup (by address) and a day.
struct Verdicts {
    rollup: usize,
    today: i32,
    by_tool: Arc<std::collections::BTreeMap<String, Vec<DayVerdict>>>,
}

impl Context {
    /// `query` runs under `limits` (`[mcp]` of the config).
    pub fn new(
        reads: Arc<Reads>,
        spike: SpikeParams,
        sweeps: Arc<dyn Sweeps>,
        limits: QueryLimits,
    ) -> Context {
        let reader = reads.reader.clone();
        let state_path = reader.layout().state_db();
        let sandbox = Sandbox::current(reader.layout().root(), limits);
        Context {
            reader,
            reads,
            spike,
            state_path,
            sweeps,
            verdicts: Mutex::new(None),
            tool_lines: Mutex::default(),
            traces: trace::TraceCache::default(),
            sandbox,
            queries: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    fn rollup(&self) -> Result<Arc<Rollup>, McpError> {
        Ok(self.reads.rollup()?)
    }

    /// The spike rule's verdicts for every tool and every day before
    /// `today`, computed once per rollup.
    fn verdicts(
        &self,
        rollup: &Arc<Rollup>,
        today: i32,
    ) -> Arc<std::collections::BTreeMap<String, Vec<DayVerdict>>> {
        let key = Arc::as_ptr(rollup) as usize;
        let mut guard = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = guard
            .as_ref()
            .filter(|v| v.rollup == key && v.today == today)
        {
            return Arc::clone(&v.by_tool);
        }
        let mut by_tool: std::collections::BTreeMap<String, Vec<DayVerdict>> = Default::default();
        for v in crate::detect::judge(&rollup.rows, today, &Default::default(), &self.spike) {
            by_tool.entry(v.tool.clone()).or_default().push(v);
        }
        let by_tool = Arc::new(by_tool);
        *guard = Some(Verdicts {
            rollup: key,
            today,
            by_tool: Arc::clone(&by_tool),
        });
        by_tool
    }

    /// `list_tools`' lines over `from..=to`, made again when the rollup or
    /// the signals were read again.
    fn tool_lines(
        &self,
        rollup: &Arc<Rollup>,
        from: i32,
        to: i32,
    ) -> Result<Arc<Vec<reads::ToolLine>>, McpError> {
        let signals = self.signals()?;
        let mut map = self.tool_lines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = map.get(&(from, to)) {
            if Arc::ptr_eq(&t.rollup, rollup) && Arc::ptr_eq(&t.signals, &signals) {
                return Ok(Arc::clone(&t.lines));
            }
        }
        let lines = Arc::new(reads::tool_lines(self, rollup, from, to)?);
        if map.len() >= 64 {
            map.clear();
        }
        map.insert(
            (from, to),
            ToolLines {
                rollup: Arc::clone(rollup),
                signals,
                lines: Arc::clone(&lines),
            },
        );
        Ok(lines)
    }

    fn signals(&self) -> Result<Arc<Vec<Signal>>, McpError> {
        Ok(self.reads.signals.signals()?)
    }

    /// The query slot, unless a query holds it.
    fn queries_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.queries).try_acquire_owned().ok()
    }

    fn state(&self) -> Result<StateDb, McpError> {
        Ok(StateDb::open(&self.state_path)?)
    }

    /// The state, to change it by hand (mute, resolve): refused on a
    /// detect standby, whose state is the holder's.
    fn state_to_change(&self) -> Result<StateDb, McpError> {
        self.reads
            .may_change_by_hand()
            .map_err(|e| McpError::Refused(e.to_string()))?;
        self.state()
    }
}

/// Sweeps run in this process over a data dir (`mcp --stdio`), as
/// `stormwatch sweep` runs them: alerts are queued, not sent.
pub struct DirectSweeps {
    pub reader: Reader,
    pub config: crate::config::Config,
    pub alerting: Option<crate::alert::Alerting>,
    /// A fixed "now" instead of the clock.
    pub now_ns: Option<i64>,
    running: tokio::sync::Mutex<()>,
}

impl DirectSweeps {
    pub fn new(
        reader: Reader,
        config: crate::config::Config,
        alerting: Option<crate::alert::Alerting>,
        now_ns: Option<i64>,
    ) -> DirectSweeps {
        DirectSweeps {
            reader,
            config,
            alerting,
            now_ns,
            running: tokio::sync::Mutex::new(()),
        }
    }
}

impl Sweeps for DirectSweeps {
    fn sweep(&self, dry_run: bool) -> BoxFuture<'_, Result<Option<SweepReport>, SweepsError>> {
        Box::pin(async move {
            let Ok(_running) = self.running.try_lock() else {
                return Err(SweepsError::Busy);
            };
            let reader = self.reader.clone();
            let config = self.config.clone();
            let opts = crate::sweep::SweepOptions::from_config(
                &config,
                self.now_ns
                    .unwrap_or_else(|| chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)),
                self.alerting.clone(),
            );
            tokio::task::spawn_blocking(move || {
                let result = if dry_run {
                    crate::sweep::dry_run(&reader, &config.detect, &opts)
                } else {
                    StateDb::open(&reader.layout().state_db())
                        .map_err(crate::sweep::SweepError::from)
                        .and_then(|mut state| {
                            crate::sweep::run(&reader, &mut state, &config.detect, &opts)
                        })
                };
                match result {
                    Ok(r) => Ok(Some(r)),
                    Err(crate::sweep::SweepError::Empty(_)) => Ok(None),
                    Err(e) => Err(SweepsError::Sweep(e)),
                }
            })
            .await
            .unwrap_or_else(|e| Err(SweepsError::Panicked(e)))
        })
    }
}

/// Serve MCP over stdin/stdout until the client closes it.
pub async fn serve_stdio(ctx: Arc<Context>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = Stormwatch::new(ctx)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("MCP over stdio: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| anyhow::anyhow!("MCP over stdio: {e}"))?;
    Ok(())
}
