//! Bearer tokens. Ingest checks its token in the OTLP handler (so a refusal
//! answers in the request's encoding); the dashboard, API and `/metrics` sit
//! behind [`require`]. API clients send `Authorization: Bearer <token>`;
//! browsers sign in once at `/login`, which sets an HttpOnly, SameSite=Strict
//! session cookie holding an HMAC of the token (never the token itself).
//! `/healthz` and `/readyz` stay open for load balancers and probes.
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
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

const COOKIE: &str = "stormwatch_session";

/// A configured token, kept only as digests.
pub struct Token {
    digest: [u8; 32],
    session: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(redacted)")
    }
}

impl Token {
    /// `None` for no token (or an empty one, as an unset env var gives).
    pub fn new(secret: Option<&str>) -> Option<Arc<Token>> {
        let secret = secret.map(str::trim).filter(|s| !s.is_empty())?;
        let mut mac = hmac::Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .expect("HMAC takes keys of any length");
        mac.update(b"stormwatch-session-v1");
        let session: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Some(Arc::new(Token {
            digest: Sha256::digest(secret.as_bytes()).into(),
            session,
        }))
    }

    /// Whether `presented` is the token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(presented.trim().as_bytes()).into();
        d.iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    fn session_matches(&self, cookie: &str) -> bool {
        cookie.len() == self.session.len()
            && cookie
                .bytes()
                .zip(self.session.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
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

    fn cookie_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == COOKIE && self.session_matches(v))
    }
}

/// Refuse to listen on `addr` without a token, unless `insecure`.
pub fn check_bind(
    addr: SocketAddr,
    token: Option<&Token>,
    what: &str,
    flag: &str,
    insecure: bool,
) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    if insecure {
        tracing::warn!(%addr, "{what} listens on a non-loopback address without a token (--insecure)");
        return Ok(());
    }
    Err(format!(
        "refusing to serve {what} on {addr} without a token: anyone who reaches it could use it. \
         Set {flag}, bind to 127.0.0.1, or pass --insecure to accept the risk"
    ))
}

/// Paths open without a token.
fn open_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/login" | "/logout" | "/favicon.ico"
    )
}

/// The middleware in front of the dashboard, API and metrics.
pub async fn require(State(token): State<Arc<Token>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if open_path(req.uri().path()) || token.bearer_ok(headers) || token.cookie_ok(headers) {
        return next.run(req).await;
    }
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
    let mut resp = (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({
            "error": "this server needs a token: send `Authorization: Bearer <token>` (the value of --api-token / STORMWATCH_API_TOKEN)"
        })),
    )
        .into_response();
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

/// Only a path on this server: no scheme, no `//host`.
fn safe_next(next: &str) -> &str {
    if next.starts_with('/') && !next.starts_with("//") && !next.contains('\\') {
        next
    } else {
        "/"
    }
}

fn login_page(next: &str, error: Option<&str>) -> String {
    use crate::dash::html::esc;
    let error = error.map_or(String::new(), |e| {
        format!(r#"<p class="bad">{}</p>"#, esc(e))
    });
    crate::dash::html::page(
        "Sign in",
        &format!(
            r#"<h1>Sign in</h1>{error}<form method="post" action="/login">
<label>API token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<input type="hidden" name="next" value="{}"> <button type="submit">Sign in</button></form>
<p>The token is the server's <code>--api-token</code> (<code>STORMWATCH_API_TOKEN</code>).</p>"#,
            esc(safe_next(next))
        ),
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
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000",
        token.session
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, safe_next(&form.next).to_string()),
        ],
    )
        .into_response()
}

async fn logout() -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (
                header::SET_COOKIE,
                format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
            ),
            (header::LOCATION, "/login".to_string()),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_themselves_and_debug_hides_them() {
        let t = Token::new(Some("s3cret-token")).unwrap();
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-tokeN"));
        assert!(!t.matches(""));
        assert!(!format!("{t:?}").contains("s3cret"));
        assert!(!t.session.contains("s3cret"));
        assert!(Token::new(Some("  ")).is_none());
        assert!(Token::new(None).is_none());
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer s3cret-token"),
        );
        assert!(t.bearer_ok(&h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic s3cret-token"),
        );
        assert!(!t.bearer_ok(&h));
    }

    #[test]
    fn non_loopback_needs_a_token_or_insecure() {
        let t = Token::new(Some("x")).unwrap();
        let public: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(check_bind(local, None, "the API", "--api-token", false).is_ok());
        let err = check_bind(public, None, "the API", "--api-token", false).unwrap_err();
        assert!(
            err.contains("--api-token") && err.contains("0.0.0.0:8080"),
            "{err}"
        );
        assert!(check_bind(public, Some(&t), "the API", "--api-token", false).is_ok());
        assert!(check_bind(public, None, "the API", "--api-token", true).is_ok());
    }

    #[test]
    fn next_stays_on_this_server() {
        assert_eq!(safe_next("/signals?state=open"), "/signals?state=open");
        for bad in ["//evil.example/", "https://evil.example/", "/\\evil", ""] {
            assert_eq!(safe_next(bad), "/", "{bad}");
        }
    }
}
