//! Tests of the MCP sessions: slots, limits and their error codes.

use rmcp::model::{ErrorCode, RequestId};

use super::*;

fn sessions(calls: usize) -> Sessions {
    Sessions::new(&McpConfig {
        max_sessions: 2,
        max_calls_in_flight: calls,
        ..McpConfig::default()
    })
}

fn slot(s: &Sessions) -> Slot {
    Slot {
        calls: Mutex::default(),
        permit: Mutex::new(Some(s.reserve().unwrap())),
        gone: Mutex::default(),
    }
}

fn code(r: Result<(), ErrorData>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}

#[test]
fn an_id_in_flight_is_refused_until_its_call_ends() {
    let s = sessions(100);
    let a = slot(&s);
    let id = RequestId::Number(5);
    assert_eq!(code(s.begin(&a, &id)), None);
    let e = s.begin(&a, &id).unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
    assert!(
        e.message
            .starts_with("request id 5 is already in flight in this session"),
        "{}",
        e.message
    );
    // Another session may use it; the same one once the call ended.
    let b = slot(&s);
    assert_eq!(code(s.begin(&b, &id)), None);
    a.end(&id);
    assert_eq!(code(s.begin(&a, &id)), None);
}

#[test]
fn calls_per_session_the_calls_of_all_and_long_ids_are_bounded() {
    let s = sessions(20);
    let a = slot(&s);
    for i in 0..CALLS_PER_SESSION as i64 {
        assert_eq!(code(s.begin(&a, &RequestId::Number(i))), None);
    }
    let e = s.begin(&a, &RequestId::Number(99)).unwrap_err();
    assert_eq!(e.code, AT_CAPACITY);
    assert!(
        e.message
            .starts_with("too many calls in flight in this session: at most 16"),
        "{}",
        e.message
    );
    let b = slot(&s);
    for i in 0..4 {
        assert_eq!(code(s.begin(&b, &RequestId::Number(i))), None);
    }
    let e = s.begin(&b, &RequestId::Number(4)).unwrap_err();
    assert!(
        e.message.contains("20 at once (mcp.max_calls_in_flight)"),
        "{}",
        e.message
    );
    // Ending a call gives its place back to every session.
    a.end(&RequestId::Number(0));
    assert_eq!(code(s.begin(&b, &RequestId::Number(4))), None);
    let long = RequestId::String("x".repeat(MAX_ID_CHARS + 1).into());
    assert_eq!(code(s.begin(&b, &long)), Some(ErrorCode::INVALID_REQUEST));
    // The session cap: two slots taken, a third refused, one back on drop.
    assert!(matches!(s.reserve(), Err(SessionsError::Full { limit: 2 })));
    drop(a);
    assert_eq!(s.live(), 1);
    assert!(s.reserve().is_ok());
}
