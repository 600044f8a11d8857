//! Signal state in `state.sqlite`: one row per signal key with its
//! lifecycle (`new` → `ongoing` → `resolved` → `regressed`, or `muted`),
//! and a history of every change. A sweep that sees no new data changes
//! nothing, so running it twice is harmless.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::Serialize;

use super::group::SignalDraft;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    New,
    Ongoing,
    Resolved,
    Regressed,
    Muted,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::New => "new",
            Lifecycle::Ongoing => "ongoing",
            Lifecycle::Resolved => "resolved",
            Lifecycle::Regressed => "regressed",
            Lifecycle::Muted => "muted",
        }
    }

    pub fn parse(s: &str) -> Option<Lifecycle> {
        [
            Lifecycle::New,
            Lifecycle::Ongoing,
            Lifecycle::Resolved,
            Lifecycle::Regressed,
            Lifecycle::Muted,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
    }

    pub fn is_open(self) -> bool {
        matches!(
            self,
            Lifecycle::New | Lifecycle::Ongoing | Lifecycle::Regressed
        )
    }
}

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

/// When an open signal that this sweep found nothing new for resolves
/// (docs/alerting.md, Lifecycle): by the data's clock, never by counting
/// sweeps, so a sweep every five minutes and one a day agree, and a sweep
/// that saw no new data changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quiet {
    /// The newest span end the sweep saw.
    pub horizon_ns: i64,
    /// Daily rules: complete days after the last flagged one.
    pub after_days: i64,
    /// Per-turn rules: hours of the tool's own traffic after the last finding.
    pub after_hours: i64,
    /// Per tool, the latest call (start) of a settled turn the sweep saw.
    pub traffic: std::collections::BTreeMap<String, i64>,
    /// Per tool, the end of its latest successful call (the rollup's):
    /// a `no_success` signal resolves as soon as one follows its last day.
    pub last_ok: std::collections::BTreeMap<String, i64>,
}

impl Quiet {
    /// Whether a signal last seen as `draft` has been quiet long enough.
    pub fn resolves(&self, draft: &SignalDraft) -> bool {
        use super::group::Kind;
        match draft.kind {
            Kind::NoSuccess
                // A flagged day had no success: one at or after its start
                // is the recovery.
                if self.last_ok.get(&draft.tool).is_some_and(|&ok| ok >= draft.last_seen_ns) =>
            {
                true
            }
            k if k.is_daily() => {
                let last = crate::model::day_of_ns(draft.last_seen_ns);
                let through = crate::model::day_of_ns(self.horizon_ns);
                // Days strictly between the last flagged day and the day the
                // data reaches are complete, and were judged clean.
                i64::from(through) - i64::from(last) > self.after_days.max(1)
            }
            _ => {
                let Some(&seen) = self.traffic.get(&draft.tool) else {
                    return false;
                };
                let quiet_ns = seen.min(self.horizon_ns) - draft.last_seen_ns;
                quiet_ns >= self.after_hours.max(1).saturating_mul(3_600_000_000_000)
            }
        }
    }
}

/// The id a new key gets: `SW-` and four letters from its hash, one more
/// letter for as long as that id is taken (`taken` says so). Existing ids
/// never change; two keys can never share one.
pub fn free_id(
    key: &str,
    taken: impl FnMut(&str) -> rusqlite::Result<bool>,
) -> rusqlite::Result<String> {
    free_id_with("SW-", key, taken)
}

/// [`free_id`] for ids of another prefix (incidents' `INC-`): the prefix
/// and 4 to 14 consonants of the key's hash, the first not `taken`.
pub fn free_id_with(
    prefix: &str,
    key: &str,
    mut taken: impl FnMut(&str) -> rusqlite::Result<bool>,
) -> rusqlite::Result<String> {
    for letters in 4..=14 {
        let id = format!("{prefix}{}", &super::group::short_id_of(key, letters)[3..]);
        if !taken(&id)? {
            return Ok(id);
        }
    }
    // 14 letters of a 64-bit hash are all of it: fall back to the key's hash in hex.
    Ok(format!(
        "{prefix}{:016X}",
        xxhash_rust::xxh3::xxh3_64(key.as_bytes())
    ))
}

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
    /// The sweep may no longer commit (it lost the detect lease).
    #[error("{0}")]
    Fenced(String),
    #[error("{0}")]
    Incident(String),
    #[error(transparent)]
    File(#[from] crate::state::StateFileError),
}

/// The state database.
pub struct StateDb {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
}

struct Row {
    id: String,
    state: Lifecycle,
    draft: SignalDraft,
    clean_sweeps: i64,
    resolved_at_ns: Option<i64>,
    muted_until_ns: Option<i64>,
    mute_until_escalates: bool,
    mute_escalate_at: Option<i64>,
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

    fn rows(&self, filter: &str, arg: &str) -> Result<Vec<Row>, StateError> {
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
    pub fn apply_then(
        &mut self,
        drafts: &[SignalDraft],
        now_ns: i64,
        quiet: &Quiet,
        after: impl FnOnce(&Connection, &SweepOutcome) -> Result<(), StateError>,
    ) -> Result<SweepOutcome, StateError> {
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
        let mut out = SweepOutcome::default();
        let mut change = |tx: &rusqlite::Transaction<'_>,
                          id: &str,
                          from: Option<Lifecycle>,
                          to: Lifecycle,
                          reason: &str| {
            out.changes.push((id.to_string(), from, to));
            tx.execute(
                "INSERT INTO signal_history (id, at_ns, from_state, to_state, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, now_ns, from.map(Lifecycle::as_str), to.as_str(), reason],
            )
        };
        for d in drafts {
            let body = serde_json::to_string(d).unwrap_or_default();
            let Some(row) = existing.iter().find(|r| r.draft.key == d.key) else {
                // Checked in this transaction, against every id stored and
                // every id this sweep has given out already.
                let id = free_id(&d.key, |id| {
                    tx.prepare_cached("SELECT 1 FROM signals WHERE id = ?1")?
                        .exists([id])
                })
                .map_err(err.clone())?;
                tx.execute(
                    "INSERT INTO signals (id, key, state, draft, findings, last_seen_ns) VALUES (?1, ?2, 'new', ?3, ?4, ?5)",
                    params![id, d.key, body, d.findings as i64, d.last_seen_ns],
                )
                .map_err(err.clone())?;
                change(&tx, &id, None, Lifecycle::New, "first finding").map_err(err.clone())?;
                continue;
            };
            // Only a finding later than any seen before is news: a sweep over
            // a shorter window (fewer findings) or the same data is not.
            let newer = d.last_seen_ns > row.draft.last_seen_ns;
            let mut state = row.state;
            let mut clean = row.clean_sweeps;
            let mut resolved_at = row.resolved_at_ns;
            let reason;
            match row.state {
                Lifecycle::Muted => {
                    let expired = row.muted_until_ns.is_some_and(|u| now_ns >= u);
                    let escalated = row.mute_until_escalates
                        && row
                            .mute_escalate_at
                            .is_some_and(|lvl| d.findings as i64 >= lvl);
                    reason = if expired {
                        "mute expired"
                    } else {
                        "escalated while muted"
                    };
                    if expired || escalated {
                        state = Lifecycle::Ongoing;
                    }
                }
                Lifecycle::Resolved => {
                    reason = "a finding after it resolved";
                    if resolved_at.is_none_or(|r| d.last_seen_ns > r) {
                        state = Lifecycle::Regressed;
                        clean = 0;
                    }
                }
                _ => {
                    if newer {
                        reason = "new findings";
                        state = Lifecycle::Ongoing;
                        clean = 0;
                    } else {
                        reason = "quiet long enough";
                        if fresh {
                            clean += 1;
                        }
                        if fresh && quiet.resolves(&row.draft) {
                            state = Lifecycle::Resolved;
                            resolved_at = Some(d.last_seen_ns.max(row.draft.last_seen_ns));
                        }
                    }
                }
            }
            if state != row.state {
                change(&tx, &row.id, Some(row.state), state, reason).map_err(err.clone())?;
            }
            let unmute = state != Lifecycle::Muted;
            // The stored picture is replaced only by a newer one, and keeps
            // every day it fired on.
            let draft = if newer {
                let mut merged = d.clone();
                merged.days.extend(row.draft.days.iter().cloned());
                merged.days.sort();
                merged.days.dedup();
                merged.findings = merged.findings.max(row.draft.findings);
                merged.first_seen_ns = merged.first_seen_ns.min(row.draft.first_seen_ns);
                merged
            } else {
                row.draft.clone()
            };
            let body = serde_json::to_string(&draft).unwrap_or_default();
            if state != row.state || clean != row.clean_sweeps || draft != row.draft {
                tx.execute(
                    "UPDATE signals SET state = ?2, draft = ?3, findings = ?4, last_seen_ns = ?5, clean_sweeps = ?6, resolved_at_ns = ?7,
                       muted_until_ns = CASE WHEN ?8 THEN NULL ELSE muted_until_ns END,
                       mute_until_escalates = CASE WHEN ?8 THEN 0 ELSE mute_until_escalates END
                     WHERE id = ?1",
                    params![row.id, state.as_str(), body, draft.findings as i64, draft.last_seen_ns, clean, resolved_at, unmute],
                )
                .map_err(err.clone())?;
            }
        }
        // Signals this sweep found nothing for. A mute that ran out ends
        // (the signal is open again, and resolves like any other).
        for row in existing
            .iter()
            .filter(|r| !drafts.iter().any(|d| d.key == r.draft.key))
        {
            if row.state == Lifecycle::Muted && row.muted_until_ns.is_some_and(|u| now_ns >= u) {
                change(
                    &tx,
                    &row.id,
                    Some(Lifecycle::Muted),
                    Lifecycle::Ongoing,
                    "mute expired",
                )
                .map_err(err.clone())?;
                tx.execute(
                    "UPDATE signals SET state = 'ongoing', clean_sweeps = 0, muted_until_ns = NULL, mute_until_escalates = 0 WHERE id = ?1",
                    params![row.id],
                )
                .map_err(err.clone())?;
                continue;
            }
            if !fresh || !row.state.is_open() {
                continue;
            }
            let clean = row.clean_sweeps + 1;
            let state = if quiet.resolves(&row.draft) {
                Lifecycle::Resolved
            } else {
                row.state
            };
            if state != row.state {
                change(&tx, &row.id, Some(row.state), state, "quiet long enough")
                    .map_err(err.clone())?;
            }
            tx.execute(
                "UPDATE signals SET state = ?2, clean_sweeps = ?3, resolved_at_ns = CASE WHEN ?2 = 'resolved' THEN last_seen_ns ELSE resolved_at_ns END WHERE id = ?1",
                params![row.id, state.as_str(), clean],
            )
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

    /// Change a signal's state by hand: `sql` updates it (`?1` is the id),
    /// and the change goes into the history.
    fn set_state(
        &mut self,
        id: &str,
        to: Lifecycle,
        reason: &str,
        now_ns: i64,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<(), StateError> {
        let current = self.get(id)?;
        let path = self.path.clone();
        let err = move |source| StateError::Db {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err.clone())?;
        let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id];
        all.extend_from_slice(args);
        tx.execute(sql, all.as_slice()).map_err(err.clone())?;
        tx.execute(
            "INSERT INTO signal_history (id, at_ns, from_state, to_state, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, now_ns, current.state.as_str(), to.as_str(), reason],
        )
        .map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    /// Mute until `until_ns`, until it escalates (≥ 2× today's findings), or forever.
    pub fn mute(
        &mut self,
        id: &str,
        until_ns: Option<i64>,
        until_escalates: bool,
        now_ns: i64,
    ) -> Result<(), StateError> {
        let findings = self.get(id)?.draft.findings as i64;
        let escalate_at = until_escalates.then_some(2 * findings.max(1));
        self.set_state(
            id,
            Lifecycle::Muted,
            "muted by hand",
            now_ns,
            "UPDATE signals SET state = 'muted', muted_until_ns = ?2, mute_until_escalates = ?3, mute_escalate_at = ?4 WHERE id = ?1",
            &[&until_ns, &until_escalates, &escalate_at],
        )
    }

    pub fn unmute(&mut self, id: &str, now_ns: i64) -> Result<(), StateError> {
        self.set_state(
            id,
            Lifecycle::Ongoing,
            "unmuted by hand",
            now_ns,
            "UPDATE signals SET state = 'ongoing', muted_until_ns = NULL, mute_until_escalates = 0, mute_escalate_at = NULL WHERE id = ?1",
            &[],
        )
    }

    pub fn resolve(&mut self, id: &str, now_ns: i64) -> Result<(), StateError> {
        self.set_state(
            id,
            Lifecycle::Resolved,
            "resolved by hand",
            now_ns,
            "UPDATE signals SET state = 'resolved', resolved_at_ns = last_seen_ns, clean_sweeps = 0 WHERE id = ?1",
            &[],
        )
    }

    /// The history of one signal: (at, from, to, reason).
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, StateError> {
        let mut stmt = self.db(self.conn.prepare("SELECT at_ns, from_state, to_state, reason FROM signal_history WHERE id = ?1 ORDER BY rowid"))?;
        self.db(stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|m| m.collect()))
    }
}

fn to_signal(r: Row) -> Signal {
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
) -> Result<Vec<Row>, StateError> {
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
            Ok(Row {
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
