//! The per-turn rules on what agents really do (docs/detection.md §4.2–4.7):
//! distinct-argument calls, parallel fan-outs, polling, loops and cycles,
//! nested MCP spans, sessions on the agent span. Each case is one that a
//! rule got wrong before chains (a coding agent's `bash` calls were a storm).

use polars::prelude::*;

use super::calls;
use super::chains::{judge, Attempt, Verdict};
use super::loops::{tool_loops, LoopParams};
use super::storm::{retry_storms, Outcome, StormParams};
use super::tests::{synthetic, synthetic_with, Syn, FAR_FUTURE};
use super::{retries_after_success, wasted_retries};

/// One agent turn (trace `t`) calling `tool` once per entry of `classes`,
/// each call 100 ms, `gaps` ms apart (the last gap repeats).
fn turn(t: u8, tool: &'static str, classes: &[&'static str], gaps: &[i64]) -> Vec<Syn> {
    let mut spans: Vec<Syn> = vec![(t, 1, 0, true, "", 0, 600_000, "ok")];
    let mut at = 0;
    for (i, class) in classes.iter().enumerate() {
        spans.push((t, 10 + i as u8, 1, false, tool, at, at + 100, class));
        at += 100 + gaps.get(i).or(gaps.last()).copied().unwrap_or(0);
    }
    spans
}

/// Arguments per span: none for the agent, then one per call.
fn args(calls: &[&'static str]) -> Vec<Option<&'static str>> {
    std::iter::once(None)
        .chain(calls.iter().map(|a| Some(*a)))
        .collect()
}

fn all(spans: &[Syn], args: &[Option<&str>], results: &[Option<&str>]) -> calls::TurnCalls {
    calls::collect(&synthetic_with(spans, args, results)).unwrap()
}

const COMMANDS: [&str; 14] = [
    "ls", "cat a", "grep x", "cargo b", "cargo t", "git st", "sed 1p", "wc -l", "rg y", "make",
    "head", "tail", "diff", "echo",
];

#[test]
fn fourteen_different_commands_with_two_failures_are_no_storm() {
    let mut classes = vec!["ok"; 14];
    classes[4] = "unknown";
    classes[9] = "server_error";
    let spans = turn(1, "bash", &classes, &[800]);
    let tc = all(&spans, &args(&COMMANDS), &vec![None; spans.len()]);
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    assert!(wasted_retries(&tc.calls).is_empty());
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
}

#[test]
fn a_dead_feed_asked_fifteen_different_questions_is_a_storm() {
    let questions = [
        "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", "q14",
        "q15",
    ];
    let spans = turn(2, "search_flights", &["unavailable"; 15], &[5]);
    let tc = all(&spans, &args(&questions), &vec![None; spans.len()]);
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms.len(), 1, "{storms:?}");
    assert_eq!((storms[0].rounds, storms[0].failures), (15, 15));
    assert_eq!(storms[0].outcome, Outcome::GaveUp);
    // Every retry asked something else: it is the dependency that is dead.
    assert_eq!(storms[0].same_args, Some(0.0));
    // The same, asking the same question, repeats it every time.
    let spans = turn(3, "search_flights", &["unavailable"; 15], &[5]);
    let tc = all(&spans, &args(&["q"; 15]), &vec![None; spans.len()]);
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms[0].same_args, Some(1.0));
}

#[test]
fn a_parallel_fan_out_with_failures_is_rounds_not_retries() {
    // Six cities at once, three time out; the three asked again at once, ok.
    let mut spans: Vec<Syn> = vec![(4, 1, 0, true, "", 0, 60_000, "ok")];
    for i in 0..6u8 {
        let class = if i % 2 == 0 { "timeout" } else { "ok" };
        spans.push((
            4,
            10 + i,
            1,
            false,
            "weather",
            100 + i64::from(i),
            900,
            class,
        ));
    }
    for i in 0..3u8 {
        spans.push((
            4,
            20 + i,
            1,
            false,
            "weather",
            2000 + i64::from(i),
            2500,
            "ok",
        ));
    }
    let cities = [
        "paris", "london", "rome", "oslo", "bern", "riga", "paris", "rome", "bern",
    ];
    let tc = all(&spans, &args(&cities), &vec![None; spans.len()]);
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    // Even fourteen failed fan-outs in a row are rounds: five of them a storm.
    let mut wide: Vec<Syn> = vec![(5, 1, 0, true, "", 0, 60_000, "ok")];
    for r in 0..5i64 {
        for i in 0..3i64 {
            let id = (10 + r * 3 + i) as u8;
            wide.push((
                5,
                id,
                1,
                false,
                "weather",
                r * 1000 + i,
                r * 1000 + 500,
                "timeout",
            ));
        }
    }
    let storms = super::tests::storms_of(&wide);
    assert_eq!(storms.len(), 1);
    assert_eq!((storms[0].rounds, storms[0].calls), (5, 15));
}

#[test]
fn polling_with_a_changing_result_is_waiting_not_a_retry() {
    // job_status(same id): running, running, running, succeeded, 1-2-4 s apart.
    let spans = turn(6, "job_status", &["ok"; 4], &[1000, 2000, 4000]);
    let results = [
        None,
        Some("running"),
        Some("running"),
        Some("running"),
        Some("done"),
    ];
    let tc = all(&spans, &args(&["job-7"; 4]), &results);
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    let loops = tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default());
    assert!(loops.is_empty());
    let attempts: Vec<Attempt<'_>> = tc.calls.iter().map(|c| c.attempt()).collect();
    assert!(judge(&attempts, 1.5).iter().all(|v| *v == Verdict::Ok));
    // Growing gaps and no results recorded: polling too.
    let spans = turn(7, "job_status", &["ok"; 5], &[500, 1000, 2000, 4000]);
    let tc = all(&spans, &args(&["job-7"; 5]), &vec![None; spans.len()]);
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
}

#[test]
fn a_booking_sent_again_after_a_backoff_chain_succeeded_is_no_poll() {
    // book(same request): three failures 1, 2, 4 s apart (a backoff that
    // grows), the fourth call succeeds, and 0.5 s later the same booking is
    // sent again. The growing gaps are the retry's backoff, not a poll's:
    // the repeat after the success is reported.
    let spans = turn(
        11,
        "book_flight",
        &["unavailable", "unavailable", "unavailable", "ok", "ok"],
        &[1000, 2000, 4000, 500],
    );
    let results = [None, None, None, None, Some("conf-1"), Some("conf-2")];
    let tc = all(&spans, &args(&["seat-12A"; 5]), &results);
    assert_eq!(retries_after_success(&tc.calls, 1.5, |_| false).len(), 1);
}

#[test]
fn a_status_poll_whose_result_carries_a_counter_is_polling_not_a_retry() {
    // job_status(same id) ×8, 1, 2, 4 … 64 s apart, each answer different
    // ({"status": "running", "progress": N}), the last `succeeded`: no two
    // results alike, and still a poll — its gaps grow.
    let gaps: Vec<i64> = (0..7).map(|k| 1000 << k).collect();
    let spans = turn(9, "job_status", &["ok"; 8], &gaps);
    let mut results: Vec<Option<&str>> = vec![None];
    results.extend(
        [
            r#"{"progress":5,"status":"running"}"#,
            r#"{"progress":12,"status":"running"}"#,
            r#"{"progress":20,"status":"running"}"#,
            r#"{"progress":28,"status":"running"}"#,
            r#"{"progress":36,"status":"running"}"#,
            r#"{"progress":61,"status":"running"}"#,
            r#"{"progress":88,"status":"running"}"#,
            r#"{"progress":100,"status":"succeeded"}"#,
        ]
        .map(Some),
    );
    let tc = all(&spans, &args(&["job-7"; 8]), &results);
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    // The same eight answers at an even pace are eight requests repeated.
    let spans = turn(10, "job_status", &["ok"; 8], &[2000]);
    let tc = all(&spans, &args(&["job-7"; 8]), &results);
    assert_eq!(retries_after_success(&tc.calls, 1.5, |_| false).len(), 1);
}

#[test]
fn the_same_call_with_the_same_answer_again_and_again_is_a_loop() {
    let spans = turn(8, "read_file", &["ok"; 6], &[200]);
    let same = vec![Some("r"); spans.len()];
    let tc = all(&spans, &args(&["a.rs"; 6]), &same);
    let loops = tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default());
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!((loops[0].calls, loops[0].repeats), (6, 6));
    assert!(loops[0].results_known);
    // A different answer each time is not the agent repeating itself.
    let differ = [
        None,
        Some("1"),
        Some("2"),
        Some("3"),
        Some("4"),
        Some("5"),
        Some("6"),
    ];
    let tc = all(&spans, &args(&["a.rs"; 6]), &differ);
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    // Four is not enough; empty arguments carry no hash and are not judged.
    let four = turn(9, "read_file", &["ok"; 4], &[200]);
    let tc = all(&four, &args(&["a.rs"; 4]), &vec![Some("r"); four.len()]);
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    let mut none = vec![None; spans.len()];
    none[0] = None;
    let tc = all(&spans, &none, &same);
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
}

/// A turn calling `tools` in order (with their arguments), 300 ms apart.
fn sequence(t: u8, tools: &[(&'static str, &'static str)]) -> calls::TurnCalls {
    let mut spans: Vec<Syn> = vec![(t, 1, 0, true, "", 0, 600_000, "ok")];
    for (i, (tool, _)) in tools.iter().enumerate() {
        let at = i as i64 * 300;
        spans.push((t, 10 + i as u8, 1, false, tool, at, at + 100, "ok"));
    }
    let a: Vec<&'static str> = tools.iter().map(|(_, a)| *a).collect();
    all(&spans, &args(&a), &vec![None; spans.len()])
}

#[test]
fn a_cycle_run_three_times_is_a_loop_and_an_interruption_breaks_it() {
    let (s, o) = (("search", "q"), ("open", "doc-1"));
    let tc = sequence(10, &[s, o, s, o, s, o]);
    let loops = tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default());
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!(loops[0].steps, vec!["search", "open"]);
    assert_eq!((loops[0].repeats, loops[0].calls), (3, 6));
    // Twice is not a loop; a call of another tool in between breaks the run.
    let tc = sequence(11, &[s, o, s, o]);
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    let tc = sequence(12, &[s, o, ("write", "x"), s, o, s, o]);
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    // Searching and opening different things is research, not a loop.
    let tc = sequence(
        13,
        &[
            ("search", "a"),
            ("open", "1"),
            ("search", "b"),
            ("open", "2"),
            ("search", "c"),
            ("open", "3"),
        ],
    );
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
}

/// `n` calls of `tool`, each an MCP client span (under the agent) with its
/// server span inside it, as the OTel MCP conventions nest them.
fn mcp_pairs(n: u8, tool: &'static str, class: &'static str) -> DataFrame {
    let t = "ee".repeat(16);
    let id = |b: u8| format!("{b:02x}").repeat(8);
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    let mut span = vec![id(1)];
    let mut parent = vec![None];
    let mut start = vec![ms(0)];
    let mut end = vec![ms(60_000)];
    let mut is_tool = vec![false];
    let mut conv = vec![None];
    for i in 0..n {
        let at = i64::from(i) * 1000;
        span.extend([id(10 + i), id(100 + i)]);
        parent.extend([Some(id(1)), Some(id(10 + i))]);
        start.extend([ms(at), ms(at + 5)]);
        end.extend([ms(at + 500), ms(at + 495)]);
        is_tool.extend([true, true]);
        conv.extend([Some("mcp"), Some("mcp")]);
    }
    let rows = span.len();
    df! {
        "trace_id" => vec![t; rows],
        "span_id" => span,
        "parent_span_id" => parent,
        "is_agent" => (0..rows).map(|i| i == 0).collect::<Vec<_>>(),
        "agent_call_id" => vec![None::<String>; rows],
        "start_ns" => start,
        "end_ns" => end,
        "is_tool_call" => is_tool.clone(),
        "tool_name" => is_tool.iter().map(|t| t.then_some(tool)).collect::<Vec<_>>(),
        "service_name" => (0..rows).map(|i| if i % 2 == 0 { "mcp-server" } else { "agent" }).collect::<Vec<_>>(),
        "error_class" => (0..rows).map(|i| if i == 0 { "ok" } else { class }).collect::<Vec<_>>(),
        "tool_args_hash" => is_tool.iter().map(|t| t.then_some("same")).collect::<Vec<_>>(),
        "session_id" => vec![None::<String>; rows],
        "tool_convention" => conv,
    }
    .unwrap()
}

#[test]
fn an_mcp_client_and_server_span_are_one_call() {
    let tc = calls::collect(&mcp_pairs(6, "query_db", "unavailable")).unwrap();
    assert_eq!(tc.calls.len(), 6, "each pair counts once");
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms.len(), 1);
    assert_eq!((storms[0].calls, storms[0].failures), (6, 6));
    // The rollup's rows: one per call, its failure kept.
    let once = crate::spans::once_per_call(&mcp_pairs(6, "query_db", "unavailable")).unwrap();
    let tools = once.column("is_tool_call").unwrap().bool().unwrap().sum();
    assert_eq!(tools, Some(6));
}

#[test]
fn a_failure_only_the_server_span_saw_fails_the_call() {
    // The client span says ok (the framework passed isError on as content);
    // the server span says the tool failed.
    let mut df = mcp_pairs(2, "query_db", "ok");
    let classes: Vec<&str> = (0..df.height())
        .map(|i| {
            if i >= 1 && i % 2 == 0 {
                "unavailable"
            } else {
                "ok"
            }
        })
        .collect();
    df.with_column(Column::new("error_class".into(), classes))
        .unwrap();
    let once = crate::spans::once_per_call(&df).unwrap();
    let failed = once
        .column("error_class")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .filter(|c| *c == Some("unavailable"))
        .count();
    assert_eq!((once.height(), failed), (3, 2));
    let tc = calls::collect(&df).unwrap();
    assert!(tc.calls.iter().all(|c| c.failed()), "{:?}", tc.calls);
}

#[test]
fn a_storm_carries_the_session_of_its_agent_span() {
    let spans = turn(14, "fetch", &["unavailable"; 6], &[5]);
    let mut df = synthetic(&spans);
    let sessions: Vec<Option<&str>> = (0..spans.len())
        .map(|i| (i == 0).then_some("conv-42"))
        .collect();
    df.with_column(Column::new("session_id".into(), sessions))
        .unwrap();
    let tc = calls::collect(&df).unwrap();
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms[0].session_id.as_deref(), Some("conv-42"));
}

#[test]
fn a_supervisor_handing_a_failing_task_to_three_sub_agents_is_one_storm_of_ten() {
    // One user request: a supervisor agent (span 1, session `user-42`)
    // hands the booking to sub-agent 2, then 3, then 4 (each its own
    // agent span and conversation), which call `book_flight` with the same
    // arguments 3, 4 and 3 times, every call a 503. Each sub-agent alone is
    // under the storm minimum for two of them; the user's turn saw ten.
    let mut spans: Vec<Syn> = vec![(15, 1, 0, true, "", 0, 60_000, "ok")];
    let mut at = 100;
    for (agent, calls) in [(2u8, 3u8), (3, 4), (4, 3)] {
        let began = at;
        for k in 0..calls {
            spans.push((
                15,
                agent * 10 + k,
                agent,
                false,
                "book_flight",
                at,
                at + 100,
                "unavailable",
            ));
            at += 400;
        }
        spans.push((15, agent, 1, true, "", began - 50, at, "ok"));
        at += 200;
    }
    let mut df = synthetic(&spans);
    let sessions: Vec<Option<&str>> = spans
        .iter()
        .map(|s| match (s.1, s.3) {
            (1, _) => Some("user-42"),
            (2, true) => Some("sub-a"),
            (3, true) => Some("sub-b"),
            (4, true) => Some("sub-c"),
            _ => None,
        })
        .collect();
    df.with_column(Column::new("session_id".into(), sessions))
        .unwrap();
    let tc = calls::collect(&df).unwrap();
    let storms = retry_storms(&tc, FAR_FUTURE, &StormParams::default());
    assert_eq!(storms.len(), 1, "{storms:?}");
    assert_eq!((storms[0].rounds, storms[0].failures), (10, 10));
    assert_eq!(storms[0].session_id.as_deref(), Some("user-42"));
    assert_eq!(
        storms[0].turn,
        format!("{}/{}", "0f".repeat(16), "01".repeat(8)),
        "the supervisor's span is the turn"
    );
    assert_eq!(tc.turns.len(), 1, "one turn: {:?}", tc.turns.keys());
}

#[test]
fn a_retry_that_recovers_with_backoff_is_no_storm_and_a_chain_ends_at_success() {
    // Five failures with growing backoff, then ok: a healthy policy.
    let spans = turn(
        15,
        "pay",
        &[
            "unavailable",
            "unavailable",
            "unavailable",
            "unavailable",
            "ok",
        ],
        &[250, 500, 1000, 2000],
    );
    assert!(super::tests::storms_of(&spans).is_empty());
    // Two short chains split by a success are not one storm of six.
    let classes = [
        "unavailable",
        "unavailable",
        "ok",
        "unavailable",
        "unavailable",
        "unavailable",
    ];
    assert!(super::tests::storms_of(&turn(16, "pay", &classes, &[5])).is_empty());
}

#[test]
fn three_bookings_with_three_confirmations_are_not_a_poll() {
    let spans = turn(17, "book_hotel", &["ok"; 3], &[2000]);
    let results = [None, Some("c1"), Some("c2"), Some("c3")];
    let tc = all(&spans, &args(&["h-9"; 3]), &results);
    let found = retries_after_success(&tc.calls, 1.5, |_| false);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].repeats, 2);
}

#[test]
fn the_same_tests_run_after_each_edit_are_work_not_a_retry() {
    // bash("npm test") / edit_file(...) alternating: the edits change the
    // state the tests read; no retry after success, no loop.
    let mut steps: Vec<(&'static str, &'static str)> = Vec::new();
    let edits = ["e1", "e2", "e3", "e4", "e5", "e6"];
    for e in edits {
        steps.push(("bash", "npm test"));
        steps.push(("edit_file", e));
    }
    let tc = sequence(18, &steps);
    assert!(retries_after_success(&tc.calls, 1.5, |_| false).is_empty());
    assert!(tool_loops(&tc, FAR_FUTURE, 90, 1.5, &LoopParams::default()).is_empty());
    // With only reads in between, it is a repeat.
    let mut reads: Vec<(&'static str, &'static str)> = Vec::new();
    for e in ["a", "b"] {
        reads.push(("bash", "npm test"));
        reads.push(("get_status", e));
    }
    let tc = sequence(19, &reads);
    let read_only = |t: &str| t.starts_with("get_");
    assert_eq!(retries_after_success(&tc.calls, 1.5, read_only).len(), 1);
}

#[test]
fn an_agent_debugging_with_different_commands_is_no_storm() {
    // Five different commands failing with `exit 1` (unknown), then one that works.
    let mut classes = vec!["unknown"; 5];
    classes.push("ok");
    let spans = turn(20, "bash", &classes, &[1000]);
    let cmds = [
        "make",
        "make -j1",
        "cargo b",
        "cargo b -v",
        "cc x.c",
        "cc -O0 x.c",
    ];
    let tc = all(&spans, &args(&cmds), &vec![None; spans.len()]);
    assert!(retry_storms(&tc, FAR_FUTURE, &StormParams::default()).is_empty());
    // The same command failing five times is a blind retry: a storm.
    let tc = all(&spans, &args(&["make"; 6]), &vec![None; spans.len()]);
    assert_eq!(
        retry_storms(&tc, FAR_FUTURE, &StormParams::default()).len(),
        1
    );
}

#[test]
fn a_success_that_ends_a_chain_is_never_wasted() {
    let spans = turn(21, "read_file", &["not_found", "ok"], &[500]);
    let tc = all(&spans, &args(&["x"; 2]), &vec![None; spans.len()]);
    let attempts: Vec<Attempt<'_>> = tc.calls.iter().map(|c| c.attempt()).collect();
    assert_eq!(
        judge(&attempts, 1.5),
        vec![Verdict::Failed, Verdict::Rescued]
    );
    // A retry that resends a request which already went through is a
    // repeat after success, even inside a chain.
    let spans = turn(22, "book", &["ok", "unavailable", "ok"], &[500]);
    let tc = all(&spans, &args(&["x", "y", "x"]), &vec![None; spans.len()]);
    let attempts: Vec<Attempt<'_>> = tc.calls.iter().map(|c| c.attempt()).collect();
    assert_eq!(
        judge(&attempts, 1.5),
        vec![Verdict::Ok, Verdict::Failed, Verdict::AfterSuccess]
    );
}

#[test]
fn a_wrapper_around_two_attempts_counts_the_attempts() {
    // ai.toolCall (ok) around two MCP tools/call spans: a 503, then ok.
    let t = "fa".repeat(16);
    let id = |b: u8| format!("{b:02x}").repeat(8);
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    let df = df! {
        "trace_id" => vec![t; 4],
        "span_id" => [id(1), id(2), id(3), id(4)],
        "parent_span_id" => [None, Some(id(1)), Some(id(2)), Some(id(2))],
        "is_agent" => [true, false, false, false],
        "agent_call_id" => [None::<String>, None, None, None],
        "start_ns" => [ms(0), ms(10), ms(20), ms(600)],
        "end_ns" => [ms(5000), ms(1000), ms(500), ms(900)],
        "is_tool_call" => [false, true, true, true],
        "tool_name" => [None, Some("query_db"), Some("query_db"), Some("query_db")],
        "service_name" => ["svc"; 4],
        "error_class" => ["ok", "ok", "unavailable", "ok"],
        "tool_args_hash" => [None, Some("q"), Some("q"), Some("q")],
        "session_id" => [None::<String>, None, None, None],
    }
    .unwrap();
    let tc = calls::collect(&df).unwrap();
    assert_eq!(tc.calls.len(), 2, "{:?}", tc.calls);
    let attempts: Vec<Attempt<'_>> = tc.calls.iter().map(|c| c.attempt()).collect();
    assert_eq!(
        judge(&attempts, 1.5),
        vec![Verdict::Failed, Verdict::Rescued]
    );
}
