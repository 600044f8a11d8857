//! Time as stormwatch writes and reads it: RFC 3339 (UTC, milliseconds) of
//! a nanosecond timestamp, and the `--now` / `--since` values of the
//! commands, the API and the MCP tools. A leaf: it depends on [`crate::model`]
//! only, so every stage can format a time without depending on another.

use crate::model::NANOS_PER_DAY;

/// RFC 3339 (UTC) of a nanosecond timestamp.
pub fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp(
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    .unwrap_or_default()
}

/// A time or duration that does not parse; each names the value given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("expected a duration like 30d, 12h or 2w, got {0:?}")]
    NotADuration(String),
    #[error("{0:?} is too long")]
    TooLong(String),
    #[error("expected a time (2026-08-06T09:00:00Z), a date (2026-08-06) or a duration back from now (90m, 2h, 1d), got {0:?}")]
    NotAPoint(String),
    #[error("expected an RFC 3339 time (2026-08-06T09:00:00Z) or a date (2026-08-06), got {0:?}")]
    NotATime(String),
    #[error("{0:?} is out of range")]
    OutOfRange(String),
}

/// Days of history a `--since` value covers (`30d`, `12h` rounds up to a day, `2w`).
pub fn parse_since(s: &str) -> Result<i32, TimeError> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| TimeError::NotADuration(s.to_string()))?;
    let days = match unit {
        "d" | "" => n,
        "w" => n * 7,
        "h" => (n + 23) / 24,
        _ => return Err(TimeError::NotADuration(s.to_string())),
    };
    i32::try_from(days.max(1)).map_err(|_| TimeError::TooLong(s.to_string()))
}

/// A point in time given as a time (RFC 3339), a date (its midnight, UTC)
/// or a duration back from `now_ns` (`90m`, `2h`, `1d`, `30s`, `1w`).
pub fn parse_point(s: &str, now_ns: i64) -> Result<i64, TimeError> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let per: Option<i64> = match unit {
        "s" => Some(1),
        "m" => Some(60),
        "h" => Some(3600),
        "d" => Some(86_400),
        "w" => Some(7 * 86_400),
        _ => None,
    };
    if let (Ok(n), Some(per)) = (num.parse::<i64>(), per) {
        return n
            .checked_mul(per)
            .and_then(|secs| secs.checked_mul(1_000_000_000))
            .map(|ns| now_ns.saturating_sub(ns))
            .ok_or_else(|| TimeError::TooLong(s.to_string()));
    }
    parse_now(t).map_err(|_| TimeError::NotAPoint(s.to_string()))
}

/// A `--now` value: RFC 3339, or a UTC date (its midnight).
pub fn parse_now(s: &str) -> Result<i64, TimeError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return t
            .timestamp_nanos_opt()
            .ok_or_else(|| TimeError::OutOfRange(s.to_string()));
    }
    let day = crate::model::day_from_str(s).ok_or_else(|| TimeError::NotATime(s.to_string()))?;
    i64::from(day)
        .checked_mul(NANOS_PER_DAY)
        .ok_or_else(|| TimeError::OutOfRange(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_a_time_a_date_or_a_duration_back() {
        let now = parse_now("2026-12-05T12:00:00Z").unwrap();
        assert_eq!(parse_point("90m", now), parse_now("2026-12-05T10:30:00Z"));
        assert_eq!(parse_point("1d", now), parse_now("2026-12-04T12:00:00Z"));
        assert_eq!(
            parse_point("2026-12-05T11:00:00Z", now),
            parse_now("2026-12-05T11:00:00Z")
        );
        assert_eq!(parse_point("2026-12-05", now), parse_now("2026-12-05"));
        let err = parse_point("soon", now).unwrap_err().to_string();
        assert!(
            err.contains("duration back from now") && err.contains("\"soon\""),
            "{err}"
        );
        assert!(parse_point("99999999999999w", now).is_err());
    }
}
