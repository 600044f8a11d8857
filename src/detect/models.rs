//! The model round trips of the turns the per-turn rules keep (model
//! spans, docs/detection.md §1), from a [`SpanTable`]: what the driver rule
//! ([`super::driver`]) looks for between a chain's attempts.
//!
//! One model call can be two model spans: a framework's span around the
//! provider instrumentor's (LangChain's `LLM` span and openinference-openai's
//! below it; pydantic-ai's `chat` and a provider's). A model span with a
//! model-span ancestor is no model call of its own: the outermost is the
//! call, its tokens its own when recorded, else the largest recorded among
//! its model-span descendants (input and output each).

use std::collections::{BTreeMap, HashMap};

use super::driver::ModelCall;
use crate::spans::{SpanIndex, SpanTable};

/// How far up a model span's ancestors are followed (a cycle of parent ids
/// in bad data ends there).
const MAX_DEPTH: usize = 256;

/// The outermost model-span ancestor of model row `row`, if any.
fn outermost_model_ancestor(t: &SpanTable, index: &SpanIndex<'_>, row: usize) -> Option<usize> {
    let mut top = None;
    let mut at = row;
    for _ in 0..MAX_DEPTH {
        let Some(p) = index.parent_of(at) else { break };
        if p == row {
            break;
        }
        if t.is_model[p] {
            top = Some(p);
        }
        at = p;
    }
    top
}

/// Per turn id, the model calls of the turns in `ids` (turn number → id),
/// in start order; `turn_of` gives each row's turn number.
pub fn of_turns<S: std::hash::BuildHasher>(
    t: &SpanTable,
    index: &SpanIndex<'_>,
    turn_of: &[u32],
    ids: &HashMap<u32, String, S>,
) -> BTreeMap<String, Vec<ModelCall>> {
    let mut out: BTreeMap<String, Vec<ModelCall>> = BTreeMap::new();
    if t.usage.is_empty() {
        return out;
    }
    // The model spans of kept turns only, before anything else.
    let kept: Vec<usize> = t
        .usage
        .keys()
        .copied()
        .filter(|&i| ids.contains_key(&turn_of[i]))
        .collect();
    // Outermost model spans, with the largest tokens their model-span
    // descendants recorded.
    let mut calls: Vec<usize> = Vec::with_capacity(kept.len());
    let mut inner: HashMap<usize, (Option<i64>, Option<i64>)> = HashMap::new();
    for &i in &kept {
        match outermost_model_ancestor(t, index, i) {
            None => calls.push(i),
            Some(top) => {
                let u = t.usage[&i];
                let e = inner.entry(top).or_default();
                e.0 = e.0.max(u.input_tokens);
                e.1 = e.1.max(u.output_tokens);
            }
        }
    }
    calls.sort_unstable_by_key(|&i| (t.start[i], t.end[i], i));
    for i in calls {
        let turn = &ids[&turn_of[i]];
        let u = t.usage[&i];
        let (in_below, out_below) = inner.get(&i).copied().unwrap_or_default();
        out.entry(turn.clone()).or_default().push(ModelCall {
            start_ns: t.start[i],
            end_ns: t.end[i],
            model: t.model_of(i).map(str::to_string),
            scope: t.model_scope(i).map(str::to_string),
            input_tokens: u.input_tokens.or(in_below),
            output_tokens: u.output_tokens.or(out_below),
            cost_usd: t.cost_of(i),
        });
    }
    out
}
