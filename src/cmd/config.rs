//! `stormwatch config check|default`: check a config file (and the
//! environment variables its alert targets name), or print the commented
//! default one.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::Status;
use crate::config::Config;

/// `config default`: the default file, every key commented.
pub fn default(out: &mut dyn Write) -> anyhow::Result<Status> {
    out.write_all(crate::config::DEFAULT_FILE.as_bytes())?;
    Ok(Status::Success)
}

/// `config check`: `path`, or `./stormwatch.toml` when `None` and present.
pub fn check(
    path: Option<&Path>,
    public_url: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let path = path.map(Path::to_path_buf).or_else(|| {
        let p = PathBuf::from("stormwatch.toml");
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
    crate::alert::commands::alerting(&config.alert, public_url, true)
        .with_context(|| format!("{}: alert targets", path.display()))?;
    writeln!(
        out,
        "{}: ok ({} alert target(s), sweep every {}, retention {}, {} result shape(s) of your own tools{})",
        path.display(),
        config.alert.targets.len(),
        match config.sweep.interval_secs {
            0 => "never (schedule off)".to_string(),
            s => format!("{s} s"),
        },
        match config.store.retention_days {
            0 => "off".to_string(),
            d => format!("{d} days"),
        },
        config.ingest.result_failures.len(),
        match config.ingest.result_failures.len() {
            0 => String::new(),
            _ => format!(
                ": {}",
                config
                    .ingest
                    .result_failures
                    .iter()
                    .map(|r| match r.tools.as_slice() {
                        [] => format!("{} (every tool)", r.pointer),
                        t => format!("{} ({})", r.pointer, t.join(", ")),
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    )?;
    Ok(Status::Success)
}
