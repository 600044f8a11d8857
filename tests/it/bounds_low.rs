//! Hardening v2, the low items (issue 25), against the real binary:
//! `/readyz` turns 503 while every WAL write fails with ENOSPC;
//! `/api/tools` comes a page at a time; an alert target on this server's
//! own port stops the start, and the host lists are validated and enforced.

use std::path::Path;
use std::time::{Duration, Instant};

use prost::Message;
use reqwest_blocking::blocking::Client;
use serde_json::{json, Value};

use crate::bounds::{get_json, now_ns, request, tool_span};
use crate::common::{free_addr, run, Server, BIN};

#[test]
fn readyz_is_not_ready_while_every_wal_write_fails_with_enospc() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new();
    let readyz = |server: &Server| {
        let r = client
            .get(format!("http://{}/readyz", server.http))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (
            status,
            serde_json::from_str::<Value>(&r.text().unwrap()).unwrap(),
        )
    };
    let batch = |server: &Server, id: u64| {
        client
            .post(server.traces_url())
            .header("content-type", "application/x-protobuf")
            .body(request(vec![tool_span(id, 0, "x", now_ns())]).encode_to_vec())
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    // Every write fails: every export is refused, and /readyz says so,
    // second after second (its own 64 KiB probe would pass).
    let server = Server::start(
        &dir.path().join("a"),
        &[],
        &[("STORMWATCH_FAULTS", "wal_write=enospc")],
    );
    assert_eq!(readyz(&server).0, 200, "ready before any write");
    assert_eq!(batch(&server, 1), 503);
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        let (status, body) = readyz(&server);
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["ready"], false);
        let wal = body["wal_writes"].as_str().unwrap();
        assert!(
            wal.starts_with("the last WAL write (") && wal.contains("No space left on device"),
            "{body}"
        );
        assert!(
            body["wal_writable"]
                .as_str()
                .unwrap()
                .contains("the size of the WAL write that failed last"),
            "{body}"
        );
        assert_eq!(batch(&server, 2), 503);
        std::thread::sleep(Duration::from_millis(300));
    }
    server.stop();
    // Space comes back (the fault runs out): ready again without a write,
    // then writes pass.
    let server = Server::start(
        &dir.path().join("b"),
        &[],
        &[("STORMWATCH_FAULTS", "wal_write=enospc:2")],
    );
    assert_eq!(batch(&server, 3), 503);
    assert_eq!(
        readyz(&server).0,
        503,
        "the probe copying the write fails too"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body) = readyz(&server);
        if status == 200 {
            assert_eq!(body["wal_writes"], "ok", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "never ready again: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(batch(&server, 4), 200);
    assert_eq!(readyz(&server).0, 200);
    server.stop();
}

/// OTLP JSON of `n` tools, tool `i` called `1 + i % 7` times, all today.
fn many_tools(n: usize) -> String {
    let start = now_ns() - 3_600_000_000_000;
    let mut spans = Vec::new();
    for i in 0..n {
        for c in 0..(1 + i % 7) {
            spans.push(json!({
                "traceId": format!("{:032x}", i + 1), "spanId": format!("{:016x}", c + 1),
                "name": "execute_tool", "kind": 1,
                "startTimeUnixNano": (start + (i * 10 + c) as i64 * 1000).to_string(),
                "endTimeUnixNano": (start + (i * 10 + c) as i64 * 1000 + 500).to_string(),
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": format!("tool_{i:06}")}}
                ]
            }));
        }
    }
    json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).to_string()
}

#[test]
fn api_tools_comes_a_page_at_a_time_in_a_stable_order() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let n = 5000;
    let file = dir.path().join("tools.json");
    std::fs::write(&file, many_tools(n)).unwrap();
    crate::common::import_files(&data, &[&file]);
    let server = Server::start(&data, &[], &[]);
    let (status, first) = get_json(&server, "/api/tools");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["total_tools"], n);
    assert_eq!(
        (first["page"].clone(), first["page_size"].clone()),
        (json!(1), json!(200))
    );
    assert_eq!(first["pages"], 25);
    assert_eq!(first["tools"].as_array().unwrap().len(), 200);
    // Every tool once across the pages, busiest first, then by name.
    let mut seen: Vec<(i64, String)> = Vec::new();
    for page in 1..=5 {
        let started = Instant::now();
        let r = Client::new()
            .get(format!(
                "http://{}/api/tools?page_size=1000&page={page}",
                server.http
            ))
            .send()
            .unwrap();
        let size = r.content_length();
        let v: Value = serde_json::from_str(&r.text().unwrap()).unwrap();
        eprintln!("page {page}: {size:?} bytes in {:?}", started.elapsed());
        for t in v["tools"].as_array().unwrap() {
            seen.push((
                t["calls"].as_i64().unwrap(),
                t["tool"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert_eq!(seen.len(), n);
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(seen, sorted, "busiest first, then by name, across pages");
    sorted.dedup_by(|a, b| a.1 == b.1);
    assert_eq!(sorted.len(), n, "no tool twice");
    for (q, says) in [
        (
            "page=6&page_size=1000",
            "page: expected 1 to 5 (1000 tools a page), got 6",
        ),
        ("page=0", "page: expected a page number from 1"),
        ("page_size=1001", "page_size: expected 1 to 1000"),
        ("page_size=0", "page_size: expected 1 to 1000"),
    ] {
        let r = Client::new()
            .get(format!("http://{}/api/tools?{q}", server.http))
            .send()
            .unwrap();
        assert_eq!(r.status(), 400, "{q}");
        let text = r.text().unwrap();
        assert!(text.contains(says), "{q}: {text}");
    }
    // The OpenAPI document says so.
    let (_, doc) = get_json(&server, "/api/openapi.json");
    let params: Vec<&str> = doc["paths"]["/api/tools"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        params.contains(&"page") && params.contains(&"page_size"),
        "{params:?}"
    );
    server.stop();
}

/// `serve` with the dashboard and OTLP ports chosen here and `config`; it
/// must exit, and its stderr is returned.
fn serve_must_refuse(
    dir: &Path,
    http: std::net::SocketAddr,
    otlp: std::net::SocketAddr,
    config: &str,
) -> String {
    let cfg = dir.join("refuse.toml");
    std::fs::write(&cfg, config).unwrap();
    let mut child = std::process::Command::new(BIN)
        .args([
            "serve",
            "--http-addr",
            &http.to_string(),
            "--otlp-addr",
            &otlp.to_string(),
            "--otlp-grpc-addr",
            "none",
        ])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--config")
        .arg(&cfg)
        .env_remove("STORMWATCH_FAULTS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(!status.success(), "{err}");
            return err;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started with an alert target on its own port");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn target(url: &str) -> String {
    format!("[[alert.targets]]\nname = \"self\"\nkind = \"webhook\"\nurl = \"{url}\"\n")
}

#[test]
fn an_alert_target_on_this_servers_own_listeners_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (http, otlp) = (free_addr(), free_addr());
    for (url, says) in [
        (
            format!("http://{http}/api/sweep"),
            format!("{http} is this server's own dashboard listener"),
        ),
        (
            format!("http://localhost:{}/api/signals/SW-X/mute", http.port()),
            "is this server's own dashboard listener".to_string(),
        ),
        (
            format!("http://0.0.0.0:{}/v1/traces", otlp.port()),
            format!(
                "0.0.0.0:{} is this server's own OTLP/HTTP listener",
                otlp.port()
            ),
        ),
    ] {
        let err = serve_must_refuse(dir.path(), http, otlp, &target(&url));
        assert!(
            err.contains("alert target \"self\": refused: "),
            "{url}: {err}"
        );
        assert!(err.contains(&says), "{url}: {err}");
        assert!(
            !err.contains("/api/"),
            "the URL stays out of the message: {err}"
        );
    }
}

#[test]
fn the_alert_host_lists_are_checked_at_start_and_at_every_send() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("data");
    std::fs::create_dir_all(&state).unwrap();
    let (hook, hook_addr, _rt) = crate::alerts::background((204, ""));
    let check = |config: &str| {
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, config).unwrap();
        run(&["config", "check", "--config", cfg.to_str().unwrap()], &[])
    };
    let send = |config: &str| {
        let cfg = dir.path().join("s.toml");
        std::fs::write(&cfg, config).unwrap();
        let out = run(
            &[
                "alerts",
                "test",
                "self",
                "--config",
                cfg.to_str().unwrap(),
                "--data-dir",
                state.to_str().unwrap(),
            ],
            &[(
                "SW_BOUNDS_URL",
                &format!("http://localhost:{}/in", hook_addr.port()),
            )],
        );
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    // A bad entry is refused naming the key and the entry.
    let out = check("[alert]\ndeny_hosts = [\"10.0.0.0/33\"]\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("alert.deny_hosts: expected a host name") && err.contains("\"10.0.0.0/33\""),
        "{err}"
    );
    // A literal target the lists refuse fails config check.
    let out = check(&format!(
        "[alert]\ndeny_hosts = [\"loopback\"]\n\n{}",
        target(&format!("http://{hook_addr}/in"))
    ));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("alert target \"self\": refused: ") && err.contains("alert.deny_hosts"),
        "{err}"
    );
    // The default lets a local receiver through (loopback is allowed).
    let env_target =
        "[[alert.targets]]\nname = \"self\"\nkind = \"webhook\"\nurl_env = \"SW_BOUNDS_URL\"\n";
    let (ok, said) = send(env_target);
    assert!(ok && said.contains("self: delivered"), "{said}");
    assert_eq!(hook.hits().len(), 1);
    // Denied by class, or not in an allow list: not sent, saying why.
    for (lists, says) in [
        ("deny_hosts = [\"loopback\"]", "alert.deny_hosts refuses"),
        (
            "allow_hosts = [\"192.0.2.0/24\", \"hooks.slack.com\"]",
            "not in alert.allow_hosts",
        ),
        (
            "deny_hosts = [\"localhost\"]",
            "its host is in alert.deny_hosts",
        ),
    ] {
        let (ok, said) = send(&format!("[alert]\n{lists}\n\n{env_target}"));
        assert!(!ok, "{lists}: {said}");
        assert!(
            said.contains("not delivered") && said.contains(says),
            "{lists}: {said}"
        );
    }
    assert_eq!(hook.hits().len(), 1, "nothing more was sent");
    // Allowed explicitly: sent.
    let (ok, said) = send(&format!(
        "[alert]\nallow_hosts = [\"loopback\"]\n\n{env_target}"
    ));
    assert!(ok, "{said}");
    assert_eq!(hook.hits().len(), 2);
}
