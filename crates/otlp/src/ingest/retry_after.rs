//! How long a failed call was told to wait (docs/detection.md §4.9): read
//! once at ingest into the span's `retry_after_ms`, for the rule that finds
//! retries sent sooner.
//!
//! The sources, first that gives a wait wins — all only on a failed span:
//!
//! 1. an attribute whose last dotted segment is `retry-after`,
//!    `retry_after` or `retryAfter` (any case): the HTTP conventions'
//!    `http.response.header.retry-after`, a string array (the Python
//!    instrumentations write it `http.response.header.retry_after`), an
//!    exception's or a user's own attribute. Delta-seconds or an HTTP-date
//!    (RFC 9110 §10.2.3: IMF-fixdate, RFC 850, asctime), the date read
//!    relative to the span's end. `…retry-after-ms` (OpenAI's, Azure's
//!    header) is milliseconds. The exception event's attributes likewise;
//! 2. words in the failure's texts — the exception message, the status
//!    message, then the tool's recorded result (a JSON error body, a text):
//!    a cue (`retry-after`, `retry_after`, `retryAfter`, `retry after`,
//!    `retry in`, `retry again in`, `retrying in`, `try again in`, `try
//!    again after`; `…-ms`/`…_ms`/`…Ms` cues are milliseconds; any case)
//!    followed, past quotes, `:` and `=`, by a duration (`30`, `30s`, `1.5
//!    s`, `250ms`, `2 minutes`, `7m12s`; a bare number is seconds) or an
//!    HTTP-date. A number followed by a word that is no unit (`retry in 3
//!    attempts`) is no wait; a bare number only when what follows it is
//!    white space, the end, or one of `. , ; } " ' )` — not `:`, `-`, `/`,
//!    `T` or a digit, nor a `,` or `.` before a digit (`10:30 UTC`,
//!    `2026-08-02T15:00:00Z`, `1,500 ms` are no wait). `wait for` is no cue
//!    (`wait for 30 seconds exceeded` is a timeout's words, not a wait).
//!
//! Bounds: nothing that is not a positive, finite wait of at most a day
//! ([`MAX_MS`]) gives one: zero, negative, a date already past, more than 12
//! digits, more than a day (an epoch timestamp, garbage) give none. Only the
//! first [`SCAN_BYTES`] of a text are looked at.

use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::Event, Span};

use super::attrs;
use crate::model::ErrorClass;

/// The longest wait kept: one day; a longer one is garbage, no wait.
pub const MAX_MS: i64 = 86_400_000;

/// How much of one text is scanned for a wait.
pub const SCAN_BYTES: usize = 64 * 1024;

/// The wait `span` states, when its class is a failure: its attributes,
/// its exception's, its exception message and status message, then its
/// recorded `result` (a tool call's).
pub fn of_span(span: &Span, class: ErrorClass, result: Option<&Value>, end_ns: i64) -> Option<i64> {
    if !class.is_failure() {
        return None;
    }
    let exception_message = span
        .events
        .iter()
        .find(|e| e.name == "exception")
        .and_then(|e| attrs::str_ref(&e.attributes, "exception.message"));
    let status_message = span
        .status
        .as_ref()
        .map(|s| s.message.as_str())
        .filter(|m| !m.is_empty());
    stated(
        &span.attributes,
        &span.events,
        &[exception_message, status_message],
        result,
        end_ns,
    )
}

/// The wait a failed span states, in ms. `texts` are its failure's words
/// (exception message, status message), `result` its recorded result.
pub fn stated(
    attrs: &[KeyValue],
    events: &[Event],
    texts: &[Option<&str>],
    result: Option<&Value>,
    end_ns: i64,
) -> Option<i64> {
    let exception = events.iter().filter(|e| e.name == "exception");
    from_attrs(attrs, end_ns)
        .or_else(|| {
            exception
                .clone()
                .find_map(|e| from_attrs(&e.attributes, end_ns))
        })
        .or_else(|| texts.iter().flatten().find_map(|t| from_text(t, end_ns)))
        .or_else(|| match result? {
            Value::StringValue(s) => from_text(s, end_ns),
            v @ (Value::KvlistValue(_) | Value::ArrayValue(_)) => {
                from_text(&attrs::value_to_json(v), end_ns)
            }
            _ => None,
        })
}

/// Which wait an attribute key names, by its last dotted segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

fn key_unit(key: &str) -> Option<Unit> {
    let last = key.rsplit('.').next().unwrap_or(key);
    if last.len() > 16 {
        return None;
    }
    // Compared byte by byte, `-` and `_` left out, any case: no allocation
    // per attribute.
    let is = |want: &[u8]| {
        last.bytes()
            .filter(|b| *b != b'-' && *b != b'_')
            .map(|b| b.to_ascii_lowercase())
            .eq(want.iter().copied())
    };
    if is(b"retryafter") {
        Some(Unit::Seconds)
    } else if is(b"retryafterms") {
        Some(Unit::Millis)
    } else {
        None
    }
}

fn from_attrs(attrs: &[KeyValue], end_ns: i64) -> Option<i64> {
    attrs.iter().find_map(|kv| {
        let unit = key_unit(&kv.key)?;
        let v = kv.value.as_ref()?.value.as_ref()?;
        from_value(v, unit, end_ns)
    })
}

/// A header's value: a string, a number, or (the HTTP conventions) an
/// array of strings whose first is read.
fn from_value(v: &Value, unit: Unit, end_ns: i64) -> Option<i64> {
    match v {
        Value::StringValue(s) => header(s, unit, end_ns),
        Value::IntValue(i) => bound(*i as f64 * scale(unit)),
        Value::DoubleValue(d) => bound(d * scale(unit)),
        Value::ArrayValue(a) => a
            .values
            .first()
            .and_then(|x| x.value.as_ref())
            .and_then(|x| from_value(x, unit, end_ns)),
        _ => None,
    }
}

fn scale(unit: Unit) -> f64 {
    match unit {
        Unit::Seconds => 1000.0,
        Unit::Millis => 1.0,
    }
}

/// A wait in ms within bounds: positive and finite, at most a day; a
/// longer one (an epoch timestamp read as seconds, garbage) is none.
fn bound(ms: f64) -> Option<i64> {
    (ms.is_finite() && ms >= 0.5 && ms <= MAX_MS as f64).then(|| ms.round() as i64)
}

/// A header value: delta-seconds (a decimal accepted), else an HTTP-date.
fn header(s: &str, unit: Unit, end_ns: i64) -> Option<i64> {
    let s = s.trim().trim_matches('"').trim();
    // A comma-joined repeat of the header (`30, 30`): its first value.
    let first = s.split(',').next().unwrap_or(s).trim();
    if first.starts_with(|c: char| c.is_ascii_digit()) {
        let (n, rest) = number(first)?;
        return rest.trim().is_empty().then(|| bound(n * scale(unit)))?;
    }
    date_wait(s, end_ns)
}

/// A wait the words state.
pub fn from_text(text: &str, end_ns: i64) -> Option<i64> {
    let mut cut = text.len().min(SCAN_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let text = &text[..cut];
    let lower = text.to_ascii_lowercase();
    const CUES: [(&str, Unit); 12] = [
        ("retry-after-ms", Unit::Millis),
        ("retry_after_ms", Unit::Millis),
        ("retryafterms", Unit::Millis),
        ("retry-after", Unit::Seconds),
        ("retry_after", Unit::Seconds),
        ("retryafter", Unit::Seconds),
        ("retry after", Unit::Seconds),
        ("retry in", Unit::Seconds),
        ("try again in", Unit::Seconds),
        ("try again after", Unit::Seconds),
        ("retry again in", Unit::Seconds),
        ("retrying in", Unit::Seconds),
    ];
    let bytes = lower.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Every cue starts with `r` or `t`.
        if !matches!(bytes[i], b'r' | b't') {
            i += 1;
            continue;
        }
        let at = &lower[i..];
        if let Some((cue, unit)) = CUES.iter().find(|(c, _)| at.starts_with(c)) {
            let after = i + cue.len();
            // A cue inside a word (`preretry in`) is still read; one that
            // runs on (`retry_after_seconds`) is not this cue.
            let runs_on = bytes
                .get(after)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
            if !runs_on {
                if let Some(ms) = after_cue(&text[after..], *unit, end_ns) {
                    return Some(ms);
                }
            }
            i = after;
            continue;
        }
        i += 1;
    }
    None
}

/// What follows a cue: past quotes, `:`, `=` and spaces, a duration or an
/// HTTP-date.
fn after_cue(rest: &str, unit: Unit, end_ns: i64) -> Option<i64> {
    let rest = rest.trim_start_matches(|c: char| {
        c == '"' || c == '\'' || c == ':' || c == '=' || c == ' ' || c == '\t'
    });
    if rest.starts_with(|c: char| c.is_ascii_digit()) {
        return duration(rest, unit);
    }
    // `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT` in a message.
    let end = rest.char_indices().nth(40).map_or(rest.len(), |(k, _)| k);
    let candidate = &rest[..end];
    let stop = candidate
        .find(['"', '\'', '}', ';'])
        .unwrap_or(candidate.len());
    let candidate = &candidate[..stop];
    let gmt = candidate.find("GMT").map(|k| k + 3);
    let candidate = match gmt {
        Some(k) => &candidate[..k],
        None => candidate.trim_end_matches(|c: char| !c.is_ascii_digit()),
    };
    date_wait(candidate, end_ns)
}

/// A number at the start of `s` (digits, an optional fraction; at most 12
/// digits before the point), and what follows it.
fn number(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut k = 0;
    while k < b.len() && b[k].is_ascii_digit() {
        k += 1;
    }
    if k == 0 || k > 12 {
        return None;
    }
    let mut end = k;
    if b.get(k) == Some(&b'.') && b.get(k + 1).is_some_and(u8::is_ascii_digit) {
        end = k + 1;
        while end < b.len() && b[end].is_ascii_digit() && end - k <= 9 {
            end += 1;
        }
        // More fraction digits than that are read no further.
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
    }
    let n: f64 = s[..end].parse().ok()?;
    Some((n, &s[end..]))
}

/// The ms of a unit word; `None` for a word that is no unit.
fn unit_ms(word: &str) -> Option<f64> {
    Some(match word {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
        _ => return None,
    })
}

/// A duration in words: `30`, `30s`, `1.5 s`, `250ms`, `7m12s`, `1 minute
/// 30 seconds`. A bare number is in `unit`.
fn duration(s: &str, unit: Unit) -> Option<i64> {
    let mut total = 0.0;
    let mut rest = s;
    let mut parts = 0;
    while let Some((n, after)) = number(rest) {
        let spaced = after.trim_start_matches([' ', '\t']);
        let word_len = spaced.bytes().take_while(u8::is_ascii_alphabetic).count();
        let word = spaced[..word_len].to_ascii_lowercase();
        if word.is_empty() {
            // A bare number ends the duration (in its default unit only
            // when it is the first part, and only when it stands alone: a
            // clock time, a date, `1,500` are no wait).
            if parts == 0 {
                if !stands_alone(after) {
                    return None;
                }
                total += n * scale(unit);
                parts += 1;
            }
            break;
        }
        match unit_ms(&word) {
            Some(ms) => {
                total += n * ms;
                parts += 1;
                rest = spaced[word_len..].trim_start_matches([' ', '\t', ',']);
                // `1 minute and 30 seconds`.
                rest = rest.strip_prefix("and ").unwrap_or(rest);
            }
            // `retry in 3 attempts`: no wait; after a first part, the end.
            None if parts == 0 => return None,
            None => break,
        }
    }
    if parts == 0 {
        return None;
    }
    bound(total)
}

/// Whether what follows a bare number ends it: white space, the end, or
/// one of `. , ; } " ' )` — a `,` or `.` not before a digit.
fn stands_alone(after: &str) -> bool {
    let b = after.as_bytes();
    match b.first() {
        None => true,
        Some(c) if c.is_ascii_whitespace() => true,
        Some(b'.' | b',') => !b.get(1).is_some_and(u8::is_ascii_digit),
        Some(b';' | b'}' | b'"' | b'\'' | b')') => true,
        Some(_) => false,
    }
}

/// The wait until an HTTP-date, from the span's end; none when the date is
/// past or unreadable.
fn date_wait(s: &str, end_ns: i64) -> Option<i64> {
    let at_ms = http_date_ms(s)?;
    bound((at_ms - end_ns.div_euclid(1_000_000)) as f64)
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// An HTTP-date (RFC 9110 §5.6.7) as ms since the epoch: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94
/// 08:49:37 GMT`) or asctime (`Sun Nov  6 08:49:37 1994`).
pub fn http_date_ms(s: &str) -> Option<i64> {
    let tokens: Vec<&str> = s
        .split([' ', ',', '-', '\t'])
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.len() < 4 || tokens.len() > 6 {
        return None;
    }
    let month_of = |t: &str| {
        let t = t.to_ascii_lowercase();
        MONTHS.iter().position(|m| *m == t).map(|p| p as u32 + 1)
    };
    // The weekday is not checked against the date; it only has to be a word.
    let rest =
        if tokens[0].bytes().all(|b| b.is_ascii_alphabetic()) && month_of(tokens[0]).is_none() {
            &tokens[1..]
        } else {
            &tokens[..]
        };
    let (day, month, year, time) = match rest {
        // asctime: month day time year
        [m, d, t, y] if month_of(m).is_some() => (*d, month_of(m)?, *y, *t),
        // IMF-fixdate and RFC 850: day month year time GMT
        [d, m, y, t, z] if z.eq_ignore_ascii_case("gmt") => (*d, month_of(m)?, *y, *t),
        _ => return None,
    };
    let day: u32 = small(day, 2)?;
    let mut year: i64 = i64::from(small(year, 4)?);
    if year < 100 {
        // RFC 850's two-digit year.
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = time.split(':');
    let (h, m, sec) = (hms.next()?, hms.next()?, hms.next()?);
    if hms.next().is_some() {
        return None;
    }
    let (h, m, sec) = (small(h, 2)?, small(m, 2)?, small(sec, 2)?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 || !(1970..=9999).contains(&year) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + i64::from(h)) * 60 + i64::from(m)) * 60_000 + i64::from(sec) * 1000)
}

/// A number of at most `digits` digits.
fn small(s: &str, digits: usize) -> Option<u32> {
    (!s.is_empty() && s.len() <= digits && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())?
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[path = "tests_retry_after.rs"]
mod tests;
