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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the OTLP/HTTP receiver and the HTTP server on the embedded store
    Serve(ServeArgs),
    /// Load OTLP JSON, JSON-lines or protobuf files (or directories) into the store
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where OTLP/HTTP exporters send traces (POST /v1/traces)
    #[arg(long, env = "STORMWATCH_OTLP_ADDR", default_value = "127.0.0.1:4318")]
    pub otlp_addr: SocketAddr,
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
