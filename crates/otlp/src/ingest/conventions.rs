//! The conventions layer (docs/detection.md §1): how each tracing
//! convention marks a span as a tool call — or as protocol or a
//! framework's own bookkeeping, which are not calls — and where it keeps
//! the call's name, id, arguments and result. One entry of [`CONVENTIONS`]
//! per convention, tried in that order (the first that marks a span reads
//! it); each names the frameworks and versions it was observed in, and the
//! framework conformance suite (`tests/it/conformance.rs`) replays their
//! spans. A span of none of these shapes that still names a tool is read by
//! the last entry, `fallback`, and counted as unknown shape in the coverage
//! report.

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::Event;

use super::attrs;
use crate::model::ToolConvention;

/// The parts of a span a convention reads.
#[derive(Debug, Clone, Copy)]
pub struct SpanView<'a> {
    pub name: &'a str,
    pub attrs: &'a [KeyValue],
    pub events: &'a [Event],
    /// The instrumentation scope's name (`""` when the span has none).
    pub scope: &'a str,
}

impl<'a> SpanView<'a> {
    /// A span of only a name and attributes (no events, no scope).
    pub fn bare(name: &'a str, attrs: &'a [KeyValue]) -> Self {
        SpanView {
            name,
            attrs,
            events: &[],
            scope: "",
        }
    }

    fn is(&self, key: &str, value: &str) -> bool {
        attrs::str_ref(self.attrs, key) == Some(value)
    }

    fn has(&self, key: &str) -> bool {
        attrs::get(self.attrs, key).is_some()
    }

    /// The first value a list of sources holds.
    fn find(&self, sources: &[Source]) -> Option<&'a Value> {
        sources.iter().find_map(|s| match *s {
            Source::Attr(k) => attrs::get(self.attrs, k),
            Source::Event { event, key } => self
                .events
                .iter()
                .filter(|e| e.name == event)
                .find_map(|e| attrs::get(&e.attributes, key)),
        })
    }
}

/// Where a convention keeps a value: an attribute of the span, or an
/// attribute of its first event of a name that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Attr(&'static str),
    Event {
        event: &'static str,
        key: &'static str,
    },
}

/// What a convention says a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A tool call.
    Call,
    /// The convention's own protocol (MCP `initialize`, `tools/list`): no call.
    Protocol,
    /// Not this convention's span.
    No,
}

/// How the arguments' value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsShape {
    /// The value is the arguments.
    Plain,
    /// OpenInference's `input.value`: the arguments, or the instrumentor's
    /// wrapper of them (`{"args": [], "kwargs": {...}}`, smolagents adds
    /// `sanitize_inputs_outputs`), whose `kwargs` (and `args`, when not
    /// empty) are the arguments.
    Wrapped,
}

/// One convention: what marks its spans, where it keeps each part of the call.
#[derive(Debug)]
pub struct Convention {
    pub id: ToolConvention,
    /// Who defines it.
    pub spec: &'static str,
    /// The frameworks (and versions) its spans were observed from.
    pub observed_in: &'static str,
    pub marks: fn(&SpanView<'_>) -> Mark,
    /// Attributes naming the tool, in order; else the span name less a prefix.
    pub name: &'static [&'static str],
    /// Span-name prefixes the tool name follows (`execute_tool `).
    pub name_prefixes: &'static [&'static str],
    pub call_id: &'static [&'static str],
    pub args: &'static [Source],
    pub args_shape: ArgsShape,
    pub result: &'static [Source],
}

/// The result keys every GenAI-shaped span may carry (pydantic-ai's
/// `tool_response` before it wrote the GenAI key; ADK's own keys).
const GENAI_RESULT: &[Source] = &[
    Source::Attr("gen_ai.tool.call.result"),
    Source::Attr("gcp.vertex.agent.tool_response"),
    Source::Attr("tool_response"),
    // Strands Agents, legacy conventions: the result is the tool's
    // `gen_ai.choice` event.
    Source::Event {
        event: "gen_ai.choice",
        key: "message",
    },
];

const GENAI_ARGS: &[Source] = &[
    Source::Attr("gen_ai.tool.call.arguments"),
    Source::Attr("gcp.vertex.agent.tool_call_args"),
    Source::Attr("tool_arguments"),
    // Strands Agents, legacy conventions: the arguments only in the
    // `gen_ai.tool.message` event.
    Source::Event {
        event: "gen_ai.tool.message",
        key: "content",
    },
];

/// Every convention, in precedence order.
pub static CONVENTIONS: &[Convention] = &[
    Convention {
        id: ToolConvention::Mcp,
        spec: "OpenTelemetry MCP semantic conventions; the MCP SDKs' native spans",
        observed_in: "MCP Python SDK 2.x (client `MCP send tools/call <tool>`, server \
                      `tools/call <tool>`), under pydantic-ai and the OpenAI Agents SDK",
        marks: |s| match attrs::str_ref(s.attrs, "mcp.method.name") {
            Some("tools/call") => Mark::Call,
            Some(_) => Mark::Protocol,
            None => Mark::No,
        },
        name: &["gen_ai.tool.name", "mcp.tool.name"],
        name_prefixes: &["MCP send tools/call ", "tools/call "],
        call_id: &["gen_ai.tool.call.id", "jsonrpc.request.id"],
        args: &[Source::Attr("gen_ai.tool.call.arguments")],
        args_shape: ArgsShape::Plain,
        result: &[
            Source::Attr("gen_ai.tool.call.result"),
            Source::Attr("mcp.tool.result"),
        ],
    },
    Convention {
        id: ToolConvention::OpenInference,
        spec: "OpenInference semantic conventions (TOOL span kind); before GenAI, because \
               OpenInference's GenAI mapping (OPENINFERENCE_ENABLE_GENAI_SEMCONV) copies \
               the tool's schema into gen_ai.tool.call.arguments",
        observed_in: "OpenAI Agents SDK + openinference-instrumentation-openai-agents, \
                      smolagents + openinference-instrumentation-smolagents, LangGraph",
        marks: |s| {
            if s.is("openinference.span.kind", "TOOL") {
                Mark::Call
            } else {
                Mark::No
            }
        },
        name: &["tool.name"],
        name_prefixes: &[],
        call_id: &["tool_call.id", "tool.id"],
        // `tool.parameters` is the tool's JSON schema, the same on every call.
        args: &[Source::Attr("input.value")],
        args_shape: ArgsShape::Wrapped,
        result: &[Source::Attr("output.value")],
    },
    Convention {
        id: ToolConvention::GenAi,
        spec: "OpenTelemetry GenAI semantic conventions (`execute_tool`), attributes \
               and events, legacy and latest experimental",
        observed_in: "pydantic-ai 2.68 (Logfire's GenAI spans), Google ADK 2.x \
                      (scope gcp.vertex.agent), Strands Agents 1.x",
        marks: |s| {
            if s.is("gen_ai.operation.name", "execute_tool") {
                Mark::Call
            } else {
                Mark::No
            }
        },
        name: &["gen_ai.tool.name"],
        name_prefixes: &["execute_tool "],
        call_id: &["gen_ai.tool.call.id"],
        args: GENAI_ARGS,
        args_shape: ArgsShape::Plain,
        result: GENAI_RESULT,
    },
    Convention {
        id: ToolConvention::OpenLlmetry,
        spec: "OpenLLMetry (Traceloop) `traceloop.span.kind = tool`",
        observed_in: "traceloop-sdk's @tool decorator",
        marks: |s| {
            if s.is("traceloop.span.kind", "tool") {
                Mark::Call
            } else {
                Mark::No
            }
        },
        name: &["traceloop.entity.name"],
        name_prefixes: &[],
        call_id: &[],
        args: &[Source::Attr("traceloop.entity.input")],
        args_shape: ArgsShape::Wrapped,
        result: &[Source::Attr("traceloop.entity.output")],
    },
    Convention {
        id: ToolConvention::VercelAi,
        spec: "the Vercel AI SDK's `ai.toolCall` spans",
        observed_in: "AI SDK 6.0 (`experimental_telemetry`); AI SDK 7.0 with @ai-sdk/otel \
                      writes GenAI spans, read by that convention",
        marks: |s| {
            if s.has("ai.toolCall.name") {
                Mark::Call
            } else {
                Mark::No
            }
        },
        name: &["ai.toolCall.name"],
        name_prefixes: &[],
        call_id: &["ai.toolCall.id"],
        args: &[
            Source::Attr("ai.toolCall.args"),
            Source::Attr("ai.toolCall.input"),
        ],
        args_shape: ArgsShape::Plain,
        result: &[
            Source::Attr("ai.toolCall.result"),
            Source::Attr("ai.toolCall.output"),
        ],
    },
    Convention {
        id: ToolConvention::Fallback,
        spec: "none: a span that names a tool (`gen_ai.tool.name`, `tool.name`) in no \
               shape above, read as GenAI",
        observed_in: "hand-made spans",
        marks: |s| {
            if s.has("gen_ai.tool.name") || s.has("tool.name") {
                Mark::Call
            } else {
                Mark::No
            }
        },
        name: &["gen_ai.tool.name", "tool.name"],
        name_prefixes: &["execute_tool "],
        call_id: &["gen_ai.tool.call.id"],
        args: GENAI_ARGS,
        args_shape: ArgsShape::Plain,
        result: &[
            Source::Attr("gen_ai.tool.call.result"),
            Source::Attr("output.value"),
            Source::Attr("tool.output"),
            Source::Attr("tool_response"),
        ],
    },
];

/// A tool call as a convention reads it, borrowed from the span.
#[derive(Debug, Clone)]
pub struct Read<'a> {
    pub convention: &'static Convention,
    pub name: Cow<'a, str>,
    pub call_id: Option<Cow<'a, str>>,
    pub args: Option<&'a Value>,
    pub result: Option<&'a Value>,
}

/// A framework's own bookkeeping that its tracing records as a tool call:
/// under scope `scope` (or a dotted name below it), a tool named `tool`
/// (`*` any run of characters) is no call of the agent's.
pub struct Bookkeeping {
    pub scope: &'static str,
    pub tool: &'static str,
    pub what: &'static str,
}

/// Every framework's bookkeeping that looks like a tool call.
pub static BOOKKEEPING: &[Bookkeeping] = &[
    Bookkeeping {
        scope: "openinference.instrumentation.smolagents",
        tool: "final_answer",
        what: "smolagents' final answer (smolagents 1.26)",
    },
    Bookkeeping {
        scope: "gcp.vertex.agent",
        tool: "transfer_to_agent",
        what: "Google ADK's hand-off to another agent (TransferToAgentTool, ADK 2.13)",
    },
    Bookkeeping {
        scope: "strands",
        tool: "handoff_to_agent",
        what: "Strands' hand-off inside a Swarm (strands-agents 1.62)",
    },
    Bookkeeping {
        scope: "openinference.instrumentation.openai_agents",
        tool: "handoff to *",
        what: "the OpenAI Agents SDK's hand-off span (HandoffSpanData, openai-agents 0.24)",
    },
];

/// `scope` is `prefix` or a dotted name under it (`prefix.…`); every scope
/// is under `""`.
pub fn under(scope: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || scope
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// `name` matches `pattern`, where `*` is any run of characters.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The tool call a span is, read by the first convention that marks it;
/// `None` for a span no convention marks, for protocol spans (MCP's
/// `initialize`, `tools/list`) and for a framework's bookkeeping
/// ([`BOOKKEEPING`]).
pub fn read<'a>(span: &SpanView<'a>) -> Option<Read<'a>> {
    let (c, mark) = CONVENTIONS.iter().find_map(|c| match (c.marks)(span) {
        Mark::No => None,
        m => Some((c, m)),
    })?;
    if mark != Mark::Call {
        return None;
    }
    let r = read_with(c, span);
    let bookkeeping = BOOKKEEPING
        .iter()
        .any(|b| under(span.scope, b.scope) && glob(b.tool, &r.name));
    (!bookkeeping).then_some(r)
}

fn read_with<'a>(c: &'static Convention, s: &SpanView<'a>) -> Read<'a> {
    let first = |keys: &[&str]| keys.iter().find_map(|k| attrs::string_cow(s.attrs, k));
    let name = first(c.name).unwrap_or_else(|| {
        let n = c
            .name_prefixes
            .iter()
            .find_map(|p| s.name.strip_prefix(p))
            .unwrap_or(s.name);
        Cow::Borrowed(n.trim())
    });
    Read {
        convention: c,
        name,
        call_id: first(c.call_id),
        args: s.find(c.args),
        result: s.find(c.result),
    }
}

/// The arguments an instrumentor's wrapper holds ([`ArgsShape::Wrapped`]):
/// `Some` only when `v` is such a wrapper — an object with `kwargs` and no
/// keys but `args`, `kwargs` and `sanitize_inputs_outputs`.
pub fn unwrap_args(v: &serde_json::Value) -> Option<serde_json::Value> {
    let o = v.as_object()?;
    let kwargs = o.get("kwargs")?;
    if !o
        .keys()
        .all(|k| matches!(k.as_str(), "args" | "kwargs" | "sanitize_inputs_outputs"))
    {
        return None;
    }
    let positional = o
        .get("args")
        .filter(|a| !matches!(a, serde_json::Value::Array(v) if v.is_empty()))
        .filter(|a| !a.is_null());
    match (kwargs, positional) {
        (serde_json::Value::Object(_), None) => Some(kwargs.clone()),
        (serde_json::Value::Null, None) => Some(serde_json::Value::Null),
        (_, p) => {
            let mut out = serde_json::Map::new();
            if let Some(p) = p {
                out.insert("args".into(), p.clone());
            }
            match kwargs {
                serde_json::Value::Object(k) => out.extend(k.clone()),
                serde_json::Value::Null => {}
                other => {
                    out.insert("kwargs".into(), other.clone());
                }
            }
            Some(serde_json::Value::Object(out))
        }
    }
}
