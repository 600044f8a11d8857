//! Acknowledged spans not yet in Parquet, as one columnar [`SpanBatch`] per
//! day, and the set of span keys already stored (so a redelivered span is
//! stored once).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::ingest::batch::Shape;
use crate::ingest::SpanBatch;
use crate::store::write::frozen::Frozen;

/// Spans waiting for the next flush.
#[derive(Default)]
pub struct Memtable {
    pub days: BTreeMap<i32, SpanBatch>,
    pub rows: usize,
    /// Bytes the day batches have allocated.
    pub bytes: usize,
    /// The size of each day's batch in the table taken last: a day's new
    /// batch is reserved like it (within [`Memtable::take`]'s bound), so
    /// under steady traffic its columns are not moved over and over as they
    /// grow (each move copies them to freshly faulted pages).
    shapes: BTreeMap<i32, Shape>,
}

impl Memtable {
    /// Append the spans at `rows` (ascending) of `batch`, all of `day`.
    pub fn append(&mut self, day: i32, batch: &SpanBatch, rows: &[u32]) {
        if rows.is_empty() {
            return;
        }
        let shapes = &mut self.shapes;
        let table = self.days.entry(day).or_insert_with(|| {
            let mut b = SpanBatch::default();
            if let Some(shape) = shapes.remove(&day) {
                b.reserve_shape(&shape);
            }
            b
        });
        let before = table.mem_bytes();
        table.extend_from(batch, rows);
        self.bytes = self.bytes - before + table.mem_bytes();
        self.rows += rows.len();
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The table, leaving an empty one that reserves each day's batch like
    /// the one taken, scaled down to `reserve_bytes` in all.
    pub fn take(&mut self, reserve_bytes: usize) -> Memtable {
        let mut taken = std::mem::take(self);
        // A sixteenth more: the next table tends to overshoot its trigger
        // by a group, as this one did.
        let shapes: Vec<(i32, Shape)> = taken
            .days
            .iter()
            .map(|(&d, b)| (d, b.shape().scaled(17, 16)))
            .collect();
        let total: usize = shapes.iter().map(|(_, s)| s.bytes()).sum();
        self.shapes = shapes
            .into_iter()
            .map(|(d, s)| {
                if total > reserve_bytes {
                    (d, s.scaled(reserve_bytes, total))
                } else {
                    (d, s)
                }
            })
            .collect();
        taken.shapes.clear();
        taken
    }
}

/// Span keys already stored, per day, loaded lazily from the day's parts the
/// first time a row of that day arrives, and bounded by a number of days.
pub struct Seen {
    days: HashMap<i32, KeySet>,
    order: Vec<i32>,
    max_days: usize,
}

impl Seen {
    pub fn new(max_days: usize) -> Seen {
        Seen {
            days: HashMap::new(),
            order: Vec::new(),
            max_days: max_days.max(1),
        }
    }

    pub fn is_loaded(&self, day: i32) -> bool {
        self.days.contains_key(&day)
    }

    /// Install the keys of a day (from its parts, the frozen table and the
    /// memtable), evicting the least recently used days not in `in_use`.
    pub fn load(&mut self, day: i32, keys: KeySet, in_use: &std::collections::BTreeSet<i32>) {
        while self.order.len() >= self.max_days {
            let Some(pos) = self.order.iter().position(|d| !in_use.contains(d)) else {
                break;
            };
            let evict = self.order.remove(pos);
            self.days.remove(&evict);
        }
        self.order.push(day);
        self.days.insert(day, keys);
    }

    /// The keys of a loaded day, to record new ones in (the day becomes
    /// the most recently used).
    pub fn day_mut(&mut self, day: i32) -> &mut KeySet {
        if let Some(pos) = self.order.iter().position(|d| *d == day) {
            if pos + 1 != self.order.len() {
                let d = self.order.remove(pos);
                self.order.push(d);
            }
        }
        self.days.entry(day).or_default()
    }
}

pub use crate::store::format::frame::KeySet;

/// Keys of one day held in memory (memtable and frozen table).
pub fn memory_keys(day: i32, table: &Memtable, frozen: Option<&Arc<Frozen>>) -> KeySet {
    let mut keys: KeySet = table
        .days
        .get(&day)
        .into_iter()
        .flat_map(|b| (0..b.len()).map(|i| b.key(i)))
        .collect();
    keys.extend(frozen.map_or(&[][..], |f| f.keys(day)).iter().copied());
    keys
}
