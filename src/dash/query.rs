//! What a request asks for, read from its path and query: the [`Segments`]
//! extractor, the pages' blank form fields, the date range and the trace
//! page number, each a 400 with what was expected when it is bad.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::{request::Parts, StatusCode};

use super::fail::Fail;
use super::pages::{self, Range};
use crate::model::{day_from_str, day_of_ns};

pub(super) type Q = Query<HashMap<String, String>>;

/// The query of a page: its forms send a field left blank as `name=`, which
/// means "not given". The JSON API takes every value as given, so there an
/// empty `days`, `from`, `state`... is a bad value (400), like any other.
pub(super) fn form_fields(mut q: HashMap<String, String>) -> HashMap<String, String> {
    q.retain(|_, v| !v.is_empty());
    q
}

/// axum's `Path`, whose rejection (a segment that is not UTF-8 once
/// percent-decoded) is answered like the handlers' own bad values: a 400
/// page rather than axum's plain text.
pub(super) struct Segments<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Segments<T> {
    type Rejection = Fail;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Fail> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(Segments(t)),
            Err(e) => Err(Fail(e.status(), e.body_text())),
        }
    }
}

/// The range asked for: `days=N` (ending on the newest day with data) or
/// `from` / `to` dates, not both; 30 days by default.
pub(super) fn range(q: &HashMap<String, String>, last_day: Option<i32>) -> Result<Range, Fail> {
    let today = last_day
        .unwrap_or_else(|| day_of_ns(chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)));
    let bad = |what: &str, v: &str| {
        Fail(
            StatusCode::BAD_REQUEST,
            format!(
                "{what}: expected {}, got {v:?}",
                if what == "days" {
                    "a number of days from 1 to 366"
                } else {
                    "a date like 2026-07-29"
                }
            ),
        )
    };
    let parse_day = |k: &str| -> Result<Option<i32>, Fail> {
        q.get(k)
            .map(|v| day_from_str(v).ok_or_else(|| bad(k, v)))
            .transpose()
    };
    let (from, to) = (parse_day("from")?, parse_day("to")?);
    let days = q
        .get("days")
        .map(|v| {
            v.parse::<i32>()
                .ok()
                .filter(|d| (1..=366).contains(d))
                .ok_or_else(|| bad("days", v))
        })
        .transpose()?;
    if from.is_some() || to.is_some() {
        if days.is_some() {
            return Err(Fail(
                StatusCode::BAD_REQUEST,
                "days, or from and to: not both".into(),
            ));
        }
        let to = to.unwrap_or(today);
        let from = from.unwrap_or(to - 29);
        if from > to || to - from > 365 {
            return Err(Fail(
                StatusCode::BAD_REQUEST,
                "from must be before to, at most 366 days apart".into(),
            ));
        }
        return Ok(Range {
            from,
            to,
            days: to - from + 1,
        });
    }
    let days = days.unwrap_or(30);
    Ok(Range {
        from: today - days + 1,
        to: today,
        days,
    })
}

/// `page=N` (1 when absent), at most the last page of `spans` spans.
pub(super) fn page_no(q: &HashMap<String, String>, spans: usize) -> Result<usize, Fail> {
    let last = spans.div_ceil(pages::PAGE_SPANS).max(1);
    match q.get("page") {
        None => Ok(1),
        Some(p) => p
            .parse::<usize>()
            .ok()
            .filter(|p| (1..=last).contains(p))
            .ok_or_else(|| {
                Fail(
                    StatusCode::BAD_REQUEST,
                    format!("page: expected 1 to {last}, got {p:?}"),
                )
            }),
    }
}
