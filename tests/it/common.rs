//! Helpers shared by the integration tests: the real binary as a server,
//! free ports, reading the store back.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use polars::prelude::*;
use stormwatch::store::Reader;

pub const BIN: &str = env!("CARGO_BIN_EXE_stormwatch");

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A `stormwatch serve` process on free ports: OTLP/HTTP, OTLP/gRPC and
/// the HTTP server of health, metrics and the dashboard.
pub struct Server {
    pub child: Child,
    pub otlp: SocketAddr,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub log: PathBuf,
}

impl Server {
    pub fn start(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        // A port found free can be taken before the server binds it (by
        // another test's client connection, say): then start again on others.
        for _ in 0..4 {
            match Server::try_start(data_dir, extra, env) {
                Ok(server) => return server,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("serve exited before it was ready; log:\n{log}"),
            }
        }
        panic!("serve found its ports taken four times over");
    }

    /// Start and wait until every listener answers; the log when it exited.
    fn try_start(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
        let otlp = free_addr();
        let grpc = free_addr();
        let http = free_addr();
        let log = data_dir.with_extension(format!("{}.log", otlp.port()));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args([
            "serve",
            "--otlp-addr",
            &otlp.to_string(),
            "--otlp-grpc-addr",
            &grpc.to_string(),
            "--http-addr",
            &http.to_string(),
        ])
        // The fixtures are dated July 2026: keep them whatever today is.
        .env("STORMWATCH_RETENTION_DAYS", "0")
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env("RUST_LOG", "info")
        .env_remove("STORMWATCH_FAULTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn stormwatch serve");
        let mut server = Server {
            child,
            otlp,
            grpc,
            http,
            log,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest_blocking::blocking::Client::new();
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return Err(self.log_text());
            }
            let ok = client
                .get(format!("http://{}/healthz", self.http))
                .timeout(Duration::from_millis(500))
                .send()
                .is_ok_and(|r| r.status().is_success());
            // A detect node has no receivers: its HTTP server is all.
            let receives = !self
                .log_text()
                .contains("as the detect role (no OTLP receivers)");
            if ok
                && (!receives
                    || (std::net::TcpStream::connect(self.otlp).is_ok()
                        && std::net::TcpStream::connect(self.grpc).is_ok()))
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server did not become ready; log:\n{}", self.log_text());
    }

    pub fn traces_url(&self) -> String {
        format!("http://{}/v1/traces", self.otlp)
    }

    /// Where an OTLP/gRPC exporter sends (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// The text of `/metrics`.
    pub fn metrics(&self) -> String {
        reqwest_blocking::blocking::get(format!("http://{}/metrics", self.http))
            .unwrap()
            .text()
            .unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then wait for a clean exit (which flushes the store).
    pub fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "serve exited with {status}; log:\n{}",
                    self.log_text()
                );
                return self.log_text();
            }
            assert!(
                Instant::now() < deadline,
                "serve did not stop; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: no flush, no goodbye.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every stored span, collected.
pub fn spans(data_dir: &Path) -> DataFrame {
    Reader::open(data_dir)
        .unwrap()
        .collect_spans(.., |lf| lf)
        .unwrap()
}

/// One stored span's string columns, keyed by `trace_id/span_id`.
pub fn rows_by_key(df: &DataFrame, columns: &[&str]) -> HashMap<String, Vec<Option<String>>> {
    let t = df.column("trace_id").unwrap().str().unwrap();
    let s = df.column("span_id").unwrap().str().unwrap();
    let cols: Vec<Column> = columns
        .iter()
        .map(|c| df.column(c).unwrap().cast(&DataType::String).unwrap())
        .collect();
    let mut out = HashMap::new();
    for i in 0..df.height() {
        let key = format!("{}/{}", t.get(i).unwrap(), s.get(i).unwrap());
        let values = cols
            .iter()
            .map(|c| c.str().unwrap().get(i).map(str::to_string))
            .collect();
        assert!(
            out.insert(key.clone(), values).is_none(),
            "span {key} stored twice"
        );
    }
    out
}

/// `stormwatch import` of `paths` into `data`, which must succeed.
pub fn import_files(data: &Path, paths: &[&Path]) -> std::process::Output {
    let mut args = vec![
        "import".to_string(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, &[]);
    assert!(
        out.status.success(),
        "import {paths:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Run the binary to completion.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("STORMWATCH_FAULTS")
        .env("STORMWATCH_RETENTION_DAYS", "0")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run stormwatch")
}

/// One sample of `/metrics` text, by its name with labels as written; 0
/// when absent (a counter not yet incremented).
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The Python interpreter of a venv that `scripts/test.sh` prepared.
pub fn python(var: &str) -> PathBuf {
    let path = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests through scripts/test.sh, which creates the Python venvs")
    });
    let p = PathBuf::from(path);
    assert!(
        p.exists(),
        "{var}={} does not exist; run scripts/py/setup_venvs.sh",
        p.display()
    );
    p
}

/// The columns a manifest entry is checked against, in the order of
/// [`assert_manifest_stored`]'s rows.
pub const MANIFEST_COLUMNS: &[&str] = &[
    "tool_name",
    "error_class",
    "session_id",
    "is_tool_call",
    "service_name",
];

/// Every span of an exporter script's manifest (`{"service", "spans": [{
/// trace_id, span_id, tool_name, error_class, session_id, is_tool_call}]}`)
/// is in `stored` (from [`rows_by_key`] over [`MANIFEST_COLUMNS`]) with
/// that tool, class, session and service. Returns how many were checked.
pub fn assert_manifest_stored(
    what: &str,
    stored: &HashMap<String, Vec<Option<String>>>,
    manifest: &serde_json::Value,
) -> usize {
    let service = manifest["service"].as_str().unwrap();
    let list = manifest["spans"].as_array().unwrap();
    for s in list {
        let key = format!(
            "{}/{}",
            s["trace_id"].as_str().unwrap(),
            s["span_id"].as_str().unwrap()
        );
        let row = stored
            .get(&key)
            .unwrap_or_else(|| panic!("{what}: span {key} ({}) not stored", s["name"]));
        let want = |v: &serde_json::Value| v.as_str().map(str::to_string);
        assert_eq!(row[0], want(&s["tool_name"]), "{what} {key} tool_name");
        assert_eq!(row[1], want(&s["error_class"]), "{what} {key} error_class");
        assert_eq!(row[2], want(&s["session_id"]), "{what} {key} session_id");
        let tool_call = s["is_tool_call"].as_bool().unwrap();
        assert_eq!(
            row[3].as_deref(),
            Some(if tool_call { "true" } else { "false" }),
            "{what} {key} is_tool_call"
        );
        assert_eq!(row[4].as_deref(), Some(service), "{what} {key} service");
    }
    list.len()
}

/// An OTLP/HTTP request that holds `bytes` of the server's in-flight budget:
/// it declares `bytes`, sends all but the last one (a body is charged for
/// what arrived) and stalls. On a server of [`server_with_budget`]
/// (`max_inflight_bytes = bytes`, so no reserve, and no minimum body rate)
/// every other export is refused as overloaded until this is dropped (the
/// body read fails and the permits return), or the server's 30 s body
/// timeout.
pub struct BudgetHold(std::net::TcpStream);

impl BudgetHold {
    pub fn take(server: &Server, bytes: usize) -> BudgetHold {
        let open = || {
            use std::io::Write;
            let mut s = std::net::TcpStream::connect(server.otlp).unwrap();
            write!(
                s,
                "POST /v1/traces HTTP/1.1\r\nhost: {}\r\ncontent-type: application/x-protobuf\r\n\
                 content-length: {bytes}\r\n\r\n",
                server.otlp
            )
            .unwrap();
            s.write_all(&vec![0xffu8; bytes - 1]).unwrap();
            s.flush().unwrap();
            s.set_nonblocking(true).unwrap();
            s
        };
        let mut hold = open();
        // Held once a small request is refused 429 (before that, its
        // undecodable body is a 400 and stores nothing). Were the small one
        // charged while the hold's last bytes arrived, the hold itself is
        // refused (its answer arrives once the server gave up reading its
        // body, 5 s on): take it again. A head start makes that rare.
        std::thread::sleep(Duration::from_millis(100));
        let client = reqwest_blocking::blocking::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = client
                .post(server.traces_url())
                .header("content-type", "application/x-protobuf")
                .body(vec![0xff])
                .send()
                .unwrap()
                .status();
            if status == 429 {
                return BudgetHold(hold);
            }
            assert!(Instant::now() < deadline, "the budget was never held");
            if hold.peek(&mut [0u8; 1]).is_ok() {
                hold = open();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for BudgetHold {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Wait until the `/metrics` sample `series` is at least `n`.
pub fn wait_for_sample(server: &Server, series: &str, n: f64, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let m = server.metrics();
        if sample(&m, series) >= n {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{series} did not reach {n} in {within:?}:\n{m}\nserver log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Remove every `OTEL_*` variable the test's own environment would pass to
/// an exporter: each run starts from none.
pub fn without_otel_env(cmd: &mut std::process::Command) {
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")) {
        cmd.env_remove(k);
    }
}

/// The JSON manifest an exporter script printed, which must have succeeded.
pub fn exporter_manifest(
    what: &str,
    out: &std::process::Output,
    server: &Server,
) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: the exporter failed: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: manifest: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A server whose body cap and in-flight budget are both `budget` bytes
/// (so the budget has no reserve), with no minimum body rate: a
/// [`BudgetHold`] can hold it.
pub fn server_with_budget(dir: &Path, budget: usize) -> (PathBuf, Server) {
    let data = dir.join("data");
    let config = dir.join("stormwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[ingest]\nmax_body_bytes = {budget}\nmax_inflight_bytes = {budget}\n\n\
             [admission]\nmin_body_rate_bytes = 0\n"
        ),
    )
    .unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()], &[]);
    (data, server)
}
