//! Letting settled groups go, and waking them: a group whose traces all
//! have their root today and whose spans all ended by the settle line has
//! its rows dropped and its records added up into [`Totals`] (its
//! `Parts` not kept); a span that joins it later reads its traces' spans
//! again, takes its records back out and makes the group again.

use std::collections::{HashMap, HashSet};

use super::super::rows::{row_sum, Stale};
use super::super::{Census, TraceIds};
use super::{Before, Fast, Groups};
use crate::detect::calls::{self, Keep, TurnCalls};
use crate::spans::SpanTable;

impl Groups {
    /// The traces let go of that share a group with one of `dirty` (so
    /// must be read again before it is made again), by their ids as stored.
    pub fn asleep(
        &self,
        table: &SpanTable,
        before: Option<&Before>,
        dirty: &HashSet<u128>,
    ) -> TraceIds {
        if self.let_go == 0 {
            return Vec::new();
        }
        let mut out: TraceIds = self
            .closure(table, before, dirty)
            .into_iter()
            .filter(|t| self.traces.get(t).is_some_and(|tr| tr.let_go > 0))
            .map(|t| (t, format!("{t:032x}")))
            .collect();
        out.sort_unstable();
        out
    }

    /// `traces` (of [`Groups::asleep`]) read again: `table`'s rows from
    /// `first` on are their spans as they were let go (read again by
    /// [`super::rows::DayRows::pull`]), so the kernel over them makes the
    /// records that were added up, which are taken back out; the traces
    /// are no longer let go (their rows come back through
    /// [`Groups::take_rows`], their groups are made again). Stale when the
    /// spans read again are not those let go (a duplicate merged away).
    pub fn wake(
        &mut self,
        table: &SpanTable,
        first: usize,
        traces: &TraceIds,
        settled_by: i64,
        nest: bool,
    ) -> Result<(), Stale> {
        let mut found: HashMap<u128, (u32, u64), Fast> = HashMap::default();
        for r in first..table.len() {
            let f = found.entry(table.trace[r]).or_default();
            f.0 += 1;
            f.1 = f.1.wrapping_add(row_sum(table, r));
        }
        for (t, _) in traces {
            let tr = &self.traces[t];
            if found.get(t).copied().unwrap_or_default() != (tr.let_go, tr.let_go_sum) {
                return Err(Stale(format!(
                    "the spans of trace {t:032x} read again are not those let go"
                )));
            }
        }
        let mut old = SpanTable::default();
        old.extend_range(table, first..table.len());
        let records = calls::parts_nesting(&old, Keep::Findable, nest);
        if !self.folded.remove(&records, settled_by) {
            return Err(Stale(
                "the records of traces read again are not those let go".into(),
            ));
        }
        for (t, _) in traces {
            let tr = self.traces.get_mut(t).expect("checked above");
            self.let_go -= tr.let_go as usize;
            tr.let_go = 0;
            tr.let_go_sum = 0;
        }
        Ok(())
    }

    /// Let go of the rows of the groups settled by `settled_by` whose
    /// traces all have a root today (their records stay; a whole read
    /// would find them the same), once they are a quarter of the table:
    /// the rows to keep, in order, and the traces' rows renumbered to
    /// match.
    pub fn let_go(&mut self, table: &SpanTable, settled_by: i64) -> Option<Vec<usize>> {
        let settled = |t: &u128| {
            self.traces.get(t).is_some_and(|tr| {
                tr.rooted
                    && tr.let_go == 0
                    && !tr.own.is_empty()
                    && !table.is_odd_trace(*t)
                    && tr.own.iter().all(|&r| table.end[r as usize] <= settled_by)
            })
        };
        let mut going: Vec<u128> = Vec::new();
        let mut keys: Vec<u128> = Vec::new();
        for t in &self.awake {
            match self.group_of.get(t) {
                None if settled(t) => {
                    going.push(*t);
                    keys.push(*t);
                }
                Some(g) if g == t => {
                    let members = &self.members[g];
                    if members.iter().all(settled) {
                        going.extend(members);
                        keys.push(*g);
                    }
                }
                _ => {}
            }
        }
        let rows: usize = going.iter().map(|t| self.traces[t].own.len()).sum();
        if rows == 0 || rows * 4 < table.len() {
            return None;
        }
        // Their records are added up now, and not kept or walked again.
        for g in &keys {
            if let Some(p) = self.parts.remove(g) {
                self.folded.add(&p, settled_by);
            }
        }
        let mut gone = vec![false; table.len()];
        for t in &going {
            self.awake.remove(t);
            let tr = self.traces.get_mut(t).expect("a member");
            for &r in &tr.own {
                gone[r as usize] = true;
                self.let_go_horizon = self.let_go_horizon.max(table.end[r as usize]);
            }
            tr.let_go = tr.own.len() as u32;
            tr.let_go_sum = tr
                .own
                .iter()
                .fold(0u64, |a, &r| a.wrapping_add(row_sum(table, r as usize)));
            self.let_go += tr.own.len();
            tr.own = Vec::new();
        }
        // The rows kept stay in their order; `at` maps old rows to new.
        let mut kept = Vec::with_capacity(table.len() - rows);
        let mut at = vec![u32::MAX; table.len()];
        for (r, g) in gone.iter().enumerate() {
            if !g {
                at[r] = kept.len() as u32;
                kept.push(r);
            }
        }
        for t in &self.awake {
            let tr = self.traces.get_mut(t).expect("an awake trace");
            for r in tr.own.iter_mut() {
                *r = at[*r as usize];
            }
        }
        Some(kept)
    }

    /// Its traces, groups and records, counted (the rows are the caller's).
    pub fn census(&self) -> Census {
        let mut c = Census {
            traces: self.traces.len(),
            traces_let_go: self.traces.values().filter(|t| t.let_go > 0).count(),
            groups: self.parts.len(),
            ..Default::default()
        };
        for p in self.parts.values() {
            c.tool_turns += p.tool_turns.len();
            c.kept_calls += p.calls.len();
            c.kept_turns += p.turns.len();
        }
        c
    }

    /// The day's tables from every group's records, as
    /// [`calls::finish`] makes them: those of the groups let go from their
    /// totals, the others' added.
    pub fn totals(&self, settled_by: i64) -> TurnCalls {
        let mut totals = self.folded.clone();
        let groups: HashSet<u128, Fast> = self
            .awake
            .iter()
            .map(|t| self.group_of.get(t).copied().unwrap_or(*t))
            .collect();
        for g in groups {
            if let Some(p) = self.parts.get(&g) {
                totals.add(p, settled_by);
            }
        }
        totals.into_calls()
    }
}
