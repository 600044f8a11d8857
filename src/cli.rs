//! The command line: subcommands and flags, each flag also settable as a
//! `STORMWATCH_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "stormwatch",
    version,
    about = "Watches what AI agents do with their tools: finds retry storms and error spikes in OpenTelemetry traces"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Where spans, rollups and state live [default: ./stormwatch-data, or ./stormwatch-demo with serve --demo]
    #[arg(long, global = true, env = "STORMWATCH_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The store every node shares: a local path (the data directory), or s3://bucket/prefix (credentials, region and AWS_ENDPOINT_URL from the usual AWS variables); with s3://, --data-dir holds this node's WAL and its local copy
    #[arg(long, global = true, env = "STORMWATCH_STORE")]
    pub store: Option<String>,
    /// This node's name, in the names of the parts it ships and in the detect lease [default: the host name]
    #[arg(long, global = true, env = "STORMWATCH_NODE_ID")]
    pub node_id: Option<String>,
    /// The pipeline's TOML config file [default: ./stormwatch.toml when present]
    #[arg(long, global = true, env = "STORMWATCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format on stderr
    #[arg(
        long,
        global = true,
        env = "STORMWATCH_LOG_FORMAT",
        default_value = "pretty"
    )]
    pub log_format: LogFormat,
    /// The dashboard's address as people reach it, for links in alerts [default: alert.public_url]
    #[arg(long, global = true, env = "STORMWATCH_PUBLIC_URL")]
    pub public_url: Option<String>,
}

pub use crate::telemetry::LogFormat;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the OTLP/HTTP and OTLP/gRPC receivers and the HTTP server on the embedded store
    Serve(ServeArgs),
    /// Load OTLP JSON, JSON-lines or protobuf files (or directories) into the store
    Import(ImportArgs),
    /// One detection pass for cron or CI: print the signals, update their state
    Sweep(SweepArgs),
    /// What is broken: the incidents (open signals with one likely cause), listed or one shown whole
    Incidents(IncidentsArgs),
    /// List, show, mute, unmute or resolve signals
    Signals(SignalsArgs),
    /// What stormwatch cannot see in the spans it was sent, per service and scope, and the fix
    Coverage(CoverageArgs),
    /// The alert outbox: list, flush (deliver now), retry, test a target, enable a target
    Alerts(AlertsArgs),
    /// Check a config file, or print the commented default one
    Config(ConfigArgs),
    /// Serve the MCP tools to a coding agent that launches this process (stdio); `serve` answers MCP over HTTP at /mcp
    Mcp(McpArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Parse and check the config file (--config, or ./stormwatch.toml), including the environment variables its targets name
    Check,
    /// Print the default config file, every key commented
    Default,
}

#[derive(Debug, Args)]
pub struct AlertsArgs {
    #[command(subcommand)]
    pub action: AlertsAction,
    #[arg(long, global = true, default_value = "text")]
    pub format: OutputFormat,
}

#[derive(Debug, Subcommand)]
pub enum AlertsAction {
    /// The newest outbox rows: target, status, attempts, signals, last error
    List {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Deliver what the outbox holds (for cron: sweep, then flush)
    Flush {
        /// Wait at most this long (seconds) for retries; the rest stays queued
        #[arg(long, default_value_t = 120)]
        wait: u64,
    },
    /// Queue a dead-lettered message again, with a fresh retry budget
    Retry { id: i64 },
    /// Send a sample message to a target now, to check the wiring
    Test { target: String },
    /// Re-enable a target that was disabled because its endpoint was gone
    Enable { target: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 1 when a signal is new or regressed
    New,
    /// Exit 1 when any signal is open (new, ongoing or regressed)
    Any,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Speak MCP on stdin/stdout (the only transport of this command; logs go to stderr)
    #[arg(long)]
    pub stdio: bool,
    /// The "now" of `run_sweep`, to replay history: 2026-08-13 or 2026-08-13T09:00:00Z [default: the clock]
    #[arg(long)]
    pub now: Option<String>,
    /// Internal: answer one `query` request from stdin (the server's
    /// query worker process, `mcp::sandbox`); not for use by hand
    #[arg(long, hide = true, conflicts_with = "stdio")]
    pub query_worker: bool,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// How far back to look: 30d, 2w, 12h [default: sweep.since_days of the config file, 30 days]
    #[arg(long, env = "STORMWATCH_SWEEP_SINCE")]
    pub since: Option<String>,
    /// The sweep's "now", to replay history: 2026-08-06 or 2026-08-06T09:00:00Z [default: the clock]
    #[arg(long)]
    pub now: Option<String>,
    #[arg(long, default_value = "text")]
    pub format: OutputFormat,
    /// Exit 1 when signals are open, for CI
    #[arg(long)]
    pub fail_on: Option<FailOn>,
    /// Read every day from its spans again, instead of reusing stored results and sealed summaries of days whose data has not changed (final days are sealed again)
    #[arg(long)]
    pub rescan: bool,
}

#[derive(Debug, Args)]
pub struct CoverageArgs {
    /// Days ending on the newest day with data
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=366))]
    pub days: u32,
    /// Only the spans that started at or after this time (RFC 3339, a date,
    /// or a duration back from now: 90m, 2h): to see a fix take effect;
    /// replaces --days
    #[arg(long, conflicts_with = "days")]
    pub since: Option<String>,
    #[arg(long, default_value = "text")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SignalsArgs {
    #[command(subcommand)]
    pub action: SignalsAction,
    #[arg(long, global = true, default_value = "text")]
    pub format: OutputFormat,
}

#[derive(Debug, Subcommand)]
pub enum SignalsAction {
    /// Every signal with its state
    List,
    /// One signal: title, evidence, history
    Show {
        id: String,
    },
    /// Keep a signal quiet: until a time, until it escalates, or (neither) for good
    Mute {
        id: String,
        /// 2026-08-06 or 2026-08-06T09:00:00Z
        #[arg(long, conflicts_with = "until_escalates")]
        until: Option<String>,
        /// Until it has twice the findings it has now
        #[arg(long)]
        until_escalates: bool,
    },
    Unmute {
        id: String,
    },
    /// Mark it resolved by hand (a later finding regresses it)
    Resolve {
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct IncidentsArgs {
    #[command(subcommand)]
    pub action: IncidentsAction,
    #[arg(long, global = true, default_value = "text")]
    pub format: OutputFormat,
}

#[derive(Debug, Subcommand)]
pub enum IncidentsAction {
    /// The incidents, open ones first: id, state, severity, title, members
    List {
        /// Which ones [default: the open and the acknowledged ones]
        #[arg(long)]
        state: Option<IncidentStateArg>,
    },
    /// One incident: cause, members and why each joined, timeline, impact, remedy, evidence traces
    Show { id: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IncidentStateArg {
    /// A member signal is open
    Open,
    /// Every open member is muted
    Acknowledged,
    /// Every member resolved
    Resolved,
    /// Whatever their state
    All,
}

/// What a `serve` node does over a shared store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Receivers, WAL and flush: parts shipped to the shared store
    Ingest,
    /// Seal, sweep, signals, alerts, dashboard and MCP on a copy of the shared store; one node acts at a time (a lease), the others stand by
    Detect,
    /// Both (the single process of a local store)
    All,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// What this node does: ingest, detect or all (ingest and detect need --store s3://…)
    #[arg(long, env = "STORMWATCH_ROLE", default_value = "all")]
    pub role: Role,
    /// Where OTLP/HTTP exporters send traces (POST /v1/traces)
    #[arg(long, env = "STORMWATCH_OTLP_ADDR", default_value = "127.0.0.1:4318")]
    pub otlp_addr: SocketAddr,
    /// Where OTLP/gRPC exporters send traces (TraceService/Export); `none` turns it off
    #[arg(
        long,
        env = "STORMWATCH_OTLP_GRPC_ADDR",
        default_value = "127.0.0.1:4317"
    )]
    pub otlp_grpc_addr: ListenAddr,
    /// The dashboard, API and health endpoints
    #[arg(long, env = "STORMWATCH_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: SocketAddr,
    /// Load the bundled sample incident (the July 29 retry storm) first
    #[arg(long, env = "STORMWATCH_DEMO")]
    pub demo: bool,
    /// Delete days older than this (0 keeps everything); overrides the config file
    #[arg(long, env = "STORMWATCH_RETENTION_DAYS")]
    pub retention_days: Option<u32>,
    /// Seconds to wait for in-flight requests and the final flush on shutdown
    #[arg(long, env = "STORMWATCH_SHUTDOWN_TIMEOUT", default_value_t = 30)]
    pub shutdown_timeout: u64,
    /// The overview's panels (built-in panels when the file does not exist)
    #[arg(
        long,
        env = "STORMWATCH_DASHBOARD",
        default_value = "dashboards/overview.toml"
    )]
    pub dashboard: std::path::PathBuf,
    /// Bearer token OTLP exporters must send (`OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>`)
    #[arg(long, env = "STORMWATCH_INGEST_TOKEN", hide_env_values = true)]
    pub ingest_token: Option<String>,
    /// Bearer token for the dashboard, API and /metrics (browsers sign in once at /login)
    #[arg(long, env = "STORMWATCH_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// Allow listening on a non-loopback address without a token
    #[arg(long, env = "STORMWATCH_INSECURE")]
    pub insecure: bool,
    /// The sweeps' "now", to replay an incident: 2026-08-13 or 2026-08-13T09:00:00Z [default: the clock]
    #[arg(long, env = "STORMWATCH_SWEEP_NOW")]
    pub now: Option<String>,
    /// Seconds between scheduled sweeps, 0 for none [default: sweep.interval_secs of the config file, 300]
    #[arg(long, env = "STORMWATCH_SWEEP_INTERVAL", value_parser = clap::value_parser!(u64).range(0..=604_800))]
    pub sweep_interval: Option<u64>,
}

/// A listener's address, or `none` for no listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr(pub Option<SocketAddr>);

impl std::str::FromStr for ListenAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<ListenAddr, String> {
        if s.eq_ignore_ascii_case("none") {
            return Ok(ListenAddr(None));
        }
        s.parse().map(|a| ListenAddr(Some(a))).map_err(|_| {
            format!("expected an address like 127.0.0.1:4317, or `none` to turn the listener off; got {s:?}")
        })
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Files or directories to load
    #[arg(required_unless_present = "follow")]
    pub paths: Vec<PathBuf>,
    /// Keep pulling new files (and new lines of JSON-lines files) from this directory until interrupted
    #[arg(long, env = "STORMWATCH_FOLLOW")]
    pub follow: Option<PathBuf>,
    /// Delete days older than this (0 keeps everything); overrides the config file
    #[arg(long, env = "STORMWATCH_RETENTION_DAYS")]
    pub retention_days: Option<u32>,
}

impl Cli {
    /// The data directory this invocation uses.
    pub fn data_dir(&self) -> PathBuf {
        if let Some(d) = &self.data_dir {
            return d.clone();
        }
        match &self.command {
            Command::Serve(s) if s.demo => PathBuf::from("stormwatch-demo"),
            _ => PathBuf::from("stormwatch-data"),
        }
    }
}
