//! The times a span may carry, judged against the time it was received. A
//! span that starts or ends later than `now + max_future` (a clock far
//! ahead, or a forged date: one span dated 2262 would make the newest day
//! of every view) or starts on a day the retention would delete at once is
//! refused one by one, like a span with a bad id, and never makes a day.
//! Pure: the receive time comes in as an argument.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};

use crate::model::{day_of_ns, day_to_string};

/// The accepted span times, as configured (`ingest.max_future_secs`, the
/// store's retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBounds {
    /// How far after the receive time a span may start or end.
    pub max_future: Duration,
    /// Days kept (`None`: all): a span starting on a day before `today -
    /// days` is one the retention pass would delete, so it is refused.
    pub retention_days: Option<u32>,
}

/// The default of `ingest.max_future_secs`: two hours, well past any
/// exporter's clock skew or batching delay.
pub const DEFAULT_MAX_FUTURE: Duration = Duration::from_secs(2 * 3600);

/// The most `max_future` may be (a day): so no accepted span is dated after
/// tomorrow, and a view never ends a window later ([`newest_viewable_day`]).
pub const MAX_FUTURE_LIMIT: Duration = Duration::from_secs(86_400);

/// The newest day a view may end its default window on at `now_ns`: the
/// day of `now + MAX_FUTURE_LIMIT`. Days after it hold nothing the
/// receivers accept (data written before the window existed, or by a
/// clock gone wrong) and would hide every real day from the views.
pub fn newest_viewable_day(now_ns: i64) -> i32 {
    let ahead = MAX_FUTURE_LIMIT.as_nanos() as i64;
    day_of_ns(now_ns.saturating_add(ahead))
}

impl Default for TimeBounds {
    fn default() -> TimeBounds {
        TimeBounds {
            max_future: DEFAULT_MAX_FUTURE,
            retention_days: None,
        }
    }
}

impl TimeBounds {
    /// The window at receive time `now_ns` (nanoseconds since the epoch).
    pub fn at(&self, now_ns: i64) -> Window {
        let ahead = i64::try_from(self.max_future.as_nanos()).unwrap_or(i64::MAX);
        Window {
            latest_ns: now_ns.saturating_add(ahead),
            first_day: self
                .retention_days
                .map(|keep| day_of_ns(now_ns).saturating_sub(keep as i32)),
            bounds: *self,
        }
    }
}

/// Why a span's time was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    /// Later than the receive time plus `max_future`.
    Future,
    /// On a day before the first one the retention keeps.
    PastRetention,
}

impl Outside {
    /// The `/metrics` label (`stormwatch_spans_rejected_total{reason}`).
    pub fn label(self) -> &'static str {
        match self {
            Outside::Future => "future",
            Outside::PastRetention => "past_retention",
        }
    }
}

/// The accepted span times at one receive time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    latest_ns: i64,
    first_day: Option<i32>,
    bounds: TimeBounds,
}

impl Window {
    /// Every time accepted: for WAL replay (what was acknowledged is kept),
    /// the bundled demo, and tests.
    pub const fn unbounded() -> Window {
        Window {
            latest_ns: i64::MAX,
            first_day: None,
            bounds: TimeBounds {
                max_future: Duration::MAX,
                retention_days: None,
            },
        }
    }

    /// The latest start or end accepted (nanoseconds since the epoch).
    pub fn latest_ns(&self) -> i64 {
        self.latest_ns
    }

    /// The first day accepted, when the retention bounds it.
    pub fn first_day(&self) -> Option<i32> {
        self.first_day
    }

    /// Whether a span starting at `start_ns` and ending at `end_ns` (an end
    /// before the start counts as the start) is inside; if not, why, in
    /// words naming the bound and the setting behind it.
    pub fn check(&self, start_ns: i64, end_ns: i64) -> Result<(), (Outside, String)> {
        let end_ns = end_ns.max(start_ns);
        if end_ns > self.latest_ns {
            let (what, ns) = if start_ns > self.latest_ns {
                ("starts", start_ns)
            } else {
                ("ends", end_ns)
            };
            return Err((
                Outside::Future,
                format!(
                    "{what} {}, after {} (the receive time + {} s, ingest.max_future_secs)",
                    rfc3339(ns),
                    rfc3339(self.latest_ns),
                    self.bounds.max_future.as_secs()
                ),
            ));
        }
        if let Some(first) = self.first_day.filter(|&d| day_of_ns(start_ns) < d) {
            return Err((
                Outside::PastRetention,
                format!(
                    "starts {}, before {}, the first day the {}-day retention keeps (store.retention_days; 0 keeps everything)",
                    rfc3339(start_ns),
                    day_to_string(first),
                    self.bounds.retention_days.unwrap_or(0)
                ),
            ));
        }
        Ok(())
    }
}

/// RFC 3339 (UTC, milliseconds) of a timestamp in nanoseconds.
fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp(
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    .unwrap_or_else(|| format!("{ns} ns"))
}

/// `req` with only the spans `keep` admits (resources and scopes left with
/// none dropped): what the WAL records of a request some of whose spans
/// were refused, so a replay at a later time cannot take them in.
pub fn retain_spans(
    req: &ExportTraceServiceRequest,
    keep: impl Fn(&opentelemetry_proto::tonic::trace::v1::Span) -> bool,
) -> ExportTraceServiceRequest {
    let resource_spans = req
        .resource_spans
        .iter()
        .filter_map(|rs| {
            let scope_spans: Vec<ScopeSpans> = rs
                .scope_spans
                .iter()
                .filter_map(|ss| {
                    let spans: Vec<_> = ss.spans.iter().filter(|s| keep(s)).cloned().collect();
                    (!spans.is_empty()).then(|| ScopeSpans {
                        scope: ss.scope.clone(),
                        spans,
                        schema_url: ss.schema_url.clone(),
                    })
                })
                .collect();
            (!scope_spans.is_empty()).then(|| ResourceSpans {
                resource: rs.resource.clone(),
                scope_spans,
                schema_url: rs.schema_url.clone(),
            })
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}
