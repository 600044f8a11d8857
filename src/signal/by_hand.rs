//! A person's changes to one signal (mute, unmute, resolve), each with its
//! line in the history.

use rusqlite::params;

use super::state::{StateDb, StateError};
use super::Lifecycle;

impl StateDb {
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
}
