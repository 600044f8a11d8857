//! The one check on state-changing requests against cross-site request
//! forgery: refuse those a browser says come from another site. Used by the
//! signal actions, `POST /api/sweep` and the login form.

use axum::http::{header, HeaderMap};

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
