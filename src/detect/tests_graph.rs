//! Turn resolution over parent graphs that real data should not have but
//! stored data may: self-parented spans and parent cycles (stored before
//! ingest refused them, or imported), and chains deep enough that a walk
//! per row would be quadratic.

use std::time::Instant;

use polars::prelude::*;

use super::turns::resolve;

fn hex(b: u32) -> String {
    format!("{b:016x}")
}

/// One trace; `parents[i]` is span `i + 1`'s parent id (0: none).
fn trace(parents: &[u32], agents: &[u32]) -> DataFrame {
    let n = parents.len() as u32;
    df! {
        "trace_id" => vec!["ab".repeat(16); n as usize],
        "span_id" => (1..=n).map(hex).collect::<Vec<_>>(),
        "parent_span_id" => parents.iter().map(|&p| (p != 0).then(|| hex(p))).collect::<Vec<_>>(),
        "is_agent" => (1..=n).map(|i| agents.contains(&i)).collect::<Vec<_>>(),
        "agent_call_id" => vec![None::<&str>; n as usize],
    }
    .unwrap()
}

fn turn_of(span: u32) -> String {
    format!("{}/{}", "ab".repeat(16), hex(span))
}

#[test]
fn a_self_parented_span_is_its_own_root() {
    // 1 is its own parent; 2 hangs below it.
    let turns = resolve(&trace(&[1, 1], &[])).unwrap();
    assert_eq!(turns, vec![turn_of(1), turn_of(1)]);
}

#[test]
fn a_parent_cycle_is_one_turn_whichever_row_the_walk_enters_by() {
    // 1 → 2 → 3 → 1, with 4 under 3 and 5 under 4; and the same spans
    // stored in the reverse order. Every row anchors on the cycle's lowest
    // span id, in either order.
    let df = trace(&[3, 1, 2, 3, 4], &[]);
    assert_eq!(resolve(&df).unwrap(), vec![turn_of(1); 5]);
    assert_eq!(resolve(&df.reverse()).unwrap(), vec![turn_of(1); 5]);
    // An agent below the cycle still anchors what is under it.
    let turns = resolve(&trace(&[3, 1, 2, 3, 4], &[4])).unwrap();
    assert_eq!(turns[3], turn_of(4));
    assert_eq!(turns[4], turn_of(4));
    assert_eq!(turns[0], turns[1]);
    assert_ne!(turns[0], turn_of(4));
}

#[test]
fn deep_chains_and_long_cycles_resolve_in_linear_time() {
    // A chain of 200 000 spans, each the child of the one before, stored
    // deepest first (every row's walk would climb the whole chain), and the
    // same chain closed into one cycle. A walk per row is 2·10¹⁰ steps.
    const N: u32 = 200_000;
    let chain: Vec<u32> = (0..N).collect();
    let mut cycle = chain.clone();
    cycle[0] = N;
    for parents in [chain, cycle] {
        let df = trace(&parents, &[]).reverse();
        let started = Instant::now();
        let turns = resolve(&df).unwrap();
        let took = started.elapsed();
        assert!(turns.iter().all(|t| *t == turn_of(1)), "{:?}", &turns[..3]);
        // Linear work here takes well under a second even in a debug build.
        assert!(took.as_secs_f64() < 10.0, "{took:?}");
    }
}
