//! `stormwatch import`: files and directories into the store, then (with
//! `--follow`) new files of a directory until interrupted; one summary line,
//! and exit status 1 when a file given was refused (not a regular file, or
//! past a cap).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::Status;
use crate::config::Config;
use crate::import::ImportReport;
use crate::store::Store;

/// What to import.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files or directories to load first.
    pub paths: Vec<PathBuf>,
    /// Then keep pulling from this directory until interrupted.
    pub follow: Option<PathBuf>,
    /// `--retention-days`; the config file's when `None`.
    pub retention_days: Option<u32>,
    /// Show progress on stderr (a person at a terminal).
    pub progress: bool,
}

/// Import into the store at `data_dir` (over a shared store, as an ingest
/// node: each flush shipped there); the summary goes to `out`.
pub fn run(
    data_dir: &Path,
    shared: Option<super::Shared>,
    config: &Config,
    o: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let shipping = shared.is_some();
    let store = match shared {
        None => Store::open(data_dir, config.store_options(o.retention_days))?,
        Some(shared) => {
            // What it accepts follows --retention-days too; its own parts
            // are kept for its dedup window only.
            let config = &Config {
                store: crate::config::StoreConfig {
                    retention_days: o.retention_days.unwrap_or(config.store.retention_days),
                    ..config.store.clone()
                },
                ..config.clone()
            };
            super::serve::open_ingest(data_dir, &shared, config)?
        }
    };
    let mut report = ImportReport::default();
    if !o.paths.is_empty() {
        report =
            crate::import::import_paths(&store, &o.paths, o.progress, &config.import.limits())?;
    }
    if let Some(dir) = &o.follow {
        report.add(&follow(&store, dir, config)?);
    }
    store.close().context("flushing the store")?;
    warn_refused(&store, &report);
    if shipping {
        warn_past_shared_retention(&report, config);
    }
    writeln!(
        out,
        "imported {} file(s): {} request(s), {} span(s) stored, {} already stored, {} rejected (invalid ids), {} refused for their time ({} later than now + ingest.max_future_secs, {} older than the retention), {} bad record(s) skipped, {} file(s) refused, {} not regular skipped",
        report.files,
        report.records,
        report.spans_stored,
        report.duplicates,
        report.rejected,
        report.rejected_future + report.rejected_past,
        report.rejected_future,
        report.rejected_past,
        report.bad_records,
        report.refused,
        report.not_regular
    )?;
    // Each refusal was an error line of its own.
    Ok(if report.refused > 0 {
        Status::Failure
    } else {
        Status::Success
    })
}

/// `--follow`: pull from `dir` until a shutdown signal.
fn follow(store: &Store, dir: &Path, config: &Config) -> anyhow::Result<ImportReport> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal handler")?;
    runtime.spawn(async move {
        crate::serve::shutdown_signal().await;
        flag.store(true, Ordering::Relaxed);
    });
    let interval = Duration::from_millis(config.import.poll_interval_ms.max(10));
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = crate::import::follow(store, dir, interval, &config.import.limits(), &stop);
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
    })?
    .map_err(Into::into)
}

/// The imported days (first, last, how many) older than `keep` days, in words.
fn days_past(report: &ImportReport, keep: u32) -> Option<String> {
    let today = chrono::Utc::now().timestamp().div_euclid(86_400) as i32;
    let oldest_kept = today - keep as i32;
    let past: Vec<i32> = report.days.range(..oldest_kept).copied().collect();
    let (&first, &last) = (past.first()?, past.last()?);
    let day = crate::model::day_to_string;
    let which = if past.len() == report.days.len() {
        format!(
            "every imported span ({} day(s), {} to {}) is older than the {keep}-day retention",
            past.len(),
            day(first),
            day(last)
        )
    } else {
        format!(
            "{} of the {} imported days ({} to {}) are older than the {keep}-day retention",
            past.len(),
            report.days.len(),
            day(first),
            day(last)
        )
    };
    Some(format!("{which} (it keeps {} on)", day(oldest_kept)))
}

/// Over a shared store the spans were shipped; it is the detect lease
/// holder that applies retention there, by its own settings.
fn warn_past_shared_retention(report: &ImportReport, config: &Config) {
    let keep = config.store.retention_days;
    if keep == 0 {
        return;
    }
    if let Some(which) = days_past(report, keep) {
        tracing::warn!(
            "{which}: they were shipped to the shared store, and the detect node holding the \
             lease deletes them at its next upkeep unless it runs with --retention-days 0 (or \
             store.retention_days = 0); this command's --retention-days does not reach it"
        );
    }
}

/// Spans refused for their time: say how many, why, and how to keep old
/// ones, rather than let them vanish unexplained.
fn warn_refused(store: &Store, report: &ImportReport) {
    if report.rejected_past > 0 {
        let first = store
            .window_now()
            .first_day()
            .map_or_else(String::new, |d| {
                format!(" (it keeps {} on)", crate::model::day_to_string(d))
            });
        tracing::warn!(
            "{} span(s) were refused: they start on days older than the retention{first}, \
             which would delete them at once; import them with --retention-days 0 (or \
             store.retention_days = 0 in the config file) to keep them",
            report.rejected_past
        );
    }
    if report.rejected_future > 0 {
        tracing::warn!(
            "{} span(s) were refused: they start or end more than ingest.max_future_secs after \
             this machine's clock (a sender's clock ahead, or a forged date)",
            report.rejected_future
        );
    }
}
