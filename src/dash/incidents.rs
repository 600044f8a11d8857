//! The handlers of `/incidents`, `/incidents/{id}` and the two API reads
//! (`/api/incidents`, `/api/incidents/{id}`), over the kept incidents
//! ([`crate::read::cache::IncidentCache`]) and the types of
//! [`crate::read::incidents`].

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::Json;

use super::fail::{blocking, internal, Fail};
use super::query::{form_fields, Segments, Q};
use super::{incident_pages, Shared};
use crate::read::incidents::{
    kept, ordered, IncidentAnswer, IncidentLine, IncidentsPage, StateCounts, Which,
};

/// Incidents per `/api/incidents` page unless `page_size` says otherwise, and the most it may say.
pub(super) const PAGE: usize = 50;
pub(super) const PAGE_MAX: usize = 200;

/// A positive number from the query, 400 when it is not one (or above `max`).
fn number(
    q: &HashMap<String, String>,
    name: &str,
    default: usize,
    max: usize,
) -> Result<usize, Fail> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                Fail(
                    StatusCode::BAD_REQUEST,
                    format!("{name}: expected 1 to {max}, got {v:?}"),
                )
            }),
    }
}

fn which(q: &HashMap<String, String>) -> Result<Which, Fail> {
    Which::parse(q.get("state").map(String::as_str))
        .map_err(|e| Fail(StatusCode::BAD_REQUEST, e.to_string()))
}

fn no_incident(id: &str) -> Fail {
    Fail(
        StatusCode::NOT_FOUND,
        format!("no incident {id:?}; /incidents lists them (ids like INC-BCDF)"),
    )
}

/// [`kept`], or a 404 naming where the ids are.
fn one(d: &Shared, id: &str) -> Result<IncidentAnswer, Fail> {
    kept(&d.reads, &d.state_path, id)
        .map_err(internal)?
        .ok_or_else(|| no_incident(id))
}

/// `GET /api/incidents`: a page of the incidents `state` admits, open first.
pub(super) async fn api_incidents(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Json<IncidentsPage>, Fail> {
    let which = which(&q)?;
    let size = number(&q, "page_size", PAGE, PAGE_MAX)?;
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
        let all = d.reads.incidents.incidents().map_err(internal)?;
        let list = ordered(&all, which);
        let pages = list.len().div_ceil(size).max(1);
        if page > pages {
            return Err(Fail(
                StatusCode::BAD_REQUEST,
                format!("page: expected 1 to {pages} ({size} incidents a page), got {page}"),
            ));
        }
        Ok(Json(IncidentsPage {
            page,
            page_size: size,
            pages,
            total: list.len(),
            counts: StateCounts::of(&all),
            incidents: list
                .iter()
                .skip((page - 1) * size)
                .take(size)
                .map(|i| IncidentLine::of(i))
                .collect(),
        }))
    })
    .await
}

/// `GET /api/incidents/{id}`: the whole incident with its history.
pub(super) async fn api_incident(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Json<IncidentAnswer>, Fail> {
    blocking(move || one(&d, &id).map(Json)).await
}

/// `/incidents`: the list, `?state=` as the API takes it (blank: the default).
pub(super) async fn incidents_page(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Html<String>, Fail> {
    let q = form_fields(q);
    let which = which(&q)?;
    blocking(move || {
        let all = d.reads.incidents.incidents().map_err(internal)?;
        Ok(Html(incident_pages::list(
            &ordered(&all, which),
            which,
            StateCounts::of(&all),
        )))
    })
    .await
}

/// `/incidents/{id}`: one incident.
pub(super) async fn incident_page(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Html<String>, Fail> {
    blocking(move || {
        let a = one(&d, &id)?;
        Ok(Html(incident_pages::incident(&a)))
    })
    .await
}
