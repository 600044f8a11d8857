//! The receive time's window: spans dated after `now + max_future` or on a
//! day the retention drops are rejected one by one, counted by reason,
//! named in the partial-success message, and left out of the WAL payload.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use super::*;
use crate::model::{day_of_ns, NANOS_PER_DAY};

/// 2026-12-03T12:00:00Z.
const NOW: i64 = 1_796_299_200_000_000_000;
const HOUR: i64 = 3_600_000_000_000;

fn span(id: u8, start: i64, end: i64) -> Span {
    Span {
        trace_id: vec![1; 16],
        span_id: vec![id; 8],
        name: format!("span-{id}"),
        start_time_unix_nano: start as u64,
        end_time_unix_nano: end as u64,
        ..Default::default()
    }
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn bounds(retention_days: Option<u32>) -> TimeBounds {
    TimeBounds {
        max_future: Duration::from_secs(2 * 3600),
        retention_days,
    }
}

/// (start, end, retention) → kept, or the reason's label.
fn check(start: i64, end: i64, retention: Option<u32>, expected: Result<(), Outside>) {
    let w = bounds(retention).at(NOW);
    assert_eq!(
        w.check(start, end).map_err(|(o, _)| o),
        expected,
        "start {start} end {end} retention {retention:?}"
    );
}

#[test]
fn the_window_around_the_receive_time() {
    let ok = Ok(());
    let future = Err(Outside::Future);
    let past = Err(Outside::PastRetention);
    check(NOW, NOW, None, ok);
    check(NOW + 2 * HOUR, NOW + 2 * HOUR, None, ok);
    check(NOW + 2 * HOUR + 1, NOW + 2 * HOUR + 1, None, future);
    // A span that started in time but ends past the bound is refused too.
    check(NOW, NOW + 3 * HOUR, None, future);
    // An end before the start counts as the start (stored that way).
    check(NOW, 0, None, ok);
    // The year 2262, the latest an i64 of nanoseconds reaches.
    check(i64::MAX - 1, i64::MAX - 1, None, future);
    // Retention 0 (None): any age is kept, the July 2026 fixtures included.
    check(
        1_785_354_394_532_000_000,
        1_785_354_394_532_000_000,
        None,
        ok,
    );
    check(1, 1, None, ok);
    // 90 days kept: today - 90 is the first day kept, the day before is not.
    let first = (day_of_ns(NOW) - 90) as i64 * NANOS_PER_DAY;
    check(first, first, Some(90), ok);
    check(first - 1, first - 1, Some(90), past);
    check(1_785_354_394_532_000_000, NOW, Some(90), past);
    // Unbounded: everything.
    let w = Window::unbounded();
    assert!(w.check(i64::MAX, i64::MAX).is_ok());
    assert!(w.check(1, 1).is_ok());
}

#[test]
fn refused_spans_are_counted_by_reason_and_named_with_the_window() {
    let req = request(vec![
        span(1, NOW - HOUR, NOW - HOUR + 5),
        span(2, i64::MAX - 10, i64::MAX - 5),
        span(3, NOW + 5 * HOUR, NOW + 5 * HOUR),
        span(4, NOW - 200 * NANOS_PER_DAY, NOW - 200 * NANOS_PER_DAY),
        Span {
            trace_id: vec![1; 3],
            ..span(5, NOW, NOW)
        },
        // An end no i64 holds: past any time stored, so in the future.
        Span {
            end_time_unix_nano: u64::MAX,
            ..span(6, NOW, NOW)
        },
    ]);
    let n = normalize_within(&req, &bounds(Some(90)).at(NOW));
    assert_eq!(n.spans(), 1);
    assert_eq!(n.rejected, 5);
    assert_eq!((n.rejected_future, n.rejected_past, n.outside()), (3, 1, 4));
    let msg = n.reject_message().unwrap();
    assert!(
        msg.starts_with("rejected 5 span(s) (3 dated in the future, 1 older than the retention): "),
        "{msg}"
    );
    assert!(
        msg.contains(
            "span \"span-2\": starts 2262-04-11T23:47:16.854Z, after 2026-12-03T14:00:00.000Z \
             (the receive time + 7200 s, ingest.max_future_secs)"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("before 2026-09-04, the first day the 90-day retention keeps"),
        "{msg}"
    );
    assert!(msg.contains("trace id must be 16 bytes, got 3"), "{msg}");
    assert!(
        msg.contains("span \"span-6\": timestamp past the year 2262"),
        "{msg}"
    );
    // Unbounded, the same request keeps all but the bad id and the end no
    // time column holds.
    let all = normalize(&req);
    assert_eq!((all.spans(), all.rejected, all.outside()), (4, 2, 0));
}

#[test]
fn the_wal_payload_leaves_out_what_the_window_refused() {
    let kept = span(1, NOW, NOW + 5);
    let req = request(vec![
        kept.clone(),
        span(2, NOW + 10 * HOUR, NOW + 10 * HOUR),
    ]);
    let w = bounds(None).at(NOW);
    let p = prepare_within(&req, &w, ResultShapes::NONE);
    assert_eq!((p.spans(), p.normalized.rejected_future), (1, 1));
    let replayed = ExportTraceServiceRequest::decode(p.wal_payload.as_ref()).unwrap();
    assert_eq!(replayed, request(vec![kept]));
    // What a replay, which takes every time, makes of it: the kept span only.
    assert_eq!(normalize(&replayed).batch, p.normalized.batch);
    // Nothing refused: the payload is the request as it came.
    let fine = request(vec![span(1, NOW, NOW)]);
    let p = prepare_within(&fine, &w, ResultShapes::NONE);
    assert_eq!(p.wal_payload.as_ref(), fine.encode_to_vec().as_slice());
    // All refused: nothing kept, an empty payload, no day.
    let p = prepare_within(
        &request(vec![span(2, NOW + 10 * HOUR, NOW + 10 * HOUR)]),
        &w,
        ResultShapes::NONE,
    );
    assert_eq!(p.spans(), 0);
    assert!(p.normalized.batch.days().is_empty());
    assert!(ExportTraceServiceRequest::decode(p.wal_payload.as_ref())
        .unwrap()
        .resource_spans
        .is_empty());
}

#[test]
fn a_body_is_judged_by_the_window_it_is_given() {
    let req = request(vec![
        span(1, NOW, NOW),
        span(2, NOW + 3 * HOUR, NOW + 3 * HOUR),
    ]);
    let body: bytes::Bytes = req.encode_to_vec().into();
    let w = bounds(None).at(NOW);
    let p = prepare_body_with(
        body.clone(),
        Format::Protobuf,
        Encoding::Identity,
        1 << 20,
        Rules {
            window: &w,
            shapes: ResultShapes::NONE,
        },
        &mut |_| true,
    )
    .unwrap();
    assert_eq!((p.spans(), p.normalized.rejected_future), (1, 1));
    let p = prepare_body(body, Format::Protobuf, Encoding::Identity, 1 << 20).unwrap();
    assert_eq!((p.spans(), p.normalized.rejected), (2, 0));
}
