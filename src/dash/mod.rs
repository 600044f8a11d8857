//! The dashboard and its JSON API, served by `stormwatch serve` on the HTTP
//! port: the overview (daily volume, incidents, tools, open signals, recent
//! retries), a page per tool, the incidents, the signals with mute / unmute /
//! resolve, and the trace view. Pages and charts read the daily rollup (cached until it changes)
//! and `state.sqlite`; only the trace view reads spans, and only its own.
//! Reads run on blocking threads, never on the async ones; so does every
//! SQLite call (reads, mute / unmute / resolve, dropping the kept connection).
//!
//! Here: what the handlers share ([`Dash`], with the overview's cache and
//! its `Stamp`) and the routes ([`router`]). The handlers: `views` (the
//! pages and chart files), `api` (the JSON reads), `incidents` (the
//! incidents' pages and API, over `crate::read::incidents`),
//! `actions` (the signal actions, behind `csrf`'s check), `coverage` (what the spans leave
//! stormwatch blind to: its page and API). What they share: `query` (the path
//! and query a request asks with), `load` (the reads behind both pages
//! and API), `fail` (the error page, the blocking runner). What they read
//! and draw with: [`crate::read`] (the rollup and signals kept in memory,
//! one trace judged, the incidents' types), [`spike`], [`panels`],
//! [`chart`]; what they answer
//! with: [`pages`], [`incident_pages`] and [`html`], [`headers`], [`assets`],
//! [`openapi`].

pub mod assets;
pub mod chart;
pub mod headers;
pub mod html;
pub mod incident_pages;
pub mod openapi;
pub mod pages;
pub mod panels;
pub mod silent;
pub mod spike;

mod actions;
mod api;
mod coverage;
mod csrf;
mod fail;
mod incidents;
mod load;
mod query;
mod views;

pub(crate) use csrf::cross_site;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::store::Reader;

/// What the handlers share.
pub struct Dash {
    pub reader: Reader,
    /// The rollup, signals and tools tables, shared with the MCP server.
    pub reads: Arc<crate::read::cache::Reads>,
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

/// When the inputs of a page last changed: the rollup (its generation) and
/// the state database (with its WAL).
type Stamp = (
    Option<crate::store::RollupStamp>,
    Vec<Option<std::time::SystemTime>>,
);

impl Dash {
    fn stamp(&self) -> Stamp {
        let wal = self.state_path.with_extension("sqlite-wal");
        let state = [self.state_path.clone(), wal]
            .iter()
            .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .collect();
        (self.reader.rollup_stamp().ok(), state)
    }
}

type Shared = Arc<Dash>;

/// The dashboard's routes; `panels` is the overview's panel file (the
/// built-in panels when it does not exist), `spike` the parameters the
/// sweeps judge error-rate spikes with (`[detect.error_spike]`).
pub fn router(
    reads: Arc<crate::read::cache::Reads>,
    panels_file: &std::path::Path,
    spike: crate::detect::SpikeParams,
) -> anyhow::Result<Router> {
    let reader = reads.reader.clone();
    let panels = panels::load(panels_file)?;
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
        .route("/", get(views::overview))
        .route("/tools/{tool}", get(views::tool_page))
        .route("/signals", get(views::signals_page))
        .route("/signals/{id}", get(views::signal_page))
        .route("/incidents", get(incidents::incidents_page))
        .route("/incidents/{id}", get(incidents::incident_page))
        .route("/traces/{trace_id}", get(views::trace_page))
        .route("/charts/tools/{tool}/{file}", get(views::chart_file))
        .route("/api/tools", get(api::api_tools))
        .route("/api/tools/{tool}/daily", get(api::api_tool_daily))
        .route("/api/signals", get(api::api_signals))
        .route("/api/signals/{id}", get(api::api_signal))
        .route("/api/signals/{id}/{action}", post(actions::signal_action))
        .route("/api/incidents", get(incidents::api_incidents))
        .route("/api/incidents/{id}", get(incidents::api_incident))
        .route("/api/traces/{trace_id}", get(api::api_trace))
        .route("/api/feed", get(api::api_feed))
        .route("/coverage", get(coverage::coverage_page))
        .route("/api/coverage", get(coverage::api_coverage))
        .route(
            "/api/openapi.json",
            get(|| async { Json(openapi::document()) }),
        )
        // Browsers ask for it on documents that are not pages (charts, JSON).
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .with_state(dash)
        .merge(assets::router()))
}
