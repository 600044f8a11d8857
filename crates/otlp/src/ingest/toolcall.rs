//! Which spans are tool calls and what they are called (detection.md §1),
//! whose session they belong to and whether they open a turn (§2).

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};

use super::attrs;
use super::canon::{self, Hashed};
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

/// A tool call as [`detect_ref`] finds it: strings borrowed from the span
/// where they can be, hashes as numbers (`to_hex` of their big-endian bytes
/// is the stored text).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRef<'a> {
    pub name: Cow<'a, str>,
    pub call_id: Option<Cow<'a, str>>,
    pub args_hash: Option<u128>,
    pub result_hash: Option<u128>,
    pub convention: ToolConvention,
}

/// The tool call a span describes, if any. An MCP `tools/call` span is an
/// MCP call whatever else it carries (the OTel MCP conventions also set
/// `gen_ai.operation.name = execute_tool` on it); otherwise the first
/// convention that marks it wins (GenAI, OpenInference, OpenLLMetry, Vercel
/// AI SDK, bare `gen_ai.tool.name` / `tool.name`).
pub fn detect(span_name: &str, attrs: &[KeyValue]) -> Option<ToolCall> {
    detect_ref(span_name, attrs).map(|t| ToolCall {
        name: t.name.into_owned(),
        call_id: t.call_id.map(Cow::into_owned),
        args_hash: t.args_hash.map(hash_hex),
        result_hash: t.result_hash.map(hash_hex),
        convention: t.convention,
    })
}

/// [`detect`] without copying the strings the span holds.
pub fn detect_ref<'a>(span_name: &'a str, attrs: &'a [KeyValue]) -> Option<ToolRef<'a>> {
    let is = |key: &str, value: &str| attrs::str_ref(attrs, key) == Some(value);
    let s = |key: &str| attrs::string_cow(attrs, key);
    let (convention, name, call_id, args_keys): (_, _, _, &[&str]) =
        if is("mcp.method.name", "tools/call") {
            (
                ToolConvention::Mcp,
                s("gen_ai.tool.name").or_else(|| s("mcp.tool.name")),
                s("gen_ai.tool.call.id").or_else(|| s("jsonrpc.request.id")),
                &["gen_ai.tool.call.arguments"],
            )
        } else if is("gen_ai.operation.name", "execute_tool") {
            (
                ToolConvention::GenAi,
                s("gen_ai.tool.name"),
                s("gen_ai.tool.call.id"),
                &["gen_ai.tool.call.arguments", "tool_arguments"],
            )
        } else if is("openinference.span.kind", "TOOL") {
            (
                ToolConvention::OpenInference,
                s("tool.name"),
                s("tool_call.id"),
                &["tool.parameters", "input.value"],
            )
        } else if is("traceloop.span.kind", "tool") {
            (
                ToolConvention::OpenLlmetry,
                s("traceloop.entity.name"),
                None,
                &["traceloop.entity.input"],
            )
        } else if let Some(name) = s("ai.toolCall.name") {
            (
                ToolConvention::VercelAi,
                Some(name),
                s("ai.toolCall.id"),
                &["ai.toolCall.args", "ai.toolCall.input"],
            )
        } else if let Some(name) = s("gen_ai.tool.name").or_else(|| s("tool.name")) {
            (
                ToolConvention::Fallback,
                Some(name),
                s("gen_ai.tool.call.id"),
                &["gen_ai.tool.call.arguments", "tool_arguments"],
            )
        } else {
            return None;
        };
    let name = name.unwrap_or_else(|| Cow::Borrowed(name_from_span(span_name, convention)));
    let args = args_keys.iter().find_map(|k| attrs::get(attrs, k));
    let result = super::classify::RESULT_KEYS
        .iter()
        .find_map(|k| attrs::get(attrs, k));
    Some(ToolRef {
        name,
        call_id,
        args_hash: args.and_then(|v| attribute_hash(v).non_empty()),
        result_hash: result.map(|v| attribute_hash(v).hash()),
        convention,
    })
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

/// The tool name when no attribute gave one: the span name, less the
/// `execute_tool ` (or MCP `tools/call `) prefix the conventions put there.
fn name_from_span(span_name: &str, convention: ToolConvention) -> &str {
    let prefix = match convention {
        ToolConvention::Mcp => "tools/call ",
        _ => "execute_tool ",
    };
    span_name.strip_prefix(prefix).unwrap_or(span_name).trim()
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

/// True for the spans that open a turn: `invoke_agent` or an OpenInference AGENT.
pub fn is_agent(attrs: &[KeyValue]) -> bool {
    attrs::str_ref(attrs, "gen_ai.operation.name") == Some("invoke_agent")
        || attrs::str_ref(attrs, "openinference.span.kind") == Some("AGENT")
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
