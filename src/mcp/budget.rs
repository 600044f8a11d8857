//! The character budget held on every tool's answer as it leaves, whatever
//! the tool: the pages cut lists to it, but a field can be larger than the
//! budget on its own (a 10 MB span name, a tool error quoting it). So the
//! answer's JSON is measured, and when it is over: strings (values and
//! keys) longer than a common length are cut to it with a marker saying how
//! much was cut, the length chosen as the longest that fits; if even
//! strings of [`FLOOR`] characters do not fit, lists are cut short from
//! their end. The answer's `truncated` says what was cut. A string keeps
//! its type and a list its items' shape, so the answer still matches its
//! `outputSchema`. Text-only answers (tool errors) are cut the same way.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde_json::{Map, Value};

use super::page::BUDGET_CHARS;

/// Shortest a string is cut to: ids, times and cursors stay whole.
const FLOOR: usize = 64;

/// Room for the marker after a cut string (`… [10485760 characters cut]`).
const MARK: usize = 48;

/// Hold `response` to the budget (it stays as it is when within).
pub fn hold(response: &mut CallToolResponse) {
    if let CallToolResponse::Complete(r) = response {
        hold_result(r, BUDGET_CHARS);
    }
}

fn hold_result(r: &mut CallToolResult, budget: usize) {
    match &mut r.structured_content {
        Some(v) => {
            let Some(note) = fit(v, budget) else { return };
            note_on(v, &note);
            let size = json_len(v);
            if size <= budget {
                r.content = vec![ContentBlock::text(v.to_string())];
                return;
            }
            // Only an answer of countless small fields gets here.
            *r = CallToolResult::error(vec![ContentBlock::text(format!(
                "the answer does not fit the {budget}-character budget even cut ({size} characters: {note}); ask for less (a smaller limit, fewer days, one turn)"
            ))]);
            r.is_error = Some(true);
        }
        None => {
            for c in &mut r.content {
                if let ContentBlock::Text(t) = c {
                    if t.text.len() > budget {
                        t.text = cut(&t.text, budget.saturating_sub(MARK)).0;
                    }
                }
            }
        }
    }
}

/// Its JSON's length in bytes (never fewer than its characters).
fn json_len(v: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A character's length inside a JSON string, as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `s` cut to at most `max` bytes of JSON, marked; whether it was cut.
fn cut(s: &str, max: usize) -> (String, bool) {
    let mut used = 0;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        used += escaped_len(c);
        if used > max {
            end = i;
            break;
        }
    }
    if end == s.len() {
        return (s.to_string(), false);
    }
    let rest = s[end..].chars().count();
    (format!("{}… [{rest} characters cut]", &s[..end]), true)
}

/// The JSON length of every string in `v` (values and keys, quotes left out).
fn string_lens(v: &Value, out: &mut Vec<usize>) {
    let len = |s: &str| s.chars().map(escaped_len).sum::<usize>();
    match v {
        Value::String(s) => out.push(len(s)),
        Value::Array(a) => a.iter().for_each(|x| string_lens(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(len(k));
                string_lens(x, out);
            }
        }
        _ => {}
    }
}

/// Cut every string of `v` longer than `max` bytes of JSON; how many were.
fn cut_strings(v: &mut Value, max: usize) -> usize {
    match v {
        Value::String(s) => {
            let (c, was) = cut(s, max);
            if was {
                *s = c;
            }
            usize::from(was)
        }
        Value::Array(a) => a.iter_mut().map(|x| cut_strings(x, max)).sum(),
        Value::Object(m) => {
            let mut n = 0;
            let old = std::mem::take(m);
            let mut new = Map::new();
            for (k, mut x) in old {
                n += cut_strings(&mut x, max);
                let (mut key, was) = cut(&k, max);
                n += usize::from(was);
                // Two keys cut alike stay two keys.
                let mut i = 2;
                while new.contains_key(&key) {
                    key = format!("{} #{i}", cut(&k, max).0);
                    i += 1;
                }
                new.insert(key, x);
            }
            *m = new;
            n
        }
        _ => 0,
    }
}

/// The largest array in `v` (by JSON length) that has items, as a path of
/// object keys and array indexes.
fn largest_array(v: &Value, path: &mut Vec<PathStep>, best: &mut Option<(usize, Vec<PathStep>)>) {
    match v {
        Value::Array(a) => {
            if !a.is_empty() {
                let size = json_len(v);
                if best.as_ref().is_none_or(|(s, _)| size > *s) {
                    *best = Some((size, path.clone()));
                }
            }
            for (i, x) in a.iter().enumerate() {
                path.push(PathStep::Index(i));
                largest_array(x, path, best);
                path.pop();
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                path.push(PathStep::Key(k.clone()));
                largest_array(x, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[PathStep]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        PathStep::Key(k) => v.get_mut(k),
        PathStep::Index(i) => v.get_mut(*i),
    })
}

fn path_text(path: &[PathStep]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            PathStep::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(&cut(k, FLOOR).0);
            }
            PathStep::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Hold `v` to `budget` bytes of JSON; what was cut, in words.
fn fit(v: &mut Value, budget: usize) -> Option<String> {
    let size = json_len(v);
    if size <= budget {
        return None;
    }
    let limit = budget;
    let mut notes = Vec::new();
    // Room for the note this adds to `truncated`.
    let budget = budget.saturating_sub(600);
    let mut lens = Vec::new();
    string_lens(v, &mut lens);
    let strings: usize = lens.iter().sum();
    let overhead = size - strings.min(size);
    let fits = |max: usize| {
        overhead
            + lens
                .iter()
                .map(|&l| if l > max { max + MARK } else { l })
                .sum::<usize>()
            <= budget
    };
    let longest = lens.iter().copied().max().unwrap_or(0);
    let (mut lo, mut hi) = (FLOOR, longest.max(FLOOR));
    if fits(lo) {
        // The largest length that fits, cutting as little as it can.
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
    }
    let max = lo;
    let n = cut_strings(v, max);
    if n > 0 {
        notes.push(format!(
            "{n} string(s) longer than {max} characters cut to it (marked \"… [N characters cut]\")"
        ));
    }
    // Lists next, from their end, the largest first.
    let mut rounds = 0;
    loop {
        let size = json_len(v);
        if size <= budget || rounds == 64 {
            break;
        }
        rounds += 1;
        let mut best = None;
        largest_array(v, &mut Vec::new(), &mut best);
        let Some((_, path)) = best else { break };
        let Some(Value::Array(a)) = at(v, &path) else {
            break;
        };
        let total = a.len();
        let mut excess = size - budget;
        while excess > 0 {
            let Some(x) = a.pop() else { break };
            excess = excess.saturating_sub(json_len(&x) + 1);
        }
        notes.push(format!(
            "{} shows {} of its {total} items",
            if path.is_empty() {
                "the answer".to_string()
            } else {
                path_text(&path)
            },
            a.len()
        ));
    }
    if notes.len() > 6 {
        let more = notes.len() - 5;
        notes.truncate(5);
        notes.push(format!("{more} more lists cut"));
    }
    Some(format!(
        "cut to the {limit}-character budget: {}",
        notes.join("; ")
    ))
}

/// Say what was cut in the answer's `truncated`, after what it says.
fn note_on(v: &mut Value, note: &str) {
    let Value::Object(m) = v else { return };
    match m.get_mut("truncated") {
        Some(Value::String(s)) => {
            s.push_str("; ");
            s.push_str(note);
        }
        Some(Value::Null) | None => {
            m.insert("truncated".into(), Value::String(note.to_string()));
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests;
