//! Tests of the token, the bind check, the DNS-rebinding guard and the login redirect.

use super::*;

#[test]
fn tokens_match_only_themselves_and_debug_hides_them() {
    let t = Token::new(Some("s3cret-token-0123"), false)
        .unwrap()
        .unwrap();
    assert!(t.matches("s3cret-token-0123"));
    assert!(!t.matches("s3cret-token-012X"));
    assert!(!t.matches(""));
    assert!(!format!("{t:?}").contains("s3cret"));
    assert!(!t
        .sessions
        .value(Times {
            signed_in: 0,
            issued: 0
        })
        .contains("s3cret"));
    assert!(Token::new(Some("  "), false).unwrap().is_none());
    assert!(Token::new(None, false).unwrap().is_none());
    assert!(Token::new(Some("short"), false)
        .unwrap_err()
        .to_string()
        .contains("16"));
    let mut h = HeaderMap::new();
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("bearer s3cret-token-0123"),
    );
    assert!(t.bearer_ok(&h));
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic s3cret-token-0123"),
    );
    assert!(!t.bearer_ok(&h));
}

#[test]
fn non_loopback_needs_a_token_or_insecure() {
    let t = Token::new(Some("x".repeat(16).as_str()), false)
        .unwrap()
        .unwrap();
    let public: SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    assert!(check_bind(local, None, "the API", "--api-token", false).is_ok());
    let err = check_bind(public, None, "the API", "--api-token", false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--api-token") && err.contains("0.0.0.0:8080"),
        "{err}"
    );
    assert!(check_bind(public, Some(&t), "the API", "--api-token", false).is_ok());
    assert!(check_bind(public, None, "the API", "--api-token", true).is_ok());
}

#[test]
fn only_loopback_names_pass_the_rebinding_guard() {
    for ok in [
        "localhost",
        "localhost:8080",
        "LOCALHOST.",
        "127.0.0.1:4318",
        "127.9.9.9",
        "[::1]:8080",
        "app.localhost:80",
    ] {
        assert!(loopback_host(ok), "{ok}");
    }
    for bad in [
        "evil.example",
        "evil.example:8080",
        "127.0.0.1.evil.example",
        "10.0.0.1:8080",
        "[2001:db8::1]:80",
        "localhost.evil.example",
    ] {
        assert!(!loopback_host(bad), "{bad}");
    }
}

#[test]
fn next_stays_on_this_server() {
    assert_eq!(safe_next("/signals?state=open"), "/signals?state=open");
    for bad in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil",
        "/\t/evil.example",
        "/\n/evil.example",
        "/ /evil",
        "",
    ] {
        assert_eq!(safe_next(bad), "/", "{bad}");
    }
}
