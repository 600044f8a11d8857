//! The OpenAPI 3.0 document of the JSON API, served at `/api/openapi.json`.

use serde_json::{json, Value};

fn range_params() -> Value {
    json!([
        {"name": "days", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 366}, "description": "Days ending on the newest day with data (default 30)."},
        {"name": "from", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}},
        {"name": "to", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}}
    ])
}

fn err() -> Value {
    json!({"description": "An error, as an HTML page naming what was expected.", "content": {"text/html": {"schema": {"type": "string"}}}})
}

pub fn document() -> Value {
    let signal = json!({"type": "object", "required": ["id", "key", "kind", "tool", "error_class", "title", "state", "first_seen", "last_seen", "days", "findings", "evidence"], "properties": {
        "id": {"type": "string"}, "key": {"type": "string"}, "kind": {"type": "string", "enum": ["error_rate_spike", "retry_storm", "wasted_retries", "retry_after_success", "stacked_retries", "latency_spike"]},
        "tool": {"type": "string"}, "error_class": {"type": "string"}, "title": {"type": "string"},
        "state": {"type": "string", "enum": ["new", "ongoing", "resolved", "regressed", "muted"]},
        "first_seen": {"type": "string"}, "last_seen": {"type": "string"}, "days": {"type": "array", "items": {"type": "string"}},
        "findings": {"type": "integer"}, "evidence": {"type": "array", "items": {"type": "object"}}, "evidence_more": {"type": "integer"},
        "muted_until": {"type": "string", "nullable": true}, "history": {"type": "array", "items": {"type": "object"}}
    }});
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}});
    let tool =
        json!({"name": "tool", "in": "path", "required": true, "schema": {"type": "string"}});
    let trace = json!({"name": "trace_id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{1,64}$"}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "stormwatch API", "version": env!("CARGO_PKG_VERSION"), "description": "Daily per-tool volume, signals and traces, as the dashboard shows them."},
        "paths": {
            "/api/tools": {"get": {"summary": "Tools over a range, busiest first", "parameters": range_params(),
                "responses": {"200": {"description": "The tools table", "content": {"application/json": {"schema": {"type": "object", "required": ["from", "to", "tools"], "properties": {"from": {"type": "string"}, "to": {"type": "string"}, "tools": {"type": "array", "items": {"type": "object", "required": ["tool", "calls", "errors", "error_rate", "baseline"], "properties": {"tool": {"type": "string"}, "calls": {"type": "integer"}, "errors": {"type": "integer"}, "error_rate": {"type": "number"}, "baseline": {"type": "number"}, "p50_ms": {"type": "number"}, "p95_ms": {"type": "number"}, "daily_calls": {"type": "array", "items": {"type": "integer"}}, "daily_errors": {"type": "array", "items": {"type": "integer"}}, "top_class": {"type": "string", "nullable": true}, "open_signals": {"type": "integer"}}}}}}}}}, "400": err()}}},
            "/api/tools/{tool}/daily": {"get": {"summary": "One tool's days", "parameters": [tool, range_params()[0], range_params()[1], range_params()[2]],
                "responses": {"200": {"description": "Per day: calls, errors, rate, percentiles, classes", "content": {"application/json": {"schema": {"type": "object", "required": ["tool", "days"], "properties": {"tool": {"type": "string"}, "days": {"type": "array", "items": {"type": "object", "required": ["day", "calls", "errors", "error_rate"], "properties": {"day": {"type": "string"}, "calls": {"type": "integer"}, "errors": {"type": "integer"}, "error_rate": {"type": "number"}, "p50_ms": {"type": "number"}, "p95_ms": {"type": "number"}, "classes": {"type": "object", "additionalProperties": {"type": "integer"}}}}}}}}}}, "400": err(), "404": err()}}},
            "/api/signals": {"get": {"summary": "Signals, newest first", "parameters": [
                {"name": "state", "in": "query", "required": false, "schema": {"type": "string", "enum": ["open", "new", "ongoing", "resolved", "regressed", "muted"]}},
                {"name": "kind", "in": "query", "required": false, "schema": {"type": "string"}},
                {"name": "tool", "in": "query", "required": false, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "Signals", "content": {"application/json": {"schema": {"type": "array", "items": signal.clone()}}}}, "400": err()}}},
            "/api/signals/{id}": {"get": {"summary": "One signal with its history", "parameters": [id.clone()],
                "responses": {"200": {"description": "The signal", "content": {"application/json": {"schema": signal}}}, "404": err()}}},
            "/api/signals/{id}/{action}": {"post": {"summary": "Mute, unmute or resolve a signal", "parameters": [id,
                {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["mute", "unmute", "resolve"]}},
                {"name": "until", "in": "query", "required": false, "schema": {"type": "string"}, "description": "mute: RFC 3339 time or date"},
                {"name": "until_escalates", "in": "query", "required": false, "schema": {"type": "string", "enum": ["true", "false"]}}],
                "responses": {"200": {"description": "The new state", "content": {"application/json": {"schema": {"type": "object", "required": ["id", "state"], "properties": {"id": {"type": "string"}, "state": {"type": "string"}}}}}}, "303": {"description": "Back to the signal's page (for the page's own form posts)"}, "400": err(), "403": err(), "404": err(), "409": err()}}},
            "/api/traces/{trace_id}": {"get": {"summary": "One trace: spans by turn, attempts judged", "parameters": [trace,
                {"name": "day", "in": "query", "required": false, "schema": {"type": "string", "format": "date"}},
                {"name": "page", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1}}],
                "responses": {"200": {"description": "The trace", "content": {"application/json": {"schema": {"type": "object", "required": ["trace_id", "spans", "page", "total_spans"], "properties": {"trace_id": {"type": "string"}, "start_ns": {"type": "integer"}, "end_ns": {"type": "integer"}, "turns": {"type": "integer"}, "wasted_seconds": {"type": "number"}, "page": {"type": "integer"}, "page_size": {"type": "integer"}, "total_spans": {"type": "integer"}, "spans": {"type": "array", "items": {"type": "object"}}}}}}}, "400": err(), "404": err()}}},
            "/api/feed": {"get": {"summary": "Recent retry loops, newest first", "responses": {"200": {"description": "Up to 20 items", "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}}}}},
            "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.0", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
        }
    })
}
