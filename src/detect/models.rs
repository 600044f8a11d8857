//! The model round trips of the turns the per-turn rules keep (model
//! spans, docs/detection.md §1), from a [`SpanTable`]: what the driver rule
//! ([`super::driver`]) looks for between a chain's attempts.

use std::collections::{BTreeMap, HashMap};

use super::driver::ModelCall;
use crate::store::table::SpanTable;

/// Per turn id, the model calls of the turns in `ids` (turn number → id),
/// in start order; `turn_of` gives each row's turn number.
pub fn of_turns<S: std::hash::BuildHasher>(
    t: &SpanTable,
    turn_of: &[u32],
    ids: &HashMap<u32, String, S>,
) -> BTreeMap<String, Vec<ModelCall>> {
    let mut out: BTreeMap<String, Vec<ModelCall>> = BTreeMap::new();
    if t.usage.is_empty() {
        return out;
    }
    let mut rows: Vec<usize> = t.usage.keys().copied().collect();
    rows.sort_unstable_by_key(|&i| (t.start[i], t.end[i], i));
    for i in rows {
        let Some(turn) = ids.get(&turn_of[i]) else {
            continue;
        };
        let u = t.usage[&i];
        out.entry(turn.clone()).or_default().push(ModelCall {
            start_ns: t.start[i],
            end_ns: t.end[i],
            model: t.model_of(i).map(str::to_string),
            scope: t.model_scope(i).map(str::to_string),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost_usd: t.cost_of(i),
        });
    }
    out
}
