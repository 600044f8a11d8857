//! `stormwatch alerts list|flush|retry|test|enable`: the alert outbox in
//! `state.sqlite`, from the command line. They run outside any async
//! runtime, SQLite calls and all, except `flush` and `test`, which start a
//! current-thread runtime for the sender.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use rusqlite::Connection;

use super::{Format, Status};
use crate::alert::commands::{list_text, open, sender, test_body};
use crate::alert::{outbox, policy::Verdict, AlertConfig, Clock, Target};

/// The outbox at `state_db`, opened (and created) for a command.
fn db(state_db: &Path) -> anyhow::Result<Connection> {
    open(state_db).with_context(|| format!("opening {}", state_db.display()))
}

/// Every configured target with its URL and secret resolved from the
/// environment.
fn targets(cfg: &AlertConfig) -> anyhow::Result<Vec<Target>> {
    cfg.targets(|k| std::env::var(k).ok())
        .map_err(anyhow::Error::msg)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `alerts list`: the newest `limit` outbox rows.
pub fn list(
    state_db: &Path,
    limit: usize,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let rows = outbox::list(&db(state_db)?, limit)?;
    if format == Format::Json {
        writeln!(out, "{:#}", serde_json::to_value(&rows)?)?;
    } else {
        out.write_all(list_text(&rows).as_bytes())?;
    }
    Ok(Status::Success)
}

/// `alerts flush`: deliver what the outbox holds, waiting at most
/// `wait_secs` for retries; a failure when a message went dead.
pub fn flush(
    state_db: &Path,
    cfg: &AlertConfig,
    wait_secs: u64,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let db = db(state_db)?;
    let targets = targets(cfg)?;
    if targets.is_empty() {
        writeln!(
            out,
            "no alert targets configured ([[alert.targets]] in the config file)"
        )?;
        return Ok(Status::Success);
    }
    let s = sender(db, cfg);
    runtime()?.block_on(crate::alert::commands::flush(
        &s,
        &targets,
        Duration::from_secs(wait_secs),
    ))?;
    let counts = s.stats.snapshot();
    let dead = counts
        .iter()
        .any(|(_, o, _)| matches!(*o, "dead" | "gave_up"));
    for (t, o, n) in counts {
        writeln!(out, "{t}: {n} {o}")?;
    }
    let db = s.db.lock().unwrap_or_else(|e| e.into_inner());
    let pending: i64 = db.query_row(
        "SELECT count(*) FROM outbox WHERE status = 'pending'",
        [],
        |r| r.get(0),
    )?;
    if pending > 0 {
        writeln!(
            out,
            "{pending} message(s) still queued (retries not yet due, or a disabled target)"
        )?;
    }
    Ok(if dead {
        Status::Failure
    } else {
        Status::Success
    })
}

/// `alerts retry ID`: queue a dead-lettered message again.
pub fn retry(state_db: &Path, id: i64, out: &mut dyn Write) -> anyhow::Result<Status> {
    let db = db(state_db)?;
    if outbox::requeue(&db, id, Clock::System.now_ns())? {
        writeln!(out, "message {id} queued again")?;
        Ok(Status::Success)
    } else {
        anyhow::bail!("no undelivered outbox message {id} (see `stormwatch alerts list`)")
    }
}

/// `alerts enable TARGET`: re-enable a target disabled because its
/// endpoint was gone.
pub fn enable(state_db: &Path, target: &str, out: &mut dyn Write) -> anyhow::Result<Status> {
    if outbox::enable(&db(state_db)?, target, Clock::System.now_ns())? {
        writeln!(
            out,
            "{target} enabled; its queued messages go out on the next flush"
        )?;
    } else {
        writeln!(out, "{target} was not disabled")?;
    }
    Ok(Status::Success)
}

/// `alerts test TARGET`: send the sample message now; a failure when it
/// was not delivered.
pub fn test(
    state_db: &Path,
    cfg: &AlertConfig,
    public_url: Option<&str>,
    target: &str,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let db = db(state_db)?;
    let all = targets(cfg)?;
    let Some(t) = all.iter().find(|t| t.name == target) else {
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        anyhow::bail!(
            "no alert target {target:?}; configured: {}",
            names.join(", ")
        );
    };
    let s = sender(db, cfg);
    let body = test_body(
        t,
        public_url.unwrap_or(&cfg.public_url),
        cfg.evidence_per_signal,
        s.clock.now_ns(),
    );
    let id = format!("msg_test_{:016x}", s.clock.now_ns());
    let answer = runtime()?.block_on(s.attempt(t, &id, &body));
    match answer.verdict {
        Verdict::Delivered => {
            writeln!(
                out,
                "{target}: delivered (HTTP {})",
                answer.status.unwrap_or(0)
            )?;
            Ok(Status::Success)
        }
        other => {
            writeln!(out, "{target}: not delivered: {other}")?;
            Ok(Status::Failure)
        }
    }
}
