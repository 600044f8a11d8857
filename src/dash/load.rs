//! The reads both the pages and the JSON API answer from: a tool's rollup
//! and range, the signals (filtered), one signal with its history and
//! incident, the
//! sweeps' outcomes, one trace's view. Each runs on a blocking thread.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;

use super::fail::{internal, signal_error, Fail};
use super::pages::Range;
use super::query::range;
use super::Dash;
use crate::model::day_from_str;
use crate::read::{data, trace};
use crate::signal::{Signal, StateDb};

/// The rollup, the range asked for, and a 404 when `tool` is not in it.
pub(super) fn tool_rollup(
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
    let r = range(q, rollup.last_day())?;
    Ok((rollup, r))
}

pub(super) fn load_signals(d: &Dash) -> Result<Vec<Signal>, Fail> {
    Ok(d.reads
        .signals
        .signals()
        .map_err(internal)?
        .as_ref()
        .clone())
}

pub(super) fn load_outcomes(
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

pub(super) fn filter_signals(all: Vec<Signal>, q: &HashMap<String, String>) -> Vec<Signal> {
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

/// One signal, its history, and the incident it is part of (if any).
pub(super) type OneSignal = (
    Signal,
    Vec<crate::signal::state::HistoryEntry>,
    Option<String>,
);

pub(super) fn one_signal(path: &std::path::Path, id: &str) -> Result<OneSignal, Fail> {
    let db = StateDb::open(path).map_err(internal)?;
    let s = db.get(id).map_err(signal_error)?;
    let h = db.history(id).map_err(internal)?;
    let incident = crate::incident::store::of_signal(db.conn(), &s.draft.id).map_err(internal)?;
    Ok((s, h, incident))
}

pub(super) fn trace_view(
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
