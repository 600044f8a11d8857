//! The JSON API's reads (`/api/...`, described by [`super::openapi`]): the
//! tools table, a tool's days, the signals, one signal with its history, a
//! trace page by page, the recent retry loops. Query values are taken as
//! given: an empty one is a bad value.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::fail::{blocking, internal, Fail};
use super::load::{filter_signals, load_signals, one_signal, tool_rollup, trace_view};
use super::query::{page_no, range, Segments, Q};
use super::{pages, Shared};

pub(super) async fn api_trace(
    State(d): State<Shared>,
    Segments(trace_id): Segments<String>,
    Query(q): Q,
) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let mut v = trace_view(&d, &trace_id, &q)?;
        let p = page_no(&q, v.spans.len())?;
        let total = v.spans.len();
        v.spans = v
            .spans
            .into_iter()
            .skip((p - 1) * pages::PAGE_SPANS)
            .take(pages::PAGE_SPANS)
            .collect();
        let mut j = serde_json::to_value(&v).map_err(internal)?;
        j["page"] = p.into();
        j["total_spans"] = total.into();
        j["page_size"] = pages::PAGE_SPANS.into();
        Ok(Json(j))
    })
    .await
}

/// Tools per `/api/tools` page unless `page_size` says otherwise, and the most it may say.
pub(super) const TOOLS_PAGE: usize = 200;
pub(super) const TOOLS_PAGE_MAX: usize = 1000;

/// The tools table, busiest first (then by name), a page at a time.
pub(super) async fn api_tools(State(d): State<Shared>, Query(q): Q) -> Result<Response, Fail> {
    let size = match q.get("page_size") {
        None => TOOLS_PAGE,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=TOOLS_PAGE_MAX).contains(n))
            .ok_or_else(|| {
                Fail(
                    StatusCode::BAD_REQUEST,
                    format!("page_size: expected 1 to {TOOLS_PAGE_MAX}, got {v:?}"),
                )
            })?,
    };
    let page = match q.get("page") {
        None => 1,
        Some(v) => v.parse::<usize>().ok().filter(|p| *p >= 1).ok_or_else(|| {
            Fail(
                StatusCode::BAD_REQUEST,
                format!("page: expected a page number from 1, got {v:?}"),
            )
        })?,
    };
    blocking(move || {
        let rollup = d.reads.rollup().map_err(internal)?;
        let r = range(&q, rollup.last_day())?;
        let signals = d.reads.signals.signals().map_err(internal)?;
        let body = d
            .reads
            .tools
            .page_json(r.from, r.to, page, size, &rollup, &signals)
            .map_err(|pages| {
                Fail(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "page: expected 1 to {pages} ({page_size} tools a page), got {page}",
                        page_size = size
                    ),
                )
            })?;
        Ok((
            [(header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from(body),
        )
            .into_response())
    })
    .await
}

pub(super) async fn api_tool_daily(
    State(d): State<Shared>,
    Segments(tool): Segments<String>,
    Query(q): Q,
) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let (rollup, r) = tool_rollup(&d, &tool, &q)?;
        let rows: Vec<serde_json::Value> = rollup.tools[&tool]
            .iter()
            .filter(|x| (r.from..=r.to).contains(&x.day))
            .map(|x| {
                let classes: BTreeMap<&str, u64> = x.classes.iter().map(|(c, n)| (c.as_str(), *n)).collect();
                serde_json::json!({"day": crate::model::day_to_string(x.day), "calls": x.calls, "errors": x.errors, "error_rate": x.rate(), "p50_ms": x.p50_ns / 1e6, "p95_ms": x.p95_ns / 1e6, "classes": classes, "interrupted": x.interrupted, "cancelled": x.cancelled})
            })
            .collect();
        Ok(Json(serde_json::json!({"tool": tool, "days": rows})))
    })
    .await
}

pub(super) async fn api_signals(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Json<serde_json::Value>, Fail> {
    if let Some(st) = q.get("state") {
        if st != "open" && crate::signal::Lifecycle::parse(st).is_none() {
            return Err(Fail(
                StatusCode::BAD_REQUEST,
                format!(
                    "state: expected open, new, ongoing, resolved, regressed or muted, got {st:?}"
                ),
            ));
        }
    }
    blocking(move || {
        let list = filter_signals(load_signals(&d)?, &q);
        Ok(Json(serde_json::Value::Array(
            list.iter().map(crate::sweep::signal_json).collect(),
        )))
    })
    .await
}

pub(super) async fn api_signal(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let (s, h, incident) = one_signal(&d.state_path, &id)?;
        let mut v = crate::sweep::signal_json(&s);
        v["incident"] = incident.into();
        v["history"] = h
            .iter()
            .map(|(at, from, to, why)| serde_json::json!({"at": crate::time::rfc3339(*at), "from": from, "to": to, "reason": why}))
            .collect();
        Ok(Json(v))
    })
    .await
}

/// Recent retry loops from the signals' evidence, newest first.
pub(super) async fn api_feed(State(d): State<Shared>) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let signals = load_signals(&d)?;
        let mut items: Vec<(String, serde_json::Value)> = Vec::new();
        for s in &signals {
            let verdict = match s.draft.kind {
                crate::signal::Kind::RetryAfterSuccess => "after_success",
                crate::signal::Kind::RetryStorm
                | crate::signal::Kind::WastedRetries
                | crate::signal::Kind::StackedRetries
                | crate::signal::Kind::IgnoredRetryAfter => "wasted",
                _ => continue,
            };
            for e in &s.draft.evidence {
                let text = format!(
                    "{} · {} · {} calls, {} failed{}{}",
                    e.day,
                    s.draft.tool,
                    e.calls,
                    e.failures,
                    e.rhythm.as_deref().map(|r| format!(", {r}")).unwrap_or_default(),
                    if e.wasted_seconds > 0.0 { format!(", {:.1} s wasted", e.wasted_seconds) } else { String::new() }
                );
                items.push((e.day.clone(), serde_json::json!({"trace_id": e.trace_id, "day": e.day, "tool": s.draft.tool, "signal": s.draft.id, "verdict": verdict, "wasted_seconds": e.wasted_seconds, "text": text})));
            }
        }
        items.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(Json(serde_json::Value::Array(items.into_iter().take(20).map(|(_, v)| v).collect())))
    })
    .await
}
