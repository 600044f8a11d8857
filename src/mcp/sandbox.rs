//! Where `query` runs: a worker process (`stormwatch mcp --query-worker`,
//! this same binary), not the server. polars cannot be interrupted and has
//! no memory budget, so a statement the allowlist passes (a join on a key
//! every row shares) could still grow without bound or run on after its
//! answer was given up. In a process of its own it is stopped for real:
//! the server watches the worker's resident set and clock and kills it
//! (SIGKILL) past either limit, and the worker watches itself the same way
//! (so it ends even if the server is gone). The query slot is held until
//! the worker has exited. The worker reads the data directory itself,
//! through a `Reader`, as any reader in another process does.
//!
//! The resident set is read from `/proc/<pid>/status` (Linux); where there
//! is no `/proc`, only the time limit holds.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::sql::QueryAnswer;
use super::McpError;

/// How often the resident set and the clock are looked at.
const WATCH_EVERY: Duration = Duration::from_millis(5);
/// The most a worker's answer may be (rows are already cut to the
/// character budget, so this is never reached by a well-formed answer).
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// The most of a worker's stderr that is kept, for the failure message.
const MAX_STDERR_BYTES: usize = 16 << 10;

/// A worker's exit status when it stopped itself past its memory limit.
pub const EXIT_MEMORY: i32 = 86;
/// A worker's exit status when it stopped itself past its time limit.
pub const EXIT_TIME: i32 = 87;

/// What one query may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Resident memory of the worker process, its own code included.
    pub memory_bytes: u64,
    /// Wall-clock time from the worker's start.
    pub time: Duration,
}

impl Limits {
    /// `[mcp]`'s `query_memory_mib` and `query_timeout_secs`.
    pub fn from_config(c: &crate::config::McpConfig) -> Limits {
        Limits {
            memory_bytes: c.query_memory_mib << 20,
            time: Duration::from_secs(c.query_timeout_secs),
        }
    }
}

/// What the server sends a worker on its stdin.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub sql: String,
    pub days: Option<u32>,
    pub memory_bytes: u64,
    pub time_ms: u64,
}

/// What a worker answers on its stdout.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    #[serde(rename = "answer")]
    Answer(QueryAnswer),
    /// The query's own error (refused, or failed in polars): said as is.
    #[serde(rename = "error")]
    Error(String),
}

/// Runs queries in worker processes of `exe` over `data_dir`.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub exe: PathBuf,
    pub data_dir: PathBuf,
    pub limits: Limits,
}

/// Why a worker was stopped, or how it ended.
enum End {
    Exited(std::process::ExitStatus),
    Memory(u64),
    Time,
}

impl Sandbox {
    /// Workers of this very binary over `data_dir`.
    pub fn current(data_dir: &Path, limits: Limits) -> Sandbox {
        Sandbox {
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("stormwatch")),
            data_dir: data_dir.to_path_buf(),
            limits,
        }
    }

    /// Run `sql` (checked by the caller) in a worker; blocking, so call it
    /// on a blocking thread. Returns once the worker has exited.
    pub fn run(&self, sql: &str, days: Option<u32>) -> Result<QueryAnswer, McpError> {
        let failed = |what: String| McpError::Refused(format!("query failed: {what}"));
        let request = serde_json::to_vec(&Request {
            sql: sql.to_string(),
            days,
            memory_bytes: self.limits.memory_bytes,
            time_ms: self.limits.time.as_millis() as u64,
        })
        .map_err(|e| failed(format!("encoding the request: {e}")))?;
        let mut child = Command::new(&self.exe)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["mcp", "--query-worker"])
            .env("RUST_LOG", "warn")
            .env_remove("STORMWATCH_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                failed(format!(
                    "starting the query worker {}: {e}",
                    self.exe.display()
                ))
            })?;
        let started = Instant::now();
        let pid = child.id();
        // The request is small: written whole, then stdin closed.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&request);
        }
        let stdout = child
            .stdout
            .take()
            .map(|s| read_capped(s, MAX_ANSWER_BYTES));
        let stderr = child
            .stderr
            .take()
            .map(|s| read_capped(s, MAX_STDERR_BYTES));
        let end = loop {
            match child.try_wait() {
                Ok(Some(status)) => break End::Exited(status),
                Ok(None) => {}
                Err(e) => {
                    stop(&mut child);
                    return Err(failed(format!("waiting for the query worker: {e}")));
                }
            }
            let rss = crate::telemetry::resident_bytes(pid);
            if rss > self.limits.memory_bytes {
                stop(&mut child);
                break End::Memory(rss);
            }
            if started.elapsed() > self.limits.time {
                stop(&mut child);
                break End::Time;
            }
            std::thread::sleep(WATCH_EVERY);
        };
        let out = stdout.map(join).unwrap_or_default();
        let err = stderr.map(join).unwrap_or_default();
        let over_memory = |rss: u64| {
            McpError::Refused(format!(
                "query refused: it needed more than its memory limit ({} MiB; stopped at {} MiB); aggregate sooner, filter by day or tool, or join on a more selective key",
                self.limits.memory_bytes >> 20,
                rss >> 20
            ))
        };
        let over_time = || {
            McpError::Refused(format!(
                "query refused: it ran past its time limit ({} s) and was stopped; aggregate sooner, filter by day or tool, or read fewer days",
                self.limits.time.as_secs()
            ))
        };
        match end {
            End::Memory(rss) => Err(over_memory(rss)),
            End::Time => Err(over_time()),
            End::Exited(status) => match status.code() {
                Some(0) => match serde_json::from_slice::<Reply>(&out) {
                    Ok(Reply::Answer(a)) => Ok(a),
                    Ok(Reply::Error(e)) => Err(McpError::Refused(e)),
                    Err(e) => Err(failed(format!("the worker's answer did not decode ({e})"))),
                },
                Some(EXIT_MEMORY) => Err(over_memory(self.limits.memory_bytes)),
                Some(EXIT_TIME) => Err(over_time()),
                _ => Err(failed(format!(
                    "the query worker ended with {status}{}",
                    last_line(&err).map_or(String::new(), |l| format!(": {l}"))
                ))),
            },
        }
    }
}

/// SIGKILL the worker and reap it.
fn stop(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A thread reading `from` to its end, keeping at most `cap` bytes (the
/// rest is read and dropped, so the writer never blocks on a full pipe).
fn read_capped(
    mut from: impl Read + Send + 'static,
    cap: usize,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 16 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return kept,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
    })
}

fn join(h: std::thread::JoinHandle<Vec<u8>>) -> Vec<u8> {
    h.join().unwrap_or_default()
}

fn last_line(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(400).collect())
}
