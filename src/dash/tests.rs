//! Charts are deterministic; hostile names stay text.

use super::chart;
use super::html::{esc, seg};
use axum::http::StatusCode;

fn days() -> Vec<chart::Day> {
    (20_640..20_670)
        .map(|d| {
            (
                d,
                100.0 + (d % 7) as f64,
                if d == 20_663 { 53.0 } else { 2.0 },
            )
        })
        .collect()
}

#[test]
fn charts_are_the_same_bytes_for_the_same_input() {
    let a = chart::volume_svg(&days(), 800, 300);
    assert_eq!(a, chart::volume_svg(&days(), 800, 300));
    assert!(
        a.starts_with("<svg") && a.contains("#D62728")
            || a.contains("#d62728")
            || a.contains("rgb(214,39,40)")
            || a.contains("D62728"),
        "{}",
        &a[..200.min(a.len())]
    );
    let p = chart::volume_png(&days(), 400, 150);
    assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(p, chart::volume_png(&days(), 400, 150));
    assert_ne!(p, chart::volume_png(&days()[..20], 400, 150));
    let r = chart::rate_svg(&days(), 600, 200, "%");
    assert_eq!(r, chart::rate_svg(&days(), 600, 200, "%"));
    assert_eq!(
        chart::sparkline(&[1, 2, 3], &[0, 1, 0]),
        chart::sparkline(&[1, 2, 3], &[0, 1, 0])
    );
    // No data: an empty chart, not a panic.
    assert!(chart::volume_svg(&[], 300, 100).starts_with("<svg"));
    assert!(!chart::volume_png(&[], 300, 100).is_empty());
}

#[test]
fn escaping_leaves_nothing_active() {
    let hostile = r#""><img src=x onerror=alert(1)><script>alert(1)</script>'"#;
    let e = esc(hostile);
    assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
    let s = seg(hostile);
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"%-_.~".contains(&b)),
        "{s}"
    );
}

/// Two retry chains of one tool in one turn, split by a success, are two
/// loops in the trace view, each with its own rhythm.
#[test]
fn each_request_loop_in_a_trace_has_its_own_rhythm() {
    use polars::prelude::*;
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    // Chain one: four no-backoff 503s, then ok. Chain two (after that
    // success, so a loop of its own): three 503s with growing gaps, then ok.
    let starts = [0i64, 110, 220, 330, 440, 1000, 2100, 4200, 8300];
    let n = starts.len();
    let df = df! {
        "trace_id" => vec!["ab".repeat(16); n + 1],
        "span_id" => (0..=n).map(|i| format!("{i:016x}")).collect::<Vec<_>>(),
        "parent_span_id" => (0..=n).map(|i| (i > 0).then(|| format!("{:016x}", 0))).collect::<Vec<_>>(),
        "name" => (0..=n).map(|i| if i == 0 { "invoke_agent".to_string() } else { "execute_tool search".to_string() }).collect::<Vec<_>>(),
        "service_name" => vec!["svc"; n + 1],
        "is_agent" => (0..=n).map(|i| i == 0).collect::<Vec<_>>(),
        "agent_call_id" => vec![None::<String>; n + 1],
        "is_tool_call" => (0..=n).map(|i| i > 0).collect::<Vec<_>>(),
        "tool_name" => (0..=n).map(|i| (i > 0).then_some("search")).collect::<Vec<_>>(),
        "tool_args_hash" => (0..=n).map(|i| match i { 0 => None, 1..=5 => Some("a"), _ => Some("b") }).collect::<Vec<_>>(),
        "tool_convention" => (0..=n).map(|i| (i > 0).then_some("gen_ai")).collect::<Vec<_>>(),
        "error_class" => (0..=n).map(|i| match i { 0 | 5 | 9 => "ok", _ => "unavailable" }).collect::<Vec<_>>(),
        "attributes" => vec!["{}"; n + 1],
        "start_ns" => std::iter::once(ms(0)).chain(starts.iter().map(|s| ms(*s))).collect::<Vec<_>>(),
        "end_ns" => std::iter::once(ms(9000)).chain(starts.iter().map(|s| ms(*s + 100))).collect::<Vec<_>>(),
    }
    .unwrap();
    let v = super::trace::view(&"ab".repeat(16), &df).unwrap();
    let by_id = |i: usize| {
        v.spans
            .iter()
            .find(|s| s.span_id == format!("{i:016x}"))
            .unwrap()
    };
    assert_eq!(by_id(1).verdict, "failed");
    assert_eq!(by_id(4).verdict, "rescued");
    assert_eq!(by_id(5).verdict, "rescued");
    assert_eq!(by_id(4).rhythm.as_deref(), Some("no_backoff"));
    // After the success the next failure starts fresh, then is rescued
    // with growing gaps.
    assert_eq!(by_id(6).verdict, "failed");
    assert_eq!(by_id(9).verdict, "rescued");
    assert_eq!(by_id(9).rhythm.as_deref(), Some("exponential"));
}

fn query(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The API takes a query value as given (an empty one is a bad value, and
/// `days` is checked even beside `from` / `to`); the pages drop their forms'
/// blank fields first.
#[test]
fn api_query_values_are_taken_as_given() {
    use super::query::{form_fields, range};
    let last = Some(20_660);
    assert_eq!(range(&query(&[]), last).ok().map(|r| r.days), Some(30));
    for bad in [
        &[("days", "")][..],
        &[("from", "")],
        &[("to", "")],
        &[("days", "true"), ("to", "2026-07-29")],
        &[("days", "7"), ("from", "2026-07-01")],
    ] {
        let e = range(&query(bad), last).err();
        assert_eq!(e.map(|e| e.0), Some(StatusCode::BAD_REQUEST), "{bad:?}");
    }
    let blank = form_fields(query(&[("from", ""), ("to", ""), ("days", "7")]));
    assert_eq!(range(&blank, last).ok().map(|r| r.days), Some(7));
}

/// A path segment that is not UTF-8 is answered like the handlers' own bad
/// values: a 400 page, not axum's plain text.
#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_a_400_page() {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;
    let app = axum::Router::new().route(
        "/x/{id}",
        axum::routing::get(
            |super::query::Segments(id): super::query::Segments<String>| async move { id },
        ),
    );
    let r = app
        .clone()
        .oneshot(Request::get("/x/%FF").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let ct = r.headers()[axum::http::header::CONTENT_TYPE]
        .to_str()
        .unwrap();
    assert!(ct.starts_with("text/html"), "{ct}");
    let ok = app
        .oneshot(Request::get("/x/SW-LWJM").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}
