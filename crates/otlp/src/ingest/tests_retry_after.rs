//! The stated wait (`retry_after`): each source, the header's two forms
//! and the instrumentations' spelling, the words, the bounds, garbage; and
//! through `normalize`, the row oracle agreeing.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span::Event, ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;

use super::*;

/// 2026-08-02T14:02:00Z in ns.
const END_NS: i64 = 1_785_679_320_000_000_000;

fn kv(key: &str, v: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn s(key: &str, v: &str) -> KeyValue {
    kv(key, Value::StringValue(v.into()))
}

fn arr(key: &str, vs: &[&str]) -> KeyValue {
    kv(
        key,
        Value::ArrayValue(ArrayValue {
            values: vs
                .iter()
                .map(|v| AnyValue {
                    value: Some(Value::StringValue(v.to_string())),
                })
                .collect(),
        }),
    )
}

fn attrs_wait(attrs: &[KeyValue]) -> Option<i64> {
    stated(attrs, &[], &[], None, END_NS)
}

fn text(t: &str) -> Option<i64> {
    from_text(t, END_NS)
}

#[test]
fn the_header_as_the_conventions_and_the_instrumentations_write_it() {
    // The semantic conventions' key, a string array.
    assert_eq!(
        attrs_wait(&[arr("http.response.header.retry-after", &["30"])]),
        Some(30_000)
    );
    // opentelemetry-util-http normalises `-` to `_`.
    assert_eq!(
        attrs_wait(&[arr("http.response.header.retry_after", &["2"])]),
        Some(2_000)
    );
    // A plain string, a number, a double; a comma-joined repeat.
    assert_eq!(
        attrs_wait(&[s("http.response.header.retry-after", " 7 ")]),
        Some(7_000)
    );
    assert_eq!(
        attrs_wait(&[kv("retry_after", Value::IntValue(4))]),
        Some(4_000)
    );
    assert_eq!(
        attrs_wait(&[kv("error.retryAfter", Value::DoubleValue(1.5))]),
        Some(1_500)
    );
    assert_eq!(
        attrs_wait(&[arr("http.response.header.retry-after", &["30, 30"])]),
        Some(30_000)
    );
    // Milliseconds under OpenAI's and Azure's header.
    assert_eq!(
        attrs_wait(&[arr("http.response.header.retry-after-ms", &["250"])]),
        Some(250)
    );
    // Other keys are not a wait.
    assert_eq!(
        attrs_wait(&[s("http.response.header.x-retry-count", "3")]),
        None
    );
    assert_eq!(attrs_wait(&[s("retry_after_seconds_total", "3")]), None);
}

#[test]
fn an_http_date_is_read_from_the_span_end() {
    // IMF-fixdate 30 s after the end.
    let h = arr(
        "http.response.header.retry-after",
        &["Sun, 02 Aug 2026 14:02:30 GMT"],
    );
    assert_eq!(attrs_wait(&[h]), Some(30_000));
    // RFC 850 and asctime.
    let h = s(
        "http.response.header.retry-after",
        "Sunday, 02-Aug-26 14:03:00 GMT",
    );
    assert_eq!(attrs_wait(&[h]), Some(60_000));
    let h = s(
        "http.response.header.retry-after",
        "Sun Aug  2 14:02:05 2026",
    );
    assert_eq!(attrs_wait(&[h]), Some(5_000));
    // A date already past, or now: nothing to honour.
    let h = s(
        "http.response.header.retry-after",
        "Sun, 02 Aug 2026 14:01:00 GMT",
    );
    assert_eq!(attrs_wait(&[h]), None);
    // Far ahead, more than a day: garbage, no wait.
    let h = s(
        "http.response.header.retry-after",
        "Fri, 01 Jan 2100 00:00:00 GMT",
    );
    assert_eq!(attrs_wait(&[h]), None);
    // Over a day as seconds or a number (an epoch timestamp): none; a day
    // itself is kept.
    assert_eq!(attrs_wait(&[s("retry-after", "1785679380")]), None);
    assert_eq!(
        attrs_wait(&[kv("retry_after", Value::IntValue(1_785_679_380))]),
        None
    );
    assert_eq!(
        attrs_wait(&[kv("retry_after", Value::IntValue(86_400))]),
        Some(MAX_MS)
    );
    // Not a date.
    for bad in [
        "Sun, 32 Aug 2026 14:02:30 GMT",
        "Sun, 02 Foo 2026 14:02:30 GMT",
        "Sun, 02 Aug 2026 25:02:30 GMT",
        "Sun, 02 Aug 2026 14:02 GMT",
        "Sun, 02 Aug 2026 14:02:30 PST",
        "soon",
        "",
    ] {
        assert_eq!(attrs_wait(&[s("retry-after", bad)]), None, "{bad:?}");
    }
    assert_eq!(http_date_ms("Thu, 01 Jan 1970 00:00:01 GMT"), Some(1000));
    assert_eq!(
        http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
        Some(784_111_777_000)
    );
}

#[test]
fn the_words_of_a_message() {
    for (t, ms) in [
        ("429 Too Many Requests: retry after 30s", 30_000),
        ("Retry-After: 30", 30_000),
        (
            "Rate limit reached for gpt-4o. Please try again in 2 seconds.",
            2_000,
        ),
        ("Rate limit reached. Please try again in 6ms. Visit …", 6),
        ("please retry in 1.5s", 1_500),
        ("Please try again in 7m12s.", 432_000),
        ("try again after 1 minute and 30 seconds", 90_000),
        ("quota exceeded, retry_after=12", 12_000),
        ("{\"error\": {\"code\": 429, \"retry_after\": 20}}", 20_000),
        ("{\"error\":{\"retryAfter\":\"3\"}}", 3_000),
        (
            "{\"retry_after_ms\": 1500, \"error\": \"throttled\"}",
            1_500,
        ),
        (
            "HTTP 429; Retry-After: Sun, 02 Aug 2026 14:02:10 GMT",
            10_000,
        ),
        ("retrying in 2 min", 120_000),
    ] {
        assert_eq!(text(t), Some(ms), "{t:?}");
    }
    for t in [
        "retry after fixing the input",
        "please retry in 3 attempts",
        "retry later",
        "retry_after: null",
        "retry after -5s",
        "retry after 0s",
        "try again in a while",
        "retry_after_seconds_total 4",
        "retry ingest 5",
        "status 429",
        "retry after 1234567890123456 seconds",
    ] {
        assert_eq!(text(t), None, "{t:?}");
    }
    // A first cue without a number, then one with.
    assert_eq!(text("retry later; Retry-After: 5"), Some(5_000));
    // Over a day: no wait.
    assert_eq!(text("retry after 3 days"), None);
    assert_eq!(text("retry after 100000 seconds"), None);
    assert_eq!(text("retry after 86400 seconds"), Some(MAX_MS));
}

/// B2: clock times, dates, timestamps and thousands separators are no
/// wait; a bare number stands alone or before `. , ; } " ' )`.
#[test]
fn clock_times_dates_and_timestamps_are_no_wait() {
    for t in [
        "Please retry after 10:30 UTC",
        "{\"retry_after\": \"2026-08-02T15:00:00Z\"}",
        "retry_after=1785679380",
        "retry after 1,500 ms",
        "retry after 2026/08/02",
        "retry in 10-15 seconds",
        "retry after 5T",
    ] {
        assert_eq!(text(t), None, "{t:?}");
    }
    for (t, ms) in [
        ("retry after 30.", 30_000),
        ("retry after 30, please", 30_000),
        ("{\"retry_after\": 30}", 30_000),
        ("(retry after 30)", 30_000),
        ("retry_after='7'", 7_000),
        ("retry after 30; later", 30_000),
        ("retry after 30\n", 30_000),
    ] {
        assert_eq!(text(t), Some(ms), "{t:?}");
    }
}

/// B3: `wait for` is no cue: a timeout's words state no wait.
#[test]
fn wait_for_is_no_cue() {
    assert_eq!(text("TimeoutError: wait for 30 seconds exceeded"), None);
    assert_eq!(text("wait for 5s"), None);
}

/// Hostile texts: cue spam, a very long fraction, a multibyte character at
/// the scan's cut — each read in bounded time, without a panic.
#[test]
fn hostile_texts() {
    let spam = "retry in ".repeat(SCAN_BYTES / 9 + 10);
    assert_eq!(text(&spam), None);
    let long = format!("retry after 1.{}", "5".repeat(100_000));
    assert_eq!(text(&long), Some(1_556));
    let mut cut = "x".repeat(SCAN_BYTES - 1);
    cut.push('é');
    cut.push_str(" retry after 5");
    assert_eq!(text(&cut), None);
    let mut ok = "x".repeat(SCAN_BYTES - 20);
    ok.push_str("retry after 5 é");
    assert_eq!(text(&ok), Some(5_000));
}

#[test]
fn only_a_failed_span_states_a_wait() {
    let span = Span {
        attributes: vec![arr("http.response.header.retry_after", &["30"])],
        ..Default::default()
    };
    assert_eq!(
        of_span(&span, ErrorClass::RateLimited, None, END_NS),
        Some(30_000)
    );
    assert_eq!(of_span(&span, ErrorClass::Ok, None, END_NS), None);
    assert_eq!(of_span(&span, ErrorClass::Cancelled, None, END_NS), None);
}

#[test]
fn exceptions_status_messages_and_results() {
    let ex = Event {
        name: "exception".into(),
        attributes: vec![
            s("exception.type", "openai.RateLimitError"),
            s(
                "exception.message",
                "Error code: 429 - Please try again in 20s.",
            ),
        ],
        ..Default::default()
    };
    let span = Span {
        events: vec![ex],
        ..Default::default()
    };
    assert_eq!(
        of_span(&span, ErrorClass::RateLimited, None, END_NS),
        Some(20_000)
    );
    // An exception attribute of its own.
    let ex = Event {
        name: "exception".into(),
        attributes: vec![kv("exception.retry_after", Value::IntValue(9))],
        ..Default::default()
    };
    let span = Span {
        events: vec![ex],
        ..Default::default()
    };
    assert_eq!(
        of_span(&span, ErrorClass::RateLimited, None, END_NS),
        Some(9_000)
    );
    let span = Span {
        status: Some(Status {
            code: 2,
            message: "throttled, retry after 4s".into(),
        }),
        ..Default::default()
    };
    assert_eq!(
        of_span(&span, ErrorClass::RateLimited, None, END_NS),
        Some(4_000)
    );
    // A tool's recorded result: a JSON error body as text, or structured.
    let result = Value::StringValue("{\"isError\": true, \"content\": [{\"type\": \"text\", \"text\": \"429: retry after 8s\"}]}".into());
    let span = Span::default();
    assert_eq!(
        of_span(&span, ErrorClass::RateLimited, Some(&result), END_NS),
        Some(8_000)
    );
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![s("service.name", "agent")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn http_child(n: u8, status: i64, header: &[&str]) -> Span {
    let mut attrs = vec![
        kv("http.response.status_code", Value::IntValue(status)),
        s("url.full", "http://fares.example/search"),
    ];
    if !header.is_empty() {
        attrs.push(arr("http.response.header.retry_after", header));
    }
    Span {
        trace_id: vec![9; 16],
        span_id: vec![0, 0, 0, 0, 0, 0, 1, n],
        name: "GET".into(),
        kind: 3,
        start_time_unix_nano: END_NS as u64 - 100_000_000 + u64::from(n),
        end_time_unix_nano: END_NS as u64,
        attributes: attrs,
        status: Some(Status {
            code: if status >= 400 { 2 } else { 0 },
            message: String::new(),
        }),
        ..Default::default()
    }
}

#[test]
fn normalize_stores_it_and_the_row_oracle_agrees() {
    let req = request(vec![
        http_child(1, 429, &["30"]),
        http_child(2, 200, &["30"]),
        http_child(3, 429, &[]),
        http_child(4, 503, &["Sun, 02 Aug 2026 14:03:00 GMT"]),
    ]);
    let batch = super::super::normalize(&req).batch;
    let got: Vec<Option<i64>> = batch.retry_after_ms.clone();
    assert_eq!(got, vec![Some(30_000), None, None, Some(60_000)]);
    let rows = super::super::rows::normalize_rows(&req);
    let oracle: Vec<Option<i64>> = rows.iter().map(|r| r.retry_after_ms).collect();
    assert_eq!(oracle, got);
    assert_eq!(batch.rows(), rows);
}

proptest! {
    #[test]
    fn no_text_panics_or_breaks_the_bounds(t in ".{0,200}") {
        if let Some(ms) = text(&t) {
            prop_assert!((1..=MAX_MS).contains(&ms));
        }
        if let Some(ms) = attrs_wait(&[s("http.response.header.retry-after", &t)]) {
            prop_assert!((1..=MAX_MS).contains(&ms));
        }
    }

    #[test]
    fn delta_seconds_read_back(n in 1i64..86_400) {
        prop_assert_eq!(attrs_wait(&[arr("http.response.header.retry-after", &[&n.to_string()])]), Some(n * 1000));
        prop_assert_eq!(text(&format!("Retry-After: {n}")), Some(n * 1000));
        prop_assert_eq!(text(&format!("please try again in {n}s.")), Some(n * 1000));
    }

    #[test]
    fn a_date_reads_back_its_distance(secs in 1i64..86_400) {
        let at = END_NS / 1_000_000 + secs * 1000;
        let date = imf_fixdate(at);
        prop_assert_eq!(http_date_ms(&date), Some(at));
        prop_assert_eq!(attrs_wait(&[s("retry-after", &date)]), Some(secs * 1000));
    }
}

/// IMF-fixdate of a whole-second epoch ms (test helper).
fn imf_fixdate(ms: i64) -> String {
    let secs = ms / 1000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // civil_from_days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    const M: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "Xyz, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        M[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
