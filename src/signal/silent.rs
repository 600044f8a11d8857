//! Silent tools as signals (docs/detection.md §4.8): the findings of
//! [`crate::detect::silent`] with what their titles name — the day's calls
//! against the expected, the agent's turns beside them, the last success.

use super::{Finding, Kind};
pub use crate::detect::silent::{DayCount, Silence};
use crate::detect::{NoSuccess, Silent};
use crate::model::{day_to_string, ErrorClass, NANOS_PER_DAY};

/// A `tool_silent` finding.
pub fn from_silent(s: &Silent) -> Finding {
    Finding {
        kind: Kind::ToolSilent,
        tool: s.tool.clone(),
        class: ErrorClass::Ok,
        at_ns: i64::from(s.day) * NANOS_PER_DAY,
        day: s.day,
        evidence: None,
        calls: s.calls,
        errors: 0,
        rate: s.calls as f64 / s.expected.max(1e-9),
        baseline: s.expected,
        read_only: false,
        basis: None,
        silence: Some(Silence {
            service: s.service.clone(),
            last_ok_ns: s.last_ok_ns,
            since_ns: s.last_ok_ns.unwrap_or(0),
            days: 0.0,
            calls_since: 0,
            expected: s.expected,
            turns: s.turns,
            baseline_turns: s.baseline_turns,
        }),
    }
}

/// A `no_success` finding.
pub fn from_no_success(n: &NoSuccess) -> Finding {
    Finding {
        kind: Kind::NoSuccess,
        tool: n.tool.clone(),
        class: n.class,
        at_ns: i64::from(n.day) * NANOS_PER_DAY,
        day: n.day,
        evidence: None,
        calls: n.calls,
        errors: n.errors,
        rate: 1.0,
        baseline: 0.0,
        read_only: false,
        basis: None,
        silence: Some(Silence {
            service: n.service.clone(),
            last_ok_ns: n.last_ok_ns,
            since_ns: n.since_ns,
            days: n.days,
            calls_since: n.calls_since,
            expected: 0.0,
            turns: 0,
            baseline_turns: 0.0,
        }),
    }
}

/// A minute in UTC: `2026-08-06T09:03Z`.
pub fn minute(ns: i64) -> String {
    let t = crate::time::rfc3339(ns);
    match t.get(..16) {
        Some(m) => format!("{m}Z"),
        None => t,
    }
}

/// The title of a `tool_silent` or `no_success` signal, from its latest finding.
pub fn title(kind: Kind, tool: &str, class: ErrorClass, group: &[&Finding]) -> String {
    let latest = group
        .iter()
        .max_by_key(|f| f.day)
        .expect("a group has findings");
    let default = Silence {
        service: String::new(),
        last_ok_ns: None,
        since_ns: latest.at_ns,
        days: 0.0,
        calls_since: 0,
        expected: latest.baseline,
        turns: 0,
        baseline_turns: 0.0,
    };
    let s = latest.silence.as_ref().unwrap_or(&default);
    let last = match s.last_ok_ns {
        Some(ns) => format!("last success {}", minute(ns)),
        None => "no success stored".to_string(),
    };
    let days = if group.len() > 1 {
        format!(", {} days", group.len())
    } else {
        String::new()
    };
    if kind == Kind::ToolSilent {
        return format!(
            "Silent tool: {tool} called {} times on {} where its share of {} turns predicts {:.0} ({last}{days})",
            latest.calls,
            day_to_string(latest.day),
            s.turns,
            s.expected
        );
    }
    let class_words = class.as_str().replace('_', " ");
    let since = match s.last_ok_ns {
        Some(ns) => format!("since {}", minute(ns)),
        None => format!(
            "in the stored history (since {})",
            day_to_string(crate::model::day_of_ns(s.since_ns))
        ),
    };
    let from = match s.last_ok_ns {
        Some(ns) => format!(
            " from {} on",
            day_to_string(crate::model::day_of_ns(ns) + 1)
        ),
        None => String::new(),
    };
    format!(
        "No success: {tool} has not succeeded {since}, {:.1} days; {} failed calls{from} ({class_words})",
        s.days, s.calls_since
    )
}
