//! The per-turn rules' results for each UTC day, kept in `state.sqlite` so
//! a sweep reads only the days whose data changed. A day's entry carries a
//! fingerprint of everything its result depends on — the Parquet parts of
//! every day its read touched (the day before, for turns that began then;
//! the days after, for as long as turns begun on it went on), the rules'
//! parameters, the rules' version — and is stored only once the day is
//! final (every turn that began on it has settled), or provisionally: a day
//! not yet final keeps its result from the sweep's `now` until the moment
//! its first unsettled turn would settle (or a span it left out for being
//! later than `now` would start). A sweep that reuses an entry therefore
//! gets what reading the day again would give.

use rusqlite::{params, OptionalExtension};

use super::state::{StateDb, StateError};
use super::{Evidence, Finding};
use crate::detect::outcomes::ToolDay;

/// What the per-turn rules found on one day.
#[derive(Debug, Clone, PartialEq)]
pub struct DayResult {
    pub findings: Vec<Finding>,
    /// What the day's retries achieved, per tool.
    pub outcomes: Vec<ToolDay>,
    /// Per tool, the turns begun that day where it failed most: the
    /// evidence of an error-rate spike on that day.
    pub worst: Vec<(String, Vec<Evidence>)>,
    /// The newest span end the day's read saw.
    pub horizon_ns: i64,
    /// Spans the day's read held.
    pub spans: usize,
    /// Per tool, the latest start of a call in the day's turns: how far its
    /// traffic reached, for resolving per-turn signals.
    pub traffic: Vec<(String, i64)>,
    /// Per service, the turns begun that day (the silent-tool rule's turn
    /// volume, docs/detection.md §4.8).
    pub turns: Vec<(String, u64)>,
    /// The last day the read took spans from (turns run past midnight).
    pub read_through: i32,
    /// For a day not yet final: the `now` this result was computed at, and
    /// the first `now` at which it may differ. `None` once final.
    pub provisional: Option<(i64, i64)>,
}

impl StateDb {
    /// The last day the stored result of `day` read, if there is one.
    pub fn day_read_through(&self, day: i32) -> Result<Option<i32>, StateError> {
        self.db(self
            .conn
            .query_row(
                "SELECT read_through FROM turn_days WHERE day = ?1",
                params![day],
                |r| r.get::<_, Option<i32>>(0),
            )
            .optional())
            .map(Option::flatten)
    }

    /// The stored result of `day`, when its fingerprint is `fingerprint`
    /// and it holds at `now_ns`.
    pub fn day_result(
        &self,
        day: i32,
        fingerprint: &str,
        now_ns: i64,
    ) -> Result<Option<DayResult>, StateError> {
        type Stored = (
            String,
            String,
            i64,
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<i32>,
            Option<i64>,
            Option<i64>,
            Option<String>,
        );
        let row: Option<Stored> = self.db(self
            .conn
            .query_row(
                "SELECT fingerprint, findings, horizon_ns, spans, outcomes, worst, traffic, read_through, computed_at_ns, valid_until_ns, turns FROM turn_days WHERE day = ?1",
                params![day],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                        r.get(10)?,
                    ))
                },
            )
            .optional())?;
        let Some((
            stored,
            findings,
            horizon_ns,
            spans,
            outcomes,
            worst,
            traffic,
            read_through,
            computed_at,
            valid_until,
            turns,
        )) = row
        else {
            return Ok(None);
        };
        if stored != fingerprint {
            return Ok(None);
        }
        let provisional = match (computed_at, valid_until) {
            (Some(from), Some(until)) if (from..until).contains(&now_ns) => Some((from, until)),
            (Some(_), Some(_)) => return Ok(None),
            _ => None,
        };
        // An entry this version cannot read is recomputed, not an error.
        let outcomes: Option<Vec<ToolDay>> = outcomes.and_then(|o| serde_json::from_str(&o).ok());
        let worst: Option<Vec<(String, Vec<Evidence>)>> =
            worst.and_then(|w| serde_json::from_str(&w).ok());
        let traffic: Option<Vec<(String, i64)>> =
            traffic.and_then(|t| serde_json::from_str(&t).ok());
        let turns: Option<Vec<(String, u64)>> = turns.and_then(|t| serde_json::from_str(&t).ok());
        let (Some(outcomes), Some(worst), Some(traffic), Some(read_through), Some(turns)) =
            (outcomes, worst, traffic, read_through, turns)
        else {
            return Ok(None);
        };
        Ok(serde_json::from_str(&findings)
            .ok()
            .map(|findings| DayResult {
                findings,
                outcomes,
                worst,
                horizon_ns,
                spans: spans.max(0) as usize,
                traffic,
                turns,
                read_through,
                provisional,
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
        let outcomes = serde_json::to_string(&result.outcomes).unwrap_or_else(|_| "[]".into());
        let worst = serde_json::to_string(&result.worst).unwrap_or_else(|_| "[]".into());
        let traffic = serde_json::to_string(&result.traffic).unwrap_or_else(|_| "[]".into());
        let turns = serde_json::to_string(&result.turns).unwrap_or_else(|_| "[]".into());
        self.db(self.conn.execute(
            "INSERT INTO turn_days (day, fingerprint, findings, horizon_ns, spans, outcomes, worst, traffic, read_through, computed_at_ns, valid_until_ns, turns) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT(day) DO UPDATE SET fingerprint = excluded.fingerprint, findings = excluded.findings, \
             horizon_ns = excluded.horizon_ns, spans = excluded.spans, outcomes = excluded.outcomes, worst = excluded.worst, \
             traffic = excluded.traffic, read_through = excluded.read_through, \
             computed_at_ns = excluded.computed_at_ns, valid_until_ns = excluded.valid_until_ns, turns = excluded.turns",
            params![day, fingerprint, findings, result.horizon_ns, result.spans as i64, outcomes, worst, traffic, result.read_through,
                result.provisional.map(|p| p.0), result.provisional.map(|p| p.1), turns],
        ))?;
        Ok(())
    }

    /// The findings the sweeps kept for the days `from..=to`, by day (a day
    /// no sweep has read is absent; an entry this version cannot read is
    /// left out as if absent).
    pub fn findings_between(
        &self,
        from: i32,
        to: i32,
    ) -> Result<Vec<(i32, Vec<Finding>)>, StateError> {
        let mut stmt = self.db(self.conn.prepare(
            "SELECT day, findings FROM turn_days WHERE day BETWEEN ?1 AND ?2 ORDER BY day",
        ))?;
        let rows = self.db(stmt
            .query_map(params![from, to], |r| {
                Ok((r.get::<_, i32>(0)?, r.get::<_, String>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>()))?;
        Ok(rows
            .into_iter()
            .filter_map(|(day, f)| serde_json::from_str(&f).ok().map(|f| (day, f)))
            .collect())
    }

    /// Forget the stored results of days before `day` (retention removed them).
    pub fn forget_days_before(&self, day: i32) -> Result<(), StateError> {
        self.db(self
            .conn
            .execute("DELETE FROM turn_days WHERE day < ?1", params![day]))?;
        Ok(())
    }
}

impl StateDb {
    /// Replace the retry outcomes of days `from..=to` with `outcomes`.
    pub fn put_outcomes(
        &mut self,
        from: i32,
        to: i32,
        outcomes: &[ToolDay],
    ) -> Result<(), StateError> {
        let path = self.path.clone();
        let err = |source| StateError::Db {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "DELETE FROM retry_outcomes WHERE day BETWEEN ?1 AND ?2",
            params![from, to],
        )
        .map_err(err)?;
        for o in outcomes.iter().filter(|o| (from..=to).contains(&o.day)) {
            tx.execute(
                "INSERT OR REPLACE INTO retry_outcomes (day, tool, retries, rescued, wasted, after_success, wasted_seconds, wasted_cost_usd) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![o.day, o.tool, o.retries as i64, o.rescued as i64, o.wasted as i64, o.after_success as i64, o.wasted_seconds, o.wasted_cost_usd],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Retry outcomes of days `from..=to`, of one tool or all.
    pub fn outcomes(
        &self,
        from: i32,
        to: i32,
        tool: Option<&str>,
    ) -> Result<Vec<ToolDay>, StateError> {
        let mut stmt = self.db(self.conn.prepare(
            "SELECT day, tool, retries, rescued, wasted, after_success, wasted_seconds, wasted_cost_usd FROM retry_outcomes \
             WHERE day BETWEEN ?1 AND ?2 AND (?3 IS NULL OR tool = ?3) ORDER BY day, tool",
        ))?;
        let rows = stmt
            .query_map(params![from, to, tool], |r| {
                Ok(ToolDay {
                    day: r.get(0)?,
                    tool: r.get(1)?,
                    retries: r.get::<_, i64>(2)?.max(0) as u64,
                    rescued: r.get::<_, i64>(3)?.max(0) as u64,
                    wasted: r.get::<_, i64>(4)?.max(0) as u64,
                    after_success: r.get::<_, i64>(5)?.max(0) as u64,
                    wasted_seconds: r.get(6)?,
                    wasted_cost_usd: r.get(7)?,
                })
            })
            .and_then(|m| m.collect::<rusqlite::Result<Vec<_>>>());
        self.db(rows)
    }
}
