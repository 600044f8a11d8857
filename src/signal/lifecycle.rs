//! The signal lifecycle as a pure function (alerting.md, Lifecycle): what
//! one sweep does to one stored signal, from what is stored, what the
//! sweep observed and its clock. `new` → `ongoing` → `resolved` →
//! `regressed`, or `muted`; resolving by the data's clock ([`Quiet`]).
//! [`super::state`] reads the rows, asks [`transition`] and writes the
//! answer, in one transaction.

use serde::Serialize;

use super::draft::SignalDraft;

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
        use super::Kind;
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

/// A signal as stored, with what its lifecycle needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub id: String,
    pub state: Lifecycle,
    pub draft: SignalDraft,
    pub clean_sweeps: i64,
    pub resolved_at_ns: Option<i64>,
    pub muted_until_ns: Option<i64>,
    pub mute_until_escalates: bool,
    pub mute_escalate_at: Option<i64>,
}

/// The sweep's view: its clock, its quiet rule, and whether it read data
/// newer than every earlier sweep (only such a sweep counts towards
/// resolving).
#[derive(Debug, Clone, Copy)]
pub struct Sweep<'a> {
    pub now_ns: i64,
    pub quiet: &'a Quiet,
    pub fresh: bool,
}

/// What a sweep does to one stored signal.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to write.
    Keep,
    /// Found again: the row becomes `Next` (it differs from the stored one).
    Seen(Box<Next>),
    /// Not found, and its mute ran out: open again (`ongoing`), its quiet
    /// count and mute cleared.
    MuteExpired,
    /// Not found, open, over newer data: one more quiet sweep, resolved
    /// (at its last finding) when quiet long enough.
    Quiet { clean_sweeps: i64, resolved: bool },
}

/// A found signal's row after the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub state: Lifecycle,
    /// Why the state changed (when it did).
    pub reason: &'static str,
    pub draft: SignalDraft,
    pub clean_sweeps: i64,
    pub resolved_at_ns: Option<i64>,
}

impl Decision {
    /// The state change it makes to `prev`: (from, to, reason).
    pub fn change(&self, prev: &Stored) -> Option<(Lifecycle, Lifecycle, &'static str)> {
        let (to, reason) = match self {
            Decision::Keep => return None,
            Decision::Seen(n) => (n.state, n.reason),
            Decision::MuteExpired => (Lifecycle::Ongoing, "mute expired"),
            Decision::Quiet { resolved: true, .. } => (Lifecycle::Resolved, "quiet long enough"),
            Decision::Quiet { .. } => (prev.state, "quiet long enough"),
        };
        (to != prev.state).then_some((prev.state, to, reason))
    }
}

/// What this sweep does to `prev`, given the draft it `observed` for the
/// same key (`None`: it found nothing for it).
pub fn transition(prev: &Stored, observed: Option<&SignalDraft>, sweep: Sweep<'_>) -> Decision {
    match observed {
        Some(d) => seen(prev, d, sweep),
        None => unseen(prev, sweep),
    }
}

fn seen(row: &Stored, d: &SignalDraft, sweep: Sweep<'_>) -> Decision {
    let Sweep {
        now_ns,
        quiet,
        fresh,
    } = sweep;
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
    if state == row.state && clean == row.clean_sweeps && draft == row.draft {
        return Decision::Keep;
    }
    Decision::Seen(Box::new(Next {
        state,
        reason,
        draft,
        clean_sweeps: clean,
        resolved_at_ns: resolved_at,
    }))
}

fn unseen(row: &Stored, sweep: Sweep<'_>) -> Decision {
    // A mute that ran out ends (the signal is open again, and resolves
    // like any other).
    if row.state == Lifecycle::Muted && row.muted_until_ns.is_some_and(|u| sweep.now_ns >= u) {
        return Decision::MuteExpired;
    }
    if !sweep.fresh || !row.state.is_open() {
        return Decision::Keep;
    }
    Decision::Quiet {
        clean_sweeps: row.clean_sweeps + 1,
        resolved: sweep.quiet.resolves(&row.draft),
    }
}
