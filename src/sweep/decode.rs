//! Decoding one day's partition into a [`SpanTable`], part by part, and
//! decoding one ahead of its need on a thread of its own ([`Ahead`]), so
//! that the next day's read runs beside this day's kernel.
//!
//! A part is read in two narrower frames (the ids with `start_ns`, then
//! the rest), each a plain projection: the rows to keep (started on the
//! day, before `now`) are picked from the `start_ns` the first frame
//! decoded, and a frame is filtered only when some row is left out (a
//! day's parts hold that day's spans, so a cold read filters nothing).
//! The earliest start left out for being at or after `now` comes from
//! the same column, not from a third scan.

use std::path::Path;

use polars::prelude::*;

use super::SweepError;
use crate::model::NANOS_PER_DAY;
use crate::spans::{SpanTable, COLUMNS};
use crate::store::Reader;

/// A decoded partition.
pub struct Decoded {
    pub table: SpanTable,
    /// The parts it was decoded from (relative to the data directory), and
    /// the day's version taken before they were listed.
    pub parts: Vec<String>,
    pub version: u128,
    /// The earliest start the decode left out for being at or after `now`.
    pub held_back_ns: Option<i64>,
}

/// A day's partition being decoded on a thread of its own.
pub struct Ahead {
    pub day: i32,
    handle: std::thread::JoinHandle<Result<Decoded, SweepError>>,
}

impl Ahead {
    /// Start decoding `day` (a reader is an `Arc`: the thread holds its
    /// own; the sweep's pin, held by the caller, outlives the thread, which
    /// is always joined: [`Ahead::join`], or on drop of the window).
    pub fn start(reader: &Reader, day: i32, now_ns: i64) -> Result<Ahead, SweepError> {
        let reader = reader.clone();
        let handle = std::thread::Builder::new()
            .name("sweep-decode".into())
            .spawn(move || decode(&reader, day, now_ns))
            .map_err(|e| {
                SweepError::Store(crate::store::StoreError::data(
                    "starting a thread to read a day's spans",
                    e.to_string(),
                ))
            })?;
        Ok(Ahead { day, handle })
    }

    /// The decoded partition (a panic in the thread resumes here).
    pub fn join(self) -> Result<Decoded, SweepError> {
        self.handle
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

pub fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Decode the spans that started on `day` before `now_ns`, one part at a
/// time. The sweep's pin keeps every part it lists; a sweep in another
/// process than the store's that finds a part gone (it outlived the
/// store's grace) lists the day again, up to three times, then says why.
pub fn decode(reader: &Reader, day: i32, now_ns: i64) -> Result<Decoded, SweepError> {
    let from = i64::from(day) * NANOS_PER_DAY;
    let until = from + NANOS_PER_DAY;
    let mut last = None;
    for _ in 0..3 {
        match decode_once(reader, day, from, until, now_ns) {
            Ok(d) => return Ok(d),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(SweepError::Data { context, source }) => {
            match crate::store::retire::gone_hint(&source, None) {
                Some(hint) => SweepError::Store(crate::store::StoreError::data(
                    context,
                    format!("{source} ({hint})"),
                )),
                None => SweepError::Data { context, source },
            }
        }
        Some(e) => e,
        None => SweepError::Store(crate::store::StoreError::Closed),
    })
}

fn data(e: PolarsError) -> SweepError {
    SweepError::Data {
        context: "reading a day's spans".to_string(),
        source: e,
    }
}

fn decode_once(
    reader: &Reader,
    day: i32,
    from: i64,
    until: i64,
    now_ns: i64,
) -> Result<Decoded, SweepError> {
    let mut table = SpanTable::default();
    let mut held_back: Option<i64> = None;
    let version = part_hash(reader, day)?;
    let listed = reader.day_parts(day)?;
    let parts = listed.names().to_vec();
    // Sized once from the footers, with a little room for the rows of
    // neighbouring days a read adds.
    if !listed.is_empty() {
        let rows = listed
            .scan_all()
            .and_then(|lf| lf.select([len()]).collect())
            .map_err(data)?;
        let rows = rows
            .column("len")
            .ok()
            .and_then(|c| c.get(0).ok())
            .and_then(|v| v.extract::<usize>())
            .unwrap_or(0);
        table.reserve_exact(rows + rows / 64 + 1024);
    }
    for (part, lf) in listed.each() {
        let later = read_part_into(&mut table, part, lf.map_err(data)?, (from, until), now_ns)?;
        held_back = min_opt(held_back, later);
    }
    Ok(Decoded {
        table,
        parts,
        version,
        held_back_ns: held_back,
    })
}

/// Append to `table` the spans of one part (`lf`; `part` names it in
/// messages) that started in `from..until` and before `now_ns`; the
/// earliest start in that range at or after `now_ns` (left out, held back
/// for a later read).
pub fn read_part_into(
    table: &mut SpanTable,
    part: &Path,
    lf: LazyFrame,
    (from, until): (i64, i64),
    now_ns: i64,
) -> Result<Option<i64>, SweepError> {
    // The ids and the start (to pick the rows by), then the rest.
    let first: Vec<Expr> = COLUMNS[..3]
        .iter()
        .chain(std::iter::once(&"start_ns"))
        .map(|c| col(*c))
        .collect();
    let rest: Vec<Expr> = COLUMNS[3..].iter().map(|c| col(*c)).collect();
    let ids = lf.clone().select(&first).collect().map_err(data)?;
    let rows = ids.height();
    let (keep, later) = pick(ids.column("start_ns").map_err(data)?, from, until, now_ns)?;
    let ids = match &keep {
        Some(mask) => ids.filter(mask).map_err(data)?,
        None => ids,
    };
    table.append_ids(&ids).map_err(data)?;
    drop(ids);
    let other = lf.select(&rest).collect().map_err(data)?;
    if other.height() != rows {
        return Err(SweepError::Store(crate::store::StoreError::data(
            format!("reading {}", part.display()),
            format!(
                "the part changed while it was read ({rows} then {} rows)",
                other.height()
            ),
        )));
    }
    let other = match &keep {
        Some(mask) => other.filter(mask).map_err(data)?,
        None => other,
    };
    table.append_rest(&other).map_err(data)?;
    Ok(later)
}

/// The rows of a part to keep, by their start: `None` when all are (no
/// filter needed), else the mask; and the earliest start on the day at or
/// after `now_ns` (left out). A null start is left out, as a filter on it
/// would.
fn pick(
    start: &Column,
    from: i64,
    until: i64,
    now_ns: i64,
) -> Result<(Option<BooleanChunked>, Option<i64>), SweepError> {
    let start = start.i64().map_err(data)?;
    let end = until.min(now_ns);
    let mut later: Option<i64> = None;
    let mut all = start.null_count() == 0;
    for s in start.iter() {
        match s {
            Some(s) if s >= from && s < end => {}
            Some(s) => {
                all = false;
                if s >= now_ns && s >= from && s < until {
                    later = min_opt(later, Some(s));
                }
            }
            None => all = false,
        }
    }
    if all {
        return Ok((None, later));
    }
    let mask: BooleanChunked = start
        .iter()
        .map(|s| Some(s.is_some_and(|s| s >= from && s < end)))
        .collect();
    Ok((Some(mask), later))
}

/// A fingerprint of `day`'s parts: the store's day version (a hash of the
/// day's part manifest), not a `stat` of every part.
pub fn part_hash(reader: &Reader, day: i32) -> Result<u128, SweepError> {
    let v = reader.day_version(day)?;
    Ok(xxhash_rust::xxh3::xxh3_128(format!("{day} {v}").as_bytes()))
}
