//! The OpenAPI 3.0 document of the JSON API, served at `/api/openapi.json`.

use serde_json::{json, Value};

fn range_params() -> Value {
    json!([
        {"name": "days", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 366}, "description": "Days ending on the newest day with data (default 30). Not with from or to."},
        {"name": "from", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}, "description": "First day (default 29 days before to); at most 366 days before to."},
        {"name": "to", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}, "description": "Last day (default the newest day with data)."}
    ])
}

/// `/api/tools`' parameters: the range, then the page.
fn tools_params() -> Value {
    let mut p = range_params();
    if let Some(list) = p.as_array_mut() {
        list.push(json!({"name": "page", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1}, "description": "Page number (default 1); past the last page is a 400 naming how many there are."}));
        list.push(json!({"name": "page_size", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": super::api::TOOLS_PAGE_MAX}, "description": format!("Tools per page (default {}, at most {}).", super::api::TOOLS_PAGE, super::api::TOOLS_PAGE_MAX)}));
    }
    p
}

fn err() -> Value {
    json!({"description": "An error, as an HTML page naming what was expected.", "content": {"text/html": {"schema": {"type": "string"}}}})
}

/// A JSON error: `{"error": "..."}`.
fn json_err(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}}}})
}

/// 401, when the server runs with an API token and none (or another) came.
fn unauthorized() -> Value {
    json_err("The server has an API token (--api-token) and the request did not carry it")
}

/// An operation's responses: `ok` for 200, then the error page for each of
/// `errors` and for 500 (the store or the state database failed), and 401.
fn responses(ok: Value, errors: &[&str]) -> Value {
    let mut r = json!({"200": ok, "401": unauthorized()});
    for code in errors.iter().chain(&["500"]) {
        r[*code] = err();
    }
    r
}

/// `POST /api/sweep`.
fn sweep() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({"post": {"summary": "Sweep now (one at a time; serve also sweeps every sweep.interval_secs)",
        "responses": {
            "200": {"description": "The sweep's summary", "content": {"application/json": {"schema": {"type": "object",
                "required": ["trigger", "started", "duration_ms", "outcome", "spans_scanned", "days_scanned", "days_reused", "days_from_summary", "days_sealed", "signals", "findings", "changes", "alerts_queued"],
                "properties": {"trigger": {"type": "string", "enum": ["api", "schedule"]}, "started": {"type": "string"}, "duration_ms": count,
                    "outcome": {"type": "string", "enum": ["ok", "empty"], "description": "empty: the store holds no spans yet"},
                    "spans_scanned": count, "days_scanned": count, "days_reused": count, "days_from_summary": count, "days_sealed": count, "signals": count, "findings": count, "changes": count, "alerts_queued": count}}}}},
            "401": unauthorized(),
            "403": json_err("Asked from another site"),
            "409": json_err("A sweep is already running; Retry-After says when to ask again"),
            "500": json_err("The sweep failed (the server log has the one-line reason)")}}})
}

/// `GET /api/coverage`.
fn coverage() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    let text = json!({"type": "string"});
    let gap = json!({"type": "object", "required": ["what", "share", "blinds", "fix"], "properties": {
        "what": {"type": "string", "enum": ["arguments", "results", "failures", "failure_detail", "session", "agent_turn", "unknown_shape"]},
        "share": {"type": "number", "minimum": 0, "maximum": 1}, "blinds": text, "fix": text}});
    let scope = json!({"type": "object",
        "required": ["service", "conventions", "calls", "layers", "with_arguments", "with_results", "failed", "failed_with_class", "with_session", "in_agent_turn", "unknown_shape", "gaps"],
        "properties": {"service": text, "scope": {"type": "string", "nullable": true}, "scope_version": {"type": "string", "nullable": true},
            "conventions": {"type": "array", "items": text}, "calls": count, "layers": count, "with_arguments": count, "with_results": count,
            "failed": count, "failed_with_class": count, "with_session": count, "in_agent_turn": count, "unknown_shape": count,
            "gaps": {"type": "array", "items": gap}}});
    json!({"get": {"summary": "What the stored spans leave stormwatch blind to, per service and instrumentation scope, and the framework setting that fixes each gap",
        "parameters": [{"name": "days", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 366}, "description": "Days ending on the newest day with data (default 7). Not with since."},
            {"name": "since", "in": "query", "required": false, "schema": {"type": "string"}, "description": "Only the spans that started at or after this time (RFC 3339, a date, or a duration back from now: 90m, 2h): to see a fix take effect. Not with days.", "example": "2026-08-12T00:00:00Z"}],
        "responses": responses(json!({"description": "The coverage report", "content": {"application/json": {"schema": {"type": "object", "required": ["scopes"], "properties": {
            "from": {"type": "string", "nullable": true}, "to": {"type": "string", "nullable": true}, "since": {"type": "string", "nullable": true}, "scopes": {"type": "array", "items": scope}}}}}}), &["400"])}})
}

/// `schema`'s non-OpenAPI numeric formats (schemars' `uint`, `uint64`,
/// `int8`…) left out: OpenAPI 3.0 knows `int32`, `int64`, `float`, `double`.
fn openapi_formats(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let foreign = m
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("uint") || matches!(f, "int" | "int8" | "int16"));
            if foreign {
                m.remove("format");
            }
            m.values_mut().for_each(openapi_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(openapi_formats),
        _ => {}
    }
}

/// The incidents' operations, their schemas made by schemars from the types
/// they answer with (OpenAPI 3.0 flavour: `nullable`, references into
/// `components/schemas`), and those schemas.
fn incidents() -> (Value, Value, serde_json::Map<String, Value>) {
    use super::incidents::{PAGE, PAGE_MAX};
    use crate::read::incidents::{IncidentAnswer, IncidentsPage};
    use schemars::generate::{Contract, SchemaSettings};
    let mut g = SchemaSettings::openapi3()
        .with(|s| s.contract = Contract::Serialize)
        .into_generator();
    let page = g.subschema_for::<IncidentsPage>().to_value();
    let one = g.subschema_for::<IncidentAnswer>().to_value();
    let mut defs = g.take_definitions(true);
    for v in defs.values_mut() {
        openapi_formats(v);
    }
    let list = json!({"get": {"summary": "Incidents (open signals with one likely cause): open ones first, then acknowledged, then resolved; the most severe first, then the latest finding. What to read first when something is broken.",
        "parameters": [
            {"name": "state", "in": "query", "required": false, "schema": {"type": "string", "enum": ["open", "acknowledged", "resolved", "all"]}, "description": "Which incidents (default: the open and the acknowledged ones)."},
            {"name": "page", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1}, "description": "Page number (default 1); past the last page is a 400 naming how many there are."},
            {"name": "page_size", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX}, "description": format!("Incidents per page (default {PAGE}, at most {PAGE_MAX}).")}],
        "responses": responses(json!({"description": "One page of the incidents, with every stored incident counted by state", "content": {"application/json": {"schema": page}}}), &["400"])}});
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "example": "INC-XHPQ", "description": "The incident's id (upper case, or as given); an unknown one is a 404."});
    let get = json!({"get": {"summary": "One incident: title, state, cause, members with why each joined, timeline, impact, remedies, evidence traces, state history",
        "parameters": [id],
        "responses": responses(json!({"description": "The incident", "content": {"application/json": {"schema": one}}}), &["400", "404"])}});
    (list, get, defs)
}

pub fn document() -> Value {
    let signal = json!({"type": "object", "required": ["id", "key", "kind", "tool", "error_class", "title", "state", "first_seen", "last_seen", "days", "findings", "evidence"], "properties": {
        "id": {"type": "string"}, "key": {"type": "string"}, "kind": {"type": "string", "enum": ["error_rate_spike", "retry_storm", "wasted_retries", "retry_after_success", "stacked_retries", "latency_spike", "tool_loop", "tool_silent", "no_success", "ignored_retry_after"]},
        "tool": {"type": "string"}, "error_class": {"type": "string"}, "title": {"type": "string"},
        "state": {"type": "string", "enum": ["new", "ongoing", "resolved", "regressed", "muted"]},
        "first_seen": {"type": "string"}, "last_seen": {"type": "string"}, "days": {"type": "array", "items": {"type": "string"}},
        "findings": {"type": "integer"}, "evidence": {"type": "array", "items": {"type": "object"}}, "evidence_more": {"type": "integer"},
        "muted_until": {"type": "string", "nullable": true}, "history": {"type": "array", "items": {"type": "object"}},
        "incident": {"type": "string", "nullable": true, "description": "The incident it is part of (one signal's answer only)"},
        "remedy": {"type": "object", "nullable": true, "required": ["waiting_fixes", "cut_off", "change", "summary"], "properties": {"waiting_fixes": {"type": "string"}, "cut_off": {"type": "string"}, "change": {"type": "string"}, "summary": {"type": "string"}}}
    }});
    // The examples are from the demo incident (`stormwatch serve --demo`).
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "example": "SW-LWJM"});
    let tool = json!({"name": "tool", "in": "path", "required": true, "schema": {"type": "string"}, "example": "search_flights"});
    let trace = json!({"name": "trace_id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{1,64}$"}, "example": "baacbed78f2b62522a113193688fafe8"});
    let feed_item = json!({"type": "object", "required": ["trace_id", "day", "tool", "signal", "verdict", "wasted_seconds", "text"], "properties": {
        "trace_id": {"type": "string"}, "day": {"type": "string"}, "tool": {"type": "string"}, "signal": {"type": "string"},
        "verdict": {"type": "string", "enum": ["wasted", "after_success"]}, "wasted_seconds": {"type": "number"}, "text": {"type": "string"}
    }});
    let tool_row = json!({"type": "object", "required": ["tool", "calls", "errors", "error_rate", "baseline"], "properties": {"tool": {"type": "string"}, "calls": {"type": "integer"}, "errors": {"type": "integer"}, "error_rate": {"type": "number"}, "baseline": {"type": "number"}, "p50_ms": {"type": "number"}, "p95_ms": {"type": "number"}, "daily_calls": {"type": "array", "items": {"type": "integer"}}, "daily_errors": {"type": "array", "items": {"type": "integer"}}, "top_class": {"type": "string", "nullable": true}, "open_signals": {"type": "integer"}, "interrupted": {"type": "integer", "description": "calls a human-in-the-loop interrupt or a hand-off stopped: counted in calls, not in errors"}, "cancelled": {"type": "integer", "description": "calls their user cancelled: counted in calls, not in errors"}}});
    let max = super::api::TOOLS_PAGE_MAX;
    let page_schema = json!({"type": "object", "required": ["from", "to", "page", "page_size", "pages", "total_tools", "tools"], "properties": {
        "from": {"type": "string"}, "to": {"type": "string"}, "page": {"type": "integer", "minimum": 1},
        "page_size": {"type": "integer", "minimum": 1, "maximum": max}, "pages": {"type": "integer", "minimum": 1},
        "total_tools": {"type": "integer", "minimum": 0}, "tools": {"type": "array", "maxItems": max, "items": tool_row}}});
    let tools_page = json!({"description": "One page of the tools table", "content": {"application/json": {"schema": page_schema}}});
    let mut doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "stormwatch API", "version": env!("CARGO_PKG_VERSION"), "description": "Daily per-tool volume, incidents, signals and traces, as the dashboard shows them. A query value is taken as given: an empty one is a bad value (400), not an absent one."},
        "paths": {
            "/api/tools": {"get": {"summary": "Tools over a range, busiest first (then by name), a page at a time", "parameters": tools_params(),
                "responses": responses(tools_page, &["400"])}},
            "/api/tools/{tool}/daily": {"get": {"summary": "One tool's days", "parameters": [tool, range_params()[0], range_params()[1], range_params()[2]],
                "responses": responses(json!({"description": "Per day: calls, errors, rate, percentiles, classes", "content": {"application/json": {"schema": {"type": "object", "required": ["tool", "days"], "properties": {"tool": {"type": "string"}, "days": {"type": "array", "items": {"type": "object", "required": ["day", "calls", "errors", "error_rate"], "properties": {"day": {"type": "string"}, "calls": {"type": "integer"}, "errors": {"type": "integer"}, "error_rate": {"type": "number"}, "p50_ms": {"type": "number"}, "p95_ms": {"type": "number"}, "classes": {"type": "object", "additionalProperties": {"type": "integer"}}, "interrupted": {"type": "integer"}, "cancelled": {"type": "integer"}}}}}}}}}), &["400", "404"])}},
            "/api/signals": {"get": {"summary": "Signals, newest first", "parameters": [
                {"name": "state", "in": "query", "required": false, "schema": {"type": "string", "enum": ["open", "new", "ongoing", "resolved", "regressed", "muted"]}},
                {"name": "kind", "in": "query", "required": false, "schema": {"type": "string"}},
                {"name": "tool", "in": "query", "required": false, "schema": {"type": "string"}}],
                "responses": responses(json!({"description": "Signals", "content": {"application/json": {"schema": {"type": "array", "items": signal.clone()}}}}), &["400"])}},
            "/api/signals/{id}": {"get": {"summary": "One signal with its history", "parameters": [id.clone()],
                "responses": responses(json!({"description": "The signal", "content": {"application/json": {"schema": signal}}}), &["400", "404"])}},
            "/api/signals/{id}/{action}": {"post": {"summary": "Mute, unmute or resolve a signal", "parameters": [id,
                {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["mute", "unmute", "resolve"]}, "example": "mute"},
                {"name": "until", "in": "query", "required": false, "schema": {"type": "string"}, "description": "mute: RFC 3339 time or date (checked whatever the action)"},
                {"name": "until_escalates", "in": "query", "required": false, "schema": {"type": "string", "enum": ["true", "false"]}, "description": "mute: unmute when the signal escalates (checked whatever the action)"}],
                "responses": {
                    "200": {"description": "The new state", "content": {"application/json": {"schema": {"type": "object", "required": ["id", "state"], "properties": {"id": {"type": "string"}, "state": {"type": "string"}}}}}},
                    "303": {"description": "Back to the signal's page (for the page's own form posts)"},
                    "400": err(), "401": unauthorized(), "403": err(), "404": err(), "409": err(), "500": err()}}},
            "/api/traces/{trace_id}": {"get": {"summary": "One trace: spans by turn, attempts judged", "parameters": [trace,
                {"name": "day", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}, "description": "The trace's day (without it every day is scanned)", "example": "2026-07-29"},
                {"name": "page", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1}, "description": "Up to the trace's last page (400 past it)"}],
                "responses": responses(json!({"description": "The trace", "content": {"application/json": {"schema": {"type": "object", "required": ["trace_id", "spans", "page", "total_spans"], "properties": {"trace_id": {"type": "string"}, "start_ns": {"type": "integer"}, "end_ns": {"type": "integer"}, "turns": {"type": "integer"}, "wasted_seconds": {"type": "number"}, "page": {"type": "integer"}, "page_size": {"type": "integer"}, "total_spans": {"type": "integer"}, "spans": {"type": "array", "items": {"type": "object"}}}}}}}), &["400", "404"])}},
            "/api/feed": {"get": {"summary": "Recent retry loops, newest first",
                "responses": responses(json!({"description": "Up to 20 items", "content": {"application/json": {"schema": {"type": "array", "maxItems": 20, "items": feed_item}}}}), &[])}},
            "/api/openapi.json": {"get": {"summary": "This document (open without a token)", "responses": {"200": {"description": "OpenAPI 3.0", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
        }
    });
    doc["paths"]["/api/sweep"] = sweep();
    doc["paths"]["/api/coverage"] = coverage();
    let (list, one, schemas) = incidents();
    doc["paths"]["/api/incidents"] = list;
    doc["paths"]["/api/incidents/{id}"] = one;
    doc["components"] = json!({"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The server's --api-token, when it has one"}}, "schemas": schemas});
    doc["security"] = json!([{}, {"bearer": []}]);
    doc
}
