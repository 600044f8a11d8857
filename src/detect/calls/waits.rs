//! The waits calls were told (a `Retry-After`, docs/detection.md §4.9): on
//! the call's own span, or on a failed span below it that ran inside it.

use std::collections::HashMap;

use super::{Fast, SpanIndex, SpanTable};
use crate::model::ErrorClass;

/// How much a span below a call may stick out of it and still have run
/// inside it (clocks of two processes, whole-millisecond starts).
const INSIDE_SLACK_NS: i64 = 1_000_000;

/// A wait a call was told: how long (ms) and from when — the end of the
/// span that stated it (the call's own, or the HTTP child's, which may end
/// long before the call when the tool slept out the wait inside itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatedWait {
    /// The end of the span that stated it (ns).
    pub from_ns: i64,
    pub ms: i64,
    /// Stated by the call's own span (ranks before any child's).
    pub own: bool,
}

impl StatedWait {
    /// When the wait is over (ns): the stating span's end plus the wait.
    pub fn deadline_ns(&self) -> i64 {
        self.from_ns
            .saturating_add(self.ms.saturating_mul(1_000_000))
    }
}

/// Whether a failure of this class is one waiting can fix (rate limited,
/// unavailable, timeout, network, server error: the retryable, transient
/// classes); a wait stated on any other (a `retry_after` echoed in a 400's
/// body) is no wait (docs/detection.md §4.9).
pub fn waitable(c: ErrorClass) -> bool {
    c.retryable() == Some(true)
}

/// Per call row, the wait it was told (docs/detection.md §4.9): its own
/// span's, else the one of the latest-ending failed span below it (up
/// through spans that are no call) that ran inside it; own waits rank
/// first. Only spans of a class waiting can fix ([`waitable`]) state one.
pub fn stated_waits(
    t: &SpanTable,
    index: &SpanIndex<'_>,
    is_call: impl Fn(usize) -> bool,
) -> HashMap<u32, StatedWait, Fast> {
    let mut out: HashMap<u32, StatedWait, Fast> = HashMap::default();
    for i in (0..t.len()).filter(|&i| t.retry_after[i] > 0) {
        let ms = t.retry_after[i];
        if !t.class[i].failed() || !waitable(t.class[i].class()) {
            continue;
        }
        if is_call(i) {
            out.insert(
                i as u32,
                StatedWait {
                    from_ns: t.end[i],
                    ms,
                    own: true,
                },
            );
            continue;
        }
        // Up through spans that are no call (a client span's parents, an
        // MCP nest's inner spans), a bounded walk: parent cycles end it.
        let mut r = i;
        for _ in 0..64 {
            let Some(p) = index.parent_of(r) else {
                break;
            };
            if is_call(p) {
                let inside = t.start[i] + INSIDE_SLACK_NS >= t.start[p]
                    && t.end[i] <= t.end[p] + INSIDE_SLACK_NS;
                if inside {
                    let w = out.entry(p as u32).or_insert(StatedWait {
                        from_ns: i64::MIN,
                        ms: 0,
                        own: false,
                    });
                    if !w.own && t.end[i] > w.from_ns {
                        *w = StatedWait {
                            from_ns: t.end[i],
                            ms,
                            own: false,
                        };
                    }
                }
                break;
            }
            r = p;
        }
    }
    out
}
