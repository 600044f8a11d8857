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

/// A `stormwatch serve` process on free ports.
pub struct Server {
    pub child: Child,
    pub otlp: SocketAddr,
    pub http: SocketAddr,
    pub log: PathBuf,
}

impl Server {
    pub fn start(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let otlp = free_addr();
        let http = free_addr();
        let log = data_dir.with_extension(format!("{}.log", otlp.port()));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args([
            "serve",
            "--otlp-addr",
            &otlp.to_string(),
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
        let server = Server {
            child,
            otlp,
            http,
            log,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest_blocking::blocking::Client::new();
        while Instant::now() < deadline {
            let ok = client
                .get(format!("http://{}/healthz", self.http))
                .timeout(Duration::from_millis(500))
                .send()
                .is_ok_and(|r| r.status().is_success());
            if ok && std::net::TcpStream::connect(self.otlp).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server did not become ready; log:\n{}", self.log_text());
    }

    pub fn traces_url(&self) -> String {
        format!("http://{}/v1/traces", self.otlp)
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
