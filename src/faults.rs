//! Built-in fault injection, for the tests that watch the retry and recovery
//! paths run: `STORMWATCH_FAULTS="wal_fsync=fail_once,parquet_write=fail:2"`.
//!
//! Actions, each armed for its next N calls (`:N`) or for every call:
//! - `fail`, `fail_once`, `fail:N`: an IO error;
//! - `enospc`, `enospc:N`: "No space left on device" (ENOSPC);
//! - `delay:MS`: every call sleeps MS milliseconds first (a slow disk);
//! - `status:CODE`, `status:CODExN`: an outgoing HTTP request answers CODE
//!   without being sent (`webhook=status:503x2`);
//! - `kill`: SIGKILL the process at a [`kill_point`], for crash tests;
//! - `panic`, `panic:N`: panic at a [`panic_point`] (a bug in a store task).
//!
//! Any action may end in `@N`: the first N-1 calls pass, the N-th is the
//! first one hit (`wal_fsync=fail_once@3`).
//!
//! Points: `wal_write`, `wal_fsync`, `parquet_write`, `sweep`, `readyz_probe`
//! (`/readyz`'s synced write), `webhook`
//! (every alert delivery), `alert_kill_before_send`, `alert_kill_after_send`,
//! `seal_compact_before_commit` (a seal compaction's outputs written, not
//! committed) and `seal_compact_after_commit` (committed, manifest and
//! scratch files not yet seen to), `summary_write` (a sweep writing a day's
//! summary: some of its files written, no manifest yet), `ship` (an ingest
//! node's upload of a flushed part to the shared store),
//! `ship_before_wal_delete` (shipped, the WAL not yet trimmed),
//! `sweep_before_commit` (a sweep inside its state transaction, before it
//! commits), `query_worker` (an MCP query's worker, before it reads);
//! panic points `compact`, `rollup`,
//! `retention` (each maintenance task of the store's flusher) and `flusher`
//! (the flusher's loop itself, outside any guard: the thread dies).
//! Unset, every check is one relaxed atomic load.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static POINTS: OnceLock<Mutex<HashMap<String, Fault>>> = OnceLock::new();

/// What an armed point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Fail,
    NoSpace,
    Delay(Duration),
    Status(u16),
    Kill,
    Panic,
}

/// An armed point: its action, how many more calls it hits (`None`: all),
/// and how many calls pass before it starts (`@N`: from the N-th call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub action: Action,
    pub remaining: Option<u32>,
    pub skip: u32,
}

/// A fault spec's entry that does not parse: the entry, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fault {entry:?}: {problem}")]
pub struct FaultSpecError {
    pub entry: String,
    pub problem: Problem,
}

/// What is wrong with a fault spec's entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("expected point=action, e.g. wal_fsync=fail_once")]
    NoAction,
    #[error("expected a count, got {0:?}")]
    NotACount(String),
    #[error("@N counts calls from 1")]
    FromZero,
    #[error("expected an HTTP status from 100 to 599, got {0:?}")]
    NotAStatus(String),
    #[error("expected fail_once, fail, fail:N, enospc, enospc:N, delay:MS, status:CODE, status:CODExN, kill, panic or panic:N, got {0:?}")]
    UnknownAction(String),
    #[error("{0} does not take that action (IO points {IO_POINTS:?} take fail, enospc and delay; {STATUS_POINTS:?} takes status; {KILL_POINTS:?} take kill; {PANIC_POINTS:?} take panic)")]
    WrongAction(String),
    #[error("no point {point:?}; the points are {known:?}")]
    UnknownPoint {
        point: String,
        known: Vec<&'static str>,
    },
}

fn problem(entry: &str, problem: Problem) -> FaultSpecError {
    FaultSpecError {
        entry: entry.to_string(),
        problem,
    }
}

fn count(entry: &str, n: &str) -> Result<u32, FaultSpecError> {
    n.parse::<u32>()
        .map_err(|_| problem(entry, Problem::NotACount(n.to_string())))
}

fn parse_action(entry: &str, action: &str) -> Result<Fault, FaultSpecError> {
    let (action, skip) = match action.split_once('@') {
        Some((a, n)) => match count(entry, n)? {
            0 => return Err(problem(entry, Problem::FromZero)),
            n => (a, n - 1),
        },
        None => (action, 0),
    };
    let fault = |action, remaining| {
        Ok(Fault {
            action,
            remaining,
            skip,
        })
    };
    let (name, arg) = match action.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (action, None),
    };
    match (name, arg) {
        ("fail_once", None) => fault(Action::Fail, Some(1)),
        ("fail", None) => fault(Action::Fail, None),
        ("fail", Some(n)) => fault(Action::Fail, Some(count(entry, n)?)),
        ("enospc", None) => fault(Action::NoSpace, None),
        ("enospc", Some(n)) => fault(Action::NoSpace, Some(count(entry, n)?)),
        ("kill", None) => fault(Action::Kill, Some(1)),
        ("panic", None) => fault(Action::Panic, None),
        ("panic", Some(n)) => fault(Action::Panic, Some(count(entry, n)?)),
        ("delay", Some(ms)) => fault(
            Action::Delay(Duration::from_millis(count(entry, ms)?.into())),
            None,
        ),
        ("status", Some(spec)) => {
            let (code, times) = match spec.split_once('x') {
                Some((c, n)) => (c, Some(count(entry, n)?)),
                None => (spec, None),
            };
            match code.parse::<u16>() {
                Ok(c) if (100..600).contains(&c) => fault(Action::Status(c), times),
                _ => Err(problem(entry, Problem::NotAStatus(code.to_string()))),
            }
        }
        _ => Err(problem(entry, Problem::UnknownAction(action.to_string()))),
    }
}

/// The points the code checks: IO points (fail, enospc, delay), the one
/// outgoing-request point (status) and the kill points.
const IO_POINTS: [&str; 7] = [
    "wal_write",
    "wal_fsync",
    "parquet_write",
    "sweep",
    "readyz_probe",
    "ship",
    "query_worker",
];
const STATUS_POINTS: [&str; 1] = ["webhook"];
const KILL_POINTS: [&str; 7] = [
    "alert_kill_before_send",
    "alert_kill_after_send",
    "seal_compact_before_commit",
    "seal_compact_after_commit",
    "summary_write",
    "ship_before_wal_delete",
    "sweep_before_commit",
];
const PANIC_POINTS: [&str; 4] = ["compact", "rollup", "retention", "flusher"];

fn check_point(entry: &str, point: &str, action: Action) -> Result<(), FaultSpecError> {
    let ok = match action {
        Action::Fail | Action::NoSpace | Action::Delay(_) => IO_POINTS.contains(&point),
        Action::Status(_) => STATUS_POINTS.contains(&point),
        Action::Kill => KILL_POINTS.contains(&point),
        Action::Panic => PANIC_POINTS.contains(&point),
    };
    if ok {
        return Ok(());
    }
    let known: Vec<&'static str> = IO_POINTS
        .iter()
        .chain(&STATUS_POINTS)
        .chain(&KILL_POINTS)
        .chain(&PANIC_POINTS)
        .copied()
        .collect();
    if known.contains(&point) {
        Err(problem(entry, Problem::WrongAction(point.to_string())))
    } else {
        Err(problem(
            entry,
            Problem::UnknownPoint {
                point: point.to_string(),
                known,
            },
        ))
    }
}

/// Parse a fault spec; returns an error naming the bad entry.
pub fn parse(spec: &str) -> Result<HashMap<String, Fault>, FaultSpecError> {
    let mut points = HashMap::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (point, action) = entry
            .split_once('=')
            .ok_or_else(|| problem(entry, Problem::NoAction))?;
        let fault = parse_action(entry, action)?;
        check_point(entry, point, fault.action)?;
        points.insert(point.to_string(), fault);
    }
    Ok(points)
}

/// Install faults from a spec (the `STORMWATCH_FAULTS` value).
pub fn install(spec: &str) -> Result<(), FaultSpecError> {
    let points = parse(spec)?;
    if points.is_empty() {
        return Ok(());
    }
    tracing::warn!(faults = spec, "fault injection is on");
    let lock = POINTS.get_or_init(|| Mutex::new(HashMap::new()));
    lock.lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(points);
    ACTIVE.store(true, Ordering::Release);
    Ok(())
}

/// Take one hit of `point`'s fault, if it is armed.
fn hit(point: &str) -> Option<Action> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let mut points = POINTS.get()?.lock().unwrap_or_else(|e| e.into_inner());
    let fault = points.get_mut(point)?;
    if fault.skip > 0 {
        fault.skip -= 1;
        return None;
    }
    match &mut fault.remaining {
        Some(0) => None,
        Some(n) => {
            *n -= 1;
            Some(fault.action)
        }
        None => Some(fault.action),
    }
}

/// Fail (or stall) here if a fault is armed for `point`.
pub fn check(point: &str) -> io::Result<()> {
    match hit(point) {
        None | Some(Action::Status(_)) => Ok(()),
        Some(Action::Delay(d)) => {
            std::thread::sleep(d);
            Ok(())
        }
        Some(Action::NoSpace) => Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!("No space left on device (os error 28) (injected fault at {point})"),
        )),
        Some(Action::Fail) | Some(Action::Kill) | Some(Action::Panic) => {
            Err(io::Error::other(format!("injected fault at {point}")))
        }
    }
}

/// The status an outgoing request at `point` should answer without being
/// sent, if a `status:` fault is armed there.
pub fn status(point: &str) -> Option<u16> {
    match hit(point)? {
        Action::Status(code) => Some(code),
        _ => None,
    }
}

/// Die here, as `kill -9` would, if a fault is armed for `point`.
pub fn kill_point(point: &str) {
    if hit(point).is_none() {
        return;
    }
    tracing::warn!(point, "injected fault: killing the process");
    let _ = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    std::process::abort();
}

/// Panic here, as a bug would, if a fault is armed for `point`.
pub fn panic_point(point: &str) {
    if hit(point) == Some(Action::Panic) {
        panic!("injected panic at {point}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_and_bad_ones_are_named() {
        let p = parse(
            "wal_write=fail_once, wal_fsync=fail:2, parquet_write=enospc, sweep=delay:25, \
             webhook=status:503x2, alert_kill_after_send=kill, compact=panic, flusher=panic:1",
        )
        .unwrap();
        let f = |action, remaining| Fault {
            action,
            remaining,
            skip: 0,
        };
        assert_eq!(p["wal_write"], f(Action::Fail, Some(1)));
        assert_eq!(p["wal_fsync"], f(Action::Fail, Some(2)));
        assert_eq!(p["parquet_write"], f(Action::NoSpace, None));
        assert_eq!(
            p["sweep"],
            f(Action::Delay(Duration::from_millis(25)), None)
        );
        assert_eq!(p["webhook"], f(Action::Status(503), Some(2)));
        assert_eq!(p["alert_kill_after_send"], f(Action::Kill, Some(1)));
        assert_eq!(p["compact"], f(Action::Panic, None));
        assert_eq!(p["flusher"], f(Action::Panic, Some(1)));
        assert_eq!(
            parse("webhook=status:429").unwrap()["webhook"],
            f(Action::Status(429), None)
        );
        for (bad, named) in [
            ("wal_fsnyc=fail", "wal_fsnyc"),
            ("wal_fsync=status:503", "does not take"),
            ("webhook=kill", "does not take"),
            ("wal_fsync=panic", "does not take"),
            ("rollup=fail", "does not take"),
            ("x", "point=action"),
            ("sweep=explode", "explode"),
            ("webhook=status:999", "999"),
            ("wal_fsync=fail:many", "many"),
            ("sweep=delay", "delay"),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
        assert!(parse("").unwrap().is_empty());
        let later = parse("wal_fsync=fail_once@3").unwrap()["wal_fsync"];
        assert_eq!(
            (later.action, later.remaining, later.skip),
            (Action::Fail, Some(1), 2)
        );
        assert!(parse("wal_fsync=fail@0")
            .unwrap_err()
            .to_string()
            .contains("@N"));
    }

    /// Unset, nothing is armed: every point passes (this test binary never
    /// installs faults; the process-wide table stays empty).
    #[test]
    fn inert_when_unset() {
        assert!(!ACTIVE.load(Ordering::Relaxed));
        assert!(check("wal_fsync").is_ok());
        assert_eq!(status("webhook"), None);
        kill_point("alert_kill_before_send");
        panic_point("compact");
    }
}
