//! Which spans are tool calls and what they are called (detection.md §1),
//! whose session they belong to and whether they open a turn (§2).

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};

use super::attrs;
use super::canon::{self, Hashed};
use super::conventions::{self, ArgsShape, SpanView};
use crate::model::ToolConvention;

/// A span recognised as a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub call_id: Option<String>,
    /// Hash of the canonical JSON of the arguments, when they were recorded
    /// and not empty (`{}`, `[]`, `""`, `null` are no arguments).
    pub args_hash: Option<String>,
    /// Hash of the canonical JSON of the result, when it was recorded.
    pub result_hash: Option<String>,
    /// The arguments were recorded, empty ones too.
    pub args_recorded: bool,
    pub convention: ToolConvention,
}

const SESSION_KEYS: &[&str] = &[
    "session.id",
    "gen_ai.conversation.id",
    "gen_ai.session.id",
    "langfuse.session.id",
    "traceloop.association.properties.session_id",
    // The Vercel AI SDK 6: `experimental_telemetry.metadata.sessionId`.
    "ai.telemetry.metadata.sessionId",
];

/// A tool call as [`detect_view`] finds it: strings borrowed from the span
/// where they can be, hashes as numbers (`to_hex` of their big-endian bytes
/// is the stored text), the result as recorded (for [`super::classify`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRef<'a> {
    pub name: Cow<'a, str>,
    pub call_id: Option<Cow<'a, str>>,
    pub args_hash: Option<u128>,
    pub result_hash: Option<u128>,
    /// The arguments were recorded, empty ones too (they have no hash).
    pub args_recorded: bool,
    pub result: Option<&'a Value>,
    pub convention: ToolConvention,
}

/// The tool call a span of only a name and attributes describes, if any
/// ([`detect_view`] with no events and no scope).
pub fn detect(span_name: &str, attrs: &[KeyValue]) -> Option<ToolCall> {
    detect_view(&SpanView::bare(span_name, attrs)).map(ToolCall::from)
}

impl From<ToolRef<'_>> for ToolCall {
    fn from(t: ToolRef<'_>) -> ToolCall {
        ToolCall {
            name: t.name.into_owned(),
            call_id: t.call_id.map(Cow::into_owned),
            args_hash: t.args_hash.map(hash_hex),
            result_hash: t.result_hash.map(hash_hex),
            args_recorded: t.args_recorded,
            convention: t.convention,
        }
    }
}

/// The tool call a span describes, as the first convention of
/// [`conventions::CONVENTIONS`] that marks it reads it; `None` for a span
/// no convention marks, and for protocol and bookkeeping spans.
pub fn detect_view<'a>(span: &SpanView<'a>) -> Option<ToolRef<'a>> {
    let r = conventions::read(span)?;
    let args_hash = r.args.and_then(|v| match r.convention.args_shape {
        ArgsShape::Plain => attribute_hash(v).non_empty(),
        ArgsShape::Wrapped => wrapped_hash(v),
    });
    Some(ToolRef {
        name: r.name,
        call_id: r.call_id,
        args_hash,
        result_hash: r
            .result
            .map(|v| match super::results::payload::hashed_payload(v) {
                Some(payload) => value_hash128(&payload),
                None => attribute_hash(v).hash(),
            }),
        args_recorded: r.args.is_some(),
        result: r.result,
        convention: r.convention.id,
    })
}

impl<'a> ToolRef<'a> {
    /// The call's recorded result, for classification.
    pub fn recorded(&self) -> Option<super::results::Recorded<'_>> {
        Some(super::results::Recorded {
            tool: &self.name,
            value: self.result?,
        })
    }
}

/// The hash of arguments an instrumentor may have wrapped
/// ([`ArgsShape::Wrapped`]): of what the wrapper holds, else of the value.
fn wrapped_hash(v: &Value) -> Option<u128> {
    let parsed = match v {
        Value::StringValue(s) if s.trim_start().starts_with('{') => serde_json::from_str(s).ok(),
        Value::KvlistValue(_) => Some(attrs::to_value(v)),
        _ => None,
    };
    // The value parsed once: what a wrapper holds, else the value itself
    // (its hash is the one its text has: tests_canon holds them equal).
    let Some(parsed) = parsed else {
        return attribute_hash(v).non_empty();
    };
    let inner = conventions::unwrap_args(&parsed);
    let args = inner.as_ref().unwrap_or(&parsed);
    (!is_empty(args)).then(|| value_hash128(args))
}

/// The hash of an attribute's value as [`attrs::json`] reads it (a string
/// holding JSON is that JSON), found without building a JSON tree for text.
fn attribute_hash(v: &Value) -> Hashed {
    match v {
        Value::StringValue(s) => canon::text_value_hash(s),
        other => {
            let json = attrs::to_value(other);
            let h = value_hash128(&json);
            if is_empty(&json) {
                Hashed::Empty(h)
            } else {
                Hashed::Value(h)
            }
        }
    }
}

/// No arguments: `null`, `{}`, `[]`, `""` (or only whitespace).
fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(o) => o.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// Hash of the arguments' canonical JSON (keys sorted, no whitespace); text
/// that is not JSON is hashed as it is.
pub fn args_hash(raw: &str) -> String {
    hash_hex(canon::text_value_hash(raw).hash())
}

/// Hash of a JSON value's canonical form: keys sorted, no whitespace; a
/// string is hashed as its text, so `"ls"` and a bare `ls` agree, and a
/// structured attribute agrees with the same object sent as a JSON string.
pub fn value_hash(v: &serde_json::Value) -> String {
    hash_hex(value_hash128(v))
}

/// [`value_hash`] as the number its text spells.
pub fn value_hash128(v: &serde_json::Value) -> u128 {
    match v {
        serde_json::Value::String(s) => text_hash128(s),
        other => text_hash128(&other.to_string()),
    }
}

fn text_hash128(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

/// The stored text of a hash: 32 lowercase hex digits.
pub fn hash_hex(hash: u128) -> String {
    format!("{hash:032x}")
}

/// The session a span belongs to: the span's own attributes first, then the resource's.
pub fn session_id(attrs: &[KeyValue], resource: &[KeyValue]) -> Option<String> {
    session_id_cow(attrs, resource).map(Cow::into_owned)
}

/// [`session_id`], borrowed.
pub fn session_id_cow<'a>(attrs: &'a [KeyValue], resource: &'a [KeyValue]) -> Option<Cow<'a, str>> {
    attrs::first_string_cow(attrs, SESSION_KEYS)
        .or_else(|| attrs::first_string_cow(resource, SESSION_KEYS))
}

/// True for the spans that may open a turn (the outermost of them does,
/// docs/detection.md §2): an agent (`invoke_agent`, an OpenInference
/// AGENT) or what runs agents for one request (`invoke_workflow`: Google
/// ADK's, whose sub-agents' hand-offs are siblings under it; Strands'
/// `invoke_swarm` and `invoke_graph`; an OpenInference CHAIN: a LangGraph
/// graph running sub-agents).
pub fn is_agent(attrs: &[KeyValue]) -> bool {
    matches!(
        attrs::str_ref(attrs, "gen_ai.operation.name"),
        Some("invoke_agent" | "invoke_workflow" | "invoke_swarm" | "invoke_graph")
    ) || matches!(
        attrs::str_ref(attrs, "openinference.span.kind"),
        Some("AGENT" | "CHAIN")
    )
}

/// Usage figures the gen_ai and OpenInference conventions carry.
pub fn cost_usd(attrs: &[KeyValue]) -> Option<f64> {
    [
        "gen_ai.usage.cost",
        "gen_ai.usage.cost_usd",
        "llm.cost.total",
        "llm.usage.cost",
    ]
    .iter()
    .find_map(|k| attrs::float(attrs, k))
}

pub fn input_tokens(attrs: &[KeyValue]) -> Option<i64> {
    [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
    ]
    .iter()
    .find_map(|k| attrs::int(attrs, k))
}

pub fn output_tokens(attrs: &[KeyValue]) -> Option<i64> {
    [
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    ]
    .iter()
    .find_map(|k| attrs::int(attrs, k))
}
