//! Sealed days: once a day is final (every turn that began on it settled),
//! the per-turn kernel's output for it — its turn summary — is written once
//! as Parquet under `sealed/date=YYYY-MM-DD/`, and later sweeps run the
//! rules on it instead of decoding the day's spans again. A summary holds
//! what the rules read and nothing they decide: no `now`, no threshold.
//!
//! - `calls.parquet`: the calls of every (turn, tool) pair called twice or
//!   more in a turn begun that day (the input of chains, storms, loops and
//!   retry outcomes), one row per call;
//! - `turns.parquet`: those turns: trace, when each began, its extent,
//!   span count, the newest end of its trace, its session;
//! - `tools.parquet`: per tool, its median healthy turn (duration, spans)
//!   over the turns read, and the latest start of a call of it in a turn
//!   begun that day;
//! - `failing.parquet`: per tool, the turns begun that day where it failed
//!   most, worst first (a spike's evidence);
//! - `models.parquet`: the model calls (model spans) of those turns: when,
//!   the model, tokens and recorded cost (what a chain's driver reads);
//! - `manifest.json`, written last: the summary's version, the day, the
//!   span parts it was built from (every part of each day its read took
//!   spans from), how many spans that read held and the newest end among
//!   them, and the day's turns per service (the silent-tool rule's turn
//!   volume).
//!
//! A summary is valid while the parts it names are exactly the parts those
//! days hold: a late span (a new part), a re-import or a compaction makes
//! the next sweep read the day again and re-seal it.

use std::fs;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::SweepError;

mod frames;
use crate::detect::calls::TurnCalls;
use crate::model::day_to_string;
use crate::store::{Layout, StoreError};
use frames::*;

/// Bumped when the files' meaning changes; older summaries are rebuilt
/// (3: the turns per service; 4: each call's stated wait, retry_after_ms,
/// and the kept turns' model calls; 5: when each call's wait began,
/// wait_from_ns, and only waits of failures waiting can fix).
pub const VERSION: u32 = 5;

/// What a sealed day holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub calls: TurnCalls,
    /// Spans the day's read held, and the newest end among them.
    pub spans: usize,
    pub horizon_ns: i64,
    /// The days the read took spans from (the day before only when some
    /// trace reached back into it).
    pub read_days: Vec<i32>,
}

impl Summary {
    /// The last day the read took spans from.
    pub fn read_through(&self) -> i32 {
        self.read_days.iter().copied().max().unwrap_or(i32::MIN)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    day: String,
    /// Span parts the summary was built from, relative to the data directory.
    parts: Vec<String>,
    read_days: Vec<String>,
    spans: usize,
    horizon_ns: i64,
    files: Vec<String>,
    /// Turns begun on the day, per service of their anchor span.
    #[serde(default)]
    turns_by_service: Vec<(String, u64)>,
}

const FILES: [&str; 5] = [
    "calls.parquet",
    "turns.parquet",
    "tools.parquet",
    "failing.parquet",
    "models.parquet",
];

/// The columns of `turns.parquet` (a frame of no turns has them).
pub fn turns_schema() -> Schema {
    turns_frame(&Default::default())
        .map(|df| df.schema().as_ref().clone())
        .unwrap_or_default()
}

/// The directory of `day`'s summary.
pub fn dir(layout: &Layout, day: i32) -> PathBuf {
    layout.sealed_dir(day)
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SweepError {
    let context = context.into();
    move |e| SweepError::Store(StoreError::io(context, e))
}

fn data(context: &str) -> impl Fn(PolarsError) -> SweepError + '_ {
    move |source| SweepError::Data {
        context: context.to_string(),
        source,
    }
}

/// The parts (relative paths) of each of `days`, in order.
pub fn parts_of(layout: &Layout, days: &[i32]) -> Result<Vec<String>, SweepError> {
    let mut out = Vec::new();
    for &d in days {
        out.extend(layout.parts(d)?.iter().map(|p| layout.relative(p)));
    }
    Ok(out)
}

/// `day`'s summary, if one is there and still names exactly the parts the
/// days it read hold. A summary this version cannot read counts as none.
pub fn load(layout: &Layout, day: i32) -> Result<Option<Summary>, SweepError> {
    let Some(m) = valid_manifest(layout, day)? else {
        return Ok(None);
    };
    let dir = dir(layout, day);
    let days: Vec<i32> = m
        .read_days
        .iter()
        .filter_map(|d| crate::model::day_from_str(d))
        .collect();
    // A summary that cannot be read (a torn file) is none: the day is read
    // from its spans and sealed again.
    match read_files(&dir, day, &m, days) {
        Ok(s) => Ok(s),
        Err(e) => {
            tracing::warn!(day = %day_to_string(day), error = %e, "a sealed summary could not be read; reading the day from its spans");
            Ok(None)
        }
    }
}

/// What `day`'s valid summary says of itself (read days, spans, newest
/// end), without reading its files: whether a sweep can use it.
pub fn peek(layout: &Layout, day: i32) -> Result<Option<(Vec<i32>, i64)>, SweepError> {
    Ok(valid_manifest(layout, day)?.map(|m| {
        let days = m
            .read_days
            .iter()
            .filter_map(|d| crate::model::day_from_str(d))
            .collect();
        (days, m.horizon_ns)
    }))
}

fn valid_manifest(layout: &Layout, day: i32) -> Result<Option<Manifest>, SweepError> {
    let dir = dir(layout, day);
    let path = dir.join("manifest.json");
    let manifest = match fs::read(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // Unreadable is as good as absent: the day is read from its spans.
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "a summary manifest could not be read; reading the day from its spans");
            return Ok(None);
        }
    };
    let Ok(m) = serde_json::from_slice::<Manifest>(&manifest) else {
        return Ok(None);
    };
    let days: Option<Vec<i32>> = m
        .read_days
        .iter()
        .map(|d| crate::model::day_from_str(d))
        .collect();
    let Some(days) = days else { return Ok(None) };
    // A summary read its own day, always.
    if m.version != VERSION || m.day != day_to_string(day) || !days.contains(&day) {
        return Ok(None);
    }
    // The days the read took spans from must hold the parts it names.
    let mut named: Vec<&str> = m.parts.iter().map(String::as_str).collect();
    named.sort_unstable();
    let mut now = parts_of(layout, &days)?;
    now.sort_unstable();
    if now != named {
        return Ok(None);
    }
    drop(named);
    Ok(Some(m))
}

fn read_files(
    dir: &Path,
    day: i32,
    m: &Manifest,
    days: Vec<i32>,
) -> Result<Option<Summary>, SweepError> {
    let read = |name: &str| -> Result<DataFrame, SweepError> {
        let path = dir.join(name);
        crate::store::parquet::scan(std::slice::from_ref(&path))
            .and_then(|lf| lf.collect())
            .map_err(|source| SweepError::Data {
                context: format!("reading {}", path.display()),
                source,
            })
    };
    let calls = calls_from(&read("calls.parquet")?).map_err(data("reading a day's summary"))?;
    let turns = turns_from(&read("turns.parquet")?).map_err(data("reading a day's summary"))?;
    let (healthy, last_call) =
        tools_from(&read("tools.parquet")?, day).map_err(data("reading a day's summary"))?;
    let failing =
        failing_from(&read("failing.parquet")?, day).map_err(data("reading a day's summary"))?;
    let models = models_from(&read("models.parquet")?).map_err(data("reading a day's summary"))?;
    Ok(Some(Summary {
        calls: TurnCalls {
            calls,
            turns,
            healthy,
            failing,
            last_call,
            turns_by_service: m
                .turns_by_service
                .iter()
                .map(|(service, n)| ((service.clone(), day), *n))
                .collect(),
            models,
        },
        spans: m.spans,
        horizon_ns: m.horizon_ns,
        read_days: days,
    }))
}

/// Write `day`'s summary, built from `parts`: the files under temporary
/// names, then each renamed in, the manifest last. A crash part-way leaves
/// no manifest (or the old one, naming parts no longer there), so the day
/// is read and sealed again.
pub fn write(
    layout: &Layout,
    day: i32,
    summary: &Summary,
    parts: &[String],
) -> Result<(), SweepError> {
    let dir = dir(layout, day);
    fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    // An older manifest goes first: from here until the new one is in, the
    // day has no summary.
    match fs::remove_file(dir.join("manifest.json")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("removing {}", dir.display()))(e)),
    }
    crate::store::wal::sync_dir(&dir)?;
    let tc = &summary.calls;
    let mut frames = [
        calls_frame(&tc.calls),
        turns_frame(&tc.turns),
        tools_frame(tc, day),
        failing_frame(tc, day),
        models_frame(tc),
    ];
    for (name, df) in FILES.iter().zip(frames.iter_mut()) {
        let df = df.as_mut().map_err(|e| SweepError::Data {
            context: "building a day's summary".into(),
            source: e.clone(),
        })?;
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        // Written once, read every sweep: the fastest zstd level.
        let fast = polars::polars_utils::compression::ZstdLevel::try_new(1).ok();
        crate::store::parquet::write_file_with(&tmp, df, ParquetCompression::Zstd(fast))?;
        fs::rename(&tmp, dir.join(name)).map_err(io(format!("writing {}", dir.display())))?;
        // For the crash test: killed with some files in, no manifest.
        crate::faults::kill_point("seal_summary");
    }
    let manifest = Manifest {
        version: VERSION,
        day: day_to_string(day),
        parts: parts.to_vec(),
        read_days: summary
            .read_days
            .iter()
            .map(|d| day_to_string(*d))
            .collect(),
        spans: summary.spans,
        horizon_ns: summary.horizon_ns,
        files: FILES.iter().map(|s| s.to_string()).collect(),
        turns_by_service: tc
            .turns_by_service
            .iter()
            .filter(|((_, d), _)| *d == day)
            .map(|((service, _), n)| (service.clone(), *n))
            .collect(),
    };
    let body = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| SweepError::Store(StoreError::data("encoding a summary manifest", e)))?;
    let path = dir.join("manifest.json");
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    crate::store::wal::replace_file(&path, &tmp, &body)?;
    Ok(())
}
