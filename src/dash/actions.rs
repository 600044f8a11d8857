//! The signal actions: `POST /api/signals/{id}/mute|unmute|resolve`, which
//! change `state.sqlite` (on a blocking thread), drop the kept signals and
//! rendered overviews, and answer JSON or send a form post back to the
//! signal's page.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;

use super::csrf::cross_site;
use super::fail::{blocking, internal, signal_error, Fail};
use super::query::{Segments, Q};
use super::{html, Shared};
use crate::signal::StateDb;

/// `POST /api/signals/{id}/mute|unmute|resolve`: JSON, or back to the
/// signal's page for the page's own form posts. Refused from other sites.
pub(super) async fn signal_action(
    State(d): State<Shared>,
    Segments((id, action)): Segments<(String, String)>,
    Query(q): Q,
    headers: HeaderMap,
) -> Result<Response, Fail> {
    if cross_site(&headers) {
        return Err(Fail(StatusCode::FORBIDDEN, "a signal's state changes only from this dashboard or an API client, not from another site".into()));
    }
    // The query is checked whatever the action: a bad value is a 400 even
    // where the action has no use for it.
    let until = q
        .get("until")
        .map(|v| {
            crate::time::parse_now(v)
                .map_err(|e| Fail(StatusCode::BAD_REQUEST, format!("until: {e}")))
        })
        .transpose()?;
    let esc = match q.get("until_escalates").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => {
            return Err(Fail(
                StatusCode::BAD_REQUEST,
                format!("until_escalates: expected true or false, got {v:?}"),
            ))
        }
    };
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    d.reads
        .may_change_by_hand()
        .map_err(|why| Fail(StatusCode::SERVICE_UNAVAILABLE, why.to_string()))?;
    let id2 = id.clone();
    let d2 = Arc::clone(&d);
    let state = blocking(move || {
        let mut db = StateDb::open(&d2.state_path).map_err(internal)?;
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
        let current = db.get(&id2).map_err(signal_error)?;
        let conflict = |why: &str| {
            Err(Fail(
                StatusCode::CONFLICT,
                format!("{id2} is {}: {why}", current.state.as_str()),
            ))
        };
        match action.as_str() {
            "mute" => db.mute(&id2, until, esc, now).map_err(internal)?,
            "unmute" if current.state != crate::signal::Lifecycle::Muted => {
                return conflict("only a muted signal can be unmuted")
            }
            "unmute" => db.unmute(&id2, now).map_err(internal)?,
            "resolve" if current.state == crate::signal::Lifecycle::Resolved => {
                return conflict("already resolved")
            }
            "resolve" => db.resolve(&id2, now).map_err(internal)?,
            other => {
                return Err(Fail(
                    StatusCode::NOT_FOUND,
                    format!("expected mute, unmute or resolve, got {other:?}"),
                ))
            }
        }
        let s = db.get(&id2).map_err(internal)?;
        // Here, not on the async thread: dropping the kept connection is a
        // SQLite call, and its lock may be held by a read waiting on SQLite.
        d2.reads.signals.invalidate();
        Ok(s.state.as_str().to_string())
    })
    .await?;
    // The overview shows signals: render it afresh.
    d.overviews
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    if form {
        Ok(Redirect::to(&format!("/signals/{}", html::seg(&id))).into_response())
    } else {
        Ok(Json(serde_json::json!({"id": id, "state": state})).into_response())
    }
}
