//! The day before today, as today's read needs it: which traces it holds,
//! and the spans of those of them that have no root today (their turn may
//! have begun yesterday), read on demand rather than kept whole.

use std::collections::{HashMap, HashSet};

use polars::prelude::*;

use super::super::window::part_hash;
use super::super::SweepError;
use crate::model::NANOS_PER_DAY;
use crate::spans::{SpanTable, COLUMNS};
use crate::store::Reader;

type Fast = foldhash::fast::RandomState;

/// The day before's traces, and the spans pulled of some of them.
pub(super) struct Before {
    pub day: i32,
    /// The day's version when its traces were listed.
    pub version: u128,
    traces: HashSet<u128, Fast>,
    /// Spans of the traces asked for, and their rows by trace.
    pub pulled: SpanTable,
    rows: HashMap<u128, Vec<usize>, Fast>,
}

impl Before {
    /// The traces of `day` (read again when its version changed: `true`).
    pub fn load(reader: &Reader, day: i32, now: i64) -> Result<Before, SweepError> {
        let version = part_hash(reader, day)?;
        let listed = reader.day_parts(day)?;
        let mut before = Before {
            day,
            version,
            traces: HashSet::default(),
            pulled: SpanTable::default(),
            rows: HashMap::default(),
        };
        if listed.is_empty() {
            return Ok(before);
        }
        let data = |e| SweepError::Data {
            context: "reading the day before's traces".into(),
            source: e,
        };
        let ids = listed
            .scan_all()
            .and_then(|lf| {
                lf.filter(in_day(day, now))
                    .select(COLUMNS[..3].iter().map(|c| col(*c)).collect::<Vec<_>>())
                    .collect()
            })
            .map_err(data)?;
        let mut t = SpanTable::default();
        t.append_ids(&ids).map_err(data)?;
        before.traces = t.trace.iter().copied().collect();
        Ok(before)
    }

    /// Whether the day before holds spans of `trace`.
    pub fn holds(&self, trace: u128) -> bool {
        self.traces.contains(&trace)
    }

    /// The rows of `pulled` of `trace` (pulled by [`Before::pull`]).
    pub fn rows(&self, trace: u128) -> &[usize] {
        self.rows.get(&trace).map_or(&[], Vec::as_slice)
    }

    /// Read the spans of those of `traces` it holds and has not pulled;
    /// `strings` gives a trace's id as stored.
    pub fn pull(
        &mut self,
        reader: &Reader,
        now: i64,
        traces: &[(u128, String)],
    ) -> Result<(), SweepError> {
        let wanted: Vec<&(u128, String)> = traces
            .iter()
            .filter(|(t, _)| self.holds(*t) && !self.rows.contains_key(t))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let ids = wanted.iter().map(|(_, s)| s.as_str());
        let context = "reading the day before's spans of today's traces";
        let pulled = super::spans_of(reader, (self.day, now), ids, None, context)?;
        let at = self.pulled.len();
        self.pulled.extend_range(&pulled, 0..pulled.len());
        for (t, _) in &wanted {
            self.rows.entry(*t).or_default();
        }
        for r in at..self.pulled.len() {
            self.rows.entry(self.pulled.trace[r]).or_default().push(r);
        }
        Ok(())
    }
}

/// Spans that started on `day` before `now`.
fn in_day(day: i32, now: i64) -> Expr {
    let from = i64::from(day) * NANOS_PER_DAY;
    col("start_ns")
        .gt_eq(lit(from))
        .and(col("start_ns").lt(lit((from + NANOS_PER_DAY).min(now))))
}
