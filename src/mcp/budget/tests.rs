//! Tests of the answer budget: answers within it kept, larger ones cut with a marker.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};

use super::*;

/// `v` held to `budget`: the answer's structured content and its text.
fn held(v: Value, budget: usize) -> (Value, String) {
    let mut r = CallToolResult::structured(v);
    hold_result(&mut r, budget);
    let text = r.content[0].as_text().unwrap().text.clone();
    (r.structured_content.unwrap_or(Value::Null), text)
}

#[test]
fn an_answer_within_the_budget_is_left_as_it_is() {
    let v = json!({"name": "x".repeat(1000), "items": [1, 2, 3]});
    let (got, text) = held(v.clone(), 24_000);
    assert_eq!(got, v);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
}

#[test]
fn a_huge_string_is_cut_with_a_marker_and_the_answer_fits() {
    let name = "n".repeat(10 << 20);
    let v = json!({"trace_id": "ab".repeat(16), "spans": [{"name": name, "span_id": "0123456789abcdef"}],
        "truncated": "1 of 3 spans shown"});
    let (got, text) = held(v, 24_000);
    assert!(text.len() <= 24_000, "{}", text.len());
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), got);
    let cut = got["spans"][0]["name"].as_str().unwrap();
    assert!(
        cut.len() > 10_000,
        "cut no more than it must: {}",
        cut.len()
    );
    let mark = cut.rfind("… [").unwrap();
    assert!(cut[..mark].bytes().all(|b| b == b'n'));
    assert_eq!(
        &cut[mark..],
        format!("… [{} characters cut]", (10 << 20) - mark),
        "the marker counts what was cut"
    );
    // Short fields are whole; the note says what was cut, after what the page said.
    assert_eq!(got["trace_id"], "ab".repeat(16));
    assert_eq!(got["spans"][0]["span_id"], "0123456789abcdef");
    let note = got["truncated"].as_str().unwrap();
    assert!(
        note.starts_with(
            "1 of 3 spans shown; cut to the 24000-character budget: 1 string(s) longer than"
        ),
        "{note}"
    );
}

#[test]
fn keys_and_strings_in_lists_are_cut_and_cut_keys_stay_apart() {
    let long = |c: char| c.to_string().repeat(100_000);
    let v = json!({
        "attributes": {format!("{}1", long('k')): "a", format!("{}2", long('k')): long('v')},
        "tools": [long('t'), "short"],
    });
    let (got, text) = held(v, 24_000);
    assert!(text.len() <= 24_000, "{}", text.len());
    let keys: Vec<&String> = got["attributes"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys
        .iter()
        .all(|k| k.len() < 24_000 && k.contains("characters cut]")));
    assert_eq!(got["tools"][1], "short");
    assert!(got["tools"][0]
        .as_str()
        .unwrap()
        .contains("characters cut]"));
}

#[test]
fn when_short_strings_do_not_fit_either_lists_are_cut_from_their_end() {
    let rows: Vec<Value> = (0..5_000)
        .map(|i| json!({"day": i, "tool": format!("tool-{i:05}")}))
        .collect();
    let v = json!({"tool": "t", "days": rows});
    let (got, text) = held(v, 24_000);
    assert!(text.len() <= 24_000, "{}", text.len());
    let days = got["days"].as_array().unwrap();
    assert!(!days.is_empty() && days.len() < 5_000);
    assert_eq!(days[0]["day"], 0, "the first items are kept");
    let note = got["truncated"].as_str().unwrap();
    assert!(
        note.contains(&format!("days shows {} of its 5000 items", days.len())),
        "{note}"
    );
}

#[test]
fn a_text_answer_is_cut_with_a_marker() {
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
        "no tool {:?}; the tools are: a, b",
        "x".repeat(1 << 20)
    ))]);
    hold_result(&mut r, 24_000);
    let text = &r.content[0].as_text().unwrap().text;
    assert!(
        text.len() <= 24_000 && text.contains("characters cut]"),
        "{}",
        text.len()
    );
}

#[test]
fn control_characters_count_as_json_writes_them() {
    let v = json!({"s": "\u{1}".repeat(50_000)});
    let (got, text) = held(v, 24_000);
    assert!(text.len() <= 24_000, "{}", text.len());
    assert_eq!(serde_json::to_string(&got).unwrap().len(), text.len());
}
