//! Reading each day's turns whole, each partition decoded once per sweep.
//! A day's turns are its spans; the day before's spans of the traces that
//! have no root on it (their turn may have begun then); and, for as long as
//! there are any, the next days' spans of the traces still running (or
//! rootless) at each midnight. Days are read in order, each partition
//! decoded into a [`SpanTable`] one part at a time and kept only while a
//! neighbour may still need it: two days of integer columns at a time, not
//! three decodes of every day.

use std::collections::{BTreeMap, HashMap, HashSet};

use polars::prelude::*;

use super::SweepError;
use crate::model::{day_to_string, NANOS_PER_DAY};
use crate::spans::{SpanTable, COLUMNS};
use crate::store::Reader;

type Fast = foldhash::fast::RandomState;

/// Turns are followed at most this many days past the day they began.
pub const FOLLOW_DAYS: i32 = 2;

/// A decoded partition.
struct Decoded {
    table: SpanTable,
    /// The parts it was decoded from (relative to the data directory), and
    /// the day's version taken before they were listed.
    parts: Vec<String>,
    version: u128,
    /// The earliest start the decode left out for being at or after `now`.
    held_back_ns: Option<i64>,
}

/// The partitions a sweep has decoded and may still need.
pub struct Window<'a> {
    reader: &'a Reader,
    now_ns: i64,
    days: BTreeMap<i32, Decoded>,
}

/// One day's turns, read whole; give them back with [`Window::done`].
pub struct DayTurns {
    pub day: i32,
    pub table: SpanTable,
    /// How many rows of `table` are the day's own.
    own_rows: usize,
    /// The days the read took spans from, in order.
    pub read_days: Vec<i32>,
    /// The parts of those days, as they were when read, and each day's
    /// version ([`part_hash`]) taken before its parts were listed.
    pub parts: Vec<String>,
    pub versions: Vec<(i32, u128)>,
    /// Whether following the day's traces stopped at `today` (a later
    /// sweep, with more days, may read further).
    pub capped: bool,
    /// The earliest span start left out for being at or after `now`.
    pub held_back_ns: Option<i64>,
}

impl<'a> Window<'a> {
    pub fn new(reader: &'a Reader, now_ns: i64) -> Window<'a> {
        Window {
            reader,
            now_ns,
            days: BTreeMap::new(),
        }
    }

    /// Decode `day`'s partition unless it is held.
    fn load(&mut self, day: i32) -> Result<&Decoded, SweepError> {
        if !self.days.contains_key(&day) {
            let decoded = decode(self.reader, day, self.now_ns)?;
            self.days.insert(day, decoded);
        }
        Ok(&self.days[&day])
    }

    /// Read `day`'s turns (`day` ≤ `today`), and forget partitions no
    /// later day can need. Days are asked for in ascending order.
    pub fn turns(&mut self, day: i32, today: i32) -> Result<DayTurns, SweepError> {
        // Partitions before the day before are no neighbour of this day or
        // of any later one.
        self.days.retain(|d, _| *d >= day - 1);
        let mut own = match self.days.remove(&day) {
            Some(d) => d,
            None => decode(self.reader, day, self.now_ns)?,
        };
        let base = own.table.len();
        let mut held_back = None;
        let mut read_days = Vec::new();
        let mut parts = Vec::new();
        let mut versions = Vec::new();
        let rootless = traces_reaching(&own.table, None);
        if !rootless.is_empty() {
            read_days.push(day - 1);
            let before = self.load(day - 1)?;
            parts.extend(before.parts.iter().cloned());
            versions.push((day - 1, before.version));
            let rows = rows_of(&before.table, &rootless);
            own.table.extend_from(&before.table, &rows);
        }
        // The day before is needed no more: the next day's own day before is this one.
        self.days.remove(&(day - 1));
        read_days.push(day);
        parts.extend(own.parts.iter().cloned());
        versions.push((day, own.version));
        let mut d = day + 1;
        let mut capped = false;
        while d <= day + FOLLOW_DAYS {
            let reaching = traces_reaching(&own.table, Some(i64::from(d) * NANOS_PER_DAY));
            if reaching.is_empty() {
                break;
            }
            if d > today {
                capped = true;
                break;
            }
            read_days.push(d);
            let next = self.load(d)?;
            parts.extend(next.parts.iter().cloned());
            versions.push((d, next.version));
            let rows = rows_of(&next.table, &reaching);
            // Read, even when it gives nothing: spans it held back count.
            held_back = min_opt(held_back, next.held_back_ns);
            if rows.is_empty() {
                break;
            }
            own.table.extend_from(&next.table, &rows);
            d += 1;
        }
        let held = own.held_back_ns;
        Ok(DayTurns {
            day,
            table: own.table,
            own_rows: base,
            read_days,
            parts,
            versions,
            capped,
            held_back_ns: min_opt(held_back, held),
        })
    }

    /// Keep a day's own rows for the next day's look back.
    pub fn done(&mut self, turns: DayTurns) {
        let mut table = turns.table;
        table.truncate(turns.own_rows);
        let own = turns
            .parts
            .into_iter()
            .filter(|p| p.starts_with(&format!("spans/date={}/", day_to_string(turns.day))))
            .collect();
        self.days.insert(
            turns.day,
            Decoded {
                table,
                parts: own,
                version: turns
                    .versions
                    .iter()
                    .find(|(d, _)| *d == turns.day)
                    .map_or(0, |(_, v)| *v),
                held_back_ns: None,
            },
        );
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Rows of `table` whose trace is in `traces`, in row order.
fn rows_of(table: &SpanTable, traces: &HashSet<u128, Fast>) -> Vec<usize> {
    (0..table.len())
        .filter(|&i| traces.contains(&table.trace[i]))
        .collect()
}

/// Traces of `table` whose turns may reach outside it: those with no root
/// in it (a parent still to be read) when `open_at` is `None`; else those
/// and the ones with a span still running at `open_at`.
fn traces_reaching(table: &SpanTable, open_at: Option<i64>) -> HashSet<u128, Fast> {
    // trace → (has a root here, latest end)
    let mut seen: HashMap<u128, (bool, i64), Fast> = HashMap::default();
    for i in 0..table.len() {
        let e = seen.entry(table.trace[i]).or_insert((false, i64::MIN));
        e.0 |= !table.has_parent[i];
        e.1 = e.1.max(table.end[i]);
    }
    seen.into_iter()
        .filter(|(_, (root, last))| match open_at {
            None => !root,
            Some(at) => !root || *last >= at,
        })
        .map(|(t, _)| t)
        .collect()
}

/// Decode the spans that started on `day` before `now_ns`, one part at a
/// time. The sweep's pin keeps every part it lists; a sweep in another
/// process than the store's that finds a part gone (it outlived the
/// store's grace) lists the day again, up to three times, then says why.
fn decode(reader: &Reader, day: i32, now_ns: i64) -> Result<Decoded, SweepError> {
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

fn decode_once(
    reader: &Reader,
    day: i32,
    from: i64,
    until: i64,
    now_ns: i64,
) -> Result<Decoded, SweepError> {
    let context = "reading a day's spans";
    let data = |e| SweepError::Data {
        context: context.to_string(),
        source: e,
    };
    let mut table = SpanTable::default();
    let mut held_back: Option<i64> = None;
    let columns: Vec<Expr> = COLUMNS.iter().map(|c| col(*c)).collect();
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
        let lf = lf.map_err(data)?;
        let in_day = col("start_ns")
            .gt_eq(lit(from))
            .and(col("start_ns").lt(lit(until)));
        // In two narrower frames (the ids, then the rest): each column is
        // decoded once, and half a part's Arrow columns are in memory at a time.
        let kept = in_day.clone().and(col("start_ns").lt(lit(now_ns)));
        let ids = lf
            .clone()
            .filter(kept.clone())
            .select(&columns[..3])
            .collect()
            .map_err(data)?;
        let rows = ids.height();
        table.append_ids(&ids).map_err(data)?;
        drop(ids);
        let rest = lf
            .clone()
            .filter(kept)
            .select(&columns[3..])
            .collect()
            .map_err(data)?;
        if rest.height() != rows {
            return Err(SweepError::Store(crate::store::StoreError::data(
                format!("reading {}", part.display()),
                format!(
                    "the part changed while it was read ({rows} then {} rows)",
                    rest.height()
                ),
            )));
        }
        table.append_rest(&rest).map_err(data)?;
        if until > now_ns {
            let later = lf
                .filter(in_day.and(col("start_ns").gt_eq(lit(now_ns))))
                .select([col("start_ns").min()])
                .collect()
                .map_err(data)?;
            let min = later
                .column("start_ns")
                .and_then(|c| c.i64().map(|c| c.get(0)))
                .map_err(data)?;
            held_back = min_opt(held_back, min);
        }
    }
    Ok(Decoded {
        table,
        parts,
        version,
        held_back_ns: held_back,
    })
}

/// A fingerprint of `day`'s parts: the store's day version (a hash of the
/// day's part manifest), not a `stat` of every part.
pub fn part_hash(reader: &Reader, day: i32) -> Result<u128, SweepError> {
    let v = reader.day_version(day)?;
    Ok(xxhash_rust::xxh3::xxh3_128(format!("{day} {v}").as_bytes()))
}
