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

/// Days of history a `--since` value covers (`30d`, `12h` rounds up to a day, `2w`).
pub fn parse_since(s: &str) -> Result<i32, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("expected a duration like 30d, 12h or 2w, got {s:?}"))?;
    let days = match unit {
        "d" | "" => n,
        "w" => n * 7,
        "h" => (n + 23) / 24,
        _ => {
            return Err(format!(
                "expected a duration like 30d, 12h or 2w, got {s:?}"
            ))
        }
    };
    i32::try_from(days.max(1)).map_err(|_| format!("{s:?} is too long"))
}

/// A `--now` value: RFC 3339, or a UTC date (its midnight).
pub fn parse_now(s: &str) -> Result<i64, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return t
            .timestamp_nanos_opt()
            .ok_or_else(|| format!("{s:?} is out of range"));
    }
    let day = crate::model::day_from_str(s).ok_or_else(|| {
        format!(
            "expected an RFC 3339 time (2026-08-06T09:00:00Z) or a date (2026-08-06), got {s:?}"
        )
    })?;
    i64::from(day)
        .checked_mul(NANOS_PER_DAY)
        .ok_or_else(|| format!("{s:?} is out of range"))
}
