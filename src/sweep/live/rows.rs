//! A day's spans kept decoded between sweeps: only the parts that are new
//! since the last sweep are read; of a compaction's merged part, only the
//! spans that were not read from the parts it replaced are kept. A change
//! that takes spans away (parts removed that no merged part holds) makes
//! the caller read the day again.

use std::collections::{BTreeMap, HashMap};

use super::super::decode;
use super::super::window::part_hash;
use super::super::SweepError;
use crate::model::NANOS_PER_DAY;
use crate::spans::SpanTable;
use crate::store::{DayParts, Reader};

/// A span's (trace, span) key, in 24 bytes (a `u128` would align it to 32).
type Key = (u64, u64, u64);

fn key(table: &SpanTable, r: usize) -> Key {
    let t = table.trace[r];
    ((t >> 64) as u64, t as u64, table.span[r])
}

/// What was read of one part.
#[derive(Debug, Clone)]
struct Seen {
    /// The keys of the spans read from it (a merged part: those of the
    /// parts it replaced, then its own): kept apart from the table, whose
    /// settled rows may be let go.
    keys: Vec<Key>,
    /// Its spans of the day that started before this were read.
    read_until_ns: i64,
    /// The earliest start of the day it holds at or after `read_until_ns`.
    held_back_ns: Option<i64>,
}

/// A day's spans that started before the latest `now`, in the order read
/// (less those let go, [`DayRows::keep`]).
pub(super) struct DayRows {
    pub day: i32,
    pub table: SpanTable,
    seen: BTreeMap<String, Seen>,
    /// The day's version ([`part_hash`]) taken before its parts were listed.
    pub version: u128,
}

/// Why kept rows cannot be brought up to date by reading new parts alone.
pub(super) struct Stale(pub String);

type Fast = foldhash::fast::RandomState;

impl DayRows {
    pub fn new(day: i32) -> DayRows {
        DayRows {
            day,
            table: SpanTable::default(),
            seen: BTreeMap::new(),
            version: 0,
        }
    }

    /// How many span keys it knows (rows read, kept or let go).
    pub fn keys(&self) -> usize {
        self.seen.values().map(|s| s.keys.len()).sum()
    }

    /// The earliest start of the day left out for being at or after `now`.
    pub fn held_back_ns(&self) -> Option<i64> {
        self.seen.values().filter_map(|s| s.held_back_ns).min()
    }

    /// Read what is new as of `now`: the parts not read yet (of a merged
    /// part, the spans not read from the parts it replaced), and the spans
    /// of parts read that were left out for starting after the last `now`.
    /// Rows are only appended; the first new row's index.
    pub fn refresh(
        &mut self,
        reader: &Reader,
        now: i64,
    ) -> Result<Result<usize, Stale>, SweepError> {
        let first_new = self.table.len();
        let version = part_hash(reader, self.day)?;
        let listed = reader.day_parts(self.day)?;
        let names: Vec<String> = listed.names().to_vec();
        let position: HashMap<&str, usize, Fast> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let removed: Vec<String> = self
            .seen
            .keys()
            .filter(|k| !position.contains_key(k.as_str()))
            .cloned()
            .collect();
        let range = (
            i64::from(self.day) * NANOS_PER_DAY,
            i64::from(self.day + 1) * NANOS_PER_DAY,
        );
        // The spans of the parts replaced, to be found in the merged parts.
        let mut replaced: HashMap<Key, usize, Fast> = HashMap::default();
        let mut inherited = Vec::new();
        for k in &removed {
            let s = self.seen.remove(k).expect("listed above");
            for &k in &s.keys {
                *replaced.entry(k).or_insert(0) += 1;
            }
            inherited.extend(s.keys);
        }
        for (i, name) in names.iter().enumerate() {
            if self.seen.contains_key(name) {
                continue;
            }
            let merged = !removed.is_empty() && is_rewrite(name);
            let part = read_part(&listed, i, range, now)?;
            let at = self.table.len();
            if merged {
                let rows: Vec<usize> = (0..part.table.len())
                    .filter(|&r| match replaced.get_mut(&key(&part.table, r)) {
                        Some(n) if *n > 0 => {
                            *n -= 1;
                            false
                        }
                        _ => true,
                    })
                    .collect();
                self.table.extend_from(&part.table, &rows);
            } else {
                self.table.extend_range(&part.table, 0..part.table.len());
            }
            let mut keys = if merged {
                std::mem::take(&mut inherited)
            } else {
                Vec::new()
            };
            keys.extend((at..self.table.len()).map(|r| key(&self.table, r)));
            keys.shrink_to_fit();
            self.seen.insert(
                name.clone(),
                Seen {
                    keys,
                    read_until_ns: now,
                    held_back_ns: part.held_back_ns,
                },
            );
        }
        if let Some(missing) = replaced
            .values()
            .copied()
            .filter(|n| *n > 0)
            .reduce(|a, b| a + b)
        {
            return Ok(Err(Stale(format!(
                "{missing} spans read from parts since replaced are in no part that replaced them"
            ))));
        }
        if !inherited.is_empty() {
            return Ok(Err(Stale(
                "parts read were removed, and no merged part holds them".into(),
            )));
        }
        // Spans held back for starting after an earlier `now`, now due.
        let due: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, s)| s.held_back_ns.is_some_and(|h| h < now))
            .map(|(k, _)| k.clone())
            .collect();
        for name in due {
            let i = position[name.as_str()];
            let from = self.seen[&name].read_until_ns.max(range.0);
            let part = read_part(&listed, i, (from, range.1), now)?;
            let at = self.table.len();
            self.table.extend_range(&part.table, 0..part.table.len());
            let s = self.seen.get_mut(&name).expect("listed above");
            s.keys
                .extend((at..self.table.len()).map(|r| key(&self.table, r)));
            s.read_until_ns = now;
            s.held_back_ns = part.held_back_ns;
        }
        self.version = version;
        Ok(Ok(first_new))
    }
}

impl DayRows {
    /// Keep only `rows` of the table, in that order (row `rows[i]` becomes
    /// row `i`): the rest are let go, their keys still known to
    /// [`DayRows::refresh`].
    pub fn keep(&mut self, rows: &[usize]) {
        let mut table = SpanTable::default();
        table.extend_from(&self.table, rows);
        self.table = table;
    }

    /// Read again the spans of `traces` (let go before) that the day's
    /// parts hold and the table does not; the first new row's index.
    pub fn pull(
        &mut self,
        reader: &Reader,
        now: i64,
        traces: &[(u128, String)],
    ) -> Result<usize, SweepError> {
        let first_new = self.table.len();
        if traces.is_empty() {
            return Ok(first_new);
        }
        // Only the parts that held them (by the keys read from each).
        let wanted: std::collections::HashSet<u128, Fast> =
            traces.iter().map(|(t, _)| *t).collect();
        let holding: std::collections::HashSet<&str> = self
            .seen
            .iter()
            .filter(|(_, s)| {
                s.keys
                    .iter()
                    .any(|k| wanted.contains(&((u128::from(k.0) << 64) | u128::from(k.1))))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        let ids = traces.iter().map(|(_, s)| s.as_str());
        let context = "reading again today's spans of traces that got more";
        let pulled = super::spans_of(reader, (self.day, now), ids, Some(&holding), context)?;
        // Those already in the table (the new spans that woke them, told
        // by key and times) stay once.
        let mut present: HashMap<(Key, u64), usize, Fast> = HashMap::default();
        for r in 0..self.table.len() {
            if wanted.contains(&self.table.trace[r]) {
                *present
                    .entry((key(&self.table, r), row_sum(&self.table, r)))
                    .or_insert(0) += 1;
            }
        }
        let rows: Vec<usize> = (0..pulled.len())
            .filter(
                |&r| match present.get_mut(&(key(&pulled, r), row_sum(&pulled, r))) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        false
                    }
                    _ => true,
                },
            )
            .collect();
        self.table.extend_from(&pulled, &rows);
        Ok(first_new)
    }
}

/// What one read of a part gave.
struct PartRead {
    table: SpanTable,
    held_back_ns: Option<i64>,
}

/// Part `i`'s spans that started in `from..until` and before `now`, and
/// the earliest start in that range at or after `now` (as a whole read
/// takes them: [`decode::read_part_into`]).
fn read_part(
    listed: &DayParts,
    i: usize,
    range: (i64, i64),
    now: i64,
) -> Result<PartRead, SweepError> {
    let Some((path, lf)) = listed.part(i) else {
        return Err(SweepError::Store(crate::store::StoreError::data(
            "reading today's new spans",
            "a part listed was not found in the listing",
        )));
    };
    let lf = lf.map_err(|e| SweepError::Data {
        context: format!("reading {}", path.display()),
        source: e,
    })?;
    let mut table = SpanTable::default();
    let held_back_ns = decode::read_part_into(&mut table, path, lf, range, now)?;
    Ok(PartRead {
        table,
        held_back_ns,
    })
}

/// A part that holds only spans of the parts it replaced: a compaction's
/// merged part, or a seal's output.
fn is_rewrite(name: &str) -> bool {
    name.ends_with("-c.parquet") || crate::store::layout::is_seal_output(std::path::Path::new(name))
}

/// A hash of row `r`'s key and times, summed over a trace's rows (in any
/// order) to tell whether the spans read again are those let go.
pub(super) fn row_sum(table: &SpanTable, r: usize) -> u64 {
    let mut b = [0u8; 56];
    b[..16].copy_from_slice(&table.trace[r].to_le_bytes());
    b[16..24].copy_from_slice(&table.span[r].to_le_bytes());
    b[24..32].copy_from_slice(&table.parent[r].to_le_bytes());
    b[32..40].copy_from_slice(&table.start[r].to_le_bytes());
    b[40..48].copy_from_slice(&table.end[r].to_le_bytes());
    b[48..56].copy_from_slice(&table.retry_after[r].to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&b)
}
