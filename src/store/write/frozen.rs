//! A memtable handed to the flusher. Its span keys stay visible to dedup
//! until its parts are committed; its day batches become polars frames on
//! the flusher's first attempt (the strings move into the frames, not
//! copied) and the frames are kept for a retry.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use polars::prelude::*;

use crate::ingest::SpanBatch;
use crate::model::SpanKey;
use crate::store::format::frame;
use crate::store::write::memtable::Memtable;

/// A frozen memtable.
pub struct Frozen {
    /// Each day's span keys, for dedup while the parts are written.
    keys: BTreeMap<i32, Vec<SpanKey>>,
    spans: Mutex<Spans>,
    /// The memtable's bytes when it froze (its frames take about as much).
    pub bytes: usize,
    /// WAL segments whose records are all in this table or already in Parquet.
    pub wal_upto: u64,
}

/// The spans of each day, as batches until the first flush attempt.
enum Spans {
    Batches(BTreeMap<i32, SpanBatch>),
    Frames(BTreeMap<i32, DataFrame>),
    /// A batch would not become a frame: no attempt may commit (the WAL
    /// keeps the spans for the next start).
    Broken(String),
}

impl Frozen {
    pub fn new(table: Memtable, wal_upto: u64) -> Frozen {
        let keys = table
            .days
            .iter()
            .map(|(&day, b)| (day, (0..b.len()).map(|i| b.key(i)).collect()))
            .collect();
        Frozen {
            keys,
            bytes: table.bytes,
            spans: Mutex::new(Spans::Batches(table.days)),
            wal_upto,
        }
    }

    /// The days it holds spans of, in order.
    pub fn days(&self) -> Vec<i32> {
        self.keys.keys().copied().collect()
    }

    /// The keys of `day`'s spans.
    pub fn keys(&self, day: i32) -> &[SpanKey] {
        self.keys.get(&day).map_or(&[], Vec::as_slice)
    }

    /// Each day's frame, built from the batches the first time.
    pub fn frames(&self) -> PolarsResult<FramesGuard<'_>> {
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        if let Spans::Batches(days) = &mut *spans {
            let built: PolarsResult<BTreeMap<i32, DataFrame>> = std::mem::take(days)
                .into_iter()
                .map(|(day, batch)| Ok((day, frame::batch_into_frame(batch)?)))
                .collect();
            *spans = match built {
                Ok(frames) => Spans::Frames(frames),
                Err(e) => Spans::Broken(e.to_string()),
            };
        }
        if let Spans::Broken(e) = &*spans {
            polars_bail!(ComputeError: "the frozen spans could not become frames: {e}");
        }
        Ok(FramesGuard(spans))
    }
}

/// The frames of a frozen table, locked.
pub struct FramesGuard<'a>(MutexGuard<'a, Spans>);

impl FramesGuard<'_> {
    /// (day, frame) in day order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (i32, &mut DataFrame)> {
        let frames = match &mut *self.0 {
            Spans::Frames(f) => Some(f),
            Spans::Batches(_) | Spans::Broken(_) => None,
        };
        frames
            .into_iter()
            .flat_map(|f| f.iter_mut().map(|(d, df)| (*d, df)))
    }
}
