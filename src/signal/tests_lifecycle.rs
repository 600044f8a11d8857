//! The lifecycle's transitions as a pure function, apart from SQL: one
//! stored signal, what a sweep observed, its clock.

use super::group::group;
use super::lifecycle::{transition, Decision, Lifecycle, Next, Stored, Sweep};
use super::tests::{finding, q, DAY, HOUR};
use super::{Kind, SignalDraft};
use crate::model::ErrorClass;

/// A storm of tool `t` whose latest finding is at `at_ns`, counted as
/// `findings` findings.
fn storm(at_ns: i64, findings: usize) -> SignalDraft {
    let f = finding(
        Kind::RetryStorm,
        "t",
        ErrorClass::Unavailable,
        at_ns,
        5,
        "a",
    );
    let mut d = group(&[f], 10).remove(0);
    d.findings = findings;
    d
}

/// A spike of tool `t` on the day of `at_ns`.
fn spike(at_ns: i64) -> SignalDraft {
    let f = finding(
        Kind::ErrorRateSpike,
        "t",
        ErrorClass::Unavailable,
        at_ns,
        5,
        "a",
    );
    group(&[f], 10).remove(0)
}

fn stored(state: Lifecycle, draft: SignalDraft) -> Stored {
    Stored {
        id: draft.id.clone(),
        state,
        draft,
        clean_sweeps: 0,
        resolved_at_ns: None,
        muted_until_ns: None,
        mute_until_escalates: false,
        mute_escalate_at: None,
    }
}

fn sweep(now_ns: i64, quiet: &super::state::Quiet, fresh: bool) -> Sweep<'_> {
    Sweep {
        now_ns,
        quiet,
        fresh,
    }
}

#[test]
fn newer_findings_make_a_new_signal_ongoing_and_keep_every_day() {
    let prev = stored(Lifecycle::New, storm(DAY, 3));
    let later = storm(2 * DAY, 2);
    let quiet = q(2 * DAY);
    let d = transition(&prev, Some(&later), sweep(3 * DAY, &quiet, true));
    let Decision::Seen(next) = &d else {
        panic!("{d:?}")
    };
    let Next {
        state,
        reason,
        draft,
        clean_sweeps,
        ..
    } = &**next;
    assert_eq!(
        (*state, *reason, *clean_sweeps),
        (Lifecycle::Ongoing, "new findings", 0)
    );
    assert_eq!(draft.findings, 3, "the most findings seen");
    assert_eq!(draft.days.len(), 2, "both days it fired on");
    assert_eq!(
        d.change(&prev),
        Some((Lifecycle::New, Lifecycle::Ongoing, "new findings"))
    );
}

#[test]
fn the_same_data_again_changes_nothing() {
    let draft = storm(DAY, 3);
    let prev = stored(Lifecycle::Ongoing, draft.clone());
    let quiet = q(DAY + HOUR);
    // Not fresh: no quiet sweep counted, nothing to write.
    let d = transition(&prev, Some(&draft), sweep(2 * DAY, &quiet, false));
    assert_eq!(d, Decision::Keep);
    assert_eq!(
        transition(&prev, None, sweep(2 * DAY, &quiet, false)),
        Decision::Keep
    );
}

#[test]
fn an_open_signal_resolves_only_when_quiet_long_enough_over_newer_data() {
    let prev = stored(Lifecycle::Ongoing, storm(DAY, 3));
    let short = q(DAY + HOUR);
    let d = transition(&prev, None, sweep(2 * DAY, &short, true));
    assert_eq!(
        d,
        Decision::Quiet {
            clean_sweeps: 1,
            resolved: false
        }
    );
    assert_eq!(d.change(&prev), None);
    let long = q(DAY + 25 * HOUR);
    let d = transition(&prev, None, sweep(3 * DAY, &long, true));
    assert_eq!(
        d,
        Decision::Quiet {
            clean_sweeps: 1,
            resolved: true
        }
    );
    assert_eq!(
        d.change(&prev),
        Some((Lifecycle::Ongoing, Lifecycle::Resolved, "quiet long enough"))
    );
}

#[test]
fn a_daily_spike_resolves_after_complete_quiet_days() {
    let prev = stored(Lifecycle::New, spike(DAY));
    let one = q(3 * DAY);
    assert!(matches!(
        transition(&prev, None, sweep(3 * DAY, &one, true)),
        Decision::Quiet {
            resolved: false,
            ..
        }
    ));
    let three = q(4 * DAY + HOUR);
    assert!(matches!(
        transition(&prev, None, sweep(5 * DAY, &three, true)),
        Decision::Quiet { resolved: true, .. }
    ));
}

#[test]
fn a_finding_after_it_resolved_regresses_it_and_an_older_one_does_not() {
    let mut prev = stored(Lifecycle::Resolved, storm(DAY, 3));
    prev.resolved_at_ns = Some(DAY);
    prev.clean_sweeps = 4;
    let quiet = q(3 * DAY);
    let d = transition(
        &prev,
        Some(&storm(2 * DAY, 1)),
        sweep(3 * DAY, &quiet, true),
    );
    assert_eq!(
        d.change(&prev),
        Some((
            Lifecycle::Resolved,
            Lifecycle::Regressed,
            "a finding after it resolved"
        ))
    );
    let Decision::Seen(next) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(next.clean_sweeps, 0);
    // The finding it resolved on, seen again: nothing.
    let d = transition(&prev, Some(&storm(DAY, 3)), sweep(3 * DAY, &quiet, true));
    assert_eq!(d, Decision::Keep);
    // Not found, resolved: not open, nothing to count.
    assert_eq!(
        transition(&prev, None, sweep(3 * DAY, &quiet, true)),
        Decision::Keep
    );
}

#[test]
fn a_mute_holds_until_it_escalates_or_runs_out() {
    let mut prev = stored(Lifecycle::Muted, storm(DAY, 3));
    prev.mute_until_escalates = true;
    prev.mute_escalate_at = Some(6);
    prev.muted_until_ns = Some(10 * DAY);
    let quiet = q(3 * DAY);
    // Fewer findings than the level: still muted (the newer picture kept).
    let d = transition(
        &prev,
        Some(&storm(2 * DAY, 5)),
        sweep(3 * DAY, &quiet, true),
    );
    assert_eq!(d.change(&prev), None);
    assert!(matches!(&d, Decision::Seen(n) if n.state == Lifecycle::Muted));
    // At the level: open again.
    let d = transition(
        &prev,
        Some(&storm(2 * DAY, 6)),
        sweep(3 * DAY, &quiet, true),
    );
    assert_eq!(
        d.change(&prev),
        Some((
            Lifecycle::Muted,
            Lifecycle::Ongoing,
            "escalated while muted"
        ))
    );
    // Its time ran out, found or not.
    let d = transition(&prev, Some(&storm(DAY, 3)), sweep(10 * DAY, &quiet, true));
    assert_eq!(
        d.change(&prev),
        Some((Lifecycle::Muted, Lifecycle::Ongoing, "mute expired"))
    );
    let d = transition(&prev, None, sweep(10 * DAY, &quiet, false));
    assert_eq!(d, Decision::MuteExpired);
    assert_eq!(
        d.change(&prev),
        Some((Lifecycle::Muted, Lifecycle::Ongoing, "mute expired"))
    );
    // Before then, not found: nothing.
    assert_eq!(
        transition(&prev, None, sweep(3 * DAY, &quiet, true)),
        Decision::Keep
    );
}
