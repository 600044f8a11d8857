//! The `stormwatch` binary: parse the command line, start logging, run the
//! subcommand. The only place an error becomes an exit code.

use std::process::ExitCode;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use std::io::IsTerminal;

use stormwatch::cli::{
    Cli, Command, ConfigAction, FailOn, McpArgs, OutputFormat, SignalsAction, SignalsArgs,
    SweepArgs,
};
use stormwatch::config::Config;
use stormwatch::store::Store;

/// mimalloc for every allocation; its purge delay is set first thing in
/// `main` (`stormwatch::alloc`).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    stormwatch::alloc::purge_freed_memory_promptly();
    let cli = Cli::parse();
    stormwatch::telemetry::init(cli.log_format);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Imported spans older than the retention window are removed by the next
/// retention pass: say so, rather than let them vanish unexplained.
fn warn_past_retention(
    report: &stormwatch::import::ImportReport,
    config: &Config,
    flag: Option<u32>,
) {
    let (Some(oldest), Some(keep)) = (report.oldest_day, config.store_options(flag).retention_days)
    else {
        return;
    };
    let today = chrono::Utc::now().timestamp().div_euclid(86_400) as i32;
    if oldest < today - keep as i32 {
        tracing::warn!(
            "some imported spans start on {}, older than the {keep}-day retention: the next retention pass removes them \
             (keep them with --retention-days 0 or store.retention_days in the config file)",
            stormwatch::model::day_to_string(oldest)
        );
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Ok(spec) = std::env::var("STORMWATCH_FAULTS") {
        stormwatch::faults::install(&spec)
            .map_err(anyhow::Error::msg)
            .context("STORMWATCH_FAULTS")?;
    }
    if let Command::Config(args) = &cli.command {
        return config_command(&cli, &args.action);
    }
    let config = Config::load(cli.config.as_deref())?;
    let data_dir = cli.data_dir();
    match &cli.command {
        Command::Serve(args) => {
            let retention = if args.demo && args.retention_days.is_none() {
                // The demo incident is dated July 2026: keep it whatever its age.
                Some(0)
            } else {
                args.retention_days
            };
            let store = Arc::new(Store::open(&data_dir, config.store_options(retention))?);
            if args.demo {
                let stored = stormwatch::demo::load(&store).context("loading the demo incident")?;
                tracing::info!(
                    spans = stored,
                    "demo incident loaded (July 7 - August 12, 2026)"
                );
                let signals = stormwatch::demo::sweep(&store, &config)
                    .context("sweeping the demo incident")?;
                tracing::info!(
                    signals,
                    "demo swept as of 2026-08-13; open http://{}/",
                    args.http_addr
                );
            }
            let public_url = cli
                .public_url
                .clone()
                .unwrap_or_else(|| config.alert.public_url.clone());
            let opts = stormwatch::serve::ServeOptions {
                otlp_addr: args.otlp_addr,
                otlp_grpc_addr: args.otlp_grpc_addr.0,
                http_addr: args.http_addr,
                max_body_bytes: config.ingest.max_body_bytes,
                max_inflight_bytes: config.ingest.max_inflight_bytes,
                shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
                alerting: stormwatch::alert::commands::alerting(
                    &config.alert,
                    Some(&public_url),
                    true,
                )?,
                panels: args.dashboard.clone(),
                config: if args.demo {
                    stormwatch::demo::sweep_config(&config)
                } else {
                    config.clone()
                },
                sweep_interval: match args.sweep_interval.unwrap_or(config.sweep.interval_secs) {
                    0 => None,
                    s => Some(Duration::from_secs(s.max(10))),
                },
                // The demo's clock stands still, so its scheduled sweeps see
                // the incident as of the morning after.
                sweep_now_ns: args.demo.then_some(stormwatch::demo::NOW_NS),
                ingest_token: stormwatch::serve::auth::Token::new(
                    args.ingest_token.as_deref(),
                    false,
                )
                .map_err(anyhow::Error::msg)
                .context("--ingest-token (STORMWATCH_INGEST_TOKEN)")?,
                api_token: stormwatch::serve::auth::Token::new(
                    args.api_token.as_deref(),
                    public_url.starts_with("https://"),
                )
                .map_err(anyhow::Error::msg)
                .context("--api-token (STORMWATCH_API_TOKEN)")?,
                insecure: args.insecure,
                public_url,
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let result = runtime.block_on(stormwatch::serve::run(
                store,
                opts,
                stormwatch::serve::shutdown_signal(),
            ));
            // A final flush that overran the shutdown timeout is abandoned
            // here; its spans are in the WAL and recovered on the next start.
            runtime.shutdown_timeout(Duration::from_secs(1));
            result.map(|()| ExitCode::SUCCESS)
        }
        Command::Import(args) => {
            let store = Store::open(&data_dir, config.store_options(args.retention_days))?;
            let progress = std::io::stderr().is_terminal();
            let mut report = stormwatch::import::ImportReport::default();
            if !args.paths.is_empty() {
                report = stormwatch::import::import_paths(
                    &store,
                    &args.paths,
                    progress,
                    config.import.max_decompressed_bytes,
                )?;
            }
            if let Some(dir) = &args.follow {
                let stop = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&stop);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("starting the signal handler")?;
                runtime.spawn(async move {
                    stormwatch::serve::shutdown_signal().await;
                    flag.store(true, Ordering::Relaxed);
                });
                let interval = Duration::from_millis(config.import.poll_interval_ms.max(10));
                let followed = std::thread::scope(|s| {
                    let h = s.spawn(|| {
                        let r = stormwatch::import::follow(
                            &store,
                            dir,
                            interval,
                            config.import.max_decompressed_bytes,
                            &stop,
                        );
                        stop.store(true, Ordering::Relaxed);
                        r
                    });
                    // Drive the signal handler while the follower works.
                    runtime.block_on(async {
                        while !stop.load(Ordering::Relaxed) {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    });
                    h.join()
                        .map_err(|_| anyhow::anyhow!("the follower thread panicked"))
                })??;
                report.add(&followed);
            }
            store.close().context("flushing the store")?;
            warn_past_retention(&report, &config, args.retention_days);
            println!(
                "imported {} file(s): {} request(s), {} span(s) stored, {} already stored, {} rejected (invalid ids), {} bad record(s) skipped",
                report.files, report.records, report.spans_stored, report.duplicates, report.rejected, report.bad_records
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep(args) => sweep(&data_dir, &config, cli.public_url.as_deref(), args),
        Command::Signals(args) => signals(&data_dir, args),
        Command::Alerts(args) => {
            let layout = stormwatch::store::Layout::new(&data_dir);
            stormwatch::alert::commands::run(
                &layout.state_db(),
                &config.alert,
                cli.public_url.as_deref(),
                args,
            )
        }
        Command::Mcp(args) => mcp_stdio(&data_dir, &config, cli.public_url.as_deref(), args),
        Command::Config(_) => unreachable!("handled before the config is loaded"),
    }
}

/// `stormwatch config check|default`.
fn config_command(cli: &Cli, action: &ConfigAction) -> anyhow::Result<ExitCode> {
    match action {
        ConfigAction::Default => print!("{}", stormwatch::config::DEFAULT_FILE),
        ConfigAction::Check => {
            let path = cli.config.clone().or_else(|| {
                let p = std::path::PathBuf::from("stormwatch.toml");
                p.exists().then_some(p)
            });
            let Some(path) = path else {
                anyhow::bail!(
                    "no config file to check: pass --config FILE (or STORMWATCH_CONFIG), or create ./stormwatch.toml \
                     (`stormwatch config default > stormwatch.toml` writes the defaults)"
                );
            };
            let config = Config::load(Some(&path))?;
            // Targets' url_env / secret_env must be set where the check runs.
            stormwatch::alert::commands::alerting(&config.alert, cli.public_url.as_deref(), true)
                .with_context(|| format!("{}: alert targets", path.display()))?;
            println!(
                "{}: ok ({} alert target(s), sweep every {}, retention {})",
                path.display(),
                config.alert.targets.len(),
                match config.sweep.interval_secs {
                    0 => "never (schedule off)".to_string(),
                    s => format!("{s} s"),
                },
                match config.store.retention_days {
                    0 => "off".to_string(),
                    d => format!("{d} days"),
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}

fn sweep(
    data_dir: &std::path::Path,
    config: &Config,
    public_url: Option<&str>,
    args: &SweepArgs,
) -> anyhow::Result<ExitCode> {
    use stormwatch::sweep;
    let now = match &args.now {
        Some(s) => stormwatch::time::parse_now(s)
            .map_err(anyhow::Error::msg)
            .context("--now")?,
        None => now_ns(),
    };
    let alerting = stormwatch::alert::commands::alerting(&config.alert, public_url, false)?;
    let mut opts = stormwatch::sweep::SweepOptions::from_config(config, now, alerting);
    if let Some(since) = &args.since {
        opts.since_days = stormwatch::time::parse_since(since)
            .map_err(anyhow::Error::msg)
            .context("--since")?;
    }
    opts.reuse = !args.rescan;
    let reader = stormwatch::store::Reader::open(data_dir)?;
    let mut state = stormwatch::signal::StateDb::open(&reader.layout().state_db())?;
    let report = sweep::run(&reader, &mut state, &config.detect, &opts)?;
    let text = match args.format {
        OutputFormat::Text => sweep::to_text(&report),
        OutputFormat::Json => format!("{:#}\n", sweep::to_json(&report)),
        OutputFormat::Markdown => sweep::to_markdown(&report),
    };
    print!("{text}");
    use stormwatch::signal::Lifecycle;
    let fail = match args.fail_on {
        None => false,
        Some(FailOn::New) => report
            .signals
            .iter()
            .any(|s| matches!(s.state, Lifecycle::New | Lifecycle::Regressed)),
        Some(FailOn::Any) => report.signals.iter().any(|s| s.state.is_open()),
    };
    Ok(if fail {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `stormwatch mcp --stdio`: the MCP tools over stdin/stdout, on the data dir.
fn mcp_stdio(
    data_dir: &std::path::Path,
    config: &Config,
    public_url: Option<&str>,
    args: &McpArgs,
) -> anyhow::Result<ExitCode> {
    if !args.stdio {
        anyhow::bail!(
            "`stormwatch mcp` speaks MCP over stdin/stdout: pass --stdio (for MCP over HTTP, `stormwatch serve` answers at POST /mcp)"
        );
    }
    let now = args
        .now
        .as_deref()
        .map(stormwatch::time::parse_now)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--now")?;
    let reader = stormwatch::store::Reader::open(data_dir)?;
    let sweeps = stormwatch::mcp::DirectSweeps::new(
        reader.clone(),
        config.clone(),
        stormwatch::alert::commands::alerting(&config.alert, public_url, false)?,
        now,
    );
    let ctx = Arc::new(stormwatch::mcp::Context::new(
        Arc::new(stormwatch::dash::cache::Reads::new(reader)),
        config.detect.error_spike.clone(),
        Arc::new(sweeps),
    ));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(stormwatch::mcp::serve_stdio(ctx))?;
    Ok(ExitCode::SUCCESS)
}

fn signals(data_dir: &std::path::Path, args: &SignalsArgs) -> anyhow::Result<ExitCode> {
    use stormwatch::sweep::signal_json;
    use stormwatch::time::{parse_now, rfc3339};
    let reader = stormwatch::store::Reader::open(data_dir)?;
    let mut state = stormwatch::signal::StateDb::open(&reader.layout().state_db())?;
    let json = args.format == OutputFormat::Json;
    match &args.action {
        SignalsAction::List => {
            let all = state.list()?;
            if json {
                println!(
                    "{:#}",
                    serde_json::Value::Array(all.iter().map(signal_json).collect())
                );
            } else if all.is_empty() {
                println!("no signals yet (run `stormwatch sweep`)");
            } else {
                for s in all {
                    println!("{}  {:<9}  {}", s.draft.id, s.state.as_str(), s.draft.title);
                }
            }
        }
        SignalsAction::Show { id } => {
            let s = state.get(id)?;
            let history = state.history(id)?;
            if json {
                let mut v = signal_json(&s);
                v["history"] = history
                    .iter()
                    .map(|(at, from, to, why)| serde_json::json!({"at": rfc3339(*at), "from": from, "to": to, "reason": why}))
                    .collect();
                println!("{v:#}");
            } else {
                println!("{}  [{}]  {}", s.draft.id, s.state.as_str(), s.draft.title);
                println!(
                    "key: {}\nfirst seen {}, last seen {}, {} finding(s) on {}",
                    s.draft.key,
                    rfc3339(s.draft.first_seen_ns),
                    rfc3339(s.draft.last_seen_ns),
                    s.draft.findings,
                    s.draft.days.join(", ")
                );
                for e in &s.draft.evidence {
                    println!(
                        "  trace {}  {} calls, {} failed, {:.1} s wasted",
                        e.trace_id, e.calls, e.failures, e.wasted_seconds
                    );
                }
                for (at, from, to, why) in history {
                    println!(
                        "  {}  {} -> {}  ({why})",
                        rfc3339(at),
                        from.as_deref().unwrap_or("-"),
                        to
                    );
                }
            }
        }
        SignalsAction::Mute {
            id,
            until,
            until_escalates,
        } => {
            let until_ns = until
                .as_deref()
                .map(parse_now)
                .transpose()
                .map_err(anyhow::Error::msg)
                .context("--until")?;
            state.mute(id, until_ns, *until_escalates, now_ns())?;
            println!("{id} muted");
        }
        SignalsAction::Unmute { id } => {
            state.unmute(id, now_ns())?;
            println!("{id} unmuted");
        }
        SignalsAction::Resolve { id } => {
            state.resolve(id, now_ns())?;
            println!("{id} resolved");
        }
    }
    Ok(ExitCode::SUCCESS)
}
