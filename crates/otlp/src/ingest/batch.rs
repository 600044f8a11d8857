//! Normalized spans as columns (`SpanBatch`): what normalization writes,
//! what the store's memtable keeps per day and what a flush turns into a
//! polars frame. Ids are fixed-width bytes, enums are bytes, the service and
//! resource of a span, its tool name and its dependency are numbers into
//! small dictionaries, and every other string is appended to one buffer per
//! column with offsets (Arrow style) — no heap string per span.

use std::sync::Arc;

pub use super::column::{Dict, HeapSize, StrColumn};
use crate::model::{day_of_ns, to_hex, ErrorClass, SpanKey, SpanRow, ToolConvention};

/// What every span of one OTLP resource and instrumentation scope shares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    pub service: Arc<str>,
    /// The resource attributes as a JSON object.
    pub json: Arc<str>,
    /// The instrumentation scope's name and version (`None` when empty).
    pub scope_name: Option<Arc<str>>,
    pub scope_version: Option<Arc<str>>,
}

impl HeapSize for Resource {
    fn heap_bytes(&self) -> usize {
        self.service.len()
            + self.json.len()
            + self.scope_name.as_ref().map_or(0, |s| s.len())
            + self.scope_version.as_ref().map_or(0, |s| s.len())
            + 64
    }
}

impl From<&Resource> for Resource {
    fn from(r: &Resource) -> Resource {
        r.clone()
    }
}

/// `tool` of a span that is not a tool call.
pub const NO_TOOL: u32 = u32::MAX;

/// `dependency` of a span that names no server.
pub const NO_DEPENDENCY: u32 = u32::MAX;

/// `model` of a span that names no model (or is no model span).
pub const NO_MODEL: u32 = u32::MAX;

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
    /// One round trip to a language model ([`super::model_span`]).
    pub is_model: Vec<bool>,
    pub http_status: Vec<Option<i32>>,
    pub rpc_status: Vec<Option<i32>>,
    pub cost_usd: Vec<Option<f64>>,
    pub input_tokens: Vec<Option<i64>>,
    pub output_tokens: Vec<Option<i64>>,
    /// Number in `resources`.
    pub resource: Vec<u32>,
    /// Number in `tools`; [`NO_TOOL`] when the span is not a tool call.
    pub tool: Vec<u32>,
    /// Number in `dependencies`: the server the span talks to
    /// ([`super::dependency::dependency`]); [`NO_DEPENDENCY`] when none.
    pub dependency: Vec<u32>,
    /// Number in `models`: the model a model span names; [`NO_MODEL`] when none.
    pub model: Vec<u32>,
    /// Big-endian bytes of the 128-bit hash (its text is their hex).
    pub tool_args_hash: Vec<Option<[u8; 16]>>,
    pub tool_result_hash: Vec<Option<[u8; 16]>>,
    /// A tool call's arguments were recorded (empty ones too, which have no
    /// hash); `None` for other spans.
    pub tool_args_recorded: Vec<Option<bool>>,
    /// The wait a failed span states, in ms ([`super::retry_after`]).
    pub retry_after_ms: Vec<Option<i64>>,
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
    pub dependencies: Dict<Arc<str>>,
    pub models: Dict<Arc<str>>,
}

/// A batch's size: its spans and the bytes of each string column (name,
/// status message, tool call id, session id, agent call id, error type,
/// attributes, events), for [`SpanBatch::reserve_shape`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    pub spans: usize,
    pub str_bytes: [usize; 8],
}

impl Shape {
    /// The same shape with `num / den` of its spans and bytes.
    pub fn scaled(&self, num: usize, den: usize) -> Shape {
        let den = den.max(1);
        Shape {
            spans: self.spans * num / den,
            str_bytes: self.str_bytes.map(|b| b * num / den),
        }
    }

    /// About the bytes a batch of this shape allocates.
    pub fn bytes(&self) -> usize {
        // Fixed-width columns (ids, times, enums, options): about 200
        // bytes a span; each string column's offsets and validity 9.
        self.spans * (200 + 9 * self.str_bytes.len()) + self.str_bytes.iter().sum::<usize>()
    }
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
        $m!(is_model);
        $m!(http_status);
        $m!(rpc_status);
        $m!(cost_usd);
        $m!(input_tokens);
        $m!(output_tokens);
        $m!(tool_args_hash);
        $m!(tool_result_hash);
        $m!(tool_args_recorded);
        $m!(retry_after_ms);
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
        self.dependency.reserve(spans);
        self.model.reserve(spans);
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

    /// Its spans and each string column's bytes, to size a batch like it.
    pub fn shape(&self) -> Shape {
        Shape {
            spans: self.len(),
            str_bytes: [
                &self.name,
                &self.status_message,
                &self.tool_call_id,
                &self.session_id,
                &self.agent_call_id,
                &self.error_type,
                &self.attributes,
                &self.events,
            ]
            .map(StrColumn::data_len),
        }
    }

    /// Room for a batch of `shape` more (spans and string bytes), so that
    /// filling it up to that size moves no column.
    pub fn reserve_shape(&mut self, shape: &Shape) {
        self.reserve(shape.spans);
        let columns = [
            &mut self.name,
            &mut self.status_message,
            &mut self.tool_call_id,
            &mut self.session_id,
            &mut self.agent_call_id,
            &mut self.error_type,
            &mut self.attributes,
            &mut self.events,
        ];
        for (c, bytes) in columns.into_iter().zip(shape.str_bytes) {
            c.reserve_bytes(bytes);
        }
    }

    /// Every column holds one value per span.
    pub fn is_consistent(&self) -> bool {
        let n = self.len();
        let mut ok = self.resource.len() == n
            && self.tool.len() == n
            && self.dependency.len() == n
            && self.model.len() == n;
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

    /// The dependency of span `i`, if it names one.
    pub fn dependency_name(&self, i: usize) -> Option<&str> {
        let d = self.dependency[i];
        (d != NO_DEPENDENCY).then(|| &**self.dependencies.get(d))
    }

    /// The model span `i` names, if any.
    pub fn model_name(&self, i: usize) -> Option<&str> {
        let m = self.model[i];
        (m != NO_MODEL).then(|| &**self.models.get(m))
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
        let dependencies = self.dependencies.remap(&src.dependencies);
        let dependency = |d: u32| {
            if d == NO_DEPENDENCY {
                d
            } else {
                dependencies[d as usize]
            }
        };
        let models = self.models.remap(&src.models);
        let model = |m: u32| if m == NO_MODEL { m } else { models[m as usize] };
        if all {
            self.model.extend(src.model.iter().map(|&m| model(m)));
            self.resource
                .extend(src.resource.iter().map(|&r| resources[r as usize]));
            self.tool.extend(src.tool.iter().map(|&t| tool(t)));
            self.dependency
                .extend(src.dependency.iter().map(|&d| dependency(d)));
        } else {
            self.resource.extend(
                rows.iter()
                    .map(|&r| resources[src.resource[r as usize] as usize]),
            );
            self.tool
                .extend(rows.iter().map(|&r| tool(src.tool[r as usize])));
            self.dependency
                .extend(rows.iter().map(|&r| dependency(src.dependency[r as usize])));
            self.model
                .extend(rows.iter().map(|&r| model(src.model[r as usize])));
        }
    }

    /// Bytes allocated for the spans (the memory bounds count these).
    pub fn mem_bytes(&self) -> usize {
        fn cap<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let mut n =
            cap(&self.resource) + cap(&self.tool) + cap(&self.dependency) + cap(&self.model);
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
        n + self.resources.mem_bytes()
            + self.tools.mem_bytes()
            + self.dependencies.mem_bytes()
            + self.models.mem_bytes()
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
            tool_args_recorded: self.tool_args_recorded[i],
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
            scope_name: resource.scope_name.clone(),
            scope_version: resource.scope_version.clone(),
            dependency: self.dependency_name(i).map(str::to_string),
            retry_after_ms: self.retry_after_ms[i],
            is_model: self.is_model[i],
            model_name: self.model_name(i).map(str::to_string),
        }
    }

    /// Every span as a row.
    pub fn rows(&self) -> Vec<SpanRow> {
        (0..self.len()).map(|i| self.row(i)).collect()
    }
}
