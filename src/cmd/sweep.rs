//! `stormwatch sweep`: one detection pass over the store, its report
//! printed as text, JSON or Markdown; with `--fail-on`, a failure status
//! when signals are open (for CI).

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::{Format, Status};
use crate::config::Config;
use crate::signal::Lifecycle;

/// When a sweep's status is a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    /// A signal is new or regressed.
    New,
    /// A signal is open (new, ongoing or regressed).
    Any,
}

/// `sweep`'s flags.
#[derive(Debug, Clone)]
pub struct Options {
    /// How far back: `30d`, `2w`, `12h`; the config file's when `None`.
    pub since: Option<String>,
    /// The sweep's "now" (`2026-08-06` or RFC 3339); the clock when `None`.
    pub now: Option<String>,
    pub format: Format,
    pub fail_on: Option<FailOn>,
    /// Read every day again instead of reusing stored results.
    pub rescan: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            since: None,
            now: None,
            format: Format::Text,
            fail_on: None,
            rescan: false,
        }
    }
}

/// Sweep the store at `data_dir`, updating its signals' state; the report
/// goes to `out`. Over a shared store, `data_dir` is first made a copy of
/// it (pulled), and swept: its state is this directory's own (the detect
/// role's is shipped in the shared store, and this sweep leaves it alone).
pub fn run(
    data_dir: &Path,
    shared: Option<super::Shared>,
    config: &Config,
    public_url: Option<&str>,
    o: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    use crate::sweep;
    let now = match &o.now {
        Some(s) => crate::time::parse_now(s).context("--now")?,
        None => super::now_ns(),
    };
    let alerting = crate::alert::commands::alerting(&config.alert, public_url, false)?;
    let mut opts = sweep::SweepOptions::from_config(config, now, alerting);
    if let Some(since) = &o.since {
        opts.since_days = crate::time::parse_since(since).context("--since")?;
    }
    opts.reuse = !o.rescan;
    if let Some(shared) = shared {
        super::serve::pull_copy(data_dir, &shared, config)?;
    }
    let reader = crate::store::Reader::open(data_dir)?;
    let mut state = crate::signal::StateDb::open(&reader.layout().state_db())?;
    let report = sweep::run(&reader, &mut state, &config.detect, &opts)?;
    let text = match o.format {
        Format::Text => sweep::to_text(&report),
        Format::Json => format!("{:#}\n", sweep::to_json(&report)),
        Format::Markdown => sweep::to_markdown(&report),
    };
    out.write_all(text.as_bytes())?;
    let fail = match o.fail_on {
        None => false,
        Some(FailOn::New) => report
            .signals
            .iter()
            .any(|s| matches!(s.state, Lifecycle::New | Lifecycle::Regressed)),
        Some(FailOn::Any) => report.signals.iter().any(|s| s.state.is_open()),
    };
    Ok(if fail {
        Status::Failure
    } else {
        Status::Success
    })
}
