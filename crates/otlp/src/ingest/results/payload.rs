//! A recorded tool result as JSON, and the payload inside the envelopes the
//! frameworks record it in: ADK's function response (`{"result": …}`), a
//! serialized LangChain message (`{"type": "tool", "data": {…, "content":
//! …}}`, `{"lc": 1, …, "kwargs": {…}}`), an MCP text content block
//! (`{"type": "text", "text": …}`) or Strands' (`[{"text": …}]`), whose
//! text or content is often JSON
//! again. The failure rules and the users' shapes look at every layer; the
//! result's hash is of the LangChain message's content, not of the message
//! with its per-call id.

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use serde_json::Value as Json;

use super::super::attrs;

/// How many envelopes deep the layers go.
const MAX_LAYERS: usize = 4;

/// A recorded result as JSON: a string holding JSON is that JSON (a JSON
/// object cut short read as far as it is whole, [`cut_object`]), other text
/// a JSON string; OTLP maps and arrays as their JSON.
pub fn parse(v: &Value) -> Option<Json> {
    match v {
        Value::StringValue(s) => Some(parse_text(s)),
        Value::KvlistValue(_) | Value::ArrayValue(_) => Some(attrs::to_value(v)),
        _ => None,
    }
}

/// Text as JSON when it is, else as a JSON string.
pub fn parse_text(s: &str) -> Json {
    let t = s.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        match serde_json::from_str::<Json>(t) {
            Ok(j) => return j,
            // Only text that ran out is read as cut short.
            Err(e) if e.is_eof() => {
                if let Some(j) = cut_object(t) {
                    return j;
                }
            }
            Err(_) => {}
        }
    }
    Json::String(s.to_string())
}

/// The result and the payloads inside its envelopes, outermost first.
pub fn layers(result: Json) -> Vec<Json> {
    let mut out = vec![result];
    while out.len() < MAX_LAYERS {
        match inner(out.last().expect("one layer at least")) {
            Some(j) => out.push(j),
            None => break,
        }
    }
    out
}

/// What an envelope holds, when `j` is one.
fn inner(j: &Json) -> Option<Json> {
    let text_of = |v: &Json| match v {
        Json::String(s) => parse_text(s),
        other => other.clone(),
    };
    match j {
        Json::Object(o) => {
            if let Some(text) = text_block(j) {
                return Some(parse_text(text));
            }
            if o.len() == 1 {
                return o.get("result").or_else(|| o.get("response")).map(text_of);
            }
            if o.keys().all(|k| matches!(k.as_str(), "type" | "data")) {
                return o.get("data").filter(|d| d.is_object()).cloned();
            }
            if o.contains_key("lc") {
                return o.get("kwargs").filter(|d| d.is_object()).cloned();
            }
            if is_langchain_message(j) {
                return o.get("content").map(text_of);
            }
            None
        }
        Json::Array(items) => items.iter().find_map(text_block).map(parse_text),
        _ => None,
    }
}

/// A LangChain tool message (its `data` or `kwargs`): content and a call id.
fn is_langchain_message(j: &Json) -> bool {
    j.get("content").is_some() && j.get("tool_call_id").is_some()
}

/// The text of a text content block: MCP's `{"type": "text", "text": …}`,
/// Strands' `{"text": …}` (a tool's return value as Strands records it).
pub fn text_block(b: &Json) -> Option<&str> {
    let o = b.as_object()?;
    let typed = match o.get("type") {
        None => true,
        Some(t) => t.as_str() == Some("text"),
    };
    let only_text = o.keys().all(|k| matches!(k.as_str(), "type" | "text"));
    (typed && only_text)
        .then(|| o.get("text")?.as_str())
        .flatten()
}

/// The JSON whose hash stands for a result, when it is not the recorded
/// value itself: a LangChain tool message's content (the message carries a
/// per-call id, so hashing it whole makes every result differ). Cheap for
/// every other result: only text naming a `tool_call_id` is parsed.
pub fn hashed_payload(v: &Value) -> Option<Json> {
    let Value::StringValue(s) = v else {
        return None;
    };
    if !s.contains("\"tool_call_id\"") {
        return None;
    }
    layers(parse_text(s))
        .into_iter()
        .skip_while(|l| !is_langchain_message(l))
        .nth(1)
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
    // The last top-level comma: every member before it is whole. Only
    // ASCII bytes are looked at, so a multi-byte character never matches
    // and the cut is always at a character boundary (a comma).
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
