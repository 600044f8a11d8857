//! The span table: the columns the per-turn rules and the rollup's call
//! dedup read, decoded once from a frame into plain integer arrays. Ids
//! become integers (a trace id's 32 hex digits fit a `u128`, a span id's 16
//! a `u64`), classes an enum, names and sessions small dictionary numbers;
//! so turn resolution and grouping sort and compare integers instead of
//! hashing strings, and a day of spans costs about 100 bytes a row instead
//! of the few hundred its Arrow columns hold.
//!
//! An id that is not lowercase hex of the usual width (imported data,
//! hand-written fixtures) is keyed by its 128- or 64-bit xxh3 hash and kept
//! as text beside, so it prints back as it came. Two ids collide only if
//! their hashes do: for span ids, which are compared within one trace,
//! about one chance in 2^64 per pair.

use std::collections::HashMap;

use polars::prelude::*;

mod columns;
mod grow;
mod index;
mod usage;

use columns::{dict_column, hex_value, opt_strs, write_hex};
pub use columns::{Class, Dict, Hex, HexCol};
pub use index::SpanIndex;
pub use usage::Usage;

type Fast = foldhash::fast::RandomState;

/// The columns [`SpanTable::append`] reads; all but the ids may be missing
/// (they then read as null, false or 0).
pub const COLUMNS: [&str; 22] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "is_agent",
    "agent_call_id",
    "start_ns",
    "end_ns",
    "is_tool_call",
    "tool_name",
    "service_name",
    "error_class",
    "tool_args_hash",
    "tool_result_hash",
    "session_id",
    "tool_convention",
    "cost_usd",
    "retry_after_ms",
    "is_model",
    "model_name",
    "input_tokens",
    "output_tokens",
    "scope_name",
];
/// Spans as integer columns, rows in the order they were appended.
#[derive(Debug, Default, Clone)]
pub struct SpanTable {
    pub trace: Vec<u128>,
    pub span: Vec<u64>,
    /// The parent's id; meaningful only where `has_parent`.
    pub parent: Vec<u64>,
    pub has_parent: Vec<bool>,
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub is_agent: Vec<bool>,
    pub is_tool: Vec<bool>,
    /// Dictionary numbers (0: null).
    pub agent_call: Vec<u32>,
    pub tool: Vec<u32>,
    pub service: Vec<u32>,
    pub session: Vec<u32>,
    pub convention: Vec<u32>,
    pub class: Vec<Class>,
    /// The raw name of each `Class::Other` row.
    pub other_class: HashMap<usize, u32, Fast>,
    pub args: HexCol,
    pub result: HexCol,
    /// Costs, meaningful where `has_cost`.
    pub cost: Vec<f64>,
    pub has_cost: Vec<bool>,
    /// The wait a failed span states, in ms (0: none; docs/detection.md §4.9).
    pub retry_after: Vec<i64>,
    /// One round trip to a language model (`is_model`).
    pub is_model: Vec<bool>,
    /// What a model span names and used, for its rows only.
    pub usage: HashMap<usize, Usage, Fast>,
    pub dict: Dict,
    /// Whether some rows came from a frame without `tool_convention` (then
    /// any call may be two spans).
    pub conventions_unknown: bool,
    /// Ids that are not hex of the usual width, by their hash key.
    odd_traces: HashMap<u128, Box<str>, Fast>,
    odd_spans: HashMap<u64, Box<str>, Fast>,
}

impl SpanTable {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// Whether trace key `t` stands for an id that is not hex of the usual
    /// width (kept as text beside).
    pub fn is_odd_trace(&self, t: u128) -> bool {
        self.odd_traces.contains_key(&t)
    }

    /// A table of `df`'s rows.
    pub fn from_frame(df: &DataFrame) -> PolarsResult<SpanTable> {
        let mut t = SpanTable::default();
        t.reserve_exact(df.height());
        t.append(df)?;
        Ok(t)
    }

    fn trace_key(&mut self, s: &str) -> u128 {
        if s.len() == 32 {
            if let Some(v) = hex_value(s, 32) {
                return v;
            }
        }
        let k = xxhash_rust::xxh3::xxh3_128(s.as_bytes());
        self.odd_traces.entry(k).or_insert_with(|| s.into());
        k
    }

    fn span_key(&mut self, s: &str) -> u64 {
        if s.len() == 16 {
            if let Some(v) = hex_value(s, 16) {
                return v as u64;
            }
        }
        let k = xxhash_rust::xxh3::xxh3_64(s.as_bytes());
        self.odd_spans.entry(k).or_insert_with(|| s.into());
        k
    }

    fn hex(&mut self, s: Option<&str>) -> Hex {
        match s {
            None => Hex::None,
            Some(s) => match hex_value(s, 32) {
                Some(value) => Hex::Hex {
                    value,
                    digits: s.len() as u8,
                },
                None => Hex::Text(self.dict.id(Some(s))),
            },
        }
    }

    /// The cost of a row, when its span says.
    pub fn cost_of(&self, row: usize) -> Option<f64> {
        self.has_cost[row].then(|| self.cost[row])
    }

    /// The trace id as text.
    pub fn trace_str(&self, row: usize) -> String {
        let k = self.trace[row];
        match self.odd_traces.get(&k) {
            Some(s) => s.to_string(),
            None => {
                let mut s = String::with_capacity(32);
                write_hex(&mut s, k, 32);
                s
            }
        }
    }

    fn span_text(&self, k: u64) -> String {
        match self.odd_spans.get(&k) {
            Some(s) => s.to_string(),
            None => {
                let mut s = String::with_capacity(16);
                write_hex(&mut s, u128::from(k), 16);
                s
            }
        }
    }

    pub fn span_str(&self, row: usize) -> String {
        self.span_text(self.span[row])
    }

    pub fn parent_str(&self, row: usize) -> Option<String> {
        self.has_parent[row].then(|| self.span_text(self.parent[row]))
    }

    pub fn hex_str(&self, h: Hex) -> Option<String> {
        match h {
            Hex::None => None,
            Hex::Hex { value, digits } => {
                let mut s = String::with_capacity(digits as usize);
                write_hex(&mut s, value, digits as usize);
                Some(s)
            }
            Hex::Text(id) => self.dict.get(id).map(str::to_string),
        }
    }

    /// The class of a row as the frames spell it.
    pub fn class_str(&self, row: usize) -> Option<&str> {
        match self.class[row] {
            Class::Null => None,
            Class::Known(c) => Some(c.as_str()),
            Class::Other => self.other_class.get(&row).and_then(|&id| self.dict.get(id)),
        }
    }

    /// Append the rows of `df`, which holds at least the ids of [`COLUMNS`].
    pub fn append(&mut self, df: &DataFrame) -> PolarsResult<()> {
        self.append_ids(df)?;
        self.append_rest(df)
    }

    /// Append the ids of `df`'s rows (`trace_id`, `span_id`,
    /// `parent_span_id`): half of [`append`](Self::append), so a part can be
    /// decoded in two narrower frames.
    pub fn append_ids(&mut self, df: &DataFrame) -> PolarsResult<()> {
        let trace = df.column("trace_id")?.str()?;
        let span = df.column("span_id")?.str()?;
        let parent = df.column("parent_span_id")?.str()?;
        for (t, (s, p)) in trace.iter().zip(span.iter().zip(parent.iter())) {
            let t = self.trace_key(t.unwrap_or(""));
            self.trace.push(t);
            let s = self.span_key(s.unwrap_or(""));
            self.span.push(s);
            match p {
                Some(p) => {
                    let p = self.span_key(p);
                    self.parent.push(p);
                    self.has_parent.push(true);
                }
                None => {
                    self.parent.push(0);
                    self.has_parent.push(false);
                }
            }
        }
        Ok(())
    }

    /// Append every column of `df`'s rows but the ids (the other half).
    pub fn append_rest(&mut self, df: &DataFrame) -> PolarsResult<()> {
        let n = df.height();
        let strs = |name: &str| -> PolarsResult<Option<&StringChunked>> {
            match df.column(name) {
                Ok(c) => Ok(Some(c.str()?)),
                Err(_) => Ok(None),
            }
        };
        let bools = |name: &str| -> PolarsResult<Vec<bool>> {
            Ok(match df.column(name) {
                Ok(c) => c.bool()?.iter().map(|b| b == Some(true)).collect(),
                Err(_) => vec![false; n],
            })
        };
        let opt = |c| opt_strs(c, n);
        let ints = |name: &str| -> PolarsResult<Vec<i64>> {
            Ok(match df.column(name) {
                Ok(c) => c.i64()?.iter().map(|v| v.unwrap_or(0)).collect(),
                Err(_) => vec![0; n],
            })
        };
        self.conventions_unknown |= df.column("tool_convention").is_err();
        self.start.extend(ints("start_ns")?);
        self.end.extend(ints("end_ns")?);
        self.is_agent.extend(bools("is_agent")?);
        // A frame of tool rows only (the rollup's) may lack the flag.
        match df.column("is_tool_call") {
            Ok(c) => self
                .is_tool
                .extend(c.bool()?.iter().map(|b| b == Some(true))),
            Err(_) => self.is_tool.extend(std::iter::repeat_n(true, n)),
        }
        let dict_col = |dict: &mut Dict, c, out: &mut Vec<u32>| dict_column(dict, c, n, out);
        dict_col(&mut self.dict, strs("agent_call_id")?, &mut self.agent_call);
        dict_col(&mut self.dict, strs("tool_name")?, &mut self.tool);
        dict_col(&mut self.dict, strs("service_name")?, &mut self.service);
        dict_col(&mut self.dict, strs("session_id")?, &mut self.session);
        dict_col(
            &mut self.dict,
            strs("tool_convention")?,
            &mut self.convention,
        );
        // Classes through the dictionary too: a dozen names, parsed once each.
        let base = self.class.len();
        let mut ids = Vec::with_capacity(n);
        dict_col(&mut self.dict, strs("error_class")?, &mut ids);
        let mut parsed: HashMap<u32, Class, Fast> = HashMap::default();
        for (i, id) in ids.into_iter().enumerate() {
            let dict = &self.dict;
            let class = *parsed
                .entry(id)
                .or_insert_with(|| Class::parse(dict.get(id)));
            if class == Class::Other {
                self.other_class.insert(base + i, id);
            }
            self.class.push(class);
        }
        for a in opt(strs("tool_args_hash")?) {
            let h = self.hex(a);
            self.args.push(h);
        }
        for r in opt(strs("tool_result_hash")?) {
            let h = self.hex(r);
            self.result.push(h);
        }
        match df.column("cost_usd") {
            Ok(c) => {
                let c = c.cast(&DataType::Float64)?;
                for v in c.f64()?.iter() {
                    self.cost.push(v.unwrap_or(0.0));
                    self.has_cost.push(v.is_some());
                }
            }
            Err(_) => {
                self.cost.extend(std::iter::repeat_n(0.0, n));
                self.has_cost.extend(std::iter::repeat_n(false, n));
            }
        }
        // Parts written before the column read it as none.
        match df.column("retry_after_ms") {
            Ok(c) => {
                let c = c.cast(&DataType::Int64)?;
                self.retry_after
                    .extend(c.i64()?.iter().map(|v| v.unwrap_or(0).max(0)));
            }
            Err(_) => self.retry_after.extend(std::iter::repeat_n(0, n)),
        }
        // Model spans (parts written before the column have none).
        self.append_models(df)
    }

    /// Rows sorted by (trace, span), each key's rows in row order: the
    /// index the parent lookups search.
    pub fn by_trace_and_span(&self) -> Vec<u32> {
        let mut keys: Vec<(u128, u64, u32)> = (0..self.len())
            .map(|i| (self.trace[i], self.span[i], i as u32))
            .collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| k.2).collect()
    }

    /// Per row, the rows of its trace as a range of `order` (from
    /// [`by_trace_and_span`](Self::by_trace_and_span)), and each row's place in `order`.
    pub fn trace_ranges(&self, order: &[u32]) -> (Vec<u32>, Vec<(u32, u32)>) {
        let mut place = vec![0u32; self.len()];
        let mut range = vec![(0u32, 0u32); self.len()];
        let mut a = 0;
        while a < order.len() {
            let t = self.trace[order[a] as usize];
            let mut b = a + 1;
            while b < order.len() && self.trace[order[b] as usize] == t {
                b += 1;
            }
            for (k, &i) in order[a..b].iter().enumerate() {
                place[i as usize] = (a + k) as u32;
                range[i as usize] = (a as u32, b as u32);
            }
            a = b;
        }
        (place, range)
    }
}
