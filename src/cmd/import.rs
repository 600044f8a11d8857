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
        Some(shared) => super::serve::open_ingest(data_dir, &shared, config)?,
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
    if shipping {
        warn_past_shared_retention(&report, config);
    } else {
        warn_past_retention(&store, &report, config, o.retention_days)?;
    }
    writeln!(
        out,
        "imported {} file(s): {} request(s), {} span(s) stored, {} already stored, {} rejected (invalid ids), {} bad record(s) skipped, {} file(s) refused, {} not regular skipped",
        report.files, report.records, report.spans_stored, report.duplicates, report.rejected, report.bad_records, report.refused, report.not_regular
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

/// The imported days (first, last, how many) older than `keep` days.
fn days_past(report: &ImportReport, keep: u32) -> Option<(Vec<i32>, String)> {
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
    Some((past, format!("{which} (it keeps {} on)", day(oldest_kept))))
}

/// Over a shared store the spans were shipped; it is the detect lease
/// holder that applies retention there, by its own settings.
fn warn_past_shared_retention(report: &ImportReport, config: &Config) {
    let keep = config.store.retention_days;
    if keep == 0 {
        return;
    }
    if let Some((_, which)) = days_past(report, keep) {
        tracing::warn!(
            "{which}: they were shipped to the shared store, and the detect node holding the \
             lease deletes them at its next upkeep unless it runs with --retention-days 0 (or \
             store.retention_days = 0); this command's --retention-days does not reach it"
        );
    }
}

/// Imported spans older than the retention window are removed by a
/// retention pass (when the store opens, then hourly): say which days, and
/// whether the pass this import's store ran has removed them already (it
/// depends on when its first flush came), rather than let them vanish
/// unexplained.
fn warn_past_retention(
    store: &Store,
    report: &ImportReport,
    config: &Config,
    flag: Option<u32>,
) -> anyhow::Result<()> {
    let Some(keep) = config.store_options(flag).retention_days else {
        return Ok(());
    };
    let Some((past, which)) = days_past(report, keep) else {
        return Ok(());
    };
    let layout = store.layout();
    let mut still_there = false;
    for &day in &past {
        if !layout.parts(day)?.is_empty() {
            still_there = true;
            break;
        }
    }
    let fate = if still_there {
        "the next retention pass removes their spans (when the store is next opened, or within \
         the hour)"
    } else {
        "the retention pass removed their spans"
    };
    tracing::warn!(
        "{which}: {fate}; keep them with --retention-days 0 or store.retention_days in the \
         config file"
    );
    Ok(())
}
