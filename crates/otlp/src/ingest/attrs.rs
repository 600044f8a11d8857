//! Reading OTLP attributes: typed look-ups by key and the JSON rendering the
//! trace view keeps.

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};

/// The value under `key`, if present and not empty.
pub fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// A string attribute; numbers and booleans are rendered, empty strings are absent.
pub fn string(attrs: &[KeyValue], key: &str) -> Option<String> {
    string_cow(attrs, key).map(Cow::into_owned)
}

/// [`string`], borrowed when the attribute is a string (no allocation).
pub fn string_cow<'a>(attrs: &'a [KeyValue], key: &str) -> Option<Cow<'a, str>> {
    match get(attrs, key)? {
        Value::StringValue(s) if s.is_empty() => None,
        Value::StringValue(s) => Some(Cow::Borrowed(s)),
        Value::IntValue(i) => Some(Cow::Owned(i.to_string())),
        Value::DoubleValue(d) => Some(Cow::Owned(d.to_string())),
        Value::BoolValue(b) => Some(Cow::Owned(b.to_string())),
        other => Some(Cow::Owned(value_to_json(other))),
    }
}

/// A string attribute borrowed, only when it really is a string.
pub fn str_ref<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match get(attrs, key)? {
        Value::StringValue(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// An integer attribute; integral doubles and numeric strings are accepted,
/// since exporters disagree on how to send a status code.
pub fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match get(attrs, key)? {
        Value::IntValue(i) => Some(*i),
        Value::DoubleValue(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A float attribute; integers and numeric strings are accepted.
pub fn float(attrs: &[KeyValue], key: &str) -> Option<f64> {
    match get(attrs, key)? {
        Value::DoubleValue(d) if d.is_finite() => Some(*d),
        Value::IntValue(i) => Some(*i as f64),
        Value::StringValue(s) => s.trim().parse().ok().filter(|d: &f64| d.is_finite()),
        _ => None,
    }
}

/// An attribute as a JSON value: a string holding JSON is parsed (other
/// strings stay strings); structured values (maps, arrays — the GenAI
/// conventions' `gen_ai.tool.call.arguments` may be either) are converted.
pub fn json(attrs: &[KeyValue], key: &str) -> Option<serde_json::Value> {
    Some(match get(attrs, key)? {
        Value::StringValue(s) => {
            serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.clone()))
        }
        other => to_value(other),
    })
}

/// An OTLP value as a JSON value.
pub fn to_value(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::StringValue(s) => J::String(s.clone()),
        Value::BoolValue(b) => J::Bool(*b),
        Value::IntValue(i) => J::from(*i),
        Value::DoubleValue(d) => serde_json::Number::from_f64(*d).map_or(J::Null, J::Number),
        Value::ArrayValue(a) => J::Array(
            a.values
                .iter()
                .map(|item| item.value.as_ref().map_or(J::Null, to_value))
                .collect(),
        ),
        Value::KvlistValue(kv) => J::Object(
            kv.values
                .iter()
                .map(|kv| {
                    let v = kv.value.as_ref().and_then(|v| v.value.as_ref());
                    (kv.key.clone(), v.map_or(J::Null, to_value))
                })
                .collect(),
        ),
        Value::BytesValue(b) => J::String(crate::model::to_hex(b)),
        Value::StringValueStrindex(i) => J::from(*i),
    }
}

/// The first key of `keys` that holds a non-empty string.
pub fn first_string(attrs: &[KeyValue], keys: &[&str]) -> Option<String> {
    first_string_cow(attrs, keys).map(Cow::into_owned)
}

/// [`first_string`], borrowed when it can be.
pub fn first_string_cow<'a>(attrs: &'a [KeyValue], keys: &[&str]) -> Option<Cow<'a, str>> {
    keys.iter().find_map(|k| string_cow(attrs, k))
}

/// Attributes as one JSON object (`{}` when there are none).
pub fn to_json(attrs: &[KeyValue]) -> String {
    let mut out = String::with_capacity(16 + attrs.len() * 32);
    push_object(&mut out, attrs);
    out
}

/// Attributes as one JSON object, appended to `out`.
pub fn push_object(out: &mut String, attrs: &[KeyValue]) {
    out.push('{');
    for (i, kv) in attrs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str(out, &kv.key);
        out.push(':');
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(v) => push_value(out, v),
            None => out.push_str("null"),
        }
    }
    out.push('}');
}

/// One attribute value as JSON text.
pub fn value_to_json(v: &Value) -> String {
    let mut out = String::new();
    push_value(&mut out, v);
    out
}

fn push_value(out: &mut String, v: &Value) {
    use std::fmt::Write;
    match v {
        Value::StringValue(s) => push_str(out, s),
        Value::BoolValue(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::IntValue(i) => {
            let _ = write!(out, "{i}");
        }
        Value::DoubleValue(d) if d.is_finite() => {
            let _ = write!(out, "{d}");
        }
        Value::DoubleValue(d) => push_str(out, &d.to_string()),
        Value::ArrayValue(a) => {
            out.push('[');
            for (i, item) in a.values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match item.value.as_ref() {
                    Some(v) => push_value(out, v),
                    None => out.push_str("null"),
                }
            }
            out.push(']');
        }
        Value::KvlistValue(kv) => push_object(out, &kv.values),
        Value::BytesValue(b) => push_str(out, &crate::model::to_hex(b)),
        // Only profiles use string-table references; keep the index.
        Value::StringValueStrindex(i) => {
            let _ = write!(out, "{i}");
        }
    }
}

/// A JSON string literal, escaped. Runs of characters that need no escape
/// are copied whole, found eight bytes at a time.
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            if !needs_escape(word) {
                i += 8;
                continue;
            }
        }
        // Somewhere in these eight bytes (or the last few): byte by byte.
        for j in i..(i + 8).min(bytes.len()) {
            let escape = match bytes[j] {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..=0x1f => "",
                _ => continue,
            };
            out.push_str(&s[start..j]);
            if escape.is_empty() {
                use std::fmt::Write;
                let _ = write!(out, "\\u{:04x}", bytes[j]);
            } else {
                out.push_str(escape);
            }
            start = j + 1;
        }
        i += 8;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Whether any of eight bytes is a control character, `"` or `\`.
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let has_control = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    has_control
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

/// Build a string attribute (used by tests and the JSON decoder).
pub fn kv_string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.to_string())),
        }),
        ..Default::default()
    }
}
