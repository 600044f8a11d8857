//! stormwatch's own logs: tracing-subscriber on stderr, filtered by
//! `RUST_LOG` (default `info`, and `warn` for the MCP SDK's per-request
//! lines), pretty or JSON; and a process's resident memory, as the logs and
//! the MCP query sandbox read it.

use tracing_subscriber::EnvFilter;

/// How log lines are written: `--log-format` (`cli` re-exports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One compact line per event, coloured at a terminal.
    Pretty,
    /// One JSON object per line, the event's fields flattened.
    Json,
}

pub fn init(format: LogFormat) {
    // rmcp logs every stateless MCP request at info (with the client's
    // whole parameters): kept at warn unless RUST_LOG names it.
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never into a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Pretty => builder.compact().try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Process `pid`'s resident set in bytes (`VmRSS` of `/proc/<pid>/status`);
/// 0 when it cannot be read (the process is gone, or there is no `/proc`).
pub fn resident_bytes(pid: u32) -> u64 {
    vm_rss(&format!("/proc/{pid}/status"))
}

/// This process's resident set in bytes; 0 when it cannot be read.
pub fn own_resident_bytes() -> u64 {
    vm_rss("/proc/self/status")
}

fn vm_rss(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let kib: u64 = l
                .strip_prefix("VmRSS:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}
