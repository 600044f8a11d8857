//! Reading each day's turns whole, each partition decoded once per sweep.
//! A day's turns are its spans; the day before's spans of the traces that
//! have no root on it (their turn may have begun then); and, for as long as
//! there are any, the next days' spans of the traces still running (or
//! rootless) at each midnight. Days are read in order, each partition
//! decoded into a [`SpanTable`] one part at a time and kept only while a
//! neighbour may still need it: two days of integer columns at a time, not
//! three decodes of every day. Given the days a sweep will ask for
//! ([`Window::plan`]), the window decodes the partition the next day's read
//! will need first on a thread of its own while the caller runs this day's
//! kernel ([`Ahead`]): one partition more in memory, both cores busy.

use std::collections::{BTreeMap, HashMap, HashSet};

pub use super::decode::part_hash;
use super::decode::{decode, min_opt, Ahead, Decoded};
use super::SweepError;
use crate::model::{day_to_string, NANOS_PER_DAY};
use crate::spans::SpanTable;
use crate::store::Reader;

type Fast = foldhash::fast::RandomState;

/// Turns are followed at most this many days past the day they began.
pub const FOLLOW_DAYS: i32 = 2;

/// The partitions a sweep has decoded and may still need.
pub struct Window<'a> {
    reader: &'a Reader,
    now_ns: i64,
    days: BTreeMap<i32, Decoded>,
    /// The days the sweep will ask for, ascending: what to decode ahead.
    planned: Vec<i32>,
    ahead: Option<Ahead>,
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

impl Drop for Window<'_> {
    /// A decode still running ahead is waited for (its result dropped): no
    /// thread reads the store past the sweep that started it.
    fn drop(&mut self) {
        if let Some(a) = self.ahead.take() {
            let _ = a.join();
        }
    }
}

impl<'a> Window<'a> {
    pub fn new(reader: &'a Reader, now_ns: i64) -> Window<'a> {
        Window {
            reader,
            now_ns,
            days: BTreeMap::new(),
            planned: Vec::new(),
            ahead: None,
        }
    }

    /// The days [`turns`](Self::turns) will be asked for, in order; without
    /// a plan nothing is decoded ahead.
    pub fn plan(&mut self, days: &[i32]) {
        self.planned = days.to_vec();
    }

    /// `day`'s partition, taken out of the window: held, decoded ahead, or
    /// decoded now.
    fn take(&mut self, day: i32) -> Result<Decoded, SweepError> {
        if let Some(d) = self.days.remove(&day) {
            return Ok(d);
        }
        if self.ahead.as_ref().is_some_and(|a| a.day == day) {
            if let Some(a) = self.ahead.take() {
                return a.join();
            }
        }
        decode(self.reader, day, self.now_ns)
    }

    /// Decode `day`'s partition unless it is held.
    fn load(&mut self, day: i32) -> Result<&Decoded, SweepError> {
        if !self.days.contains_key(&day) {
            let decoded = self.take(day)?;
            self.days.insert(day, decoded);
        }
        Ok(&self.days[&day])
    }

    /// Start decoding, on a thread of its own, the partition the read of
    /// the planned day after `day` will need first and the window does not
    /// hold: that day's own, else the one after it (its turns' next
    /// midnight), never past `today`. One at a time.
    fn decode_ahead(&mut self, day: i32, today: i32) -> Result<(), SweepError> {
        let Some(&next) = self.planned.iter().find(|&&d| d > day) else {
            return Ok(());
        };
        let wanted = [next, next + 1]
            .into_iter()
            .find(|d| *d <= today && !self.days.contains_key(d));
        match (&self.ahead, wanted) {
            (Some(a), Some(w)) if a.day == w => return Ok(()),
            (_, None) => return Ok(()),
            _ => {}
        }
        // One decoding at a time: one ahead for another day is no longer wanted.
        if let Some(a) = self.ahead.take() {
            let _ = a.join();
        }
        if let Some(w) = wanted {
            self.ahead = Some(Ahead::start(self.reader, w, self.now_ns)?);
        }
        Ok(())
    }

    /// Read `day`'s turns (`day` ≤ `today`), and forget partitions no
    /// later day can need. Days are asked for in ascending order.
    pub fn turns(&mut self, day: i32, today: i32) -> Result<DayTurns, SweepError> {
        // Partitions before the day before are no neighbour of this day or
        // of any later one.
        self.days.retain(|d, _| *d >= day - 1);
        let mut own = self.take(day)?;
        let base = own.table.len();
        let mut held_back = None;
        let mut read_days = Vec::new();
        let mut parts = Vec::new();
        let mut versions = Vec::new();
        let mut reach = Reach::of(&own.table);
        let rootless = reach.traces(None);
        if !rootless.is_empty() {
            read_days.push(day - 1);
            let before = self.load(day - 1)?;
            parts.extend(before.parts.iter().cloned());
            versions.push((day - 1, before.version));
            let rows = rows_of(&before.table, &rootless);
            own.table.extend_from(&before.table, &rows);
            reach.add(&own.table, base);
        }
        // The day before is needed no more: the next day's own day before is this one.
        self.days.remove(&(day - 1));
        read_days.push(day);
        parts.extend(own.parts.iter().cloned());
        versions.push((day, own.version));
        let mut d = day + 1;
        let mut capped = false;
        while d <= day + FOLLOW_DAYS {
            let reaching = reach.traces(Some(i64::from(d) * NANOS_PER_DAY));
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
            let from = own.table.len();
            own.table.extend_from(&next.table, &rows);
            reach.add(&own.table, from);
            d += 1;
        }
        self.decode_ahead(day, today)?;
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

/// Rows of `table` whose trace is in `traces`, in row order.
fn rows_of(table: &SpanTable, traces: &HashSet<u128, Fast>) -> Vec<usize> {
    (0..table.len())
        .filter(|&i| traces.contains(&table.trace[i]))
        .collect()
}

/// Per trace of a day's read, whether it has a root and its latest end:
/// which traces' turns may reach outside what was read, kept up to date as
/// rows are added rather than recounted over the whole table each time.
struct Reach(HashMap<u128, (bool, i64), Fast>);

impl Reach {
    fn of(table: &SpanTable) -> Reach {
        let mut r = Reach(HashMap::default());
        r.add(table, 0);
        r
    }

    /// Take in the rows of `table` from `from` on.
    fn add(&mut self, table: &SpanTable, from: usize) {
        for i in from..table.len() {
            let e = self.0.entry(table.trace[i]).or_insert((false, i64::MIN));
            e.0 |= !table.has_parent[i];
            e.1 = e.1.max(table.end[i]);
        }
    }

    /// Those with no root in the rows taken in (a parent still to be read)
    /// when `open_at` is `None`; else those and the ones with a span still
    /// running at `open_at`.
    fn traces(&self, open_at: Option<i64>) -> HashSet<u128, Fast> {
        self.0
            .iter()
            .filter(|(_, (root, last))| match open_at {
                None => !root,
                Some(at) => !root || *last >= at,
            })
            .map(|(t, _)| *t)
            .collect()
    }
}
