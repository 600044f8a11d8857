//! The page handlers: the overview (rendered once per range and kept until
//! its inputs change, [`super::Dash::stamp`]), a tool's page and its chart
//! files, the signals, one signal (with the incident it is part of), a
//! trace. (The incidents' pages are in `incidents`.)

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::fail::{blocking, internal, Fail};
use super::load::{
    filter_signals, load_outcomes, load_signals, one_signal, tool_rollup, trace_view,
};
use super::query::{form_fields, page_no, range, Segments, Q};
use super::{chart, incident_pages, pages, panels, spike, Shared};
use crate::model::day_of_ns;

pub(super) async fn overview(State(d): State<Shared>, Query(q): Q) -> Result<Response, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let rollup = d.reads.rollup().map_err(internal)?;
        let r = range(&q, rollup.last_day())?;
        let key = format!("{}..{}", r.from, r.to);
        let stamp = d.stamp();
        {
            let cache = d.overviews.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((s, html)) = cache.get(&key) {
                if *s == stamp {
                    return Ok(page_response(html.clone()));
                }
            }
        }
        let signals = d.reads.signals.signals().map_err(internal)?;
        let summaries = d.reads.tools.tools(r.from, r.to, &rollup, &signals);
        let rows = rollup.frame_between(r.from, r.to).map_err(internal)?;
        let panels = panels::render(&d.panels, &rows, r.from, r.to);
        let outcomes = load_outcomes(&d.state_path, &r, None)?;
        // Incidents that cannot be read are said in their section; the
        // rest of the overview still renders.
        let incidents = d.reads.incidents.incidents().map_err(|e| e.to_string());
        let incidents = incident_pages::overview_section(match &incidents {
            Ok(list) => Ok(list.as_slice()),
            Err(e) => Err(e.as_str()),
        });
        // The panels are a template's output (`panels::render`).
        let html = bytes::Bytes::from(pages::overview(
            &r,
            &summaries,
            &signals,
            &outcomes,
            maud::PreEscaped(panels),
            incidents,
        ));
        let mut cache = d.overviews.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= 64 {
            cache.clear();
        }
        cache.insert(key, (stamp, html.clone()));
        Ok(page_response(html))
    })
    .await
}

fn page_response(html: bytes::Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        axum::body::Body::from(html),
    )
        .into_response()
}

pub(super) async fn tool_page(
    State(d): State<Shared>,
    Segments(tool): Segments<String>,
    Query(q): Q,
) -> Result<Html<String>, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let (rollup, r) = tool_rollup(&d, &tool, &q)?;
        let signals = load_signals(&d)?;
        let outcomes = load_outcomes(&d.state_path, &r, Some(&tool))?;
        // What a sweep run now judges: the days before today (UTC). Today
        // and any later day are judged too, for their thresholds, but shown
        // as in progress.
        let today = day_of_ns(chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0));
        let verdicts = rollup.spike_verdicts(&tool, today.max(r.to) + 1, &d.spike);
        let rate = spike::section(&verdicts, &r, today, &d.spike);
        // The section is a template's output (`spike::section`).
        Ok(Html(pages::tool(
            &tool,
            &rollup,
            &r,
            &signals,
            &outcomes,
            maud::PreEscaped(rate),
        )))
    })
    .await
}

pub(super) async fn signals_page(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Html<String>, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let list = filter_signals(load_signals(&d)?, &q);
        let mut f: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.sort();
        Ok(Html(pages::signals(&list, &f.join(", "))))
    })
    .await
}

pub(super) async fn signal_page(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Html<String>, Fail> {
    blocking(move || {
        let (s, h, incident) = one_signal(&d.state_path, &id)?;
        let part_of = match incident {
            Some(inc) => {
                let about = d.reads.incidents.incident(&inc).map_err(internal)?;
                incident_pages::part_of(&inc, about.as_ref())
            }
            None => maud::html! {},
        };
        Ok(Html(pages::signal(&s, &h, part_of)))
    })
    .await
}

pub(super) async fn trace_page(
    State(d): State<Shared>,
    Segments(trace_id): Segments<String>,
    Query(q): Q,
) -> Result<Html<String>, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let v = trace_view(&d, &trace_id, &q)?;
        let p = page_no(&q, v.spans.len())?;
        Ok(Html(pages::trace(&v, p, q.get("day").map(String::as_str))))
    })
    .await
}

pub(super) async fn chart_file(
    State(d): State<Shared>,
    Segments((tool, file)): Segments<(String, String)>,
    Query(q): Q,
) -> Result<Response, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let (rollup, r) = tool_rollup(&d, &tool, &q)?;
        let days = rollup.chart_days(r.from, r.to, Some(&tool));
        match file.as_str() {
            "daily.svg" => Ok((
                [(header::CONTENT_TYPE, "image/svg+xml")],
                chart::volume_svg(&days, 800, 300),
            )
                .into_response()),
            "daily.png" => Ok((
                [(header::CONTENT_TYPE, "image/png")],
                chart::volume_png(&days, 800, 300),
            )
                .into_response()),
            other => Err(Fail(
                StatusCode::NOT_FOUND,
                format!("expected daily.svg or daily.png, got {other:?}"),
            )),
        }
    })
    .await
}
