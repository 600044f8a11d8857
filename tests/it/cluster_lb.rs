//! Routing: a plain HTTP load balancer (nginx, round-robin) in front of two
//! ingest nodes of a shared store, fed by the OpenTelemetry Python SDK's
//! exporter. Both nodes take spans, and every span the SDK had
//! acknowledged is in the shared store once. (The Collector's
//! `loadbalancing` exporter, the README's other routing, cannot be fetched
//! on this machine; its gRPC path is the one `otlp_grpc.rs` tests.)

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::common::{free_addr, python, repo};

/// nginx in the foreground on a free port, round-robin over `upstreams`:
/// one process (no master and workers), so killing it leaves nothing behind.
struct Nginx {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Nginx {
    fn start(dir: &std::path::Path, upstreams: &[std::net::SocketAddr]) -> Nginx {
        let nginx = std::env::var("STORMWATCH_NGINX").unwrap_or_else(|_| {
            panic!("STORMWATCH_NGINX is not set: run the tests through scripts/test.sh, which installs Debian's nginx")
        });
        let addr = free_addr();
        let servers: String = upstreams
            .iter()
            .map(|u| format!("    server {u};\n"))
            .collect();
        let conf = dir.join("nginx.conf");
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nmaster_process off;\npid {pid};\nerror_log {err} info;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n  access_log {acc};\n  client_body_temp_path {tmp};\n  proxy_temp_path {tmp};\n\
                 upstream ingest {{\n{servers}  }}\n  server {{\n    listen {addr};\n    client_max_body_size 64m;\n\
                 location / {{ proxy_pass http://ingest; proxy_http_version 1.1; proxy_set_header Host localhost; }}\n  }}\n}}\n",
                pid = dir.join("nginx.pid").display(),
                err = dir.join("logs/error.log").display(),
                acc = dir.join("logs/access.log").display(),
                tmp = dir.join("tmp").display(),
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let child = Command::new(nginx)
            .args(["-c", conf.to_str().unwrap(), "-p", dir.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "nginx did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx { child, addr }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_http_load_balancer_over_two_ingesters_stores_every_acknowledged_span_once() {
    let c = Cluster::new("");
    let a = c.serve("ingest", "ing-a", &[], &[]);
    let b = c.serve("ingest", "ing-b", &[], &[]);
    let lb = Nginx::start(&c.dir.path().join("nginx"), &[a.otlp, b.otlp]);
    let script = repo().join("scripts/py/export_spans.py");
    let mut cmd = Command::new(python("STORMWATCH_PY_PROTO"));
    cmd.arg(script).args([
        "--endpoint",
        &format!("http://{}/v1/traces", lb.addr),
        "--protocol",
        "proto",
        "--compression",
        "gzip",
        "--run-id",
        "lb",
        "--batch-size",
        "4",
    ]);
    crate::common::without_otel_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent: BTreeSet<String> = manifest["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s["trace_id"].as_str().unwrap(),
                s["span_id"].as_str().unwrap()
            )
        })
        .collect();
    assert!(sent.len() >= 10, "{manifest}");
    a.stop();
    b.stop();
    let stored = c.stored("copy");
    let keys: BTreeSet<String> = stored.keys().cloned().collect();
    assert_eq!(keys, sent, "every acknowledged span, and nothing else");
    assert!(stored.values().all(|&n| n == 1), "stored once: {stored:?}");
    // Round-robin reached both nodes: parts of each are in the copy.
    let copy = c.dir.path().join("copy");
    let layout = stormwatch::store::Layout::new(&copy);
    let names: Vec<String> = layout
        .days()
        .unwrap()
        .iter()
        .flat_map(|d| layout.parts(*d).unwrap())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for node in ["ing-a", "ing-b"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("part-{node}-"))),
            "no part from {node}: {names:?}"
        );
    }
}
