//! What anyone who reaches the dashboard's port can make it do, bounded:
//! `/readyz` probes the disk about once a second however often it is asked,
//! still turns 503 within about a second of a failing disk, and answers in
//! 2 s on a hung one; every route answers with the security headers (CSP
//! without inline exceptions, no framing, nosniff, same-origin referrer)
//! and no page carries inline script or style (no `<style>`, `style=` or
//! `on…=` attribute, `javascript:` URL, or `<script>` but the page's own
//! `/static/` files); the session cookie carries its lifetime and `Secure`
//! over https, and a tampered one is refused.

use std::time::{Duration, Instant};

use reqwest_blocking::blocking::Client;
use serde_json::Value;

use crate::common::{sample, Server};

fn readyz(client: &Client, server: &Server) -> (u16, Value, Duration) {
    let started = Instant::now();
    let r = client
        .get(format!("http://{}/readyz", server.http))
        .timeout(Duration::from_secs(10))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let body = serde_json::from_str(&r.text().unwrap()).unwrap();
    (status, body, started.elapsed())
}

fn probes(server: &Server) -> f64 {
    sample(&server.metrics(), "stormwatch_readyz_probes_total")
}

/// Four clients asking as fast as they can for 2.5 s: thousands of
/// answers, about one probe a second, every answer quick.
#[test]
fn a_readyz_flood_probes_the_disk_about_once_a_second_and_answers_fast() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[], &[]);
    assert_eq!(probes(&server), 0.0);
    let started = Instant::now();
    let window = Duration::from_millis(2500);
    let mut latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let server = &server;
                s.spawn(move || {
                    let client = Client::new();
                    let mut seen = Vec::new();
                    while started.elapsed() < window && seen.len() < 20_000 {
                        let (status, body, took) = readyz(&client, server);
                        assert_eq!(status, 200, "{body}");
                        seen.push(took);
                    }
                    seen
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let n = probes(&server);
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let max = *latencies.last().unwrap();
    eprintln!(
        "readyz flood: {} answers in {elapsed:.2} s, {n} probes, p50 {:?}, p99 {p99:?}, max {max:?}",
        latencies.len(),
        latencies[latencies.len() / 2]
    );
    assert!(latencies.len() >= 200, "only {} answers", latencies.len());
    assert!(n >= 2.0, "the disk is probed again each second: {n}");
    assert!(n <= elapsed.ceil() + 1.0, "{n} probes in {elapsed:.2} s");
    assert!(p99 < Duration::from_millis(250), "p99 {p99:?}");
    assert!(max < Duration::from_secs(2), "max {max:?}");
    server.stop();
}

/// The probe fails from its second run on: 503 within about a second of
/// the first answer, saying why.
#[test]
fn a_failing_disk_turns_readyz_503_within_about_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[],
        &[("STORMWATCH_FAULTS", "readyz_probe=fail@2")],
    );
    let client = Client::new();
    let (status, body, _) = readyz(&client, &server);
    assert_eq!(status, 200, "{body}");
    let ok_at = Instant::now();
    let (status, body) = loop {
        let (status, body, _) = readyz(&client, &server);
        if status != 200 {
            break (status, body);
        }
        assert!(ok_at.elapsed() < Duration::from_secs(3), "still ready");
        std::thread::sleep(Duration::from_millis(20));
    };
    let after = ok_at.elapsed();
    eprintln!("readyz turned {status} {after:?} after the last good probe");
    assert_eq!(status, 503);
    assert!(after < Duration::from_millis(1500), "{after:?}");
    assert_eq!(body["ready"], false);
    assert!(
        body["wal_writable"]
            .as_str()
            .unwrap()
            .contains("injected fault at readyz_probe"),
        "{body}"
    );
    server.stop();
}

/// The probe stalls 4 s from its second run on: eight concurrent callers
/// get a 503 in about 2 s, one probe runs (not eight), and once it returns
/// the server is ready again.
#[test]
fn a_hung_disk_answers_not_ready_in_2_s_without_piling_up_probes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[],
        &[("STORMWATCH_FAULTS", "readyz_probe=delay:4000@2")],
    );
    let client = Client::new();
    assert_eq!(readyz(&client, &server).0, 200);
    std::thread::sleep(Duration::from_millis(1100));
    let answers: Vec<(u16, Value, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let server = &server;
                s.spawn(move || readyz(&Client::new(), server))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, body, took) in &answers {
        assert_eq!(*status, 503, "{body}");
        assert!(
            *took >= Duration::from_millis(1900) && *took < Duration::from_millis(3500),
            "{took:?}"
        );
        let why = body["wal_writable"].as_str().unwrap();
        assert!(why.contains("2 s"), "{body}");
    }
    assert_eq!(
        probes(&server),
        2.0,
        "one stalled probe, not one per caller"
    );
    let stalled = Instant::now();
    while readyz(&client, &server).0 != 200 {
        assert!(
            stalled.elapsed() < Duration::from_secs(10),
            "never ready again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server.stop();
}

const HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
];

fn assert_secure(what: &str, r: &reqwest_blocking::blocking::Response) {
    for (name, value) in HEADERS {
        assert_eq!(
            r.headers().get(name).map(|v| v.to_str().unwrap()),
            Some(value),
            "{what}: {name}"
        );
    }
}

/// An attribute of an HTML tag: its name (lowercase) and value.
type Attr = (String, String);

/// The tags of an HTML page, each its name (lowercase), attributes, and the
/// byte offset where the tag ends; comments, doctypes and closing tags are
/// passed over. Attributes are read as a browser reads them: after any
/// whitespace, or straight after a quoted value.
fn tags(html: &str) -> Vec<(String, Vec<Attr>, usize)> {
    let b = html.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = html[i..].find('<') {
        i += at + 1;
        if html[i..].starts_with("!--") {
            i = html[i..].find("-->").map_or(b.len(), |e| i + e + 3);
            continue;
        }
        if i >= b.len() || !b[i].is_ascii_alphabetic() {
            // A closing tag, a doctype, or a `<` in text.
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'-') {
            i += 1;
        }
        let name = html[start..i].to_ascii_lowercase();
        let mut attrs = Vec::new();
        loop {
            while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
                i += 1;
            }
            if i >= b.len() || b[i] == b'>' {
                break;
            }
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && !b"=>/".contains(&b[i]) {
                i += 1;
            }
            // A name is at least one character, `=` included when it is first.
            if i == start {
                i += 1;
            }
            let attr = html[start..i].to_ascii_lowercase();
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let mut value = String::new();
            if i < b.len() && b[i] == b'=' {
                i += 1;
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                    let q = b[i] as char;
                    let end = html[i + 1..].find(q).map_or(b.len(), |e| i + 1 + e);
                    value = html[i + 1..end].to_string();
                    i = (end + 1).min(b.len());
                } else {
                    let start = i;
                    while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                        i += 1;
                    }
                    value = html[start..i].to_string();
                }
            }
            attrs.push((attr, value));
        }
        i = (i + 1).min(b.len());
        out.push((name, attrs, i));
    }
    out
}

/// What inline code a page carries, if any: a `<style>` element, a `style`
/// attribute, an event handler (`on…=`), a `javascript:` URL, or a
/// `<script>` that is not an empty element loading one of the page's own
/// files under `/static/`.
fn inline_code(html: &str) -> Option<String> {
    for (tag, attrs, end) in tags(html) {
        if tag == "style" {
            return Some("a <style> element".into());
        }
        for (name, value) in &attrs {
            if name == "style" {
                return Some(format!("a style attribute on <{tag}>"));
            }
            if name.len() > 2
                && name.starts_with("on")
                && name[2..].bytes().all(|c| c.is_ascii_lowercase())
            {
                return Some(format!("an event handler {name}= on <{tag}>"));
            }
            // Browsers drop whitespace and control characters in a scheme.
            let url: String = value
                .chars()
                .filter(|c| !c.is_whitespace() && !c.is_control())
                .collect::<String>()
                .to_ascii_lowercase();
            if url.starts_with("javascript:") {
                return Some(format!("a javascript: URL in {name}= on <{tag}>"));
            }
        }
        if tag == "script" {
            let src = attrs
                .iter()
                .find(|(n, _)| n == "src")
                .map(|(_, v)| v.as_str());
            if !src.is_some_and(|s| s.starts_with("/static/")) {
                return Some(format!("a <script> without a /static/ src: {src:?}"));
            }
            let body = html[end..].split("</script").next().unwrap_or("");
            if !body.trim().is_empty() {
                return Some(format!("a <script> with a body: {body:.60}"));
            }
        }
    }
    None
}

/// The check above finds what it is for, and passes what the pages use.
#[test]
fn the_inline_code_check_finds_each_kind_and_passes_static_scripts() {
    for (bad, what) in [
        ("<style>p{}</style>", "<style>"),
        ("<STYLE>p{}</STYLE>", "<style>"),
        (r#"<p style="color:red">"#, "style attribute"),
        ("<p\tstyle=\"color:red\">", "style attribute"),
        ("<p\nclass=x\nstyle=color:red>", "style attribute"),
        (r#"<p class="a"style="x">"#, "style attribute"),
        (r#"<button onclick="go()">"#, "onclick="),
        ("<img src=x onerror=alert(1)>", "onerror="),
        ("<body\nONLOAD='x()'>", "onload="),
        (r#"<a href="javascript:alert(1)">"#, "javascript:"),
        (r#"<a href=" JavaScript:alert(1)">"#, "javascript:"),
        ("<a href=\"java\tscript:x\">", "javascript:"),
        (r#"<form action='javascript:x'>"#, "javascript:"),
        ("<script>alert(1)</script>", "without a /static/ src"),
        (
            r#"<script src="https://evil.example/x.js"></script>"#,
            "without a /static/ src",
        ),
        (
            r#"<script src="/static/a.js">alert(1)</script>"#,
            "with a body",
        ),
    ] {
        let found = inline_code(bad).unwrap_or_else(|| panic!("not found in {bad:?}"));
        assert!(found.contains(what), "{bad:?}: {found}");
    }
    for good in [
        r#"<!doctype html><html><head><link rel="stylesheet" href="/static/a.css"></head>"#,
        r#"<ul id="feed"></ul><script src="/static/feed.js" defer></script>"#,
        r#"<a href="/signals?state=open" class="on">onclick= in text, style= too</a>"#,
        r#"<p title="x > y, style=1">javascript: as text</p><!-- <p style=x> -->"#,
        r#"<svg viewBox="0 0 1 1"><path d="M0 0"/></svg>"#,
    ] {
        assert_eq!(inline_code(good), None, "{good}");
    }
}

/// Every page, API route, chart, asset, health and metrics answer (and a
/// 404) carries the headers; no page has inline code (a `<style>`, a
/// `style=` or `on…=` attribute, a `javascript:` URL, a `<script>` other
/// than one of the page's own `/static/` files).
#[test]
fn every_route_carries_the_security_headers_and_pages_no_inline_code() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--demo"], &[]);
    let client = Client::new();
    let url = |p: &str| format!("http://{}{p}", server.http);
    let signals: Value = serde_json::from_str(
        &client
            .get(url("/api/signals"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
    )
    .unwrap();
    let signal = signals[0]["id"].as_str().unwrap().to_string();
    let trace = signals[0]["evidence"][0]["trace_id"]
        .as_str()
        .unwrap()
        .to_string();
    let day = signals[0]["evidence"][0]["day"]
        .as_str()
        .unwrap()
        .to_string();
    let pages = [
        "/".to_string(),
        "/?days=7".into(),
        "/tools/search_flights".into(),
        "/signals".into(),
        format!("/signals/{signal}"),
        format!("/traces/{trace}?day={day}"),
        "/tools/no_such_tool".into(),
    ];
    let mut css = None;
    for p in &pages {
        let r = client.get(url(p)).send().unwrap();
        assert!(
            r.status() == 200 || (p.contains("no_such") && r.status() == 404),
            "{p}"
        );
        assert_secure(p, &r);
        let body = r.text().unwrap();
        if let Some(found) = inline_code(&body) {
            panic!("{p}: inline code: {found}");
        }
        let href = body
            .split(r#"<link rel="stylesheet" href=""#)
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("{p}: no stylesheet"));
        css = Some(href.to_string());
    }
    let css = css.unwrap();
    let overview = client.get(url("/")).send().unwrap().text().unwrap();
    let js = overview
        .split(r#"<script src=""#)
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    for (asset, kind) in [(&css, "text/css"), (&js, "text/javascript")] {
        let r = client.get(url(asset)).send().unwrap();
        assert_eq!(r.status(), 200, "{asset}");
        assert_secure(asset, &r);
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{asset}"
        );
        assert!(
            r.headers()["cache-control"]
                .to_str()
                .unwrap()
                .contains("immutable"),
            "{asset}"
        );
    }
    for p in [
        "/api/tools",
        "/api/signals",
        "/api/feed",
        "/api/openapi.json",
        "/charts/tools/search_flights/daily.svg",
        "/charts/tools/search_flights/daily.png",
        "/healthz",
        "/readyz",
        "/metrics",
        "/no/such/route",
    ] {
        let r = client.get(url(p)).send().unwrap();
        assert_secure(p, &r);
    }
    let r = client
        .post(url(&format!("/api/signals/{signal}/mute")))
        .header("origin", "http://evil.example")
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_secure("a refused state change", &r);
    server.stop();
}

/// With a token: the sign-in page, the redirect to it and the 401 carry the
/// headers; the stylesheet is open (the sign-in page uses it); the cookie
/// lasts 12 h, is `Secure` under an https public URL, and a tampered one is
/// refused.
#[test]
fn the_sign_in_path_carries_the_headers_and_a_bounded_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let token = "api-6c2e9a0b77d1f3bb";
    let server = Server::start(
        &dir.path().join("data"),
        &["--api-token", token, "--public-url", "https://dash.example"],
        &[("RUST_LOG", "info,stormwatch=debug")],
    );
    let client = Client::builder()
        .redirect(reqwest_blocking::redirect::Policy::none())
        .build()
        .unwrap();
    let url = |p: &str| format!("http://{}{p}", server.http);
    let r = client
        .get(url("/"))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_secure("the redirect to sign in", &r);
    let r = client.get(url("/api/tools")).send().unwrap();
    assert_eq!(r.status(), 401);
    assert_secure("a 401", &r);
    let r = client.get(url("/login")).send().unwrap();
    assert_secure("/login", &r);
    let page = r.text().unwrap();
    if let Some(found) = inline_code(&page) {
        panic!("/login: inline code: {found}");
    }
    let css = page
        .split(r#"<link rel="stylesheet" href=""#)
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(
        client.get(url(&css)).send().unwrap().status(),
        200,
        "{css} without a token"
    );
    let ok = client
        .post(url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&next=%2F"))
        .send()
        .unwrap();
    assert_eq!(ok.status(), 303);
    assert_secure("the sign-in", &ok);
    let cookie = ok.headers()["set-cookie"].to_str().unwrap().to_string();
    for attr in [
        "HttpOnly",
        "SameSite=Lax",
        "Max-Age=43200",
        "Secure",
        "Path=/",
    ] {
        assert!(cookie.contains(attr), "{attr}: {cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_string();
    let r = client
        .get(url("/api/tools"))
        .header("cookie", &session)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // The sign-in time (v3.<signed_in>.<issued>.<mac>) or the issue time
    // moved under the same signature: refused.
    let (name, value) = session.split_once('=').unwrap();
    assert!(value.starts_with("v3."), "{value}");
    for (field, by) in [(1, 86_400), (2, -3600)] {
        let mut parts: Vec<String> = value.split('.').map(String::from).collect();
        parts[field] = (parts[field].parse::<i64>().unwrap() + by).to_string();
        let tampered = format!("{name}={}", parts.join("."));
        let r = client
            .get(url("/api/tools"))
            .header("cookie", &tampered)
            .send()
            .unwrap();
        assert_eq!(r.status(), 401, "{tampered}");
        assert!(r
            .text()
            .unwrap()
            .contains("session has expired or is not valid"));
    }
    let log = server.stop();
    assert!(
        log.contains("session cookie refused") && log.contains("signature does not match"),
        "{log}"
    );
}
