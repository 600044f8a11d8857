//! The allocation-free JSON paths against the ones they replaced: string
//! escaping by words against byte by byte, canonical hashes without a
//! `serde_json::Value` against hashes through one.

use proptest::prelude::*;

use super::{attrs, canon, toolcall};

/// A JSON text of an arbitrary shape: keys out of order and repeated,
/// escapes, numbers in every spelling, whitespace anywhere.
fn arb_json_text() -> impl Strategy<Value = String> {
    let ws = prop_oneof![Just(""), Just(" "), Just("\n\t ")];
    let number = prop_oneof![
        Just("0"),
        Just("-0"),
        Just("1"),
        Just("1.0"),
        Just("1e5"),
        Just("1E-7"),
        Just("-12.5e+3"),
        Just("0.1"),
        Just("18446744073709551615"),
        Just("18446744073709551616"),
        Just("-9223372036854775809"),
        Just("1e400"),
        Just("123456789012345678901234567890"),
        Just("2.5000"),
    ]
    .prop_map(str::to_string);
    let string = prop_oneof![
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just(r#""a\u00e9\n\/\"\\ \ud83c\udf29""#.to_string()),
        Just(r#""é\u0001""#.to_string()),
        Just(r#""  ""#.to_string()),
    ];
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        number,
        string.clone(),
    ];
    let ws2 = ws.clone();
    leaf.prop_recursive(4, 32, 5, move |inner| {
        let ws = ws2.clone();
        prop_oneof![
            prop::collection::vec((inner.clone(), ws.clone()), 0..4).prop_map(|items| {
                let body: Vec<String> = items
                    .into_iter()
                    .map(|(v, w)| format!("{w}{v}{w}"))
                    .collect();
                format!("[{}]", body.join(","))
            }),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("a"),
                        Just("b"),
                        Just("B"),
                        Just("é"),
                        Just("$serde_json::private::RawValue")
                    ],
                    inner,
                    ws
                ),
                0..5
            )
            .prop_map(|entries| {
                let body: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v, w)| format!("{w}\"{k}\"{w}:{w}{v}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
    .prop_flat_map(move |v| {
        (
            ws.clone(),
            Just(v),
            prop_oneof![Just(""), Just(" "), Just("x")],
        )
    })
    .prop_map(|(w, v, tail)| format!("{w}{v}{tail}"))
}

/// What hashing through a `serde_json::Value` gives: (empty, hash).
fn value_path_hash(text: &str) -> (bool, u128) {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => {
            let empty = match &v {
                serde_json::Value::Null => true,
                serde_json::Value::Object(o) => o.is_empty(),
                serde_json::Value::Array(a) => a.is_empty(),
                serde_json::Value::String(s) => s.trim().is_empty(),
                _ => false,
            };
            (empty, toolcall::value_hash128(&v))
        }
        Err(_) => (
            text.trim().is_empty(),
            xxhash_rust::xxh3::xxh3_128(text.as_bytes()),
        ),
    }
}

#[test]
fn canonical_hashes_match_the_value_path_on_awkward_texts() {
    for text in [
        "",
        " ",
        "null",
        "{}",
        "[]",
        "\"\"",
        "\" \"",
        "\"ls\"",
        "ls",
        "{\"b\":1,\"a\":2}",
        "{\"a\":1,\"a\":2}",
        "{\"a\":{\"z\":[1,2.0,-0,1e2]},\"A\":null}",
        "[1,2,3] x",
        r#"{"$serde_json::private::RawValue":"[1, {\"b\":2,\"a\":1}]"}"#,
        r#"{"$serde_json::private::RawValue":5}"#,
        r#"{"x":1,"$serde_json::private::RawValue":"[1]"}"#,
        r#""\ud800""#,
        "1e400",
        "[1e400]",
        "{\"a\":\"\\u0000\"}",
    ] {
        let got = canon::text_value_hash(text);
        let (empty, hash) = value_path_hash(text);
        assert_eq!(got.hash(), hash, "{text:?}");
        assert_eq!(got.non_empty().is_none(), empty, "{text:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The canonical hash without a JSON tree is the hash through one.
    #[test]
    fn canonical_hashes_match_the_value_path(text in arb_json_text()) {
        let got = canon::text_value_hash(&text);
        let (empty, hash) = value_path_hash(&text);
        prop_assert_eq!(got.hash(), hash);
        prop_assert_eq!(got.non_empty().is_none(), empty);
    }

    /// Escaping by words escapes exactly as escaping byte by byte did.
    #[test]
    fn json_strings_escape_as_byte_by_byte(s in "(\\PC|[\u{0}-\u{1f}\"\\\\]){0,40}") {
        let mut fast = String::new();
        attrs::push_str(&mut fast, &s);
        let mut slow = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => slow.push_str("\\\""),
                '\\' => slow.push_str("\\\\"),
                '\n' => slow.push_str("\\n"),
                '\r' => slow.push_str("\\r"),
                '\t' => slow.push_str("\\t"),
                c if (c as u32) < 0x20 => slow.push_str(&format!("\\u{:04x}", c as u32)),
                c => slow.push(c),
            }
        }
        slow.push('"');
        prop_assert_eq!(&fast, &slow);
        let back: String = serde_json::from_str(&fast).unwrap();
        prop_assert_eq!(back, s);
    }
}
