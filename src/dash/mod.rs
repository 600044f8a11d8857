//! The dashboard and its JSON API, served by `stormwatch serve` on the HTTP
//! port: the overview (daily volume, tools, open signals, recent retries),
//! a page per tool, the signals with mute / unmute / resolve, and the trace
//! view. Pages and charts read the daily rollup (cached until it changes)
//! and `state.sqlite`; only the trace view reads spans, and only its own.
//! Reads run on blocking threads, never on the async ones; so does every
//! SQLite call (reads, mute / unmute / resolve, dropping the kept connection).

pub mod assets;
pub mod cache;
pub mod chart;
pub mod data;
pub mod headers;
pub mod html;
pub mod openapi;
pub mod pages;
pub mod panels;
pub mod spike;
pub mod trace;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::model::{day_from_str, day_of_ns};
use crate::signal::{Signal, StateDb};
use crate::store::Reader;
use pages::Range;

/// What the handlers share.
pub struct Dash {
    pub reader: Reader,
    /// The rollup, signals and tools tables, shared with the MCP server.
    pub reads: Arc<cache::Reads>,
    pub state_path: PathBuf,
    /// Rendered overviews by query, kept while neither the rollup nor the
    /// signal state changed.
    overviews: std::sync::Mutex<HashMap<String, (Stamp, bytes::Bytes)>>,
    /// The overview's panels (`dashboards/overview.toml`).
    pub panels: panels::Panels,
    /// The error-rate spike rule's parameters, as the sweeps use them: the
    /// tool page draws that rule's verdicts.
    pub spike: crate::detect::SpikeParams,
    /// Held by a trace lookup that scans every day.
    full_scans: std::sync::Mutex<()>,
}

/// When the inputs of a page last changed: the rollup files and the state
/// database (with its WAL).
type Stamp = Vec<Option<std::time::SystemTime>>;

impl Dash {
    fn stamp(&self) -> Stamp {
        let l = self.reader.layout();
        let wal = self.state_path.with_extension("sqlite-wal");
        [
            l.tool_daily(),
            l.tool_error_names(),
            self.state_path.clone(),
            wal,
        ]
        .iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
    }
}

type Shared = Arc<Dash>;

/// The dashboard's routes; `panels` is the overview's panel file (the
/// built-in panels when it does not exist), `spike` the parameters the
/// sweeps judge error-rate spikes with (`[detect.error_spike]`).
pub fn router(
    reads: Arc<cache::Reads>,
    panels_file: &std::path::Path,
    spike: crate::detect::SpikeParams,
) -> anyhow::Result<Router> {
    let reader = reads.reader.clone();
    let panels = panels::load(panels_file).map_err(anyhow::Error::msg)?;
    tracing::info!(panels = panels.panels.len(), from = %panels.origin, "dashboard panels");
    let state_path = reader.layout().state_db();
    let dash = Arc::new(Dash {
        reader,
        reads,
        state_path,
        overviews: Default::default(),
        panels,
        spike,
        full_scans: std::sync::Mutex::new(()),
    });
    Ok(Router::new()
        .route("/", get(overview))
        .route("/tools/{tool}", get(tool_page))
        .route("/signals", get(signals_page))
        .route("/signals/{id}", get(signal_page))
        .route("/traces/{trace_id}", get(trace_page))
        .route("/charts/tools/{tool}/{file}", get(chart_file))
        .route("/api/tools", get(api_tools))
        .route("/api/tools/{tool}/daily", get(api_tool_daily))
        .route("/api/signals", get(api_signals))
        .route("/api/signals/{id}", get(api_signal))
        .route("/api/signals/{id}/{action}", post(signal_action))
        .route("/api/traces/{trace_id}", get(api_trace))
        .route("/api/feed", get(api_feed))
        .route(
            "/api/openapi.json",
            get(|| async { Json(openapi::document()) }),
        )
        // Browsers ask for it on documents that are not pages (charts, JSON).
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .with_state(dash)
        .merge(assets::router()))
}

/// A failure a page shows: status and a message.
struct Fail(StatusCode, String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        let body = html::page(
            "Error",
            &format!("<h1>{}</h1><p>{}</p>", self.0, html::esc(&self.1)),
        );
        (self.0, Html(body)).into_response()
    }
}

fn internal(e: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// Run blocking reads off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Fail> + Send + 'static,
) -> Result<T, Fail> {
    tokio::task::spawn_blocking(f).await.map_err(internal)?
}

type Q = Query<HashMap<String, String>>;

/// The query of a page: its forms send a field left blank as `name=`, which
/// means "not given". The JSON API takes every value as given, so there an
/// empty `days`, `from`, `state`... is a bad value (400), like any other.
fn form_fields(mut q: HashMap<String, String>) -> HashMap<String, String> {
    q.retain(|_, v| !v.is_empty());
    q
}

/// axum's `Path`, whose rejection (a segment that is not UTF-8 once
/// percent-decoded) is answered like the handlers' own bad values: a 400
/// page rather than axum's plain text.
struct Segments<T>(T);

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
fn range(q: &HashMap<String, String>, last_day: Option<i32>) -> Result<Range, Fail> {
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

/// The rollup, the range asked for, and a 404 when `tool` is not in it.
fn tool_rollup(
    d: &Dash,
    tool: &str,
    q: &HashMap<String, String>,
) -> Result<(Arc<data::Rollup>, Range), Fail> {
    let rollup = d.reads.rollup().map_err(internal)?;
    if !rollup.tools.contains_key(tool) {
        return Err(Fail(
            StatusCode::NOT_FOUND,
            format!("no tool {tool:?} in the rollup"),
        ));
    }
    let r = range(q, rollup.last_day)?;
    Ok((rollup, r))
}

/// A state error as a page shows it: an unknown signal is a 404.
fn signal_error(e: crate::signal::StateError) -> Fail {
    match e {
        crate::signal::StateError::NoSuchSignal(_) => Fail(StatusCode::NOT_FOUND, e.to_string()),
        e => internal(e),
    }
}

fn load_signals(d: &Dash) -> Result<Vec<Signal>, Fail> {
    Ok(d.reads
        .signals
        .signals()
        .map_err(internal)?
        .as_ref()
        .clone())
}

fn load_outcomes(
    path: &std::path::Path,
    r: &Range,
    tool: Option<&str>,
) -> Result<Vec<crate::detect::outcomes::ToolDay>, Fail> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    StateDb::open(path)
        .and_then(|s| s.outcomes(r.from, r.to, tool))
        .map_err(internal)
}

async fn overview(State(d): State<Shared>, Query(q): Q) -> Result<Response, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let rollup = d.reads.rollup().map_err(internal)?;
        let r = range(&q, rollup.last_day)?;
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
        let html = bytes::Bytes::from(pages::overview(
            &r, &summaries, &signals, &outcomes, &panels,
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

async fn tool_page(
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
        Ok(Html(pages::tool(
            &tool, &rollup, &r, &signals, &outcomes, &rate,
        )))
    })
    .await
}

fn filter_signals(all: Vec<Signal>, q: &HashMap<String, String>) -> Vec<Signal> {
    let mut v: Vec<Signal> = all
        .into_iter()
        .filter(|s| match q.get("state").map(String::as_str) {
            None => true,
            Some("open") => s.state.is_open(),
            Some(st) => s.state.as_str() == st,
        })
        .filter(|s| q.get("kind").is_none_or(|k| s.draft.kind.as_str() == k))
        .filter(|s| q.get("tool").is_none_or(|t| &s.draft.tool == t))
        .collect();
    v.sort_by(|a, b| {
        b.draft
            .last_seen_ns
            .cmp(&a.draft.last_seen_ns)
            .then_with(|| a.draft.id.cmp(&b.draft.id))
    });
    v
}

async fn signals_page(State(d): State<Shared>, Query(q): Q) -> Result<Html<String>, Fail> {
    let q = form_fields(q);
    blocking(move || {
        let list = filter_signals(load_signals(&d)?, &q);
        let mut f: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.sort();
        Ok(Html(pages::signals(&list, &f.join(", "))))
    })
    .await
}

fn one_signal(
    path: &std::path::Path,
    id: &str,
) -> Result<(Signal, Vec<crate::signal::state::HistoryEntry>), Fail> {
    let db = StateDb::open(path).map_err(internal)?;
    let s = db.get(id).map_err(signal_error)?;
    let h = db.history(id).map_err(internal)?;
    Ok((s, h))
}

async fn signal_page(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Html<String>, Fail> {
    blocking(move || {
        let (s, h) = one_signal(&d.state_path, &id)?;
        Ok(Html(pages::signal(&s, &h)))
    })
    .await
}

fn trace_view(
    d: &Dash,
    trace_id: &str,
    q: &HashMap<String, String>,
) -> Result<trace::TraceView, Fail> {
    if trace_id.is_empty()
        || trace_id.len() > 64
        || !trace_id.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(Fail(
            StatusCode::BAD_REQUEST,
            format!("expected a hex trace id, got {trace_id:?}"),
        ));
    }
    let day = match q.get("day") {
        Some(v) => Some(day_from_str(v).ok_or_else(|| {
            Fail(
                StatusCode::BAD_REQUEST,
                format!("day: expected a date like 2026-07-29, got {v:?}"),
            )
        })?),
        None => None,
    };
    // A trace without its day scans every day: one such scan at a time.
    let _scan = match day {
        None => Some(d.full_scans.lock().unwrap_or_else(|e| e.into_inner())),
        Some(_) => None,
    };
    let (df, read) =
        data::trace_spans(&d.reader, &trace_id.to_ascii_lowercase(), day).map_err(internal)?;
    tracing::debug!(
        trace_id,
        files = read.files,
        row_groups_read = read.row_groups_read,
        row_groups_skipped = read.row_groups_skipped,
        "trace lookup"
    );
    if df.height() == 0 {
        return Err(Fail(
            StatusCode::NOT_FOUND,
            format!("no spans of trace {trace_id} are stored"),
        ));
    }
    trace::view(trace_id, &df).map_err(internal)
}

/// `page=N` (1 when absent), at most the last page of `spans` spans.
fn page_no(q: &HashMap<String, String>, spans: usize) -> Result<usize, Fail> {
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

async fn trace_page(
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

async fn api_trace(
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

async fn chart_file(
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

async fn api_tools(State(d): State<Shared>, Query(q): Q) -> Result<Response, Fail> {
    blocking(move || {
        let rollup = d.reads.rollup().map_err(internal)?;
        let r = range(&q, rollup.last_day)?;
        let signals = d.reads.signals.signals().map_err(internal)?;
        let body = d.reads.tools.json(r.from, r.to, &rollup, &signals);
        Ok((
            [(header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from(body),
        )
            .into_response())
    })
    .await
}

async fn api_tool_daily(
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
                serde_json::json!({"day": crate::model::day_to_string(x.day), "calls": x.calls, "errors": x.errors, "error_rate": x.rate(), "p50_ms": x.p50_ns / 1e6, "p95_ms": x.p95_ns / 1e6, "classes": classes})
            })
            .collect();
        Ok(Json(serde_json::json!({"tool": tool, "days": rows})))
    })
    .await
}

async fn api_signals(
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

async fn api_signal(
    State(d): State<Shared>,
    Segments(id): Segments<String>,
) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let (s, h) = one_signal(&d.state_path, &id)?;
        let mut v = crate::sweep::signal_json(&s);
        v["history"] = h
            .iter()
            .map(|(at, from, to, why)| serde_json::json!({"at": crate::time::rfc3339(*at), "from": from, "to": to, "reason": why}))
            .collect();
        Ok(Json(v))
    })
    .await
}

/// Whether a state-changing request comes from another site: the browser's
/// `Sec-Fetch-Site`, or an `Origin` that is not this host.
pub(crate) fn cross_site(headers: &HeaderMap) -> bool {
    let get = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    if get(header::HeaderName::from_static("sec-fetch-site")).is_some_and(|v| v == "cross-site") {
        return true;
    }
    match (get(header::ORIGIN), get(header::HOST)) {
        (Some(origin), Some(host)) => {
            let o = origin.split("://").nth(1).unwrap_or(origin);
            o != host
        }
        _ => false,
    }
}

/// `POST /api/signals/{id}/mute|unmute|resolve`: JSON, or back to the
/// signal's page for the page's own form posts. Refused from other sites.
async fn signal_action(
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

/// Recent retry loops from the signals' evidence, newest first.
async fn api_feed(State(d): State<Shared>) -> Result<Json<serde_json::Value>, Fail> {
    blocking(move || {
        let signals = load_signals(&d)?;
        let mut items: Vec<(String, serde_json::Value)> = Vec::new();
        for s in &signals {
            let verdict = match s.draft.kind {
                crate::signal::Kind::RetryAfterSuccess => "after_success",
                crate::signal::Kind::RetryStorm | crate::signal::Kind::WastedRetries | crate::signal::Kind::StackedRetries => "wasted",
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
