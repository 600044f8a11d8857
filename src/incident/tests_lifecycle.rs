//! The incident lifecycle as pure functions, apart from SQL: which stored
//! incident a group lands in, and what a sweep makes of one from its
//! members.

use std::collections::BTreeSet;

use super::body::Joined;
use super::group::Cause;
use super::lifecycle::{pick, transition, Stored};
use super::tests::{sig, H};
use super::IncidentState;
use crate::signal::{Kind, Lifecycle, Signal};

fn stored(id: &str, key: &str, state: IncidentState, resolved_ns: Option<i64>) -> Stored {
    Stored {
        id: id.into(),
        key: key.into(),
        state,
        cause: Cause::Own(key.into()),
        body: None,
        opened_ns: 1,
        resolved_ns,
    }
}

fn with(s: &Signal, state: Lifecycle) -> Signal {
    let mut s = s.clone();
    s.state = state;
    s
}

fn joined(signals: &[Signal]) -> Vec<Joined<'_>> {
    signals
        .iter()
        .map(|s| Joined {
            signal: s,
            joined_ns: s.draft.first_seen_ns,
            reason: "same tool".into(),
        })
        .collect()
}

#[test]
fn a_group_lands_in_its_members_open_incident_then_its_key_then_the_latest_resolved_one() {
    let all = [
        stored("INC-A", "k1", IncidentState::Resolved, Some(5)),
        stored("INC-B", "k2", IncidentState::Open, None),
        stored("INC-C", "k3", IncidentState::Resolved, Some(9)),
    ];
    let none = BTreeSet::new();
    let id = |mine: &[&str], key: &str, used: &BTreeSet<String>| {
        pick(&all, mine, key, used).map(|r| r.id.clone())
    };
    assert_eq!(
        id(&["INC-A", "INC-B"], "k1", &none).as_deref(),
        Some("INC-B"),
        "the open one a member is in"
    );
    assert_eq!(
        id(&["INC-A"], "k3", &none).as_deref(),
        Some("INC-C"),
        "then the key"
    );
    assert_eq!(
        id(&["INC-A", "INC-C"], "kx", &none).as_deref(),
        Some("INC-C"),
        "then the latest resolved"
    );
    let used: BTreeSet<String> = ["INC-C".to_string()].into();
    assert_eq!(
        id(&["INC-A", "INC-C"], "k3", &used).as_deref(),
        Some("INC-A"),
        "none taken twice"
    );
    assert_eq!(id(&[], "kx", &none), None, "else a new one");
}

#[test]
fn an_incident_is_open_acknowledged_or_resolved_by_its_members() {
    let a = sig("SW-A", Kind::RetryStorm, "t", "unavailable", 1, 2);
    let b = sig("SW-B", Kind::RetryStorm, "u", "unavailable", 1, 2);
    let prev = stored("INC-A", "k", IncidentState::Open, None);
    let now = 10 * H;

    let opened = [a.clone(), b.clone()];
    let step = transition(&prev, true, &joined(&opened), now);
    assert_eq!((step.from, step.to), (None, IncidentState::Open));
    assert_eq!(step.reason.as_deref(), Some("first member"));

    let same = transition(&prev, false, &joined(&opened), now);
    assert_eq!((same.reason, same.resolved_ns), (None, None));

    let muted = [with(&a, Lifecycle::Muted), with(&b, Lifecycle::Resolved)];
    let step = transition(&prev, false, &joined(&muted), now);
    assert_eq!(step.to, IncidentState::Acknowledged);
    assert_eq!(step.reason.as_deref(), Some("every open member muted"));

    let done = [with(&a, Lifecycle::Resolved), with(&b, Lifecycle::Resolved)];
    let step = transition(&prev, false, &joined(&done), now);
    assert_eq!(
        (step.to, step.resolved_ns),
        (IncidentState::Resolved, Some(now))
    );
    assert_eq!(step.reason.as_deref(), Some("every member resolved"));

    // Already resolved: it keeps the time it resolved at.
    let was = stored("INC-A", "k", IncidentState::Resolved, Some(3));
    let step = transition(&was, false, &joined(&done), now);
    assert_eq!((step.reason, step.resolved_ns), (None, Some(3)));

    let back = [
        with(&a, Lifecycle::Regressed),
        with(&b, Lifecycle::Resolved),
    ];
    let step = transition(&was, false, &joined(&back), now);
    assert_eq!((step.to, step.resolved_ns), (IncidentState::Open, None));
    assert_eq!(step.reason.as_deref(), Some("reopened by SW-A"));

    let new_member = [with(&a, Lifecycle::New)];
    let step = transition(&was, false, &joined(&new_member), now);
    assert_eq!(step.reason.as_deref(), Some("reopened by a new member"));

    let acked = stored("INC-A", "k", IncidentState::Acknowledged, None);
    let step = transition(&acked, false, &joined(&opened), now);
    assert_eq!(step.reason.as_deref(), Some("a member open again"));
}
