//! Failures that live only in a tool's result (docs/detection.md §3): the
//! documented payload shapes that say a call failed although its span did
//! not — MCP's `isError` and its content text, `ok: false`,
//! `success: false`, a non-empty `error`, `status: "error"` with its
//! `error_message` (Google ADK's error dict, Strands' tool result), ADK's
//! `ERROR_HANDLED_BY_…` reflection with `error_type` / `error_details` —
//! and the text the OpenAI Agents SDK hands the model for a failed tool.
//! The class comes from a status inside, else from the words, else
//! `unknown`.

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use serde_json::{Map, Value as Json};

use super::classify::{from_http, from_text};
use super::{attrs, message};
use crate::model::{ErrorClass, ToolConvention};

/// Text results that say the tool failed, by the convention that records
/// them as the tool's output although the call failed: the MCP SDKs' text
/// of a failing tool (the content of an `isError` result, which the OpenAI
/// Agents SDK hands the model as ordinary output, as text or as a text
/// content block) and the OpenAI Agents SDK's default
/// `failure_error_function` (both recorded through OpenInference).
const FAILED_TEXT: &[(ToolConvention, &str)] = &[
    (ToolConvention::OpenInference, "Error executing tool "),
    (
        ToolConvention::OpenInference,
        "An error occurred while running the tool",
    ),
];

/// The class of a recorded result that says the call failed; `None` when
/// it does not say so.
pub fn failure(result: &Value, convention: ToolConvention) -> Option<ErrorClass> {
    let json = match result {
        Value::StringValue(s) => {
            let t = s.trim_start();
            let parsed = (t.starts_with('{') || t.starts_with('['))
                .then(|| {
                    serde_json::from_str::<Json>(t)
                        .ok()
                        .or_else(|| cut_object(t))
                })
                .flatten();
            match parsed {
                Some(json) => json,
                None => return failed_text(t, convention),
            }
        }
        Value::KvlistValue(_) | Value::ArrayValue(_) => attrs::to_value(result),
        _ => return None,
    };
    json_failure(&json, 0).or_else(|| failed_text(content_text(&json)?, convention))
}

/// A text result that says the tool failed, in a convention that records
/// such texts ([`FAILED_TEXT`]): the class of its words, else `unknown`.
fn failed_text(text: &str, convention: ToolConvention) -> Option<ErrorClass> {
    let text = text.trim_start();
    FAILED_TEXT
        .iter()
        .any(|(c, prefix)| *c == convention && text.starts_with(prefix))
        .then(|| from_text(text).unwrap_or(ErrorClass::Unknown))
}

/// The text of an MCP text content block (`{"type": "text", "text": …}`),
/// or of the first one of a list of them: what a framework that hands an
/// MCP result to the model as output records.
fn content_text(v: &Json) -> Option<&str> {
    fn block(b: &Json) -> Option<&str> {
        (b.get("type")?.as_str()? == "text")
            .then(|| b.get("text")?.as_str())
            .flatten()
    }
    match v {
        Json::Array(items) => items.iter().find_map(block),
        other => block(other),
    }
}

/// A JSON object cut short — an SDK's attribute length limit
/// (`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`), a capture that trims long values
/// — read as far as its complete top-level members go: `None` when not
/// even one is whole, or the text is no object.
pub fn cut_object(text: &str) -> Option<Json> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    // The last top-level comma: every member before it is whole.
    let (mut depth, mut in_string, mut escaped, mut last) = (0usize, false, false, None);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => last = Some(i),
            _ => {}
        }
    }
    let head = &text[..last?];
    serde_json::from_str(&format!("{head}}}")).ok()
}

/// [`failure`] of a JSON result. A wrapper is looked into, once: one key
/// (`result`, `response`: ADK's function response), or a serialized
/// LangChain message (`{"type": "tool", "data": {...}}` from
/// `message_to_dict`, `{"lc": 1, "type": "constructor", "kwargs": {...}}`
/// from `dumpd`), whose `status: "error"` and `content` say a tool failed.
pub fn json_failure(value: &Json, depth: u8) -> Option<ErrorClass> {
    let obj = match value {
        Json::Object(o) => o,
        // Strands' legacy `gen_ai.choice` message: the tool result's content
        // blocks; a list says nothing of failure on its own.
        _ => return None,
    };
    if depth == 0 {
        let wrapped = match obj.len() {
            1 => obj.get("result").or_else(|| obj.get("response")),
            _ if obj.keys().all(|k| matches!(k.as_str(), "type" | "data")) => obj.get("data"),
            _ if obj.get("lc").is_some() => obj.get("kwargs"),
            _ => None,
        };
        if let Some(inner @ Json::Object(_)) = wrapped {
            return json_failure(inner, 1);
        }
    }
    let flag = |k: &str, v: bool| obj.get(k).and_then(Json::as_bool) == Some(v);
    let text = |k: &str| {
        obj.get(k)
            .and_then(Json::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    let error = obj.get("error").filter(|e| match e {
        Json::Null => false,
        Json::String(s) => !s.is_empty(),
        Json::Bool(b) => *b,
        Json::Object(o) => !o.is_empty(),
        _ => true,
    });
    let status_says = text("status").is_some_and(|s| s.eq_ignore_ascii_case("error"));
    let reflected = text("response_type").is_some_and(|t| t.contains("ERROR"));
    let failed = flag("isError", true)
        || flag("is_error", true)
        || flag("ok", false)
        || flag("success", false)
        || error.is_some()
        || status_says
        || reflected
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
    let content = || match obj.get("content")? {
        Json::Array(items) => {
            message::classify(items.iter().filter_map(|i| i.get("text")?.as_str()))
        }
        Json::String(s) => from_text(s),
        _ => None,
    };
    Some(
        inner
            .or_else(|| status_in(obj))
            .or_else(said)
            .or_else(content)
            .unwrap_or(ErrorClass::Unknown),
    )
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

/// A result shape a user declared for their own tools (`[[ingest.result_failures]]`,
/// docs/detection.md §3): where in the tool's result the sign of failure
/// is, and where its words are.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResultShape {
    /// A JSON pointer (RFC 6901, `/outcome/state`) into the result: the
    /// value that says whether the call failed.
    pub pointer: String,
    /// The values there that mean failure, compared as text (`"FAILED"`,
    /// `"false"`, `"500"`). Empty: any value but `null`, `false`, `0` and `""`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equals: Vec<String>,
    /// A JSON pointer to the failure's words (or status), classified as
    /// an error message is; without it the class is `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tools it applies to: names, `*` matching any run of characters
    /// (`book_*`). Empty: every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

impl ResultShape {
    /// What is wrong with the shape: the key, and what was expected and
    /// what came (`None`: it is fine).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let pointer = |key: &'static str, p: &str| {
            (!p.is_empty() && !p.starts_with('/')).then(|| {
                (
                    key,
                    format!("expected a JSON pointer starting with \"/\" (\"/status\"), got {p:?}"),
                )
            })
        };
        pointer("pointer", &self.pointer)
            .or_else(|| self.message.as_deref().and_then(|m| pointer("message", m)))
            .or_else(|| {
                self.equals
                    .iter()
                    .any(|e| e.is_empty())
                    .then(|| ("equals", "expected non-empty values, got \"\"".to_string()))
            })
            .or_else(|| {
                self.tools.iter().any(|t| t.is_empty()).then(|| {
                    (
                        "tools",
                        "expected tool names or patterns such as \"book_*\", got \"\"".to_string(),
                    )
                })
            })
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|p| glob(p, tool))
    }

    /// The class this shape reads in `result` (a JSON result of `tool`);
    /// `None` when it does not apply or the result does not say it failed.
    pub fn failure(&self, tool: &str, result: &Json) -> Option<ErrorClass> {
        if !self.applies_to(tool) {
            return None;
        }
        let v = result.pointer(&self.pointer)?;
        let text = match v {
            Json::String(s) => s.clone(),
            Json::Null => return None,
            other => other.to_string(),
        };
        let failed = if self.equals.is_empty() {
            !matches!(text.as_str(), "" | "false" | "0")
        } else {
            self.equals.contains(&text)
        };
        if !failed {
            return None;
        }
        let words = self.message.as_deref().and_then(|m| result.pointer(m));
        let class = words.and_then(|w| match w {
            Json::String(s) => from_text(s),
            Json::Number(n) => n
                .as_i64()
                .and_then(|s| i32::try_from(s).ok())
                .and_then(from_http),
            Json::Object(o) => status_in(o).or_else(|| {
                ["message", "type", "error"]
                    .iter()
                    .filter_map(|k| o.get(*k)?.as_str())
                    .find_map(from_text)
            }),
            _ => None,
        });
        Some(class.unwrap_or(ErrorClass::Unknown))
    }
}

/// `name` matches `pattern`, where `*` is any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
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
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The shapes users declared, in the order they are tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultShapes(pub Vec<ResultShape>);

impl ResultShapes {
    /// None declared.
    pub const NONE: &'static ResultShapes = &ResultShapes(Vec::new());

    /// The class the first shape that applies reads in a recorded result.
    pub fn failure(&self, tool: &str, result: &Value) -> Option<ErrorClass> {
        if self.0.is_empty() {
            return None;
        }
        let json = match result {
            Value::StringValue(s) => serde_json::from_str::<Json>(s).ok()?,
            Value::KvlistValue(_) | Value::ArrayValue(_) => attrs::to_value(result),
            _ => return None,
        };
        self.0.iter().find_map(|s| s.failure(tool, &json))
    }
}

/// A tool call's recorded result, for [`super::classify::classify_call`].
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'a> {
    pub tool: &'a str,
    pub value: &'a Value,
    pub convention: ToolConvention,
}

impl Recorded<'_> {
    /// The class the result says the call failed with: the user's shapes
    /// first (they know their own tools), then the documented ones.
    pub fn failure(&self, shapes: &ResultShapes) -> Option<ErrorClass> {
        shapes
            .failure(self.tool, self.value)
            .or_else(|| failure(self.value, self.convention))
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_runs_of_characters_only_where_a_star_is() {
        assert!(glob("book_*", "book_flight"));
        assert!(glob("book_*", "book_"));
        assert!(!glob("book_*", "rebook_flight"));
        assert!(glob("*_flight", "book_flight"));
        assert!(glob("a*b*c", "a-b-c"));
        assert!(glob("a*b*c", "abc"));
        assert!(!glob("a*b*c", "acb"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
        assert!(glob("*", "anything"));
        assert!(!glob("ab*ab", "ab"));
    }
}
