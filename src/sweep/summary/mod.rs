//! Day summaries: once a day is final (every turn that began on it settled),
//! the per-turn kernel's output for it — its turn summary — is handed to
//! the store once (which writes it as Parquet under `sealed/date=YYYY-MM-DD/`:
//! `crate::store::Reader::write_summary`), and later sweeps run the rules
//! on it (read through the `Reader`) instead of decoding the day's spans
//! again. This module owns what the files mean; the store owns the files.
//! A summary holds what the rules read and nothing they decide: no `now`, no threshold.
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
//! - `manifest.json` (`crate::store::SummaryManifest`), written last: the summary's version, the day, the
//!   span parts it was built from (every part of each day its read took
//!   spans from), how many spans that read held and the newest end among
//!   them, and the day's turns per service (the silent-tool rule's turn
//!   volume).
//!
//! A summary is valid while the parts it names are exactly the parts those
//! days hold: a late span (a new part), a re-import or a compaction makes
//! the next sweep read the day again and summarize it again.

use polars::prelude::*;

use super::SweepError;

mod frames;
use crate::detect::calls::TurnCalls;
use crate::model::day_to_string;
use crate::store::{Reader, SummaryManifest};
use frames::*;

/// Bumped when the files' meaning changes; older summaries are rebuilt
/// (3: the turns per service; 4: each call's stated wait, retry_after_ms,
/// and the kept turns' model calls; 5: when each call's wait began,
/// wait_from_ns, and only waits of failures waiting can fix).
pub const VERSION: u32 = 5;

/// What a day summary holds.
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

/// A manifest this version can use: every field there.
struct Manifest {
    read_days: Vec<i32>,
    spans: usize,
    horizon_ns: i64,
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

fn data(context: &str) -> impl Fn(PolarsError) -> SweepError + '_ {
    move |source| SweepError::Data {
        context: context.to_string(),
        source,
    }
}

/// `day`'s summary, if one is there and still names exactly the parts the
/// days it read hold. A summary this version cannot read counts as none.
pub fn load(reader: &Reader, day: i32) -> Result<Option<Summary>, SweepError> {
    let Some(m) = valid_manifest(reader, day)? else {
        return Ok(None);
    };
    // A summary that cannot be read (a torn file) is none: the day is read
    // from its spans and summarized again.
    match read_files(reader, day, m) {
        Ok(s) => Ok(s),
        Err(e) => {
            tracing::warn!(day = %day_to_string(day), error = %e, "a sealed summary could not be read; reading the day from its spans");
            Ok(None)
        }
    }
}

/// What `day`'s valid summary says of itself (read days, spans, newest
/// end), without reading its files: whether a sweep can use it.
pub fn peek(reader: &Reader, day: i32) -> Result<Option<(Vec<i32>, i64)>, SweepError> {
    Ok(valid_manifest(reader, day)?.map(|m| (m.read_days, m.horizon_ns)))
}

fn valid_manifest(reader: &Reader, day: i32) -> Result<Option<Manifest>, SweepError> {
    let m = match reader.summary(day) {
        Ok(Some(Ok(m))) => m,
        Ok(None | Some(Err(_))) => return Ok(None),
        // Unreadable is as good as absent: the day is read from its spans.
        Err(e) => {
            tracing::warn!(day = %day_to_string(day), error = %e, "a summary manifest could not be read; reading the day from its spans");
            return Ok(None);
        }
    };
    let SummaryManifest {
        version: Some(version),
        day: Some(named_day),
        parts,
        read_days: Some(read_days),
        spans: Some(spans),
        horizon_ns: Some(horizon_ns),
        files: Some(_),
        turns_by_service,
        ..
    } = m
    else {
        return Ok(None);
    };
    let days: Option<Vec<i32>> = read_days
        .iter()
        .map(|d| crate::model::day_from_str(d))
        .collect();
    let Some(days) = days else { return Ok(None) };
    // A summary read its own day, always.
    if version != VERSION || named_day != day_to_string(day) || !days.contains(&day) {
        return Ok(None);
    }
    // The days the read took spans from must hold the parts it names.
    let mut named: Vec<&str> = parts.iter().map(String::as_str).collect();
    named.sort_unstable();
    let mut now = reader.part_names(&days)?;
    now.sort_unstable();
    if now != named {
        return Ok(None);
    }
    Ok(Some(Manifest {
        read_days: days,
        spans,
        horizon_ns,
        turns_by_service: turns_by_service.unwrap_or_default(),
    }))
}

fn read_files(reader: &Reader, day: i32, m: Manifest) -> Result<Option<Summary>, SweepError> {
    let read = |name: &str| reader.summary_file(day, name).map_err(SweepError::Store);
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
                .into_iter()
                .map(|(service, n)| ((service, day), n))
                .collect(),
            models,
        },
        spans: m.spans,
        horizon_ns: m.horizon_ns,
        read_days: m.read_days,
    }))
}

/// Hand `day`'s summary, built from `parts`, to the store, which writes
/// it through an intent: a crash part-way leaves the old summary (or none)
/// or the new one, never a mix.
pub fn write(
    reader: &Reader,
    day: i32,
    summary: &Summary,
    parts: &[String],
) -> Result<(), SweepError> {
    let tc = &summary.calls;
    let frames = [
        calls_frame(&tc.calls),
        turns_frame(&tc.turns),
        tools_frame(tc, day),
        failing_frame(tc, day),
        models_frame(tc),
    ];
    let mut files = Vec::with_capacity(FILES.len());
    for (name, df) in FILES.into_iter().zip(frames) {
        files.push((name, df.map_err(data("building a day's summary"))?));
    }
    let manifest = SummaryManifest {
        version: Some(VERSION),
        day: Some(day_to_string(day)),
        parts: parts.to_vec(),
        read_days: Some(
            summary
                .read_days
                .iter()
                .map(|d| day_to_string(*d))
                .collect(),
        ),
        spans: Some(summary.spans),
        horizon_ns: Some(summary.horizon_ns),
        files: None,
        turns_by_service: Some(
            tc.turns_by_service
                .iter()
                .filter(|((_, d), _)| *d == day)
                .map(|((service, _), n)| (service.clone(), *n))
                .collect(),
        ),
        other: Default::default(),
    };
    // Written once, read every sweep: the fastest zstd level.
    let fast = polars::polars_utils::compression::ZstdLevel::try_new(1).ok();
    reader.write_summary(day, &mut files, ParquetCompression::Zstd(fast), manifest)?;
    Ok(())
}
