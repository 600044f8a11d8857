//! The JSON walk's reading of one value: objects, fields by either key
//! spelling, lists, strings, 64- and 32-bit integers, enums by number or
//! name, and ids in hex or base64; every error names the field's path.

use serde_json::{Map, Value};

use super::{JsonError, Result};

pub(super) fn err<T>(path: &str, message: impl Into<String>) -> Result<T> {
    Err(JsonError {
        path: path.to_string(),
        message: message.into(),
    })
}

pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().map_or_else(
        || err(path, format!("expected an object, got {}", kind_of(v))),
        Ok,
    )
}

/// The field under its camelCase or snake_case name; `null` counts as absent.
pub(super) fn field<'a>(
    obj: &'a Map<String, Value>,
    camel: &str,
    snake: &str,
) -> Option<(&'a Value, String)> {
    [camel, snake].into_iter().find_map(|k| {
        obj.get(k)
            .filter(|v| !v.is_null())
            .map(|v| (v, k.to_string()))
    })
}

pub(super) fn list<T>(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    item: fn(&Value, &str) -> Result<T>,
) -> Result<Vec<T>> {
    let Some((v, key)) = field(obj, camel, snake) else {
        return Ok(Vec::new());
    };
    let p = format!("{path}.{key}");
    let arr = v.as_array().map_or_else(
        || err(&p, format!("expected an array, got {}", kind_of(v))),
        Ok,
    )?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| item(v, &format!("{p}[{i}]")))
        .collect()
}

pub(super) fn string(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
) -> Result<String> {
    match field(obj, camel, snake) {
        None => Ok(String::new()),
        Some((Value::String(s), _)) => Ok(s.clone()),
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected a string, got {}", kind_of(v)),
        ),
    }
}

/// A 64-bit integer given as a number or a decimal string.
pub(super) fn int64(v: &Value, path: &str) -> Result<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i64)
            })
            .map_or_else(
                || err(path, format!("expected a 64-bit integer, got {n}")),
                Ok,
            ),
        Value::String(s) => s.trim().parse().map_or_else(
            |_| err(path, format!("expected a 64-bit integer, got {s:?}")),
            Ok,
        ),
        other => err(path, format!("expected an integer, got {}", kind_of(other))),
    }
}

pub(super) fn uint64_field(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
) -> Result<u64> {
    match field(obj, camel, snake) {
        None => Ok(0),
        Some((Value::Number(n), key)) => n.as_u64().map_or_else(
            || {
                err(
                    &format!("{path}.{key}"),
                    format!("expected an unsigned 64-bit integer, got {n}"),
                )
            },
            Ok,
        ),
        Some((Value::String(s), key)) => s.trim().parse().map_or_else(
            |_| {
                err(
                    &format!("{path}.{key}"),
                    format!("expected an unsigned 64-bit integer, got {s:?}"),
                )
            },
            Ok,
        ),
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected an integer, got {}", kind_of(v)),
        ),
    }
}

pub(super) fn uint32_field(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
) -> Result<u32> {
    let n = uint64_field(obj, path, camel, snake)?;
    u32::try_from(n).map_or_else(
        |_| {
            err(
                &format!("{path}.{camel}"),
                format!("{n} does not fit 32 bits"),
            )
        },
        Ok,
    )
}

/// An enum given as its number or its name (`SPAN_KIND_CLIENT`, or just `CLIENT`).
pub(super) fn enumeration(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    prefix: &str,
    names: &[&str],
) -> Result<i32> {
    match field(obj, camel, snake) {
        None => Ok(0),
        Some((Value::Number(n), key)) => {
            n.as_i64().and_then(|i| i32::try_from(i).ok()).map_or_else(
                || {
                    err(
                        &format!("{path}.{key}"),
                        format!("expected an enum number, got {n}"),
                    )
                },
                Ok,
            )
        }
        Some((Value::String(s), key)) => {
            let upper = s.trim().to_ascii_uppercase();
            let bare = upper.strip_prefix(prefix).unwrap_or(&upper);
            if let Some(i) = names.iter().position(|n| *n == bare) {
                return Ok(i as i32);
            }
            upper.parse().map_or_else(
                |_| {
                    err(
                        &format!("{path}.{key}"),
                        format!(
                            "expected one of {} (with or without {prefix}), got {s:?}",
                            names.join(", ")
                        ),
                    )
                },
                Ok,
            )
        }
        Some((v, key)) => err(
            &format!("{path}.{key}"),
            format!("expected an enum, got {}", kind_of(v)),
        ),
    }
}

/// An id: hex as the spec has it, or base64 as some older exporters sent.
/// A wrong length is kept so normalization rejects that one span (partial
/// success); characters that are neither make the body undecodable (400),
/// as the Collector answers too.
pub(super) fn id(
    obj: &Map<String, Value>,
    path: &str,
    camel: &str,
    snake: &str,
    len: usize,
) -> Result<Vec<u8>> {
    let Some((v, key)) = field(obj, camel, snake) else {
        return Ok(Vec::new());
    };
    let p = format!("{path}.{key}");
    let Value::String(s) = v else {
        return err(&p, format!("expected a hex string, got {}", kind_of(v)));
    };
    let s = s.trim();
    if let Some(bytes) = from_hex(s) {
        return Ok(bytes);
    }
    // Base64 only at the lengths `len` bytes take, padded or not, so that
    // no hex id of a wrong length is read as base64.
    let padded = len.div_ceil(3) * 4;
    let unpadded = (len * 4).div_ceil(3);
    if s.len() == padded || s.len() == unpadded {
        if let Some(bytes) = from_base64(s) {
            return Ok(bytes);
        }
    }
    err(
        &p,
        format!("expected {} hex characters, got {s:?}", len * 2),
    )
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Standard or URL-safe base64, padded or not, trailing bits ignored: what
/// protobuf's JSON mapping accepts for `bytes` (Go's protojson reads both
/// alphabets, with or without padding).
pub(super) fn from_base64(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
    use base64::engine::DecodePaddingMode;
    use base64::{alphabet, Engine};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
    STANDARD.decode(s).or_else(|_| URL_SAFE.decode(s)).ok()
}
