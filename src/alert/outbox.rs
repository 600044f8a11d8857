//! The outbox in `state.sqlite`: one row per (grouped message, target),
//! written in the same transaction as the signal state change that caused
//! it, worked by a sender, kept after delivery for `alerts list`. Also what
//! was last told per signal and per incident, and which targets a person
//! must re-enable.
//! Every function takes a `Connection` (a `Transaction` derefs to one) on
//! `state.sqlite` as [`crate::state::open`] opens it: the tables are
//! declared in `crate::state::schema`.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::incidents::IncidentTold;
use super::notify::Told;
use crate::incident::IncidentState;

/// Take the row for one attempt until `until_ns`, unless another sender
/// holds it; true when taken.
pub fn claim(c: &Connection, id: i64, now_ns: i64, until_ns: i64) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE outbox SET lease_until_ns = ?3 WHERE id = ?1 AND status = 'pending' \
         AND (lease_until_ns IS NULL OR lease_until_ns <= ?2)",
        params![id, now_ns, until_ns],
    )? == 1)
}

/// One outbox row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub id: i64,
    pub webhook_id: String,
    pub target: String,
    pub signals: String,
    #[serde(skip)]
    pub body: String,
    pub created_ns: i64,
    pub attempts: u32,
    pub next_at_ns: i64,
    pub status: String,
    pub last_error: Option<String>,
    pub done_ns: Option<i64>,
}

const COLUMNS: &str =
    "id, webhook_id, target, signals, body, created_ns, attempts, next_at_ns, status, last_error, done_ns";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        webhook_id: r.get(1)?,
        target: r.get(2)?,
        signals: r.get(3)?,
        body: r.get(4)?,
        created_ns: r.get(5)?,
        attempts: r.get::<_, i64>(6)?.max(0) as u32,
        next_at_ns: r.get(7)?,
        status: r.get(8)?,
        last_error: r.get(9)?,
        done_ns: r.get(10)?,
    })
}

/// A new idempotency key: `msg_` and 128 random-enough bits (the clock,
/// the row's content and a process counter through xxh3).
fn webhook_id(target: &str, body: &str, now_ns: i64) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let seed = format!("{target}\0{now_ns}\0{n}\0{}\0{body}", std::process::id());
    format!("msg_{:032x}", xxhash_rust::xxh3::xxh3_128(seed.as_bytes()))
}

/// Queue a message for `target`; its webhook id.
pub fn enqueue(
    c: &Connection,
    target: &str,
    signals: &[String],
    body: &str,
    now_ns: i64,
) -> rusqlite::Result<String> {
    let id = webhook_id(target, body, now_ns);
    c.execute(
        "INSERT INTO outbox (webhook_id, target, signals, body, created_ns, next_at_ns, status) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, 'pending')",
        params![id, target, signals.join(","), body, now_ns],
    )?;
    Ok(id)
}

/// Outbox rows by target and status, for `/metrics`.
pub fn counts(c: &Connection) -> rusqlite::Result<Vec<(String, String, u64)>> {
    let mut stmt = c.prepare(
        "SELECT target, status, count(*) FROM outbox GROUP BY target, status ORDER BY target, status",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
    })?;
    rows.collect()
}

/// Delete delivered and dead-lettered rows finished before `before_ns`
/// (pending rows are never pruned); how many went.
pub fn prune(c: &Connection, before_ns: i64) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM outbox WHERE status IN ('delivered', 'dead') AND coalesce(done_ns, created_ns) < ?1",
        params![before_ns],
    )
}

/// The oldest pending row of `target`, among rows up to `upto`.
pub fn next_pending(c: &Connection, target: &str, upto: i64) -> rusqlite::Result<Option<Row>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM outbox WHERE target = ?1 AND status = 'pending' AND id <= ?2 ORDER BY id LIMIT 1"),
        params![target, upto],
        row,
    )
    .optional()
}

pub fn get(c: &Connection, id: i64) -> rusqlite::Result<Option<Row>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM outbox WHERE id = ?1"),
        params![id],
        row,
    )
    .optional()
}

/// Every row, newest first, at most `limit`.
pub fn list(c: &Connection, limit: usize) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {COLUMNS} FROM outbox ORDER BY id DESC LIMIT ?1"
    ))?;
    let rows = stmt.query_map(params![limit as i64], row)?;
    rows.collect()
}

/// A failed attempt that will be retried at `next_at_ns`.
pub fn retry_later(
    c: &Connection,
    id: i64,
    attempts: u32,
    next_at_ns: i64,
    error: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE outbox SET attempts = ?2, next_at_ns = ?3, last_error = ?4, lease_until_ns = NULL WHERE id = ?1",
        params![id, attempts, next_at_ns, error],
    )?;
    Ok(())
}

/// Delivered, or dead-lettered: no more attempts.
pub fn finish(
    c: &Connection,
    id: i64,
    attempts: u32,
    status: &str,
    error: Option<&str>,
    now_ns: i64,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE outbox SET attempts = ?2, status = ?3, last_error = coalesce(?4, last_error), done_ns = ?5, lease_until_ns = NULL WHERE id = ?1",
        params![id, attempts, status, error, now_ns],
    )?;
    Ok(())
}

/// `alerts retry ID`: a dead (or pending) row goes back in the queue with a
/// fresh budget. False when there is no such row or it was delivered.
pub fn requeue(c: &Connection, id: i64, now_ns: i64) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE outbox SET status = 'pending', attempts = 0, created_ns = ?2, next_at_ns = ?2, done_ns = NULL, lease_until_ns = NULL \
         WHERE id = ?1 AND status <> 'delivered'",
        params![id, now_ns],
    )?;
    Ok(n == 1)
}

/// Why `target` is disabled, if it is.
pub fn disabled(c: &Connection, target: &str) -> rusqlite::Result<Option<String>> {
    Ok(c.query_row(
        "SELECT disabled_reason FROM alert_targets WHERE name = ?1",
        params![target],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()?
    .flatten())
}

pub fn disable(c: &Connection, target: &str, reason: &str, now_ns: i64) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO alert_targets (name, disabled_reason, disabled_ns) VALUES (?1, ?2, ?3) \
         ON CONFLICT(name) DO UPDATE SET disabled_reason = excluded.disabled_reason, disabled_ns = excluded.disabled_ns",
        params![target, reason, now_ns],
    )?;
    Ok(())
}

/// `alerts enable TARGET`; false when it was not disabled. Its queued
/// messages get a fresh age budget: the time spent disabled is not theirs.
pub fn enable(c: &Connection, target: &str, now_ns: i64) -> rusqlite::Result<bool> {
    let enabled = c.execute(
        "UPDATE alert_targets SET disabled_reason = NULL, disabled_ns = NULL WHERE name = ?1 AND disabled_reason IS NOT NULL",
        params![target],
    )? == 1;
    if enabled {
        c.execute(
            "UPDATE outbox SET created_ns = ?2, next_at_ns = ?2 WHERE target = ?1 AND status = 'pending'",
            params![target, now_ns],
        )?;
    }
    Ok(enabled)
}

/// What was last told about each signal.
pub fn told(c: &Connection) -> rusqlite::Result<std::collections::BTreeMap<String, Told>> {
    let mut stmt =
        c.prepare("SELECT signal_id, last_ns, last_fire_ns, findings, quiet FROM alert_told")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            Told {
                last_ns: r.get(1)?,
                last_fire_ns: r.get(2)?,
                findings: r.get::<_, i64>(3)?.max(0) as u64,
                quiet: r.get::<_, i64>(4)? != 0,
            },
        ))
    })?;
    rows.collect()
}

pub fn remember(c: &Connection, id: &str, t: &Told) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO alert_told (signal_id, last_ns, last_fire_ns, findings, quiet) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT(signal_id) DO UPDATE SET last_ns = excluded.last_ns, last_fire_ns = excluded.last_fire_ns, \
         findings = excluded.findings, quiet = excluded.quiet",
        params![id, t.last_ns, t.last_fire_ns, t.findings as i64, t.quiet as i64],
    )?;
    Ok(())
}

/// What was last told about each incident.
pub fn incident_told(
    c: &Connection,
) -> rusqlite::Result<std::collections::BTreeMap<String, IncidentTold>> {
    let mut stmt = c.prepare(
        "SELECT incident_id, last_ns, last_fire_ns, findings, severity, state, quiet FROM alert_incident_told",
    )?;
    let rows = stmt.query_map([], |r| {
        let severity: String = r.get(4)?;
        let state: String = r.get(5)?;
        Ok((
            r.get::<_, String>(0)?,
            IncidentTold {
                last_ns: r.get(1)?,
                last_fire_ns: r.get(2)?,
                findings: r.get::<_, i64>(3)?.max(0) as u64,
                severity: match severity.as_str() {
                    "critical" => crate::signal::Severity::Critical,
                    "warning" => crate::signal::Severity::Warning,
                    _ => crate::signal::Severity::Info,
                },
                state: IncidentState::parse(&state).unwrap_or(IncidentState::Open),
                quiet: r.get::<_, i64>(6)? != 0,
            },
        ))
    })?;
    rows.collect()
}

pub fn remember_incident(c: &Connection, id: &str, t: &IncidentTold) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO alert_incident_told (incident_id, last_ns, last_fire_ns, findings, severity, state, quiet) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT(incident_id) DO UPDATE SET last_ns = excluded.last_ns, last_fire_ns = excluded.last_fire_ns, \
         findings = excluded.findings, severity = excluded.severity, state = excluded.state, quiet = excluded.quiet",
        params![
            id,
            t.last_ns,
            t.last_fire_ns,
            t.findings as i64,
            t.severity.as_str(),
            t.state.as_str(),
            t.quiet as i64
        ],
    )?;
    Ok(())
}
