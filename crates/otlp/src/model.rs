//! The shared vocabulary of every stage: the normalized span row, the error
//! classes of detection.md §3 and the column names the store writes.
//! No IO happens here.

use std::fmt;
use std::sync::Arc;

/// What a failure was, whatever name the span gave it (detection.md §3);
/// `interrupted` and `cancelled` are control flow, not failures: a call a
/// human-in-the-loop interrupt or a hand-off stopped, or that its user
/// cancelled (appended last, so every earlier class keeps its place).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Ok,
    RateLimited,
    Unavailable,
    Timeout,
    Network,
    ServerError,
    Auth,
    NotFound,
    InvalidRequest,
    ClientError,
    Policy,
    Unknown,
    Interrupted,
    Cancelled,
}

impl ErrorClass {
    /// Every class, in the order reports list them (declaration order:
    /// `c as usize` is its place).
    pub const ALL: [ErrorClass; 14] = [
        ErrorClass::Ok,
        ErrorClass::RateLimited,
        ErrorClass::Unavailable,
        ErrorClass::Timeout,
        ErrorClass::Network,
        ErrorClass::ServerError,
        ErrorClass::Auth,
        ErrorClass::NotFound,
        ErrorClass::InvalidRequest,
        ErrorClass::ClientError,
        ErrorClass::Policy,
        ErrorClass::Unknown,
        ErrorClass::Interrupted,
        ErrorClass::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Ok => "ok",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Network => "network",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Auth => "auth",
            ErrorClass::NotFound => "not_found",
            ErrorClass::InvalidRequest => "invalid_request",
            ErrorClass::ClientError => "client_error",
            ErrorClass::Policy => "policy",
            ErrorClass::Unknown => "unknown",
            ErrorClass::Interrupted => "interrupted",
            ErrorClass::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// `Some(true)` when waiting can fix it, `Some(false)` when the same
    /// request fails the same way, `None` for `ok`, `unknown` and control
    /// flow (no failure to fix).
    pub fn retryable(self) -> Option<bool> {
        match self {
            ErrorClass::RateLimited
            | ErrorClass::Unavailable
            | ErrorClass::Timeout
            | ErrorClass::Network
            | ErrorClass::ServerError => Some(true),
            ErrorClass::Auth
            | ErrorClass::NotFound
            | ErrorClass::InvalidRequest
            | ErrorClass::ClientError
            | ErrorClass::Policy => Some(false),
            ErrorClass::Ok
            | ErrorClass::Unknown
            | ErrorClass::Interrupted
            | ErrorClass::Cancelled => None,
        }
    }

    /// Anything but a plain success: a failure, or control flow.
    pub fn is_error(self) -> bool {
        self != ErrorClass::Ok
    }

    /// A failure: what error rates, retry chains and wasted retries count
    /// (neither `ok` nor control flow).
    pub fn is_failure(self) -> bool {
        self != ErrorClass::Ok && !self.is_control_flow()
    }

    /// `interrupted` or `cancelled`: the call was stopped on purpose, by a
    /// human-in-the-loop interrupt, a hand-off or its user; no failure.
    pub fn is_control_flow(self) -> bool {
        matches!(self, ErrorClass::Interrupted | ErrorClass::Cancelled)
    }

    /// The classes that are failures, in [`ErrorClass::ALL`]'s order.
    pub fn failures() -> impl Iterator<Item = ErrorClass> {
        ErrorClass::ALL.into_iter().filter(|c| c.is_failure())
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which convention marked a span as a tool call (detection.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolConvention {
    GenAi,
    OpenInference,
    OpenLlmetry,
    VercelAi,
    Fallback,
    Mcp,
}

impl ToolConvention {
    /// Every convention, in declaration order (`c as usize` is its place).
    pub const ALL: [ToolConvention; 6] = [
        ToolConvention::GenAi,
        ToolConvention::OpenInference,
        ToolConvention::OpenLlmetry,
        ToolConvention::VercelAi,
        ToolConvention::Fallback,
        ToolConvention::Mcp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolConvention::GenAi => "gen_ai",
            ToolConvention::OpenInference => "openinference",
            ToolConvention::OpenLlmetry => "openllmetry",
            ToolConvention::VercelAi => "vercel_ai",
            ToolConvention::Fallback => "fallback",
            ToolConvention::Mcp => "mcp",
        }
    }
}

/// One span after normalization: the row of DESIGN.md's span table.
///
/// `turn_id` is resolved at sweep time (detection.md §2) and is `None` in
/// stored parts; `is_agent` and `agent_call_id` are what that resolution needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRow {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: &'static str,
    /// Shared by every span of a resource.
    pub service_name: Arc<str>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub duration_ns: i64,
    pub status_code: &'static str,
    pub status_message: Option<String>,
    pub is_tool_call: bool,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_args_hash: Option<String>,
    /// Hash of the recorded result, when there is one (loops and polling).
    pub tool_result_hash: Option<String>,
    /// A tool call's arguments were recorded, empty ones too (they have no
    /// hash); `None` for other spans. The coverage report's "with arguments".
    pub tool_args_recorded: Option<bool>,
    pub tool_convention: Option<ToolConvention>,
    pub session_id: Option<String>,
    pub turn_id: Option<String>,
    pub is_agent: bool,
    pub agent_call_id: Option<String>,
    pub http_status: Option<i32>,
    pub rpc_status: Option<i32>,
    pub error_type: Option<String>,
    pub error_class: ErrorClass,
    pub retryable: Option<bool>,
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// Span attributes as a JSON object, kept for the trace view.
    pub attributes: String,
    /// Span events as a JSON array (`[]` when there are none).
    pub events: String,
    /// Resource attributes as a JSON object, shared by every span of the resource.
    pub resource: Arc<str>,
    /// The instrumentation scope that made the span (coverage is per scope).
    pub scope_name: Option<Arc<str>>,
    pub scope_version: Option<Arc<str>>,
    /// The server the span talks to (docs/detection.md §1, "The
    /// dependency"): on tool calls, MCP server spans and client spans only.
    pub dependency: Option<String>,
    /// How long a failed span was told to wait before retrying, in ms
    /// (docs/detection.md §4.9; `ingest::retry_after`): none on spans that
    /// did not fail or stated no wait.
    pub retry_after_ms: Option<i64>,
    /// One round trip to a language model (docs/detection.md §1, "Model
    /// spans"); never a tool call or an agent span.
    pub is_model: bool,
    /// The model a model span names.
    pub model_name: Option<String>,
}

impl SpanRow {
    /// UTC day of the span's start, as days since 1970-01-01.
    pub fn day(&self) -> i32 {
        day_of_ns(self.start_ns)
    }

    /// The exact identity used to store a span once: trace id + span id.
    pub fn key(&self) -> Option<SpanKey> {
        SpanKey::from_hex(&self.trace_id, &self.span_id)
    }
}

/// The dedup key of a span: a 128-bit hash of its trace id and span id.
/// Sixteen bytes a key keeps a day of keys small; two different spans
/// share a key with odds near 2^-128 per pair, far below any disk's error rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanKey(pub u128);

impl SpanKey {
    pub fn from_hex(trace_id: &str, span_id: &str) -> Option<SpanKey> {
        if trace_id.len() != 32 || span_id.len() != 16 {
            return None;
        }
        if let (Some(trace), Some(span)) = (hex_bytes::<16>(trace_id), hex_bytes::<8>(span_id)) {
            return Some(SpanKey::from_ids(&trace, &span));
        }
        // What the digits alone do not spell (a sign): as integer parsing reads it.
        let trace = u128::from_str_radix(trace_id, 16).ok()?;
        let span = u64::from_str_radix(span_id, 16).ok()?;
        Some(SpanKey::from_ids(&trace.to_be_bytes(), &span.to_be_bytes()))
    }

    /// The key of the ids as bytes (what their hex spells, in order).
    pub fn from_ids(trace_id: &[u8; 16], span_id: &[u8; 8]) -> SpanKey {
        let mut bytes = [0u8; 24];
        bytes[..16].copy_from_slice(trace_id);
        bytes[16..].copy_from_slice(span_id);
        SpanKey(xxhash_rust::xxh3::xxh3_128(&bytes))
    }
}

pub const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// UTC day number (days since the epoch) of a nanosecond timestamp.
pub fn day_of_ns(ns: i64) -> i32 {
    ns.div_euclid(NANOS_PER_DAY) as i32
}

/// `YYYY-MM-DD` of a day number.
pub fn day_to_string(day: i32) -> String {
    let date = chrono::DateTime::from_timestamp(i64::from(day) * 86_400, 0)
        .map(|d| d.date_naive())
        .unwrap_or_default();
    date.format("%Y-%m-%d").to_string()
}

/// Day number of a `YYYY-MM-DD` string.
pub fn day_from_str(s: &str) -> Option<i32> {
    let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from((date - epoch).num_days()).ok()
}

/// The bytes `N * 2` hex digits (either case) spell; `None` for anything else.
pub fn hex_bytes<const N: usize>(s: &str) -> Option<[u8; N]> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// Lowercase hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        for s in ["1970-01-01", "2026-07-29", "2026-08-05", "1969-12-31"] {
            let d = day_from_str(s).unwrap();
            assert_eq!(day_to_string(d), s);
        }
        let jul29 = day_from_str("2026-07-29").unwrap();
        let ns = i64::from(jul29) * NANOS_PER_DAY + 3_600_000_000_000;
        assert_eq!(day_of_ns(ns), jul29);
    }

    #[test]
    fn classes_round_trip_and_split() {
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
        }
        assert_eq!(ErrorClass::Unavailable.retryable(), Some(true));
        assert_eq!(ErrorClass::NotFound.retryable(), Some(false));
        assert_eq!(ErrorClass::Unknown.retryable(), None);
        for c in [ErrorClass::Interrupted, ErrorClass::Cancelled] {
            assert_eq!(c.retryable(), None);
            assert!(c.is_control_flow() && c.is_error() && !c.is_failure());
        }
        assert!(ErrorClass::Unknown.is_failure() && !ErrorClass::Ok.is_failure());
        assert_eq!(ErrorClass::failures().count(), 11);
    }

    #[test]
    fn enum_lists_are_in_declaration_order() {
        for (i, c) in ErrorClass::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i);
        }
        for (i, c) in ToolConvention::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i);
        }
    }

    #[test]
    fn key_needs_exact_hex_lengths() {
        assert!(SpanKey::from_hex(&"ab".repeat(16), &"cd".repeat(8)).is_some());
        assert!(SpanKey::from_hex(&"ab".repeat(15), &"cd".repeat(8)).is_none());
        assert!(SpanKey::from_hex(&"zz".repeat(16), &"cd".repeat(8)).is_none());
    }

    #[test]
    fn key_from_bytes_is_the_key_of_their_hex() {
        let trace: [u8; 16] = std::array::from_fn(|i| (i * 17 + 3) as u8);
        let span: [u8; 8] = std::array::from_fn(|i| (250 - i * 31) as u8);
        let hex = SpanKey::from_hex(&to_hex(&trace), &to_hex(&span));
        assert_eq!(hex, Some(SpanKey::from_ids(&trace, &span)));
        let upper = SpanKey::from_hex(&to_hex(&trace).to_uppercase(), &to_hex(&span));
        assert_eq!(upper, hex);
        // A sign the integer parse took: still the same key as before.
        let signed = format!("+{}", &to_hex(&trace)[1..]);
        let mut shifted = trace;
        shifted[0] &= 0x0f;
        assert_eq!(
            SpanKey::from_hex(&signed, &to_hex(&span)),
            Some(SpanKey::from_ids(&shifted, &span))
        );
    }
}
