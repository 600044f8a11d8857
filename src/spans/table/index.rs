//! Finding a span of a trace by id: the table's rows sorted by (trace,
//! span), each trace a range of them, binary-searched.

use super::SpanTable;

/// Finds a span of a trace by id: binary search within the trace's rows.
pub struct SpanIndex<'a> {
    table: &'a SpanTable,
    order: Vec<u32>,
    range: Vec<(u32, u32)>,
}

impl<'a> SpanIndex<'a> {
    pub fn new(table: &'a SpanTable) -> SpanIndex<'a> {
        let order = table.by_trace_and_span();
        let (_, range) = table.trace_ranges(&order);
        SpanIndex {
            table,
            order,
            range,
        }
    }

    /// Every row of `row`'s trace.
    pub fn trace_rows(&self, row: usize) -> &[u32] {
        let (a, b) = self.range[row];
        &self.order[a as usize..b as usize]
    }

    /// The rows of `row`'s trace with span id `span`, in row order.
    pub fn rows_of(&self, row: usize, span: u64) -> &[u32] {
        let (a, b) = self.range[row];
        let slice = &self.order[a as usize..b as usize];
        let t = self.table;
        let lo = slice.partition_point(|&i| t.span[i as usize] < span);
        let hi = slice.partition_point(|&i| t.span[i as usize] <= span);
        &slice[lo..hi]
    }

    /// The parent row of `row` (the last row with that id, as a map would
    /// keep it), if its parent is in the table.
    pub fn parent_of(&self, row: usize) -> Option<usize> {
        if !self.table.has_parent[row] {
            return None;
        }
        self.rows_of(row, self.table.parent[row])
            .last()
            .map(|&i| i as usize)
    }
}
