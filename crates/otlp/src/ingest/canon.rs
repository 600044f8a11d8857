//! The hash of a JSON text's canonical form — keys sorted, no whitespace,
//! serde_json's escaping and number format, exactly the text of
//! `serde_json::Value::to_string` — without building a `Value`: strings are
//! borrowed where they hold no escape, objects are sorted vectors, and the
//! canonical text is written into one buffer and hashed once.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// A parsed JSON value, as little copied as serde allows.
enum Canon<'a> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    Str(Cow<'a, str>),
    Array(Vec<Canon<'a>>),
    /// Sorted by key, each key once (the last value, as a JSON object map keeps).
    Object(Vec<(Cow<'a, str>, Canon<'a>)>),
}

/// What a hash of arguments or a result found in a JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hashed {
    /// `null`, `{}`, `[]` or a string of only whitespace (no arguments).
    Empty(u128),
    Value(u128),
}

impl Hashed {
    /// The hash, unless the value was empty.
    pub fn non_empty(self) -> Option<u128> {
        match self {
            Hashed::Empty(_) => None,
            Hashed::Value(h) => Some(h),
        }
    }

    pub fn hash(self) -> u128 {
        match self {
            Hashed::Empty(h) | Hashed::Value(h) => h,
        }
    }
}

/// The hash of `raw` as a JSON text (`value_hash` of its parsed value),
/// or of `raw` itself when it is not JSON (a string is hashed as its text).
pub fn text_value_hash(raw: &str) -> Hashed {
    let mut de = serde_json::Deserializer::from_str(raw);
    let parsed = Canon::deserialize(&mut de).and_then(|c| de.end().map(|()| c));
    match parsed {
        Ok(c) => {
            let empty = c.is_empty();
            let h = c.hash();
            if empty {
                Hashed::Empty(h)
            } else {
                Hashed::Value(h)
            }
        }
        Err(_) if raw.trim().is_empty() => Hashed::Empty(text_hash(raw)),
        Err(_) => Hashed::Value(text_hash(raw)),
    }
}

fn text_hash(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

impl Canon<'_> {
    fn is_empty(&self) -> bool {
        match self {
            Canon::Null => true,
            Canon::Object(o) => o.is_empty(),
            Canon::Array(a) => a.is_empty(),
            Canon::Str(s) => s.trim().is_empty(),
            _ => false,
        }
    }

    /// A string is hashed as its text; anything else as its canonical JSON.
    fn hash(&self) -> u128 {
        if let Canon::Str(s) = self {
            return text_hash(s);
        }
        let mut text = Vec::with_capacity(64);
        if serde_json::to_writer(&mut text, self).is_err() {
            // Writing to a vector fails only for a map key that is not a
            // string, which `Canon` cannot hold.
            text.clear();
        }
        xxhash_rust::xxh3::xxh3_128(&text)
    }
}

/// The first key that makes serde_json read an object as raw JSON text.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

impl Canon<'static> {
    fn from_value(v: serde_json::Value) -> Canon<'static> {
        use serde_json::Value as J;
        match v {
            J::Null => Canon::Null,
            J::Bool(b) => Canon::Bool(b),
            J::Number(n) => Canon::Number(n),
            J::String(s) => Canon::Str(Cow::Owned(s)),
            J::Array(a) => Canon::Array(a.into_iter().map(Canon::from_value).collect()),
            // A `Map` iterates in key order already.
            J::Object(o) => Canon::Object(
                o.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), Canon::from_value(v)))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Canon<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Canon::Null => s.serialize_unit(),
            Canon::Bool(b) => s.serialize_bool(*b),
            Canon::Number(n) => n.serialize(s),
            Canon::Str(t) => s.serialize_str(t),
            Canon::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Canon::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k.as_ref(), v)?;
                }
                map.end()
            }
        }
    }
}

/// A key or string, borrowed from the input when it holds no escape.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Canon<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Canon<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Canon<'de>, E> {
                Ok(Canon::Null)
            }
            fn visit_none<E>(self) -> Result<Canon<'de>, E> {
                Ok(Canon::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Canon<'de>, D::Error> {
                Canon::deserialize(d)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Canon<'de>, E> {
                Ok(Canon::Bool(b))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Canon<'de>, E> {
                Ok(Canon::Number(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Canon<'de>, E> {
                Ok(Canon::Number(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Canon<'de>, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Canon::Null, Canon::Number))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Canon<'de>, E> {
                Ok(Canon::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Canon<'de>, E> {
                Ok(Canon::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Canon<'de>, E> {
                Ok(Canon::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Canon<'de>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Canon::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Canon<'de>, A::Error> {
                let mut entries: Vec<(Cow<'de, str>, Canon<'de>)> = Vec::new();
                while let Some(Text(k)) = map.next_key()? {
                    if entries.is_empty() && k == RAW_VALUE_TOKEN {
                        // serde_json (its `raw_value` feature is on) reads such
                        // an object as the JSON text its value holds.
                        let Text(raw) = map.next_value()?;
                        let value: serde_json::Value =
                            serde_json::from_str(&raw).map_err(de::Error::custom)?;
                        return Ok(Canon::from_value(value));
                    }
                    entries.push((k, map.next_value()?));
                }
                // Stable: of equal keys the last is kept, as a map insert does.
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                let mut kept: Vec<(Cow<'de, str>, Canon<'de>)> = Vec::with_capacity(entries.len());
                for e in entries {
                    match kept.last_mut() {
                        Some(last) if last.0 == e.0 => *last = e,
                        _ => kept.push(e),
                    }
                }
                Ok(Canon::Object(kept))
            }
        }
        d.deserialize_any(V)
    }
}
