//! The dashboard's own stylesheet and script, compiled in and served from
//! `/static/`, so that no page needs an inline `<style>`, `<script>` or
//! `style=` attribute: the Content-Security-Policy ([`super::headers`])
//! admits only this origin's files. Their URLs carry a hash of their
//! content (`?v=`), so a new build's files are fetched anew and a URL's
//! content can be cached for good. Open without a token: the sign-in page
//! uses the stylesheet, and neither file holds anything of the data.

use std::sync::OnceLock;

use axum::extract::Query;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The pages' stylesheet.
pub const CSS: &str = include_str!("static/dash.css");
/// The overview's script (its feed of recent retries).
pub const OVERVIEW_JS: &str = include_str!("static/overview.js");

/// Where the served files live (paths under it are open without a token).
pub const PREFIX: &str = "/static/";

fn version(content: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(content.as_bytes()))
}

fn href(cell: &'static OnceLock<String>, path: &str, content: &str) -> &'static str {
    cell.get_or_init(|| format!("{PREFIX}{path}?v={}", version(content)))
}

/// The stylesheet's URL.
pub fn css_href() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    href(&H, "dash.css", CSS)
}

/// The overview script's URL.
pub fn overview_js_href() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    href(&H, "overview.js", OVERVIEW_JS)
}

#[derive(serde::Deserialize)]
struct V {
    v: Option<String>,
}

/// A file with its type; cached for a year when asked for by this build's
/// hash, revalidated otherwise.
fn file(content: &'static str, kind: &'static str, asked: Option<String>) -> Response {
    let cache = if asked.as_deref() == Some(version(content).as_str()) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, cache)],
        content,
    )
        .into_response()
}

/// `/static/dash.css` and `/static/overview.js`.
pub fn router() -> Router {
    Router::new()
        .route(
            "/static/dash.css",
            get(|Query(q): Query<V>| async move { file(CSS, "text/css; charset=utf-8", q.v) }),
        )
        .route(
            "/static/overview.js",
            get(|Query(q): Query<V>| async move {
                file(OVERVIEW_JS, "text/javascript; charset=utf-8", q.v)
            }),
        )
}
