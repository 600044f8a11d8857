//! Failures that live only in a tool's result (docs/detection.md §3): the
//! documented payload shapes that say a call failed although its span did
//! not — MCP's `isError` and its content text, `ok: false`,
//! `success: false`, a non-empty `error`, `status: "error"` with its
//! `error_message` (Google ADK's error dict, Strands' tool result,
//! LangChain's tool message), ADK's `ERROR_HANDLED_BY_…` reflection with
//! `error_type` / `error_details` — the text the OpenAI Agents SDK hands
//! the model for a failed tool, and the shapes users declare
//! ([`shapes`]). Each is looked for in every layer of the result
//! ([`payload::layers`]: the framework's envelope, then what it holds). The
//! class comes from a status inside, else from the words, else `unknown`.

pub mod payload;
pub mod shapes;

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use serde_json::{Map, Value as Json};

use super::message::{self, from_http, from_text};
use crate::model::ErrorClass;
pub use payload::cut_object;
pub use shapes::{ResultShape, ResultShapes};

/// A failure a result says: its class, and the name it gives it (ADK's
/// `error_type`, the value of a user's shape), kept as the raw error name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: ErrorClass,
    pub name: Option<String>,
}

/// The OpenAI Agents SDK's default `failure_error_function`: the text it
/// hands the model (and OpenInference records as the output) for a failed
/// tool, under any convention that records it.
const AGENTS_SDK_FAILED: &str = "An error occurred while running the tool";

/// The MCP SDKs' text of a failing tool — the content of an `isError`
/// result, which some frameworks hand the model as ordinary output (the
/// OpenAI Agents SDK, as text or a text content block): `Error executing
/// tool <name>` naming the very tool called, under any convention.
const MCP_FAILED: &str = "Error executing tool ";

/// Words in a JSON result without which no documented shape can say it
/// failed: a result with none of them is not parsed at all.
const FAILURE_MARKS: &[&str] = &["rror", "RROR", "\"ok\"", "\"success\""];

/// A tool call's recorded result, for [`super::classify::classify_call`].
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'a> {
    pub tool: &'a str,
    pub value: &'a Value,
}

impl Recorded<'_> {
    /// The failure the result says, in its first layer that says one: the
    /// users' shapes first (they know their own tools), then the
    /// documented ones.
    pub fn failure(&self, shapes: &ResultShapes) -> Option<Failure> {
        if shapes.is_empty() {
            if let Value::StringValue(s) = self.value {
                // Most results are a success's: skip the parse when no
                // documented shape could say otherwise.
                if !FAILURE_MARKS.iter().any(|m| s.contains(m)) {
                    return None;
                }
            }
        }
        let layers = payload::layers(payload::parse(self.value)?);
        layers.iter().find_map(|layer| {
            shapes
                .failure(self.tool, layer)
                .or_else(|| documented(layer, self.tool))
        })
    }
}

/// One layer of a result of `tool`, by the documented shapes.
fn documented(layer: &Json, tool: &str) -> Option<Failure> {
    match layer {
        Json::Object(o) => object_failure(o),
        Json::String(s) => failed_text(s, tool).map(|class| Failure { class, name: None }),
        _ => None,
    }
}

/// A text result of `tool` that says it failed ([`MCP_FAILED`] naming the
/// tool, [`AGENTS_SDK_FAILED`]): the class of its words, else `unknown`.
fn failed_text(text: &str, tool: &str) -> Option<ErrorClass> {
    let text = text.trim_start();
    let mcp = text
        .strip_prefix(MCP_FAILED)
        .and_then(|rest| rest.strip_prefix(tool))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', ' ', '.']));
    (mcp || text.starts_with(AGENTS_SDK_FAILED))
        .then(|| from_text(text).unwrap_or(ErrorClass::Unknown))
}

/// Whether an `error` member says something failed: a non-empty text or
/// object or list, `true`, a non-zero number (`"error": 0`, `[]`, `null`,
/// `false` are a success's).
fn error_set(e: &Json) -> bool {
    match e {
        Json::Null => false,
        Json::String(s) => !s.trim().is_empty(),
        Json::Bool(b) => *b,
        Json::Object(o) => !o.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Number(n) => n.as_f64() != Some(0.0),
    }
}

/// The documented shapes of one object.
fn object_failure(obj: &Map<String, Json>) -> Option<Failure> {
    let flag = |k: &str, v: bool| obj.get(k).and_then(Json::as_bool) == Some(v);
    let text = |k: &str| {
        obj.get(k)
            .and_then(Json::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    let error = obj.get("error").filter(|e| error_set(e));
    let failed = flag("isError", true)
        || flag("is_error", true)
        || flag("ok", false)
        || flag("success", false)
        || error.is_some()
        || text("status").is_some_and(|s| s.eq_ignore_ascii_case("error"))
        || text("response_type").is_some_and(|t| t.contains("ERROR"))
        || text("error_message").is_some()
        || text("error_details").is_some();
    if !failed {
        return None;
    }
    let inner = error.and_then(|e| match e {
        Json::Object(o) => status_in(o).or_else(|| {
            ["type", "message"]
                .iter()
                .filter_map(|k| o.get(*k)?.as_str())
                .find_map(from_text)
        }),
        Json::String(s) => from_text(s),
        _ => None,
    });
    let said = || {
        message::classify(
            ["error_details", "error_message", "message", "error_type"]
                .iter()
                .filter_map(|k| text(k)),
        )
    };
    // MCP's `CallToolResult` and Strands' tool result: the text content
    // says why; a LangChain tool message's content is the text itself.
    let content = || obj.get("content").and_then(class_of_words);
    let class = inner
        .or_else(|| status_in(obj))
        .or_else(said)
        .or_else(content)
        .unwrap_or(ErrorClass::Unknown);
    Some(Failure {
        class,
        name: text("error_type").map(str::to_string),
    })
}

/// The class words (or a status, or MCP text content blocks) say.
pub(crate) fn class_of_words(v: &Json) -> Option<ErrorClass> {
    match v {
        Json::String(s) => from_text(s),
        Json::Number(n) => n
            .as_i64()
            .and_then(|s| i32::try_from(s).ok())
            .and_then(from_http),
        // Text blocks: MCP's `{"type": "text", "text": …}`, Strands' `{"text": …}`.
        Json::Array(items) => message::classify(items.iter().filter_map(|i| match i {
            Json::String(s) => Some(s.as_str()),
            other => other.get("text")?.as_str(),
        })),
        Json::Object(o) => status_in(o).or_else(|| {
            ["message", "type", "error", "text"]
                .iter()
                .filter_map(|k| o.get(*k)?.as_str())
                .find_map(from_text)
        }),
        _ => None,
    }
}

/// An HTTP status a result object carries (`status`, `statusCode`, `code`).
fn status_in(o: &Map<String, Json>) -> Option<ErrorClass> {
    ["status", "statusCode", "status_code", "code"]
        .iter()
        .filter_map(|k| o.get(*k))
        .find_map(|v| v.as_i64().or_else(|| v.as_str()?.trim().parse().ok()))
        .and_then(|s| i32::try_from(s).ok())
        .and_then(from_http)
}
