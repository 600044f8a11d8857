//! Normalized spans as columns (`SpanBatch`): what normalization writes,
//! what the store's memtable keeps per day and what a flush turns into a
//! polars frame. Ids are fixed-width bytes, enums are bytes, the service and
//! resource of a span and its tool name are numbers into small dictionaries,
//! and every other string is appended to one buffer per column with offsets
//! (Arrow style) — no heap string per span.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use crate::model::{day_of_ns, to_hex, ErrorClass, SpanKey, SpanRow, ToolConvention};

/// The strings of one column in one buffer, as Arrow's `LargeUtf8` lays
/// them out: value `i` is `data[offsets[i]..offsets[i + 1]]`, absent when
/// `!valid[i]` (an absent value takes no bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct StrColumn {
    data: String,
    offsets: Vec<i64>,
    valid: Vec<bool>,
}

impl Default for StrColumn {
    fn default() -> Self {
        StrColumn {
            data: String::new(),
            offsets: vec![0],
            valid: Vec::new(),
        }
    }
}

impl StrColumn {
    pub fn len(&self) -> usize {
        self.valid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    /// Value `i`, `None` when absent.
    pub fn get(&self, i: usize) -> Option<&str> {
        let (start, end) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        self.valid[i].then(|| &self.data[start..end])
    }

    pub fn push(&mut self, s: &str) {
        self.data.push_str(s);
        self.close(true);
    }

    pub fn push_opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.push(s),
            None => self.close(false),
        }
    }

    /// A value `write` appends to the column's buffer in place.
    pub fn push_with(&mut self, write: impl FnOnce(&mut String)) {
        write(&mut self.data);
        self.close(true);
    }

    fn close(&mut self, valid: bool) {
        self.offsets.push(self.data.len() as i64);
        self.valid.push(valid);
    }

    /// Append the values at `rows` of `src` (all of them when `rows` is every row).
    fn extend_from(&mut self, src: &StrColumn, rows: &[u32]) {
        if rows.len() == src.len() {
            let base = self.data.len() as i64;
            self.data.push_str(&src.data);
            self.offsets
                .extend(src.offsets[1..].iter().map(|o| o + base));
            self.valid.extend_from_slice(&src.valid);
            return;
        }
        for &r in rows {
            self.push_opt(src.get(r as usize));
        }
    }

    /// Room for `bytes` more bytes of values.
    pub fn reserve_bytes(&mut self, bytes: usize) {
        self.data.reserve(bytes);
    }

    fn reserve(&mut self, spans: usize) {
        self.offsets.reserve(spans);
        self.valid.reserve(spans);
    }

    /// Bytes allocated.
    pub fn mem_bytes(&self) -> usize {
        self.data.capacity()
            + self.offsets.capacity() * std::mem::size_of::<i64>()
            + self.valid.capacity()
    }

    /// Bytes of the values.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The buffer, the offsets (one more than values) and the validity.
    pub fn into_parts(self) -> (String, Vec<i64>, Vec<bool>) {
        (self.data, self.offsets, self.valid)
    }
}

/// A dictionary value's heap bytes, for the memory bounds.
pub trait HeapSize {
    fn heap_bytes(&self) -> usize;
}

impl HeapSize for Arc<str> {
    fn heap_bytes(&self) -> usize {
        self.len() + 16
    }
}

/// Values numbered in the order they first came; a span holds the number.
#[derive(Debug, Clone, PartialEq)]
pub struct Dict<T: Hash + Eq> {
    values: Vec<T>,
    index: HashMap<T, u32, foldhash::fast::FixedState>,
    /// Heap bytes of the values, the vector and the index.
    bytes: usize,
}

impl<T: Hash + Eq> Default for Dict<T> {
    fn default() -> Self {
        Dict {
            values: Vec::new(),
            index: HashMap::default(),
            bytes: 0,
        }
    }
}

impl<T: Hash + Eq + Clone + HeapSize> Dict<T> {
    /// The number of `value`, added if new.
    pub fn intern<Q>(&mut self, value: &Q) -> u32
    where
        T: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(&id) = self.index.get(value) {
            return id;
        }
        self.add(T::from(value))
    }

    fn add(&mut self, value: T) -> u32 {
        let id = self.values.len() as u32;
        // The value, its slot in the vector and one in the index (key, number, control byte).
        self.bytes += value.heap_bytes() + 2 * std::mem::size_of::<T>() + 8;
        self.values.push(value.clone());
        self.index.insert(value, id);
        id
    }

    pub fn get(&self, id: u32) -> &T {
        &self.values[id as usize]
    }

    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// Numbers in `self` of every value of `other`, in `other`'s order.
    fn remap(&mut self, other: &Dict<T>) -> Vec<u32> {
        other.values.iter().map(|v| self.intern_owned(v)).collect()
    }

    fn intern_owned(&mut self, value: &T) -> u32 {
        match self.index.get(value) {
            Some(&id) => id,
            None => self.add(value.clone()),
        }
    }

    /// Heap bytes held (values shared with another dictionary counted in both).
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
}

/// What every span of one OTLP resource shares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    pub service: Arc<str>,
    /// The resource attributes as a JSON object.
    pub json: Arc<str>,
}

impl HeapSize for Resource {
    fn heap_bytes(&self) -> usize {
        self.service.len() + self.json.len() + 32
    }
}

impl From<&Resource> for Resource {
    fn from(r: &Resource) -> Resource {
        r.clone()
    }
}

/// `tool` of a span that is not a tool call.
pub const NO_TOOL: u32 = u32::MAX;

/// OTLP span kinds by number (0 and unknown numbers: `unspecified`).
pub const KINDS: [&str; 6] = [
    "unspecified",
    "internal",
    "server",
    "client",
    "producer",
    "consumer",
];

/// Status codes by number: OTLP's `STATUS_CODE_UNSET`, `_OK`, `_ERROR`.
pub const STATUSES: [&str; 3] = ["unset", "ok", "error"];

/// Normalized spans, one value per span in every column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanBatch {
    pub trace_id: Vec<[u8; 16]>,
    pub span_id: Vec<[u8; 8]>,
    /// All zero for a root span.
    pub parent_span_id: Vec<[u8; 8]>,
    pub start_ns: Vec<i64>,
    /// Never before the start.
    pub end_ns: Vec<i64>,
    /// Index into [`KINDS`].
    pub kind: Vec<u8>,
    /// Index into [`STATUSES`].
    pub status: Vec<u8>,
    pub error_class: Vec<ErrorClass>,
    pub tool_convention: Vec<Option<ToolConvention>>,
    pub is_agent: Vec<bool>,
    pub http_status: Vec<Option<i32>>,
    pub rpc_status: Vec<Option<i32>>,
    pub cost_usd: Vec<Option<f64>>,
    pub input_tokens: Vec<Option<i64>>,
    pub output_tokens: Vec<Option<i64>>,
    /// Number in `resources`.
    pub resource: Vec<u32>,
    /// Number in `tools`; [`NO_TOOL`] when the span is not a tool call.
    pub tool: Vec<u32>,
    /// Big-endian bytes of the 128-bit hash (its text is their hex).
    pub tool_args_hash: Vec<Option<[u8; 16]>>,
    pub tool_result_hash: Vec<Option<[u8; 16]>>,
    pub name: StrColumn,
    pub status_message: StrColumn,
    pub tool_call_id: StrColumn,
    pub session_id: StrColumn,
    pub agent_call_id: StrColumn,
    pub error_type: StrColumn,
    /// Span attributes as a JSON object.
    pub attributes: StrColumn,
    /// Span events as a JSON array (`[]` when there are none).
    pub events: StrColumn,
    pub resources: Dict<Resource>,
    pub tools: Dict<Arc<str>>,
}

/// Call `$m!(field)` for every per-span column of a `SpanBatch` that holds
/// plain fixed-width values.
macro_rules! fixed_columns {
    ($m:ident) => {
        $m!(trace_id);
        $m!(span_id);
        $m!(parent_span_id);
        $m!(start_ns);
        $m!(end_ns);
        $m!(kind);
        $m!(status);
        $m!(error_class);
        $m!(tool_convention);
        $m!(is_agent);
        $m!(http_status);
        $m!(rpc_status);
        $m!(cost_usd);
        $m!(input_tokens);
        $m!(output_tokens);
        $m!(tool_args_hash);
        $m!(tool_result_hash);
    };
}

/// ... and every string column.
macro_rules! str_columns {
    ($m:ident) => {
        $m!(name);
        $m!(status_message);
        $m!(tool_call_id);
        $m!(session_id);
        $m!(agent_call_id);
        $m!(error_type);
        $m!(attributes);
        $m!(events);
    };
}

impl SpanBatch {
    pub fn len(&self) -> usize {
        self.trace_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trace_id.is_empty()
    }

    /// Room for `spans` more spans (their strings' bytes grow as they come).
    pub fn reserve(&mut self, spans: usize) {
        macro_rules! reserve {
            ($f:ident) => {
                self.$f.reserve(spans)
            };
        }
        fixed_columns!(reserve);
        self.resource.reserve(spans);
        self.tool.reserve(spans);
        for c in [
            &mut self.name,
            &mut self.attributes,
            &mut self.events,
            &mut self.status_message,
            &mut self.tool_call_id,
            &mut self.session_id,
            &mut self.agent_call_id,
            &mut self.error_type,
        ] {
            c.reserve(spans);
        }
    }

    /// Every column holds one value per span.
    pub fn is_consistent(&self) -> bool {
        let n = self.len();
        let mut ok = self.resource.len() == n && self.tool.len() == n;
        macro_rules! check {
            ($f:ident) => {
                ok &= self.$f.len() == n
            };
        }
        fixed_columns!(check);
        str_columns!(check);
        ok
    }

    /// UTC day of span `i`'s start.
    pub fn day(&self, i: usize) -> i32 {
        day_of_ns(self.start_ns[i])
    }

    /// The dedup key of span `i` (the same as [`SpanKey::from_hex`] of its hex ids).
    pub fn key(&self, i: usize) -> SpanKey {
        SpanKey::from_ids(&self.trace_id[i], &self.span_id[i])
    }

    /// The tool name of span `i`, if it is a tool call.
    pub fn tool_name(&self, i: usize) -> Option<&str> {
        let t = self.tool[i];
        (t != NO_TOOL).then(|| &**self.tools.get(t))
    }

    /// Append the spans at `rows` (ascending) of `src`.
    pub fn extend_from(&mut self, src: &SpanBatch, rows: &[u32]) {
        let all = rows.len() == src.len();
        macro_rules! gather {
            ($f:ident) => {
                if all {
                    self.$f.extend_from_slice(&src.$f);
                } else {
                    self.$f.extend(rows.iter().map(|&r| src.$f[r as usize]));
                }
            };
        }
        fixed_columns!(gather);
        macro_rules! gather_str {
            ($f:ident) => {
                self.$f.extend_from(&src.$f, rows)
            };
        }
        str_columns!(gather_str);
        let resources = self.resources.remap(&src.resources);
        let tools = self.tools.remap(&src.tools);
        let tool = |t: u32| if t == NO_TOOL { t } else { tools[t as usize] };
        if all {
            self.resource
                .extend(src.resource.iter().map(|&r| resources[r as usize]));
            self.tool.extend(src.tool.iter().map(|&t| tool(t)));
        } else {
            self.resource.extend(
                rows.iter()
                    .map(|&r| resources[src.resource[r as usize] as usize]),
            );
            self.tool
                .extend(rows.iter().map(|&r| tool(src.tool[r as usize])));
        }
    }

    /// Bytes allocated for the spans (the memory bounds count these).
    pub fn mem_bytes(&self) -> usize {
        fn cap<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let mut n = cap(&self.resource) + cap(&self.tool);
        macro_rules! fixed {
            ($f:ident) => {
                n += cap(&self.$f)
            };
        }
        fixed_columns!(fixed);
        macro_rules! strs {
            ($f:ident) => {
                n += self.$f.mem_bytes()
            };
        }
        str_columns!(strs);
        n + self.resources.mem_bytes() + self.tools.mem_bytes()
    }

    /// The UTC days the spans start on.
    pub fn days(&self) -> std::collections::BTreeSet<i32> {
        let mut days = std::collections::BTreeSet::new();
        let mut last = None;
        for &ns in &self.start_ns {
            let d = day_of_ns(ns);
            if last != Some(d) {
                days.insert(d);
                last = Some(d);
            }
        }
        days
    }

    /// Span `i` as a row (for tests and callers that want one; the write
    /// path never builds rows).
    pub fn row(&self, i: usize) -> SpanRow {
        let resource = self.resources.get(self.resource[i]);
        let owned = |c: &StrColumn| c.get(i).map(str::to_string);
        let parent = self.parent_span_id[i];
        let class = self.error_class[i];
        SpanRow {
            trace_id: to_hex(&self.trace_id[i]),
            span_id: to_hex(&self.span_id[i]),
            parent_span_id: (parent != [0; 8]).then(|| to_hex(&parent)),
            name: owned(&self.name).unwrap_or_default(),
            kind: KINDS[self.kind[i] as usize],
            service_name: Arc::clone(&resource.service),
            start_ns: self.start_ns[i],
            end_ns: self.end_ns[i],
            duration_ns: self.end_ns[i] - self.start_ns[i],
            status_code: STATUSES[self.status[i] as usize],
            status_message: owned(&self.status_message),
            is_tool_call: self.tool[i] != NO_TOOL,
            tool_name: self.tool_name(i).map(str::to_string),
            tool_call_id: owned(&self.tool_call_id),
            tool_args_hash: self.tool_args_hash[i].map(|h| to_hex(&h)),
            tool_result_hash: self.tool_result_hash[i].map(|h| to_hex(&h)),
            tool_convention: self.tool_convention[i],
            session_id: owned(&self.session_id),
            turn_id: None,
            is_agent: self.is_agent[i],
            agent_call_id: owned(&self.agent_call_id),
            http_status: self.http_status[i],
            rpc_status: self.rpc_status[i],
            error_type: owned(&self.error_type),
            error_class: class,
            retryable: class.retryable(),
            cost_usd: self.cost_usd[i],
            input_tokens: self.input_tokens[i],
            output_tokens: self.output_tokens[i],
            attributes: owned(&self.attributes).unwrap_or_default(),
            events: owned(&self.events).unwrap_or_default(),
            resource: Arc::clone(&resource.json),
        }
    }

    /// Every span as a row.
    pub fn rows(&self) -> Vec<SpanRow> {
        (0..self.len()).map(|i| self.row(i)).collect()
    }
}
