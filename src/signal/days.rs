//! The per-turn rules' results for each UTC day, kept in `state.sqlite` so
//! a sweep reads only the days whose data changed. A day's entry carries a
//! fingerprint of everything its result depends on — the Parquet parts of
//! the day and of its neighbours (a turn may cross midnight), the rules'
//! parameters, the rules' version — and is stored only once the day is
//! final: every turn that began on it has had time to settle. A sweep that
//! reuses an entry therefore gets what reading the day again would give.

use rusqlite::{params, OptionalExtension};

use super::group::Finding;
use super::state::{StateDb, StateError};

/// What the per-turn rules found on one day.
#[derive(Debug, Clone, PartialEq)]
pub struct DayResult {
    pub findings: Vec<Finding>,
    /// The newest span end the day's read saw.
    pub horizon_ns: i64,
    /// Spans the day's read held.
    pub spans: usize,
}

impl StateDb {
    /// The stored result of `day`, when its fingerprint is `fingerprint`.
    pub fn day_result(&self, day: i32, fingerprint: &str) -> Result<Option<DayResult>, StateError> {
        let row: Option<(String, String, i64, i64)> = self.db(self
            .conn
            .query_row(
                "SELECT fingerprint, findings, horizon_ns, spans FROM turn_days WHERE day = ?1",
                params![day],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional())?;
        let Some((stored, findings, horizon_ns, spans)) = row else {
            return Ok(None);
        };
        if stored != fingerprint {
            return Ok(None);
        }
        // An entry this version cannot read is recomputed, not an error.
        Ok(serde_json::from_str(&findings)
            .ok()
            .map(|findings| DayResult {
                findings,
                horizon_ns,
                spans: spans.max(0) as usize,
            }))
    }

    /// Keep `day`'s result under `fingerprint`, replacing any older one.
    pub fn put_day_result(
        &self,
        day: i32,
        fingerprint: &str,
        result: &DayResult,
    ) -> Result<(), StateError> {
        let findings = serde_json::to_string(&result.findings).unwrap_or_else(|_| "[]".into());
        self.db(self.conn.execute(
            "INSERT INTO turn_days (day, fingerprint, findings, horizon_ns, spans) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT(day) DO UPDATE SET fingerprint = excluded.fingerprint, findings = excluded.findings, \
             horizon_ns = excluded.horizon_ns, spans = excluded.spans",
            params![day, fingerprint, findings, result.horizon_ns, result.spans as i64],
        ))?;
        Ok(())
    }

    /// Forget the stored results of days before `day` (retention removed them).
    pub fn forget_days_before(&self, day: i32) -> Result<(), StateError> {
        self.db(self
            .conn
            .execute("DELETE FROM turn_days WHERE day < ?1", params![day]))?;
        Ok(())
    }
}
