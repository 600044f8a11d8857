//! The subcommands' bodies, callable without spawning the binary: each
//! takes plain parameters, writes what it prints to a `&mut dyn Write` and
//! returns a [`Status`] (or an error) that `main` turns into an exit code.
//!
//! [`run`] is the one place that reads the parsed command line (`cli`): it
//! loads the config, converts the clap structs into each command's
//! parameters, and calls it. No other module depends on `cli`.

pub mod alerts;
pub mod config;
pub mod coverage;
pub mod import;
pub mod incidents;
pub mod mcp;
pub mod serve;
pub mod signals;
pub mod sweep;

#[cfg(test)]
mod tests;

use std::io::{IsTerminal, Write};

use anyhow::Context;

use crate::cli::{
    self, AlertsAction, Cli, Command, ConfigAction, IncidentStateArg, IncidentsAction,
    SignalsAction,
};

/// How a command ended when it did not fail with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0.
    Success,
    /// Exit 1 without an error message: `sweep --fail-on` found open
    /// signals, a message went dead, a test message was not delivered.
    Failure,
}

impl From<Status> for std::process::ExitCode {
    fn from(s: Status) -> std::process::ExitCode {
        match s {
            Status::Success => std::process::ExitCode::SUCCESS,
            Status::Failure => std::process::ExitCode::FAILURE,
        }
    }
}

/// How `sweep`, `signals`, `incidents` and `alerts` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

impl From<cli::OutputFormat> for Format {
    fn from(f: cli::OutputFormat) -> Format {
        match f {
            cli::OutputFormat::Text => Format::Text,
            cli::OutputFormat::Json => Format::Json,
            cli::OutputFormat::Markdown => Format::Markdown,
        }
    }
}

/// A shared store (`--store s3://…`) and this node's id in it.
#[derive(Debug, Clone)]
pub struct Shared {
    pub remote: crate::cluster::Remote,
    pub node_id: String,
}

/// Resolve `--store` against `--data-dir`: a local path is the data
/// directory itself; `s3://…` is a shared store, with `--data-dir` this
/// node's local directory (its WAL, its copy).
pub fn shared_store(
    store: Option<&str>,
    data_dir: &std::path::Path,
    data_dir_given: bool,
    node_id: Option<&str>,
) -> anyhow::Result<(std::path::PathBuf, Option<Shared>)> {
    let Some(store) = store else {
        return Ok((data_dir.to_path_buf(), None));
    };
    if store.starts_with("s3://") {
        // The CLI prints the error's text, as it always read (its sources
        // are in it already).
        let text = |e: crate::cluster::ClusterError| anyhow::Error::msg(e.to_string());
        let remote = crate::cluster::Remote::open(store).map_err(text)?;
        crate::cluster::Remote::block(remote.check()).map_err(text)?;
        let node_id = match node_id {
            Some(n) => n.to_string(),
            None => host_name().context("--node-id: no host name to default to; name this node")?,
        };
        crate::cluster::check_node_id(&node_id)
            .map_err(text)
            .context("--node-id (STORMWATCH_NODE_ID, default: the host name)")?;
        return Ok((data_dir.to_path_buf(), Some(Shared { remote, node_id })));
    }
    if let Some((scheme, _)) = store.split_once("://") {
        anyhow::bail!(
            "--store {store}: {scheme}:// is not supported; expected a local path or s3://bucket/prefix (S3-compatible servers through AWS_ENDPOINT_URL)"
        );
    }
    if store.to_ascii_lowercase().starts_with("s3:") {
        anyhow::bail!(
            "--store {store}: expected s3://bucket/prefix (two slashes, lower case) or a local path"
        );
    }
    let path = std::path::PathBuf::from(store);
    if data_dir_given && path != data_dir {
        anyhow::bail!(
            "--store {store} and --data-dir {} name two local directories; give one (a local --store is the data directory)",
            data_dir.display()
        );
    }
    Ok((path, None))
}

/// The host name, for a node that was not given an id.
fn host_name() -> anyhow::Result<String> {
    let name = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow::anyhow!("neither $HOSTNAME nor /proc/sys/kernel/hostname"))?;
    // A host name's dots become dashes in part names.
    Ok(name.replace('.', "-"))
}

/// The clock, in nanoseconds since the epoch.
pub(crate) fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}

/// `STORMWATCH_FAULTS`, when set: install its faults (tests only).
pub fn install_faults_from_env() -> anyhow::Result<()> {
    if let Ok(spec) = std::env::var("STORMWATCH_FAULTS") {
        crate::faults::install(&spec).context("STORMWATCH_FAULTS")?;
    }
    Ok(())
}

/// Run the parsed command line, printing to `out`.
pub fn run(cli: &Cli, out: &mut dyn Write) -> anyhow::Result<Status> {
    install_faults_from_env()?;
    let public_url = cli.public_url.as_deref();
    if let Command::Config(args) = &cli.command {
        // Before the config is loaded: `check` reports a bad one itself.
        return match args.action {
            ConfigAction::Default => config::default(out),
            ConfigAction::Check => config::check(cli.config.as_deref(), public_url, out),
        };
    }
    if let Command::Mcp(a) = &cli.command {
        if a.query_worker {
            // Started by the server with its data dir; reads no config.
            crate::mcp::worker::run(&cli.data_dir(), std::io::stdin().lock(), out)?;
            return Ok(Status::Success);
        }
    }
    let config = crate::config::Config::load(cli.config.as_deref())?;
    let (data_dir, shared) = shared_store(
        cli.store.as_deref(),
        &cli.data_dir(),
        cli.data_dir.is_some(),
        cli.node_id.as_deref(),
    )?;
    match &cli.command {
        Command::Serve(a) => serve::run(&data_dir, shared, &config, serve_options(cli, a)),
        Command::Import(a) => import::run(
            &data_dir,
            shared,
            &config,
            &import::Options {
                paths: a.paths.clone(),
                follow: a.follow.clone(),
                retention_days: a.retention_days,
                progress: std::io::stderr().is_terminal(),
            },
            out,
        ),
        Command::Sweep(a) => sweep::run(
            &data_dir,
            shared,
            &config,
            public_url,
            &sweep::Options {
                since: a.since.clone(),
                now: a.now.clone(),
                format: a.format.into(),
                fail_on: a.fail_on.map(|f| match f {
                    cli::FailOn::New => sweep::FailOn::New,
                    cli::FailOn::Any => sweep::FailOn::Any,
                }),
                rescan: a.rescan,
            },
            out,
        ),
        Command::Coverage(a) => {
            let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
            let days = a.since.is_none().then_some(a.days);
            let span = crate::coverage::Span::ask(days, a.since.as_deref(), now)
                .map_err(|e| anyhow::anyhow!("--{e}"))?;
            coverage::run(&data_dir, span, a.format.into(), out)
        }
        Command::Incidents(a) => run_incidents(&data_dir, a, out),
        Command::Signals(a) => run_signals(&data_dir, a, out),
        Command::Alerts(a) => run_alerts(&data_dir, &config, public_url, a, out),
        Command::Mcp(a) => mcp::stdio(&data_dir, &config, public_url, a.stdio, a.now.as_deref()),
        Command::Config(_) => unreachable!("handled before the config is loaded"),
    }
}

/// `serve`'s flags as its options.
fn serve_options(cli: &Cli, a: &cli::ServeArgs) -> serve::Options {
    serve::Options {
        role: a.role,
        public_url: cli.public_url.clone(),
        demo: a.demo,
        retention_days: a.retention_days,
        otlp_addr: a.otlp_addr,
        otlp_grpc_addr: a.otlp_grpc_addr.0,
        http_addr: a.http_addr,
        shutdown_timeout_secs: a.shutdown_timeout,
        dashboard: a.dashboard.clone(),
        ingest_token: a.ingest_token.clone(),
        api_token: a.api_token.clone(),
        insecure: a.insecure,
        sweep_interval_secs: a.sweep_interval,
        now: a.now.clone(),
    }
}

/// `incidents list|show`.
fn run_incidents(
    data_dir: &std::path::Path,
    a: &cli::IncidentsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let format = a.format.into();
    match &a.action {
        IncidentsAction::List { state } => {
            use crate::incident::IncidentState;
            use crate::read::incidents::Which;
            let which = match state {
                None => Which::Unresolved,
                Some(IncidentStateArg::Open) => Which::Only(IncidentState::Open),
                Some(IncidentStateArg::Acknowledged) => Which::Only(IncidentState::Acknowledged),
                Some(IncidentStateArg::Resolved) => Which::Only(IncidentState::Resolved),
                Some(IncidentStateArg::All) => Which::All,
            };
            incidents::list(data_dir, which, format, out)
        }
        IncidentsAction::Show { id } => incidents::show(data_dir, id, format, out),
    }
}

/// `signals list|show|mute|unmute|resolve`.
fn run_signals(
    data_dir: &std::path::Path,
    a: &cli::SignalsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let format = a.format.into();
    match &a.action {
        SignalsAction::List => signals::list(data_dir, format, out),
        SignalsAction::Show { id } => signals::show(data_dir, id, format, out),
        SignalsAction::Mute {
            id,
            until,
            until_escalates,
        } => signals::mute(data_dir, id, until.as_deref(), *until_escalates, out),
        SignalsAction::Unmute { id } => signals::unmute(data_dir, id, out),
        SignalsAction::Resolve { id } => signals::resolve(data_dir, id, out),
    }
}

/// `alerts list|flush|retry|test|enable`.
fn run_alerts(
    data_dir: &std::path::Path,
    config: &crate::config::Config,
    public_url: Option<&str>,
    a: &cli::AlertsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let db = crate::store::Layout::new(data_dir).state_db();
    let cfg = &config.alert;
    match &a.action {
        AlertsAction::List { limit } => alerts::list(&db, *limit, a.format.into(), out),
        AlertsAction::Flush { wait } => alerts::flush(&db, cfg, *wait, out),
        AlertsAction::Retry { id } => alerts::retry(&db, *id, out),
        AlertsAction::Test { target } => alerts::test(&db, cfg, public_url, target, out),
        AlertsAction::Enable { target } => alerts::enable(&db, target, out),
    }
}
