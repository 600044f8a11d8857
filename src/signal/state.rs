//! Signal state in `state.sqlite`: one row per signal key with its
//! lifecycle (`new` → `ongoing` → `resolved` → `regressed`, or `muted`),
//! and a history of every change. A sweep that sees no new data changes
//! nothing, so running it twice is harmless.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::Serialize;

use super::draft::SignalDraft;
pub use super::ids::{free_id, free_id_with};
use super::lifecycle::{transition, Decision, Stored, Sweep};
pub use super::lifecycle::{Lifecycle, Quiet};

/// A signal with its lifecycle, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signal {
    #[serde(flatten)]
    pub draft: SignalDraft,
    pub state: Lifecycle,
    pub muted_until_ns: Option<i64>,
    pub mute_until_escalates: bool,
}

/// One change of a signal's state: (at ns, from, to, reason).
pub type HistoryEntry = (i64, Option<String>, String, String);

/// What a sweep changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepOutcome {
    /// (id, from, to); `from` is `None` for a signal seen for the first time.
    pub changes: Vec<(String, Option<Lifecycle>, Lifecycle)>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("signal state {path}: {source}")]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("no signal {0} (see `stormwatch signals list`)")]
    NoSuchSignal(String),
    #[error("signal state {path}: row {id} is unreadable ({message}); move the file aside to start afresh")]
    Corrupt {
        path: PathBuf,
        id: String,
        message: String,
    },
    /// A file whose schema could not be brought to this build's.
    #[error(transparent)]
    File(crate::state::StateFileError),
}

impl From<crate::state::StateFileError> for StateError {
    /// A file that does not open reads as it always did ("signal state …").
    fn from(e: crate::state::StateFileError) -> StateError {
        match e {
            crate::state::StateFileError::Open { path, source } => StateError::Db { path, source },
            other => StateError::File(other),
        }
    }
}

/// The state database.
pub struct StateDb {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
}

impl StateDb {
    /// Open `state.sqlite` (through [`crate::state::open`]: its schema
    /// current), waiting up to 30 s for another writer.
    pub fn open(path: &Path) -> Result<StateDb, StateError> {
        let conn = crate::state::open(path, std::time::Duration::from_secs(30))?;
        Ok(StateDb {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The connection, for the stages that keep tables of their own in
    /// `state.sqlite` (incidents, the outbox) and read them outside a sweep.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn db<T>(&self, r: rusqlite::Result<T>) -> Result<T, StateError> {
        r.map_err(|source| StateError::Db {
            path: self.path.clone(),
            source,
        })
    }

    fn rows(&self, filter: &str, arg: &str) -> Result<Vec<Stored>, StateError> {
        load_rows(&self.conn, &self.path, filter, arg)
    }

    /// SQLite's `data_version`: it changes when another connection commits
    /// to the database, so a reader that keeps this connection knows when
    /// what it read went stale.
    pub fn data_version(&self) -> Result<i64, StateError> {
        self.db(self.conn.query_row("PRAGMA data_version", [], |r| r.get(0)))
    }

    /// How many signals are in each state, for `/metrics`.
    pub fn counts_by_state(&self) -> Result<Vec<(String, u64)>, StateError> {
        let mut stmt = self.db(self
            .conn
            .prepare("SELECT state, count(*) FROM signals GROUP BY state ORDER BY state"))?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        });
        self.db(rows.and_then(|r| r.collect()))
    }

    /// Every signal, by id.
    pub fn list(&self) -> Result<Vec<Signal>, StateError> {
        Ok(self.rows("", "")?.into_iter().map(to_signal).collect())
    }

    pub fn get(&self, id: &str) -> Result<Signal, StateError> {
        self.rows("WHERE id = ?1", id)?
            .into_iter()
            .next()
            .map(to_signal)
            .ok_or_else(|| StateError::NoSuchSignal(id.to_string()))
    }

    /// Apply one sweep's drafts at `now_ns`. `horizon_ns` is the newest data
    /// the sweep saw: only a sweep over newer data counts towards resolving.
    pub fn apply(
        &mut self,
        drafts: &[SignalDraft],
        now_ns: i64,
        quiet: &Quiet,
    ) -> Result<SweepOutcome, StateError> {
        self.apply_then(drafts, now_ns, quiet, |_, _| Ok(()))
    }

    /// [`apply`](Self::apply), then `after` in the same transaction (the
    /// alerter queues its messages there, so a state change and its
    /// notification commit together or not at all).
    pub fn apply_then<E>(
        &mut self,
        drafts: &[SignalDraft],
        now_ns: i64,
        quiet: &Quiet,
        after: impl FnOnce(&Connection, &SweepOutcome) -> Result<(), E>,
    ) -> Result<SweepOutcome, E>
    where
        E: From<StateError>,
    {
        let path = self.path.clone();
        let err = move |source| StateError::Db {
            path: path.clone(),
            source,
        };
        // IMMEDIATE: take the write lock before reading, so a concurrent
        // writer (serve's alert sender, another sweep) waits for us or we
        // for it, and what we read is what we update.
        let state_path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err.clone())?;
        let existing = load_rows(&tx, &state_path, "", "")?;
        let last_horizon: Option<i64> = tx
            .query_row("SELECT max(horizon_ns) FROM sweeps", [], |r| r.get(0))
            .map_err(err.clone())?;
        let horizon_ns = quiet.horizon_ns;
        let fresh = last_horizon.is_none_or(|h| horizon_ns > h);
        let sweep = Sweep {
            now_ns,
            quiet,
            fresh,
        };
        let mut out = SweepOutcome::default();
        for d in drafts {
            match existing.iter().find(|r| r.draft.key == d.key) {
                None => insert_new(&tx, d, now_ns, &mut out).map_err(err.clone())?,
                Some(row) => write(&tx, row, &transition(row, Some(d), sweep), now_ns, &mut out)
                    .map_err(err.clone())?,
            }
        }
        // Signals this sweep found nothing for.
        for row in existing
            .iter()
            .filter(|r| !drafts.iter().any(|d| d.key == r.draft.key))
        {
            write(&tx, row, &transition(row, None, sweep), now_ns, &mut out)
                .map_err(err.clone())?;
        }
        if fresh {
            tx.execute(
                "INSERT INTO sweeps (at_ns, horizon_ns, signals, changes) VALUES (?1, ?2, ?3, ?4)",
                params![
                    now_ns,
                    horizon_ns,
                    drafts.len() as i64,
                    out.changes.len() as i64
                ],
            )
            .map_err(err.clone())?;
        }
        after(&tx, &out)?;
        tx.commit().map_err(err)?;
        Ok(out)
    }

    /// The history of one signal: (at, from, to, reason).
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, StateError> {
        let mut stmt = self.db(self.conn.prepare("SELECT at_ns, from_state, to_state, reason FROM signal_history WHERE id = ?1 ORDER BY rowid"))?;
        self.db(stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|m| m.collect()))
    }
}

/// Record a state change in the history and in `out`.
fn record(
    tx: &Connection,
    id: &str,
    from: Option<Lifecycle>,
    to: Lifecycle,
    reason: &str,
    now_ns: i64,
    out: &mut SweepOutcome,
) -> rusqlite::Result<()> {
    out.changes.push((id.to_string(), from, to));
    tx.execute(
        "INSERT INTO signal_history (id, at_ns, from_state, to_state, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, now_ns, from.map(Lifecycle::as_str), to.as_str(), reason],
    )?;
    Ok(())
}

/// A key seen for the first time: its id (checked in this transaction,
/// against every id stored and every id this sweep has given out already)
/// and its row, `new`.
fn insert_new(
    tx: &Connection,
    d: &SignalDraft,
    now_ns: i64,
    out: &mut SweepOutcome,
) -> rusqlite::Result<()> {
    let body = serde_json::to_string(d).unwrap_or_default();
    let id = free_id(&d.key, |id| {
        tx.prepare_cached("SELECT 1 FROM signals WHERE id = ?1")?
            .exists([id])
    })?;
    tx.execute(
        "INSERT INTO signals (id, key, state, draft, findings, last_seen_ns) VALUES (?1, ?2, 'new', ?3, ?4, ?5)",
        params![id, d.key, body, d.findings as i64, d.last_seen_ns],
    )?;
    record(tx, &id, None, Lifecycle::New, "first finding", now_ns, out)
}

/// Write what [`transition`] decided for `row`.
fn write(
    tx: &Connection,
    row: &Stored,
    decision: &Decision,
    now_ns: i64,
    out: &mut SweepOutcome,
) -> rusqlite::Result<()> {
    if let Some((from, to, reason)) = decision.change(row) {
        record(tx, &row.id, Some(from), to, reason, now_ns, out)?;
    }
    match decision {
        Decision::Keep => {}
        Decision::Seen(next) => {
            let body = serde_json::to_string(&next.draft).unwrap_or_default();
            let unmute = next.state != Lifecycle::Muted;
            tx.execute(
                "UPDATE signals SET state = ?2, draft = ?3, findings = ?4, last_seen_ns = ?5, clean_sweeps = ?6, resolved_at_ns = ?7,
                   muted_until_ns = CASE WHEN ?8 THEN NULL ELSE muted_until_ns END,
                   mute_until_escalates = CASE WHEN ?8 THEN 0 ELSE mute_until_escalates END
                 WHERE id = ?1",
                params![row.id, next.state.as_str(), body, next.draft.findings as i64, next.draft.last_seen_ns, next.clean_sweeps, next.resolved_at_ns, unmute],
            )?;
        }
        Decision::MuteExpired => {
            tx.execute(
                "UPDATE signals SET state = 'ongoing', clean_sweeps = 0, muted_until_ns = NULL, mute_until_escalates = 0 WHERE id = ?1",
                params![row.id],
            )?;
        }
        Decision::Quiet {
            clean_sweeps,
            resolved,
        } => {
            let state = if *resolved {
                Lifecycle::Resolved
            } else {
                row.state
            };
            tx.execute(
                "UPDATE signals SET state = ?2, clean_sweeps = ?3, resolved_at_ns = CASE WHEN ?2 = 'resolved' THEN last_seen_ns ELSE resolved_at_ns END WHERE id = ?1",
                params![row.id, state.as_str(), clean_sweeps],
            )?;
        }
    }
    Ok(())
}

fn to_signal(r: Stored) -> Signal {
    let mut draft = r.draft;
    draft.id = r.id;
    Signal {
        draft,
        state: r.state,
        muted_until_ns: r.muted_until_ns,
        mute_until_escalates: r.mute_until_escalates,
    }
}

fn load_rows(
    conn: &Connection,
    path: &Path,
    filter: &str,
    arg: &str,
) -> Result<Vec<Stored>, StateError> {
    let err = |source| StateError::Db {
        path: path.to_path_buf(),
        source,
    };
    let sql = format!(
        "SELECT id, state, draft, clean_sweeps, resolved_at_ns, muted_until_ns, mute_until_escalates, mute_escalate_at \
         FROM signals {filter} ORDER BY id"
    );
    let mut stmt = conn.prepare(&sql).map_err(err)?;
    let map = |r: &rusqlite::Row<'_>| {
        let state: String = r.get(1)?;
        let draft: String = r.get(2)?;
        Ok((
            r.get::<_, String>(0)?,
            state,
            draft,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get::<_, i64>(6)?,
            r.get(7)?,
        ))
    };
    let raw: Vec<_> = if filter.is_empty() {
        stmt.query_map([], map)
            .and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(err)?
    } else {
        stmt.query_map([arg], map)
            .and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(err)?
    };
    raw.into_iter()
        .map(|(id, state, draft, clean, resolved, muted, esc, esc_at)| {
            let corrupt = |message: String| StateError::Corrupt {
                path: path.to_path_buf(),
                id: id.clone(),
                message,
            };
            Ok(Stored {
                state: Lifecycle::parse(&state)
                    .ok_or_else(|| corrupt(format!("unknown state {state:?}")))?,
                draft: serde_json::from_str(&draft).map_err(|e| corrupt(e.to_string()))?,
                id,
                clean_sweeps: clean,
                resolved_at_ns: resolved,
                muted_until_ns: muted,
                mute_until_escalates: esc != 0,
                mute_escalate_at: esc_at,
            })
        })
        .collect()
}

/// Every signal as the connection `c` sees it (inside a transaction too).
pub fn signals_in(c: &Connection, path: &Path) -> Result<Vec<Signal>, StateError> {
    Ok(load_rows(c, path, "", "")?
        .into_iter()
        .map(to_signal)
        .collect())
}
