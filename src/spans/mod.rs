//! Spans as the detectors and the store's rollup read them: the span table
//! ([`SpanTable`], the columns decoded once into integer arrays, and its
//! parent index) and the one-call-one-count rule ([`once_per_call`]: a tool call
//! seen as several spans counts once). Depends only on the data model;
//! the store and the detectors both build on it.

mod nest;
mod table;

pub use nest::{
    calls_with_dependencies, may_nest, may_nest_in, nested_duplicates, nested_in, once_per_call,
    takes_inner_class,
};
pub use table::{Class, Dict, Hex, HexCol, SpanIndex, SpanTable, Usage, COLUMNS};
