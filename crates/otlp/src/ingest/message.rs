//! What an error's words say (detection.md §3): an HTTP status code or
//! reason phrase inside a message (`upstream 503 Service Unavailable`,
//! `Request failed with status code 429`), a JSON-RPC error code (MCP), and
//! the words that name a kind of failure (`timed out`, `connection reset`).
//! Frameworks that record a failed tool as status ERROR plus an exception
//! event — the Vercel AI SDK, pydantic-ai — leave only these. And control
//! flow, which is no failure: the exception types frameworks stop a call
//! with on purpose (LangGraph's `GraphInterrupt`, a user's `CancelledError`
//! or `AbortError`) and the words of a user's abort.

use crate::model::ErrorClass;

/// Words that, just before a three-digit number, make it a status code.
const CODE_CUES: &[&str] = &[
    "http", "http/1.0", "http/1.1", "http/2", "status", "code", "upstream", "returned", "response",
    "error", "failed",
];

/// Reason phrases (RFC 9110) and the status they stand for.
const PHRASES: &[(&str, i32)] = &[
    ("too many requests", 429),
    ("service unavailable", 503),
    ("bad gateway", 502),
    ("gateway timeout", 504),
    ("gateway time-out", 504),
    ("internal server error", 500),
    ("request timeout", 408),
    ("unprocessable entity", 422),
    ("unprocessable content", 422),
    ("bad request", 400),
    ("unauthorized", 401),
    ("forbidden", 403),
    ("not found", 404),
    ("payload too large", 413),
    ("client closed request", 499),
];

/// Phrases too common in other senses ("merge conflict") to decide alone.
const AFTER_CODE_ONLY: &[&str] = &["conflict"];

/// An HTTP status (400–599) the text names: a three-digit number after a
/// cue word (`HTTP 429`, `status code 502`, `returned 503.`), or followed
/// by its reason phrase (`429 Too Many Requests`, `429 Client Error`), or
/// alone at the very start (`503: upstream`). A number that counts
/// something (`received 500 items`, `500 tokens`) is not a status.
pub fn http_status(text: &str) -> Option<i32> {
    let t = text.to_ascii_lowercase();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        // Not part of a longer number (`1.503`, `503.2`); a sentence's full
        // stop after it is fine.
        let decimal_after = b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if i - start != 3 || (start > 0 && b[start - 1] == b'.') || decimal_after {
            continue;
        }
        let Ok(code) = t[start..i].parse::<i32>() else {
            continue;
        };
        if !(400..=599).contains(&code) {
            continue;
        }
        let before = t[..start].trim_end_matches([' ', ':', '=', '(', '[', '#', '-', '_']);
        let cue = CODE_CUES.iter().any(|c| before.ends_with(c));
        let after = t[i..].trim_start_matches([' ', ':', '-', ')', ']', ',']);
        let phrase = PHRASES.iter().any(|(p, _)| after.starts_with(p))
            || AFTER_CODE_ONLY.iter().any(|p| after.starts_with(p));
        let client_error = after.starts_with("client error") || after.starts_with("server error");
        // Alone at the start: nothing after it, or a separator.
        let lone_start = before.is_empty()
            && (after.is_empty() || t[i..].starts_with(':') || t[i..].starts_with(" -"));
        if cue || phrase || client_error || lone_start {
            return Some(code);
        }
    }
    None
}

/// The status a reason phrase alone names (`Service Unavailable`).
pub fn phrase_status(text: &str) -> Option<i32> {
    let t = text.to_ascii_lowercase();
    PHRASES
        .iter()
        .find(|(p, _)| t.contains(p))
        .map(|(_, code)| *code)
}

/// A JSON-RPC error code (`-32602`), as MCP spans carry it in `error.type`
/// or `rpc.response.status_code`.
pub fn jsonrpc(text: &str) -> Option<ErrorClass> {
    let code: i32 = text.trim().parse().ok()?;
    Some(match code {
        -32700 | -32600 | -32602 => ErrorClass::InvalidRequest,
        -32601 | -32002 => ErrorClass::NotFound,
        -32603 => ErrorClass::ServerError,
        -32001 => ErrorClass::Timeout,
        -32000 => ErrorClass::Network,
        -32099..=-32003 => ErrorClass::ServerError,
        _ => return None,
    })
}

/// The class a status code or reason phrase in `text` decides.
pub fn status_class(text: &str) -> Option<ErrorClass> {
    http_status(text).and_then(from_http)
}

/// Exception types a framework stops a call with on purpose, by the last
/// segment of their name (`langgraph.errors.GraphInterrupt`): LangGraph's
/// `GraphBubbleUp` family — `GraphInterrupt`, `NodeInterrupt` (any type
/// ending in `Interrupt` but Python's `KeyboardInterrupt`), `ParentCommand`
/// (a hand-off to the parent graph) — are `interrupted`; a cancellation —
/// `CancelledError` (asyncio, concurrent.futures), `CanceledError` (axios),
/// `AbortError` (a DOM `AbortSignal`, the OpenAI and Anthropic SDKs'
/// `APIUserAbortError`), `CancellationException` (Java, Kotlin),
/// `OperationCanceledException` / `TaskCanceledException` (.NET),
/// `KeyboardInterrupt` (the user's Ctrl-C) — is `cancelled`.
pub fn control_type(name: &str) -> Option<ErrorClass> {
    let last = name
        .trim()
        .rsplit(['.', ':', '/', '$', '\\'])
        .next()
        .unwrap_or("");
    let ends = |suffixes: &[&str]| suffixes.iter().any(|s| last.ends_with(s));
    if last == "KeyboardInterrupt"
        || ends(&[
            "CancelledError",
            "CanceledError",
            "AbortError",
            "CancellationException",
            "CanceledException",
            "CancelledException",
        ])
    {
        Some(ErrorClass::Cancelled)
    } else if ends(&["Interrupt"]) || last == "GraphBubbleUp" || last == "ParentCommand" {
        Some(ErrorClass::Interrupted)
    } else if last.eq_ignore_ascii_case("cancelled") || last == "Canceled" {
        // The gRPC status name as `error.type` (`CANCELLED`), Go's
        // `context.Canceled`.
        Some(ErrorClass::Cancelled)
    } else {
        None
    }
}

/// The words a user's abort is reported in, where no exception type says
/// it: Node's and the browsers' `AbortError` messages ("This operation was
/// aborted"), node-fetch's ("The user aborted a request."), the OpenAI
/// and Anthropic JS SDKs' ("Request was aborted."), .NET's ("The operation
/// was canceled."), Go's `context canceled`, Python gRPC's
/// `StatusCode.CANCELLED`.
const ABORT_WORDS: &[&str] = &[
    "operation was aborted",
    "request was aborted",
    "user aborted",
    "aborted by the user",
    "operation was canceled",
    "operation was cancelled",
    "request was canceled",
    "request was cancelled",
    "context canceled",
    "statuscode.cancelled",
];

/// Words in an error name or message → class.
pub fn words(text: &str) -> Option<ErrorClass> {
    let t = text.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(&["timeout", "timed out", "deadline"]) {
        Some(ErrorClass::Timeout)
    } else if has(ABORT_WORDS) {
        Some(ErrorClass::Cancelled)
    } else if has(&[
        "rate limit",
        "ratelimit",
        "rate_limit",
        "too many requests",
        "quota",
        "throttl",
    ]) {
        Some(ErrorClass::RateLimited)
    } else if has(&[
        "connection reset",
        "connection refused",
        "connectionreset",
        "connectionrefused",
        "econnreset",
        "econnrefused",
        "fetch failed",
        "dns",
        "name resolution",
        "getaddrinfo",
        "enotfound",
    ]) {
        Some(ErrorClass::Network)
    } else if has(&["validation", "invalid"]) {
        Some(ErrorClass::InvalidRequest)
    } else if has(&["moderation", "content policy", "content_policy", "safety"]) {
        Some(ErrorClass::Policy)
    } else {
        None
    }
}

/// The class of a set of texts (error name, exception type and message,
/// status message, in that order): a status code in any of them first — it
/// is the most exact clue — then the words, then a reason phrase alone
/// ("Rate limit exceeded; requests are forbidden" is a rate limit).
pub fn classify<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) -> Option<ErrorClass> {
    texts
        .clone()
        .into_iter()
        .find_map(status_class)
        .or_else(|| texts.clone().into_iter().find_map(words))
        .or_else(|| {
            texts
                .into_iter()
                .find_map(|t| phrase_status(t).and_then(from_http))
        })
}

/// HTTP status → class; `None` for statuses that are not failures.
pub fn from_http(status: i32) -> Option<ErrorClass> {
    Some(match status {
        429 => ErrorClass::RateLimited,
        408 => ErrorClass::Timeout,
        502..=504 => ErrorClass::Unavailable,
        500..=599 => ErrorClass::ServerError,
        401 | 403 => ErrorClass::Auth,
        404 | 410 => ErrorClass::NotFound,
        400 | 409 | 413 | 422 => ErrorClass::InvalidRequest,
        // nginx's "Client Closed Request": the caller went away.
        499 => ErrorClass::Cancelled,
        400..=499 => ErrorClass::ClientError,
        _ => return None,
    })
}

/// gRPC status code → class; `None` for OK and codes the table leaves open.
pub fn from_grpc(code: i32) -> Option<ErrorClass> {
    Some(match code {
        8 => ErrorClass::RateLimited,
        14 => ErrorClass::Unavailable,
        4 => ErrorClass::Timeout,
        16 | 7 => ErrorClass::Auth,
        5 => ErrorClass::NotFound,
        3 | 9 | 11 => ErrorClass::InvalidRequest,
        13 | 2 => ErrorClass::ServerError,
        // CANCELLED: "the operation was cancelled, typically by the caller".
        1 => ErrorClass::Cancelled,
        _ => return None,
    })
}

/// Words in an error name or message → class (a status code or reason
/// phrase in it first).
pub fn from_text(text: &str) -> Option<ErrorClass> {
    classify([text])
}
