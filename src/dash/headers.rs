//! The headers every answer of the dashboard's listener carries (pages, API,
//! charts, sign-in, health, metrics, MCP), set by [`secure`] as the
//! outermost layer:
//!
//! - `Content-Security-Policy` ([`CSP`]): nothing is loaded but this
//!   origin's own scripts, stylesheets and images (and `data:` images: the
//!   favicon), fetches go only to this origin, forms post only here, no
//!   `<base>`, and no page may frame the dashboard (`frame-ancestors 'none'`).
//!   No `'unsafe-inline'`: the pages carry no inline script or style (see
//!   [`super::assets`]); charts are inline SVG, whose presentation
//!   attributes (`fill`, `x`, `width`) are not styles and need no exception;
//! - `X-Frame-Options: DENY`, the same rule for browsers older than CSP 2;
//! - `X-Content-Type-Options: nosniff`: a JSON answer is never run as a
//!   script, an SVG never taken for a page;
//! - `Referrer-Policy: same-origin`: a link out of the dashboard (a tool's
//!   docs in a span attribute) does not tell the other site the trace's URL.
//!
//! A header a handler set itself is left as it is.

use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;

/// The dashboard's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// Every header [`secure`] sets, with its value.
pub const HEADERS: [(&str, &str); 4] = [
    ("content-security-policy", CSP),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
];

/// The layer (`axum::middleware::map_response(secure)`).
pub async fn secure(mut resp: Response) -> Response {
    let headers = resp.headers_mut();
    for (name, value) in HEADERS {
        headers
            .entry(HeaderName::from_static(name))
            .or_insert(HeaderValue::from_static(value));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tower::ServiceExt;

    #[tokio::test]
    async fn every_answer_gets_the_headers_and_a_handlers_own_stay() {
        let app = axum::Router::new()
            .route("/", get(|| async { "page" }))
            .route(
                "/own",
                get(|| async { ([("referrer-policy", "no-referrer")], "own") }),
            )
            .layer(axum::middleware::map_response(secure));
        for (path, referrer) in [
            ("/", "same-origin"),
            ("/own", "no-referrer"),
            ("/404", "same-origin"),
        ] {
            let req = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let h = resp.headers();
            assert_eq!(h["content-security-policy"], CSP, "{path}");
            assert_eq!(h["x-frame-options"], "DENY", "{path}");
            assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
            assert_eq!(h["referrer-policy"], referrer, "{path}");
        }
        assert!(CSP.contains("frame-ancestors 'none'") && !CSP.contains("unsafe"));
    }
}
