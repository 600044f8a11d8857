//! Bearer tokens. Ingest checks its token in the OTLP handler (so a refusal
//! answers in the request's encoding); the dashboard, API and `/metrics` sit
//! behind [`require`]. API clients send `Authorization: Bearer <token>`;
//! browsers sign in once at `/login`, which sets an HttpOnly, SameSite=Lax
//! session cookie that expires after 12 h and is renewed while in use, up
//! to 7 days from the sign-in (`super::session`: signed with a key derived
//! from the token, never the token itself). `/logout` clears the browser's
//! cookie; nothing is kept server-side, so a copied value stays good until
//! it expires (rotating the token revokes every cookie). `/healthz` and `/readyz` stay open for load balancers and
//! probes.
//!
//! Also the bind rule: a listener on a non-loopback address needs a token,
//! unless `--insecure` says otherwise.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Router};
use sha2::{Digest, Sha256};

use super::session::{Session, Sessions, Times};
use crate::alert::sign::same_bytes;

/// Unix seconds now; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

fn system_clock() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A configured token, kept only as digests.
pub struct Token {
    digest: [u8; 32],
    /// Signs and checks the session cookies (a key derived from the token).
    sessions: Sessions,
    clock: Clock,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(redacted)")
    }
}

/// A token or listener the server refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthSetupError {
    #[error("a token must be at least {min} characters (got {len}); e.g. `openssl rand -hex 24`", min = Token::MIN_LEN)]
    ShortToken { len: usize },
    #[error("refusing to serve {what} on {addr} without a token: anyone who reaches it could use it. Set {flag}, bind to 127.0.0.1, or pass --insecure to accept the risk")]
    Unprotected {
        what: String,
        addr: SocketAddr,
        flag: String,
    },
}

impl Token {
    /// Tokens shorter than this are refused: they could be guessed.
    pub const MIN_LEN: usize = 16;

    /// `Ok(None)` for no token (or an empty one, as an unset env var gives);
    /// an error for one too short to be a secret.
    /// `secure_cookie`: the dashboard is reached over https.
    pub fn new(
        secret: Option<&str>,
        secure_cookie: bool,
    ) -> Result<Option<Arc<Token>>, AuthSetupError> {
        Token::with_clock(secret, secure_cookie, Arc::new(system_clock))
    }

    /// [`Token::new`] with the clock session cookies are judged by.
    pub fn with_clock(
        secret: Option<&str>,
        secure_cookie: bool,
        clock: Clock,
    ) -> Result<Option<Arc<Token>>, AuthSetupError> {
        let Some(secret) = secret.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        if secret.len() < Token::MIN_LEN {
            return Err(AuthSetupError::ShortToken { len: secret.len() });
        }
        Ok(Some(Arc::new(Token {
            digest: Sha256::digest(secret.as_bytes()).into(),
            sessions: Sessions::new(secret, secure_cookie),
            clock,
        })))
    }

    /// Whether `presented` is the token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(presented.trim().as_bytes()).into();
        same_bytes(&d, &self.digest)
    }

    /// The request's `Authorization: Bearer …` holds the token.
    pub fn bearer_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(rest)
            })
            .any(|t| self.matches(t))
    }

    /// What the request's session cookies say, now.
    fn session(&self, headers: &HeaderMap) -> Session {
        self.sessions.check(
            headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
            (self.clock)(),
        )
    }
}

/// Refuse to listen on `addr` without a token, unless `insecure`.
pub fn check_bind(
    addr: SocketAddr,
    token: Option<&Token>,
    what: &str,
    flag: &str,
    insecure: bool,
) -> Result<(), AuthSetupError> {
    if addr.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    if insecure {
        tracing::warn!(%addr, "{what} listens on a non-loopback address without a token (--insecure)");
        return Ok(());
    }
    Err(AuthSetupError::Unprotected {
        what: what.to_string(),
        addr,
        flag: flag.to_string(),
    })
}

/// Whether a `Host` header names this machine's loopback: `localhost`,
/// `*.localhost`, or a loopback address, with any port.
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(n, _)| n)
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The guard of a loopback listener without a token: only requests
/// addressed to localhost (or to the configured public host) are answered,
/// so a web page cannot reach it by pointing its own name at 127.0.0.1
/// (DNS rebinding).
pub async fn loopback_only(
    State(public_host): State<Arc<Option<String>>>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match host {
        Some(h) if !loopback_host(&h) && public_host.as_deref() != Some(h.as_str()) => {
            tracing::warn!(host = %h, "refused a request addressed to another host (loopback listener without a token)");
            (
                StatusCode::FORBIDDEN,
                "this server listens on loopback without a token and answers only requests addressed to localhost; \
                 set a token to serve it under another name\n",
            )
                .into_response()
        }
        _ => next.run(req).await,
    }
}

/// Paths open without a token (the stylesheet and script are the sign-in
/// page's and hold nothing of the data).
fn open_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/login" | "/logout" | "/favicon.ico" | "/api/openapi.json"
    ) || path.starts_with(crate::dash::assets::PREFIX)
}

/// The middleware in front of the dashboard, API and metrics. A good
/// session cookie old enough to renew gets a fresh one on the answer; a bad
/// one counts as none, and is removed.
pub async fn require(State(token): State<Arc<Token>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if open_path(req.uri().path()) || token.bearer_ok(headers) {
        return next.run(req).await;
    }
    let session = token.session(headers);
    let refused = match session {
        Session::Valid { times, renew } => {
            let mut resp = next.run(req).await;
            if renew {
                let now = (token.clock)();
                tracing::debug!(
                    age_s = now - times.issued,
                    signed_in_s_ago = now - times.signed_in,
                    "session cookie renewed (older than half its lifetime; the sign-in's time carried over)"
                );
                let renewed = Times {
                    signed_in: times.signed_in,
                    issued: now,
                };
                if let Ok(v) = HeaderValue::from_str(&token.sessions.set_cookie(renewed)) {
                    resp.headers_mut().append(header::SET_COOKIE, v);
                }
            }
            return resp;
        }
        Session::Refused(why) => {
            tracing::debug!(path = %req.uri().path(), "session cookie refused, treated as signed out: {why}");
            true
        }
        Session::Absent => false,
    };
    let mut resp = refuse(&req, refused);
    if refused {
        if let Ok(v) = HeaderValue::from_str(&token.sessions.clear_cookie()) {
            resp.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    resp
}

/// A request without a good token or session: a page goes to `/login`, the
/// rest get a 401 (`expired`: it came with a session cookie that is not good).
fn refuse(req: &Request, expired: bool) -> Response {
    let headers = req.headers();
    let path = req.uri().path();
    let wants_page = req.method() == axum::http::Method::GET
        && !path.starts_with("/api/")
        && !path.starts_with("/charts/")
        && path != "/metrics"
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    if wants_page {
        let next_url = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let to = format!("/login?next={}", crate::dash::html::seg(&next_url));
        return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    }
    let message = if headers.contains_key(header::AUTHORIZATION) {
        "the token sent does not match: send `Authorization: Bearer <token>` with the value of --api-token / STORMWATCH_API_TOKEN"
    } else if expired {
        "the session has expired or is not valid: sign in again at /login, or send `Authorization: Bearer <token>` (the value of --api-token / STORMWATCH_API_TOKEN)"
    } else {
        "this server needs a token: send `Authorization: Bearer <token>` (the value of --api-token / STORMWATCH_API_TOKEN)"
    };
    // MCP clients show a JSON-RPC error's message; others read `error`.
    let body = if path == "/mcp" || path.starts_with("/mcp/") {
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": message}})
    } else {
        serde_json::json!({ "error": message })
    };
    let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"stormwatch\""),
    );
    resp
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

#[derive(serde::Deserialize)]
struct NextQuery {
    #[serde(default)]
    next: String,
}

/// Only a path on this server: it starts with one `/`, and holds only the
/// characters of a plain path and query (browsers drop tabs and newlines from
/// a URL, so `/\t/evil.example` would become `//evil.example`).
fn safe_next(next: &str) -> &str {
    let plain = next
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._~%?=&+-:,;@!$'()*".contains(&b));
    if plain && next.starts_with('/') && !next.starts_with("//") {
        next
    } else {
        "/"
    }
}

fn login_page(next: &str, error: Option<&str>) -> String {
    crate::dash::html::page(
        "Sign in",
        maud::html! {
            h1 { "Sign in" }
            @if let Some(e) = error { p class="bad" { (e) } }
            form method="post" action="/login" {
                "\n"
                label {
                    "API token "
                    input type="password" name="token" autocomplete="current-password" required autofocus;
                }
                "\n"
                input type="hidden" name="next" value=(safe_next(next));
                " "
                button type="submit" { "Sign in" }
            }
            "\n"
            p {
                "The token is the server's " code { "--api-token" }
                " (" code { "STORMWATCH_API_TOKEN" } ")."
            }
        },
    )
}

/// `/login` and `/logout`.
pub fn login_router(token: Arc<Token>) -> Router {
    Router::new()
        .route(
            "/login",
            get(
                |axum::extract::Query(q): axum::extract::Query<NextQuery>| async move {
                    axum::response::Html(login_page(&q.next, None))
                },
            )
            .post(login),
        )
        .route("/logout", axum::routing::post(logout))
        .with_state(token)
}

async fn login(
    State(token): State<Arc<Token>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if crate::dash::cross_site(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "sign-in is only accepted from this dashboard\n",
        )
            .into_response();
    }
    if !token.matches(&form.token) {
        // Slow down guessing; tokens should be long anyway.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        tracing::warn!("dashboard sign-in with a wrong token");
        return (
            StatusCode::UNAUTHORIZED,
            axum::response::Html(login_page(&form.next, Some("That is not the token."))),
        )
            .into_response();
    }
    // Lax, not Strict: a trace link in a Slack alert must arrive signed in.
    // State changes are guarded by their Origin check, not by the cookie.
    let now = (token.clock)();
    let cookie = token.sessions.set_cookie(Times {
        signed_in: now,
        issued: now,
    });
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, safe_next(&form.next).to_string()),
        ],
    )
        .into_response()
}

async fn logout(State(token): State<Arc<Token>>) -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, token.sessions.clear_cookie()),
            (header::LOCATION, "/login".to_string()),
        ],
    )
        .into_response()
}

/// The host (with port, as a `Host` header carries it) of a URL.
pub(super) fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests;
