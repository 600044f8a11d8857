//! The MCP `query` sandbox under the attacks that broke it (issue 25): a
//! CTE that shadows a file function to read another store's Parquet, the
//! error text as an existence oracle, `lpad` to a billion characters, a
//! cross join, a join that passes the allowlist but multiplies every row,
//! and a query that runs on past its time limit — each against the real
//! server, in a memory cgroup, whose own resident set stays small.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{import_files, repo, Server};
use crate::mcp_http::{call, TOKEN};
use crate::memcap::{peak_rss, MemCap};

/// The server's peak resident set under every attack here stays below this
/// (the demo server alone peaks at ~150 MiB).
const SERVER_PEAK: u64 = 400 << 20;

fn server(dir: &Path, config: &str, env: &[(&str, &str)]) -> Server {
    let cfg = dir.join("stormwatch.toml");
    std::fs::write(&cfg, config).unwrap();
    Server::start(
        &dir.join("data"),
        &[
            "--demo",
            "--api-token",
            TOKEN,
            "--config",
            cfg.to_str().unwrap(),
        ],
        env,
    )
}

fn text(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn query(s: &Server, sql: &str, days: u32) -> Value {
    call(s, "query", json!({"sql": sql, "days": days}))
}

/// The server's query workers still running (its child processes).
fn workers(server: &Server) -> Vec<String> {
    let pid = server.child.id();
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(children.split_whitespace().map(String::from));
    }
    out
}

#[test]
fn a_shadowing_cte_cannot_read_another_store_and_refusals_are_no_oracle() {
    let dir = tempfile::tempdir().unwrap();
    // Another store, on the same machine, with spans of its own.
    let other = dir.path().join("other");
    import_files(&other, &[&repo().join("fixtures/storms_jul29.json")]);
    let other_glob = format!("{}/spans/*/*.parquet", other.display());
    assert!(
        glob::glob(&other_glob).unwrap().count() > 0,
        "the other store has no parts"
    );
    let s = server(dir.path(), "", &[]);
    let cap = MemCap::new(4 << 30);
    cap.add(s.child.id());
    let attacks = [
        format!("WITH read_parquet AS (SELECT 1 AS x) SELECT name, trace_id FROM read_parquet('{other_glob}')"),
        format!("SELECT count(*) FROM read_parquet('{other_glob}')"),
        format!(
            "WITH t AS (SELECT 1 AS x) SELECT count(*) FROM t('{}/spans/*/*.parquet')",
            dir.path().display()
        ),
        format!("SELECT * FROM spans('{other_glob}')"),
        format!("SELECT * FROM (SELECT * FROM read_csv('{}')) AS x", "/etc/passwd"),
        format!("SELECT read_parquet('{other_glob}')"),
    ];
    for sql in &attacks {
        let r = query(&s, sql, 1);
        assert_eq!(r["isError"], true, "{sql}: {r}");
        let t = text(&r);
        assert!(t.starts_with("query refused"), "{sql}: {t}");
        assert!(
            !t.contains("PAR1") && !t.contains("No such file"),
            "{sql}: {t}"
        );
    }
    // The same refusal whether the file exists or not: no existence oracle.
    let exists = text(&query(
        &s,
        &format!("WITH read_parquet AS (SELECT 1 AS x) SELECT * FROM read_parquet('{other_glob}')"),
        1,
    ));
    let absent = text(&query(
        &s,
        "WITH read_parquet AS (SELECT 1 AS x) SELECT * FROM read_parquet('/no/such/dir/*.parquet')",
        1,
    ));
    assert_eq!(exists, absent);
    // What is allowed still answers, from this server's own store.
    let r = query(&s, "SELECT count(*) AS n FROM spans", 7);
    assert_ne!(r["isError"], true, "{r}");
    assert!(
        r["structuredContent"]["rows"][0][0].as_u64().unwrap() > 0,
        "{r}"
    );
    assert_eq!(cap.oom_kills(), 0);
}

#[test]
fn string_growers_and_cross_joins_are_refused_before_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), "", &[]);
    let cap = MemCap::new(4 << 30);
    cap.add(s.child.id());
    for (sql, says) in [
        ("SELECT lpad('x', 1000000000, 'y')", "at most 10000"),
        (
            "SELECT count(*) FROM spans a CROSS JOIN spans b",
            "CROSS JOIN is not allowed",
        ),
        (
            "SELECT count(*) FROM spans a, spans b",
            "cross join, which is not allowed",
        ),
    ] {
        let started = Instant::now();
        let r = query(&s, sql, 7);
        assert_eq!(r["isError"], true, "{sql}: {r}");
        assert!(text(&r).contains(says), "{sql}: {}", text(&r));
        assert!(started.elapsed() < Duration::from_secs(2), "{sql}: ran");
    }
    assert!(
        peak_rss(s.child.id()) < SERVER_PEAK,
        "server peak {} MiB",
        peak_rss(s.child.id()) >> 20
    );
    assert_eq!(cap.oom_kills(), 0);
}

#[test]
fn a_query_past_its_memory_limit_is_stopped_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(
        dir.path(),
        "[mcp]\nquery_memory_mib = 256\nquery_timeout_secs = 60\n",
        &[],
    );
    let cap = MemCap::new(4 << 30);
    cap.add(s.child.id());
    // Passes the allowlist (equi-joins only), but every span matches every
    // other of its kind, four times over: N⁴ rows, each pair's attributes
    // concatenated.
    let n = query(&s, "SELECT count(*) FROM spans", 7)["structuredContent"]["rows"][0][0]
        .as_u64()
        .unwrap();
    assert!(n >= 50, "the demo's last week has {n} spans");
    let sql = "SELECT max(length(concat(a.attributes, b.attributes, c.name, d.name))) AS m \
               FROM spans a JOIN spans b ON a.kind = b.kind \
               JOIN spans c ON b.kind = c.kind JOIN spans d ON c.kind = d.kind";
    let started = Instant::now();
    let r = query(&s, sql, 7);
    let took = started.elapsed();
    assert_eq!(r["isError"], true, "{r}");
    let t = text(&r);
    assert!(t.contains("memory limit (256 MiB"), "{t}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The server is up and its own memory never held the query's.
    let peak = peak_rss(s.child.id());
    assert!(peak < SERVER_PEAK, "server peak {} MiB", peak >> 20);
    assert_eq!(cap.oom_kills(), 0, "the cgroup's OOM killer acted");
    assert!(
        workers(&s).is_empty(),
        "a worker is left: {:?}",
        workers(&s)
    );
    // The slot is free again: the next query answers at once.
    let r = query(&s, "SELECT count(*) FROM tool_daily", 1);
    assert_ne!(r["isError"], true, "{r}");
    eprintln!(
        "memory attack: refused after {took:?}; server peak RSS {} MiB",
        peak >> 20
    );
}

#[test]
fn a_query_past_its_time_limit_is_killed_and_frees_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    // Every worker sleeps 30 s before it reads anything (a slow query that
    // holds no memory).
    let s = server(
        dir.path(),
        "[mcp]\nquery_timeout_secs = 1\n",
        &[("STORMWATCH_FAULTS", "query_worker=delay:30000")],
    );
    for _ in 0..2 {
        let started = Instant::now();
        let r = query(&s, "SELECT count(*) FROM spans", 1);
        let took = started.elapsed();
        assert_eq!(r["isError"], true, "{r}");
        let t = text(&r);
        // Stopped, not "another query is still running": the slot was freed.
        assert!(t.contains("time limit (1 s) and was stopped"), "{t}");
        assert!(took < Duration::from_secs(4), "took {took:?}");
        assert!(
            workers(&s).is_empty(),
            "a worker is left: {:?}",
            workers(&s)
        );
    }
}
