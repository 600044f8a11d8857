//! Control flow is not failure (detection.md §3): the exception types, the
//! status codes and the words that make a call `interrupted` or
//! `cancelled`, each source on its own, as the frameworks record them.

use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::Event, status::StatusCode, Status};

use super::classify;
use crate::model::ErrorClass::{self, *};

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn i(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

/// The class of a span with `attrs`, a status (`code`, `message`) and, when
/// `exception` is given, one exception event of that type and message.
fn class(
    attrs: Vec<KeyValue>,
    code: StatusCode,
    message: &str,
    exception: Option<(&str, &str)>,
) -> ErrorClass {
    let status = Status {
        code: code as i32,
        message: message.into(),
    };
    let events: Vec<Event> = exception
        .map(|(t, m)| Event {
            name: "exception".into(),
            attributes: vec![s("exception.type", t), s("exception.message", m)],
            ..Default::default()
        })
        .into_iter()
        .collect();
    classify::classify(&attrs, Some(&status), &events).class
}

/// A failed span (status ERROR) with an exception of `ty` saying `message`.
fn thrown(ty: &str, message: &str) -> ErrorClass {
    class(vec![], StatusCode::Error, message, Some((ty, message)))
}

#[test]
fn langgraph_interrupts_recorded_on_an_ok_span_are_interrupted() {
    // What openinference-instrumentation-langchain 0.1.80 records for
    // LangGraph's `interrupt()` inside a tool: the exception event, status
    // OK (its IGNORED_EXCEPTION_PATTERNS match `GraphInterrupt(`). The
    // interrupt's payload is the application's words, which decide nothing.
    let payload =
        "(Interrupt(value={'question': 'Hotel not found (404), book another?'}, id='71db08'),)";
    for code in [StatusCode::Ok, StatusCode::Unset] {
        assert_eq!(
            class(
                vec![],
                code,
                "",
                Some(("langgraph.errors.GraphInterrupt", payload))
            ),
            Interrupted
        );
    }
    let verdict = classify::classify(
        &[],
        Some(&Status {
            code: StatusCode::Ok as i32,
            message: String::new(),
        }),
        &[Event {
            name: "exception".into(),
            attributes: vec![s("exception.type", "langgraph.errors.GraphInterrupt")],
            ..Default::default()
        }],
    );
    assert_eq!(
        verdict.error_type.as_deref(),
        Some("langgraph.errors.GraphInterrupt"),
        "the raw name is kept"
    );
    // An ordinary exception on an OK span was handled: still ok.
    assert_eq!(
        class(vec![], StatusCode::Ok, "", Some(("HTTPError", "HTTP 503"))),
        Ok
    );
}

#[test]
fn interrupt_and_hand_off_types_are_interrupted() {
    for ty in [
        "langgraph.errors.NodeInterrupt",
        "NodeInterrupt",
        "GraphInterrupt",
        "langgraph.errors.GraphBubbleUp",
        "langgraph.errors.ParentCommand",
    ] {
        // The status message LangChain's tracer writes: the repr, then the
        // traceback (file paths, line numbers).
        let message = format!("{ty}([Interrupt(value='approve?')])Traceback … line 503, in run");
        assert_eq!(thrown(ty, &message), Interrupted, "{ty}");
    }
}

#[test]
fn cancellation_types_are_cancelled() {
    for (ty, message) in [
        ("CancelledError", "CancelledError()"),
        ("asyncio.exceptions.CancelledError", ""),
        ("concurrent.futures._base.CancelledError", ""),
        ("AbortError", "This operation was aborted"),
        ("DOMException:AbortError", "The operation was aborted."),
        ("APIUserAbortError", "Request was aborted."),
        ("CanceledError", "canceled"),
        (
            "kotlinx.coroutines.JobCancellationException",
            "Job was cancelled",
        ),
        (
            "System.OperationCanceledException",
            "The operation was canceled.",
        ),
        ("KeyboardInterrupt", ""),
        ("CANCELLED", ""),
    ] {
        assert_eq!(thrown(ty, message), Cancelled, "{ty}");
    }
    // A cancellation that says it timed out is a timeout (.NET's HttpClient).
    assert_eq!(
        thrown(
            "System.Threading.Tasks.TaskCanceledException",
            "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing."
        ),
        Timeout
    );
    // Not cancellations: Python's EINTR, a thread's interruption.
    assert_eq!(thrown("InterruptedError", "[Errno 4]"), Unknown);
    assert_eq!(thrown("java.lang.InterruptedException", ""), Unknown);
}

#[test]
fn status_codes_of_a_cancelled_call_are_cancelled() {
    // gRPC CANCELLED (1), nginx's 499 Client Closed Request.
    assert_eq!(
        class(
            vec![i("rpc.grpc.status_code", 1)],
            StatusCode::Error,
            "",
            None
        ),
        Cancelled
    );
    for key in ["http.response.status_code", "http.status_code"] {
        assert_eq!(
            class(vec![i(key, 499)], StatusCode::Error, "", None),
            Cancelled
        );
    }
    assert_eq!(
        class(vec![s("error.type", "499")], StatusCode::Error, "", None),
        Cancelled
    );
    assert_eq!(
        thrown("HTTPError", "upstream answered 499 Client Closed Request"),
        Cancelled
    );
    // The call's own status outranks the exception it ended with.
    assert_eq!(
        class(
            vec![i("http.response.status_code", 503)],
            StatusCode::Error,
            "",
            Some(("CancelledError", ""))
        ),
        Unavailable
    );
}

#[test]
fn a_users_abort_in_the_words_alone_is_cancelled() {
    for message in [
        "This operation was aborted",
        "AbortError: The operation was aborted.",
        "The user aborted a request.",
        "Request was aborted.",
        "context canceled",
        "<_InactiveRpcError of RPC that terminated with: status = StatusCode.CANCELLED>",
    ] {
        assert_eq!(
            class(vec![], StatusCode::Error, message, None),
            Cancelled,
            "{message:?}"
        );
    }
    // Words about a business cancellation are no abort, and a timeout's
    // abort is a timeout.
    assert_eq!(
        class(
            vec![],
            StatusCode::Error,
            "the airline cancelled the flight",
            None
        ),
        Unknown
    );
    assert_eq!(
        class(
            vec![],
            StatusCode::Error,
            "The operation was aborted due to timeout",
            None
        ),
        Timeout
    );
}

#[test]
fn control_flow_is_neither_retryable_nor_deterministic() {
    for c in [Interrupted, Cancelled] {
        assert_eq!(c.retryable(), None);
        assert!(!c.is_failure());
    }
}
