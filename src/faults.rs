//! Built-in fault injection, for the tests that watch the retry and recovery
//! paths run: `STORMWATCH_FAULTS="wal_fsync=fail_once,parquet_write=fail:2"`.
//! Each point fails its next N calls (`fail_once` = `fail:1`, `fail` = always)
//! with an IO error. A point passed to [`kill_point`] armed with `kill`
//! SIGKILLs the process there, for crash tests
//! (`alert_kill_before_send=kill`). Unset, both are one relaxed atomic load.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static ACTIVE: AtomicBool = AtomicBool::new(false);
static POINTS: OnceLock<Mutex<HashMap<String, Option<u32>>>> = OnceLock::new();

/// Parse a fault spec; returns an error naming the bad entry.
pub fn parse(spec: &str) -> Result<HashMap<String, Option<u32>>, String> {
    let mut points = HashMap::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (point, action) = entry.split_once('=').ok_or_else(|| {
            format!("fault {entry:?}: expected point=action, e.g. wal_fsync=fail_once")
        })?;
        let times = match action {
            "fail_once" | "kill" => Some(1),
            "fail" => None,
            a => match a.strip_prefix("fail:").map(str::parse::<u32>) {
                Some(Ok(n)) => Some(n),
                _ => {
                    return Err(format!(
                        "fault {entry:?}: expected fail_once, fail, fail:N or kill, got {a:?}"
                    ))
                }
            },
        };
        points.insert(point.to_string(), times);
    }
    Ok(points)
}

/// Install faults from a spec (the `STORMWATCH_FAULTS` value).
pub fn install(spec: &str) -> Result<(), String> {
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

/// Fail here if a fault is armed for `point`.
pub fn check(point: &str) -> io::Result<()> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(lock) = POINTS.get() else {
        return Ok(());
    };
    let mut points = lock.lock().unwrap_or_else(|e| e.into_inner());
    match points.get_mut(point) {
        None | Some(Some(0)) => Ok(()),
        Some(remaining) => {
            if let Some(n) = remaining {
                *n -= 1;
            }
            Err(io::Error::other(format!("injected fault at {point}")))
        }
    }
}

/// Die here, as `kill -9` would, if a fault is armed for `point`.
pub fn kill_point(point: &str) {
    if check(point).is_ok() {
        return;
    }
    tracing::warn!(point, "injected fault: killing the process");
    let _ = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    std::process::abort();
}
