//! How a handler fails and where it reads: [`Fail`], a status and a message
//! answered as an error page; [`blocking`], which runs a handler's reads and
//! SQLite calls on a blocking thread, never on the async ones.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::html;

/// A failure a page shows: status and a message.
pub(super) struct Fail(pub(super) StatusCode, pub(super) String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        let body = html::page("Error", maud::html! { h1 { (self.0) } p { (self.1) } });
        (self.0, Html(body)).into_response()
    }
}

pub(super) fn internal(e: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// Run blocking reads off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Fail> + Send + 'static,
) -> Result<T, Fail> {
    tokio::task::spawn_blocking(f).await.map_err(internal)?
}

/// A state error as a page shows it: an unknown signal is a 404.
pub(super) fn signal_error(e: crate::signal::StateError) -> Fail {
    match e {
        crate::signal::StateError::NoSuchSignal(_) => Fail(StatusCode::NOT_FOUND, e.to_string()),
        e => internal(e),
    }
}
