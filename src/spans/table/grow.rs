//! Growing and shrinking a [`SpanTable`]: appending rows of another table
//! (remapping its dictionary numbers), reserving and truncating every
//! column together.

use std::collections::HashMap;

use super::{Dict, Fast, Hex, SpanTable, Usage};

impl SpanTable {
    /// Append the rows `rows` of `other` (a table with its own dictionary).
    pub fn extend_from(&mut self, other: &SpanTable, rows: &[usize]) {
        self.extend_rows(other, rows.iter().copied());
    }

    /// Append the rows of `other` in `rows`, in order ([`extend_from`](Self::extend_from)
    /// of a range, without listing it).
    pub fn extend_range(&mut self, other: &SpanTable, rows: std::ops::Range<usize>) {
        self.extend_rows(other, rows);
    }

    fn extend_rows(&mut self, other: &SpanTable, rows: impl ExactSizeIterator<Item = usize>) {
        let mut remap: HashMap<u32, u32, Fast> = HashMap::default();
        let mut map = |dict: &mut Dict, id: u32| -> u32 {
            if id == 0 {
                return 0;
            }
            *remap
                .entry(id)
                .or_insert_with(|| dict.id(other.dict.get(id)))
        };
        self.conventions_unknown |= other.conventions_unknown;
        self.reserve_exact(rows.len());
        for i in rows {
            let row = self.len();
            self.trace.push(other.trace[i]);
            if let Some(s) = other.odd_traces.get(&other.trace[i]) {
                self.odd_traces.entry(other.trace[i]).or_insert(s.clone());
            }
            for k in [other.span[i], other.parent[i]] {
                if let Some(s) = other.odd_spans.get(&k) {
                    self.odd_spans.entry(k).or_insert(s.clone());
                }
            }
            self.span.push(other.span[i]);
            self.parent.push(other.parent[i]);
            self.has_parent.push(other.has_parent[i]);
            self.start.push(other.start[i]);
            self.end.push(other.end[i]);
            self.is_agent.push(other.is_agent[i]);
            self.is_tool.push(other.is_tool[i]);
            let d = &mut self.dict;
            let ids = [
                other.agent_call[i],
                other.tool[i],
                other.service[i],
                other.session[i],
                other.convention[i],
            ]
            .map(|id| map(d, id));
            self.agent_call.push(ids[0]);
            self.tool.push(ids[1]);
            self.service.push(ids[2]);
            self.session.push(ids[3]);
            self.convention.push(ids[4]);
            self.class.push(other.class[i]);
            if let Some(&id) = other.other_class.get(&i) {
                let id = map(&mut self.dict, id);
                self.other_class.insert(row, id);
            }
            let hex = |h: Hex, map: &mut dyn FnMut(&mut Dict, u32) -> u32, d: &mut Dict| match h {
                Hex::Text(id) => Hex::Text(map(d, id)),
                h => h,
            };
            let a = hex(other.args.get(i), &mut map, &mut self.dict);
            self.args.push(a);
            let r = hex(other.result.get(i), &mut map, &mut self.dict);
            self.result.push(r);
            self.cost.push(other.cost[i]);
            self.has_cost.push(other.has_cost[i]);
            self.retry_after.push(other.retry_after[i]);
            self.is_model.push(other.is_model[i]);
            if let Some(u) = other.usage.get(&i) {
                let model = map(&mut self.dict, u.model);
                let scope = map(&mut self.dict, u.scope);
                self.usage.insert(row, Usage { model, scope, ..*u });
            }
        }
    }

    /// Room for `n` more rows, exactly: a day's table is sized once, so it
    /// never doubles (and never holds two copies while it grows).
    pub fn reserve_exact(&mut self, n: usize) {
        self.trace.reserve_exact(n);
        self.span.reserve_exact(n);
        self.parent.reserve_exact(n);
        self.has_parent.reserve_exact(n);
        self.start.reserve_exact(n);
        self.end.reserve_exact(n);
        self.is_agent.reserve_exact(n);
        self.is_tool.reserve_exact(n);
        self.agent_call.reserve_exact(n);
        self.tool.reserve_exact(n);
        self.service.reserve_exact(n);
        self.session.reserve_exact(n);
        self.convention.reserve_exact(n);
        self.class.reserve_exact(n);
        self.args.idx.reserve_exact(n);
        self.result.idx.reserve_exact(n);
        self.cost.reserve_exact(n);
        self.has_cost.reserve_exact(n);
        self.retry_after.reserve_exact(n);
        self.is_model.reserve_exact(n);
    }

    /// Keep the first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        self.trace.truncate(rows);
        self.span.truncate(rows);
        self.parent.truncate(rows);
        self.has_parent.truncate(rows);
        self.start.truncate(rows);
        self.end.truncate(rows);
        self.is_agent.truncate(rows);
        self.is_tool.truncate(rows);
        self.agent_call.truncate(rows);
        self.tool.truncate(rows);
        self.service.truncate(rows);
        self.session.truncate(rows);
        self.convention.truncate(rows);
        self.class.truncate(rows);
        self.other_class.retain(|&r, _| r < rows);
        self.args.truncate(rows);
        self.result.truncate(rows);
        self.cost.truncate(rows);
        self.has_cost.truncate(rows);
        self.retry_after.truncate(rows);
        self.is_model.truncate(rows);
        self.usage.retain(|&r, _| r < rows);
    }
}
