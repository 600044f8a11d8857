//! Acknowledged rows not yet in Parquet, by day, and the set of span keys
//! already stored (so a redelivered span is stored once).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::model::{SpanKey, SpanRow};

/// Rows waiting for the next flush.
#[derive(Default)]
pub struct Memtable {
    pub days: BTreeMap<i32, Vec<SpanRow>>,
    pub rows: usize,
    pub bytes: usize,
}

/// A rough size of a row in memory, for the flush and memory bounds.
pub fn row_bytes(r: &SpanRow) -> usize {
    // Each heap string costs its bytes plus the allocator's rounding and
    // bookkeeping; measured RSS per row came to about this with 32 a string.
    const PER_STRING: usize = 32;
    let s = |v: &String| v.len() + PER_STRING;
    let o = |v: &Option<String>| v.as_ref().map_or(0, s);
    std::mem::size_of::<SpanRow>()
        + s(&r.trace_id)
        + s(&r.span_id)
        + o(&r.parent_span_id)
        + s(&r.name)
        + o(&r.status_message)
        + o(&r.tool_name)
        + o(&r.tool_call_id)
        + o(&r.tool_args_hash)
        + o(&r.tool_result_hash)
        + o(&r.session_id)
        + o(&r.turn_id)
        + o(&r.agent_call_id)
        + o(&r.error_type)
        + s(&r.attributes)
        + s(&r.events)
}

impl Memtable {
    pub fn push(&mut self, row: SpanRow) {
        self.rows += 1;
        self.bytes += row_bytes(&row);
        self.days.entry(row.day()).or_default().push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn take(&mut self) -> Memtable {
        std::mem::take(self)
    }
}

/// A memtable handed to the flusher: its rows stay visible to dedup until
/// their parts are committed.
pub struct Frozen {
    pub table: Memtable,
    /// WAL segments whose records are all in this table or already in Parquet.
    pub wal_upto: u64,
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

    /// Record a key of a loaded day; false when it was already stored.
    pub fn insert(&mut self, day: i32, key: SpanKey) -> bool {
        if let Some(pos) = self.order.iter().position(|d| *d == day) {
            if pos + 1 != self.order.len() {
                let d = self.order.remove(pos);
                self.order.push(d);
            }
        }
        self.days.entry(day).or_default().insert(key)
    }
}

/// A set of span keys, hashed with foldhash (fast, randomly seeded per set).
pub type KeySet = HashSet<SpanKey, foldhash::fast::RandomState>;

/// Keys of one day held in memory (memtable and frozen table).
pub fn memory_keys(day: i32, table: &Memtable, frozen: Option<&Arc<Frozen>>) -> KeySet {
    let rows = table.days.get(&day).into_iter().flatten().chain(
        frozen
            .and_then(|f| f.table.days.get(&day))
            .into_iter()
            .flatten(),
    );
    rows.filter_map(SpanRow::key).collect()
}
