//! `stormwatch signals list|show|mute|unmute|resolve`: read and change the
//! signals in `state.sqlite`.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::{now_ns, Format, Status};
use crate::signal::StateDb;
use crate::sweep::signal_json;
use crate::time::rfc3339;

/// The state of the store at `data_dir` (which must be a store).
fn state(data_dir: &Path) -> anyhow::Result<StateDb> {
    let reader = crate::store::Reader::open(data_dir)?;
    Ok(StateDb::open(&reader.layout().state_db())?)
}

/// `signals list`: every signal with its state (JSON: an array).
pub fn list(data_dir: &Path, format: Format, out: &mut dyn Write) -> anyhow::Result<Status> {
    let all = state(data_dir)?.list()?;
    if format == Format::Json {
        writeln!(
            out,
            "{:#}",
            serde_json::Value::Array(all.iter().map(signal_json).collect())
        )?;
    } else if all.is_empty() {
        writeln!(out, "no signals yet (run `stormwatch sweep`)")?;
    } else {
        for s in all {
            writeln!(
                out,
                "{}  {:<9}  {}",
                s.draft.id,
                s.state.as_str(),
                s.draft.title
            )?;
        }
    }
    Ok(Status::Success)
}

/// `signals show ID`: title, key, evidence and history.
pub fn show(
    data_dir: &Path,
    id: &str,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let state = state(data_dir)?;
    let s = state.get(id)?;
    let history = state.history(id)?;
    if format == Format::Json {
        let mut v = signal_json(&s);
        v["history"] = history
            .iter()
            .map(|(at, from, to, why)| {
                serde_json::json!({"at": rfc3339(*at), "from": from, "to": to, "reason": why})
            })
            .collect();
        writeln!(out, "{v:#}")?;
        return Ok(Status::Success);
    }
    writeln!(
        out,
        "{}  [{}]  {}",
        s.draft.id,
        s.state.as_str(),
        s.draft.title
    )?;
    writeln!(
        out,
        "key: {}\nfirst seen {}, last seen {}, {} finding(s) on {}",
        s.draft.key,
        rfc3339(s.draft.first_seen_ns),
        rfc3339(s.draft.last_seen_ns),
        s.draft.findings,
        s.draft.days.join(", ")
    )?;
    for e in &s.draft.evidence {
        writeln!(
            out,
            "  trace {}  {} calls, {} failed, {:.1} s wasted",
            e.trace_id, e.calls, e.failures, e.wasted_seconds
        )?;
    }
    for (at, from, to, why) in history {
        writeln!(
            out,
            "  {}  {} -> {}  ({why})",
            rfc3339(at),
            from.as_deref().unwrap_or("-"),
            to
        )?;
    }
    Ok(Status::Success)
}

/// `signals mute ID [--until T | --until-escalates]`; neither: for good.
pub fn mute(
    data_dir: &Path,
    id: &str,
    until: Option<&str>,
    until_escalates: bool,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let mut state = state(data_dir)?;
    let until_ns = until
        .map(crate::time::parse_now)
        .transpose()
        .context("--until")?;
    state.mute(id, until_ns, until_escalates, now_ns())?;
    writeln!(out, "{id} muted")?;
    Ok(Status::Success)
}

/// `signals unmute ID`.
pub fn unmute(data_dir: &Path, id: &str, out: &mut dyn Write) -> anyhow::Result<Status> {
    state(data_dir)?.unmute(id, now_ns())?;
    writeln!(out, "{id} unmuted")?;
    Ok(Status::Success)
}

/// `signals resolve ID`: by hand (a later finding regresses it).
pub fn resolve(data_dir: &Path, id: &str, out: &mut dyn Write) -> anyhow::Result<Status> {
    state(data_dir)?.resolve(id, now_ns())?;
    writeln!(out, "{id} resolved")?;
    Ok(Status::Success)
}
