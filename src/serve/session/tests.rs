//! The session cookie: its format and checks, and the middleware's answers
//! to good, old, expired (12 h after its issue, or 7 days after its sign-in
//! however often renewed), tampered, pre-v3 and revoked cookies (on a clock
//! the tests set, not by sleeping).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use axum::http::{header, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use tower::ServiceExt;

use super::*;
use crate::serve::auth::{self, Token};

const SECRET: &str = "session-test-token-0123";
const T0: i64 = 1_785_000_000;

/// A cookie signed in and issued at `t`.
fn at(t: i64) -> Times {
    Times {
        signed_in: t,
        issued: t,
    }
}

/// A `v2.<issued>.<mac>` cookie, as signed before the sign-in time was
/// carried.
fn v2(s: &Sessions, issued: i64) -> String {
    s.signed(&format!("v2.{issued}"))
}

#[test]
fn a_cookie_is_good_until_it_expires_and_renews_past_half_its_life() {
    let s = Sessions::new(SECRET, false);
    let v = s.value(at(T0));
    assert!(
        v.starts_with("v3.1785000000.1785000000.") && !v.contains(SECRET),
        "{v}"
    );
    assert_eq!(s.verify(&v, T0), Ok(at(T0)));
    assert_eq!(s.verify(&v, T0 + TTL_SECS - 1), Ok(at(T0)));
    let err = s.verify(&v, T0 + TTL_SECS).unwrap_err().to_string();
    assert!(err.contains("expired 0 s ago"), "{err}");
    assert!(s
        .verify(&v, T0 - 3600)
        .unwrap_err()
        .to_string()
        .contains("future"));
    let check = |now| s.check(std::iter::once(format!("a=b; {COOKIE}={v}").as_str()), now);
    assert_eq!(
        check(T0 + 10),
        Session::Valid {
            times: at(T0),
            renew: false
        }
    );
    assert_eq!(
        check(T0 + RENEW_AFTER_SECS),
        Session::Valid {
            times: at(T0),
            renew: true
        }
    );
    assert!(
        matches!(check(T0 + TTL_SECS), Session::Refused(w) if w.to_string().contains("expired"))
    );
    assert_eq!(s.check(std::iter::once("a=b"), T0), Session::Absent);
    // Of two cookies, the newest good one counts.
    let newer = s.value(at(T0 + 100));
    let both = format!("{COOKIE}=junk; {COOKIE}={v}; {COOKIE}={newer}");
    assert_eq!(
        s.check(std::iter::once(both.as_str()), T0 + 200),
        Session::Valid {
            times: at(T0 + 100),
            renew: false
        }
    );
}

#[test]
fn renewals_carry_the_sign_in_time_and_end_at_the_absolute_limit() {
    let s = Sessions::new(SECRET, false);
    // Renewed every 6 h, as a dashboard in use is: good until 7 days after
    // the sign-in, not a second more.
    let mut cookie = s.value(at(T0));
    let mut now = T0;
    while now + RENEW_AFTER_SECS < T0 + MAX_LIFETIME_SECS {
        now += RENEW_AFTER_SECS;
        let header = format!("{COOKIE}={cookie}");
        let Session::Valid { times, renew } = s.check(std::iter::once(header.as_str()), now) else {
            panic!("refused {} s after the sign-in", now - T0);
        };
        assert!(renew);
        assert_eq!(times.signed_in, T0);
        cookie = s.value(Times {
            signed_in: T0,
            issued: now,
        });
    }
    let last_issue = now;
    assert!(last_issue + TTL_SECS > T0 + MAX_LIFETIME_SECS);
    assert_eq!(
        s.verify(&cookie, T0 + MAX_LIFETIME_SECS - 1)
            .map(|t| t.signed_in),
        Ok(T0)
    );
    let err = s
        .verify(&cookie, T0 + MAX_LIFETIME_SECS)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expired 0 s ago")
            && err.contains(&format!("signed in {MAX_LIFETIME_SECS} s ago")),
        "{err}"
    );
    // The last renewal tells the browser to drop it at the limit too.
    let set = s.set_cookie(Times {
        signed_in: T0,
        issued: last_issue,
    });
    assert!(
        set.contains(&format!("Max-Age={}", T0 + MAX_LIFETIME_SECS - last_issue)),
        "{set}"
    );
}

#[test]
fn a_v2_cookie_is_still_good_its_issue_time_its_sign_in() {
    let s = Sessions::new(SECRET, false);
    let old = v2(&s, T0);
    assert_eq!(s.verify(&old, T0 + 10), Ok(at(T0)));
    assert!(s
        .verify(&old, T0 + TTL_SECS)
        .unwrap_err()
        .to_string()
        .contains("expired"));
    // Its signature covers its issue time as before.
    let mac = old.rsplit('.').next().unwrap();
    let moved = format!("v2.{}.{mac}", T0 + 3600);
    assert!(s
        .verify(&moved, T0)
        .unwrap_err()
        .to_string()
        .contains("signature"));
    // Its MAC is no v3 cookie's.
    let as_v3 = format!("v3.{T0}.{T0}.{mac}");
    assert!(s
        .verify(&as_v3, T0)
        .unwrap_err()
        .to_string()
        .contains("signature"));
    // Signed with another token: refused.
    let rotated = Sessions::new("another-token-4567890", false);
    assert!(rotated
        .verify(&old, T0)
        .unwrap_err()
        .to_string()
        .contains("earlier token"));
}

#[test]
fn tampered_forged_malformed_and_revoked_cookies_are_refused() {
    let s = Sessions::new(SECRET, false);
    let v = s.value(Times {
        signed_in: T0,
        issued: T0 + 3600,
    });
    let mac = v.rsplit('.').next().unwrap();
    // A later issue time under the old signature.
    let moved = format!("v3.{T0}.{}.{mac}", T0 + 7200);
    assert!(s
        .verify(&moved, T0 + 3600)
        .unwrap_err()
        .to_string()
        .contains("signature"));
    // A later sign-in time (to outlive the absolute limit), or an earlier one.
    for signed_in in [T0 + 60, T0 - 60] {
        let moved = format!("v3.{signed_in}.{}.{mac}", T0 + 3600);
        assert!(
            s.verify(&moved, T0 + 3600)
                .unwrap_err()
                .to_string()
                .contains("signature"),
            "{moved}"
        );
    }
    // One digit of the signature changed.
    let mut flipped = v.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    assert!(s
        .verify(&flipped, T0)
        .unwrap_err()
        .to_string()
        .contains("signature"));
    // Signed with another token: a rotated token revokes every cookie.
    let rotated = Sessions::new("another-token-4567890", false);
    assert!(rotated
        .verify(&v, T0)
        .unwrap_err()
        .to_string()
        .contains("earlier token"));
    // A sign-in after the issue is nothing this server signs.
    let backwards = s.value(Times {
        signed_in: T0 + 10,
        issued: T0,
    });
    assert!(s
        .verify(&backwards, T0 + 20)
        .unwrap_err()
        .to_string()
        .contains("after"));
    for bad in [
        "",
        "v3",
        "v3.",
        "v3.123",
        "v3.123.456",
        "v3..123.abcd",
        "v3.-5.5.00",
        "v3.5.+5.00",
        &format!("v3.{T0}.{mac}"),
        &format!("v3.{T0}.{T0}.{T0}.{mac}"),
        &format!("v3.{T0}.{T0}.{}", &mac[..63]),
        &format!("v3.{T0}.{T0}.{}zz", &mac[..62]),
        "v2",
        "v2.",
        "v2.123",
        "v2..abcd",
        "v2.-5.00",
        "v2.+5.00",
        &format!("v2.{T0}.{T0}.{mac}"),
        &format!("v1.{T0}.{mac}"),
        // The first version's cookie: a bare HMAC of the token.
        mac,
    ] {
        assert!(
            s.verify(bad, T0)
                .unwrap_err()
                .to_string()
                .contains("malformed"),
            "{bad:?}"
        );
    }
}

#[test]
fn the_set_cookie_header_carries_max_age_httponly_samesite_and_secure_over_https() {
    let plain = Sessions::new(SECRET, false).set_cookie(at(T0));
    for attr in [
        "Path=/",
        "HttpOnly",
        "SameSite=Lax",
        &format!("Max-Age={TTL_SECS}"),
    ] {
        assert!(plain.contains(attr), "{plain}");
    }
    assert!(!plain.contains("Secure"), "{plain}");
    let https = Sessions::new(SECRET, true);
    assert!(https.set_cookie(at(T0)).ends_with("; Secure"));
    assert!(https.clear_cookie().contains("Max-Age=0") && https.clear_cookie().contains("Secure"));
}

/// A server on a clock the test sets: a page, an API route, `/login`.
fn app(secret: &str, secure: bool, clock: &Arc<AtomicI64>) -> Router {
    let c = Arc::clone(clock);
    let token = Token::with_clock(
        Some(secret),
        secure,
        Arc::new(move || c.load(Ordering::SeqCst)),
    )
    .unwrap()
    .unwrap();
    Router::new()
        .route("/", get(|| async { "overview" }))
        .route("/api/tools", get(|| async { "{}" }))
        .merge(auth::login_router(Arc::clone(&token)))
        .layer(axum::middleware::from_fn_with_state(token, auth::require))
}

async fn send(app: &Router, req: Request<axum::body::Body>) -> axum::response::Response {
    app.clone().oneshot(req).await.unwrap()
}

fn get_with(path: &str, cookie: &str, page: bool) -> Request<axum::body::Body> {
    let mut r = Request::get(path).header(header::COOKIE, cookie);
    if page {
        r = r.header(header::ACCEPT, "text/html");
    }
    r.body(axum::body::Body::empty()).unwrap()
}

fn set_cookies(resp: &axum::response::Response) -> Vec<String> {
    resp.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

/// `name=value` of a `Set-Cookie` header.
fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn signed_in_renewed_expired_tampered_and_revoked_through_the_middleware() {
    let clock = Arc::new(AtomicI64::new(T0));
    let app = app(SECRET, false, &clock);
    let login = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(format!("token={SECRET}&next=%2F")))
        .unwrap();
    let resp = send(&app, login).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let set = set_cookies(&resp);
    assert_eq!(set.len(), 1, "{set:?}");
    assert!(set[0].contains(&format!("Max-Age={TTL_SECS}")) && set[0].contains("HttpOnly"));
    let first = pair(&set[0]);

    // An hour in: signed in, nothing renewed.
    clock.store(T0 + 3600, Ordering::SeqCst);
    let resp = send(&app, get_with("/", &first, true)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(set_cookies(&resp).is_empty());

    // Seven hours in: signed in, and a fresh cookie on the answer.
    clock.store(T0 + 7 * 3600, Ordering::SeqCst);
    let resp = send(&app, get_with("/api/tools", &first, false)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let set = set_cookies(&resp);
    assert_eq!(set.len(), 1, "{set:?}");
    assert!(
        set[0].contains(&format!("v3.{T0}.{}.", T0 + 7 * 3600)),
        "the sign-in time carried over: {set:?}"
    );
    assert!(set[0].contains(&format!("Max-Age={TTL_SECS}")));
    let renewed = pair(&set[0]);

    // Twelve hours in: the first cookie has expired (a page goes to sign in,
    // the API answers 401, the cookie is removed); the renewed one is good.
    clock.store(T0 + TTL_SECS, Ordering::SeqCst);
    let resp = send(&app, get_with("/", &first, true)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[header::LOCATION], "/login?next=%2F");
    assert!(set_cookies(&resp)[0].contains("Max-Age=0"));
    let resp = send(&app, get_with("/api/tools", &first, false)).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("session has expired"));
    let resp = send(&app, get_with("/", &renewed, true)).await;
    assert_eq!(resp.status(), StatusCode::OK);

    // Tampered: the renewed cookie with a later issue time, or a later
    // sign-in time.
    let (head, mac) = renewed.rsplit_once('.').unwrap();
    let issued: i64 = head.rsplit('.').next().unwrap().parse().unwrap();
    for forged in [
        format!("{COOKIE}=v3.{T0}.{}.{mac}", issued + 3600),
        format!("{COOKIE}=v3.{}.{issued}.{mac}", T0 + 3600),
    ] {
        let resp = send(&app, get_with("/api/tools", &forged, false)).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{forged}");
    }

    // The token rotated (a restart with a new --api-token): every cookie of
    // the old one is refused.
    let rotated = app_rotated(&clock);
    let resp = send(&rotated, get_with("/api/tools", &renewed, false)).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let resp = send(&rotated, get_with("/", &renewed, true)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_sign_in_renewed_while_in_use_ends_seven_days_on_and_a_v2_cookie_renews_to_v3() {
    let clock = Arc::new(AtomicI64::new(T0));
    let app = app(SECRET, false, &clock);
    let s = Sessions::new(SECRET, false);
    // A browser holding a cookie from before v3, used every 6 h: renewed
    // each time, the v2 cookie's issue time carried as the sign-in.
    let mut cookie = format!("{COOKIE}={}", v2(&s, T0));
    let mut now = T0;
    let mut renewals = 0;
    loop {
        now += RENEW_AFTER_SECS;
        clock.store(now, Ordering::SeqCst);
        let resp = send(&app, get_with("/", &cookie, true)).await;
        if now >= T0 + MAX_LIFETIME_SECS {
            // Past the absolute limit: back to sign in, the cookie removed,
            // as an expired one is; the API answers 401.
            assert_eq!(resp.status(), StatusCode::SEE_OTHER);
            assert_eq!(resp.headers()[header::LOCATION], "/login?next=%2F");
            assert!(set_cookies(&resp)[0].contains("Max-Age=0"));
            let resp = send(&app, get_with("/api/tools", &cookie, false)).await;
            assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
            break;
        }
        assert_eq!(resp.status(), StatusCode::OK, "{} s in", now - T0);
        let set = set_cookies(&resp);
        assert_eq!(set.len(), 1, "{set:?}");
        assert!(
            set[0].contains(&format!("v3.{T0}.{now}.")),
            "renewed with the sign-in time: {set:?}"
        );
        cookie = pair(&set[0]);
        renewals += 1;
    }
    assert_eq!(renewals, MAX_LIFETIME_SECS / RENEW_AFTER_SECS - 1);
    // A fresh sign-in then starts another seven days.
    let login = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(format!("token={SECRET}&next=%2F")))
        .unwrap();
    let set = set_cookies(&send(&app, login).await);
    assert!(set[0].contains(&format!("v3.{now}.{now}.")), "{set:?}");
    let resp = send(&app, get_with("/", &pair(&set[0]), true)).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

fn app_rotated(clock: &Arc<AtomicI64>) -> Router {
    app("a-rotated-token-98765", false, clock)
}

#[tokio::test]
async fn over_https_the_login_cookie_is_secure() {
    let clock = Arc::new(AtomicI64::new(T0));
    let app = app(SECRET, true, &clock);
    let login = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(format!("token={SECRET}")))
        .unwrap();
    let set = set_cookies(&send(&app, login).await);
    assert!(set[0].ends_with("; Secure"), "{set:?}");
    let logout = Request::post("/logout")
        .body(axum::body::Body::empty())
        .unwrap();
    let set = set_cookies(&send(&app, logout).await);
    assert!(
        set[0].contains("Max-Age=0") && set[0].ends_with("; Secure"),
        "{set:?}"
    );
}
