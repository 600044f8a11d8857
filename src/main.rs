//! The `stormwatch` binary: parse the command line, start logging, run the
//! subcommand (`stormwatch::cmd`). The only place an error becomes an exit
//! code.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use stormwatch::cli::Cli;

/// mimalloc for every allocation; its purge delay is set first thing in
/// `main` (`stormwatch::alloc`).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    stormwatch::alloc::purge_freed_memory_promptly();
    let cli = Cli::parse();
    stormwatch::telemetry::init(cli.log_format);
    let mut stdout = std::io::stdout();
    let result = stormwatch::cmd::run(&cli, &mut stdout);
    let _ = stdout.flush();
    match result {
        Ok(status) => status.into(),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
