//! Remedies: each kind's answer, with the numbers and names its evidence
//! carries.

use super::*;
use crate::model::ErrorClass;

fn draft(kind: Kind, class: ErrorClass, evidence: Evidence) -> SignalDraft {
    let f = Finding {
        kind,
        tool: "search_flights".into(),
        class,
        at_ns: 0,
        day: 20_663,
        evidence: Some(evidence),
        calls: 15,
        errors: 15,
        rate: 0.0,
        baseline: 0.0,
        read_only: false,
        basis: None,
        silence: None,
    };
    group(&[f], 10).remove(0)
}

fn storm_turn() -> Evidence {
    Evidence {
        rhythm: Some("no_backoff".into()),
        turn_duration_s: Some(80.0),
        healthy_turn_duration_s: Some(8.1),
        same_args: Some(1.0),
        ..Evidence::turn("t1", "t1/root", 20_663, 15, 15)
    }
}

#[test]
fn a_storm_on_a_retryable_class_gets_a_cap_backoff_and_retry_after_with_its_numbers() {
    let d = draft(Kind::RetryStorm, ErrorClass::Unavailable, storm_turn());
    let r = remedy(&d, &["HTTP 503".into(), "UpstreamUnavailable".into()]);
    // Twice the healthy turn (8.1 s), rounded up.
    assert_eq!(
        r.summary,
        "Cap at 3 attempts or 17 s, exponential backoff with jitter, honour Retry-After."
    );
    assert!(r.cut_off.contains("15 calls in 80 s"), "{}", r.cut_off);
    assert!(
        r.waiting_fixes.contains("\"HTTP 503\""),
        "{}",
        r.waiting_fixes
    );
    assert!(
        r.waiting_fixes.contains("no backoff"),
        "{}",
        r.waiting_fixes
    );
    assert!(
        r.change.contains("100 % of its retries repeated"),
        "{}",
        r.change
    );
    // The sweep's grouping already attached one (without raw names).
    assert!(d.remedy.is_some());
}

#[test]
fn retries_of_a_deterministic_error_are_told_to_fail_fast_naming_the_raw_errors() {
    let e = Evidence {
        outcome: Some("gave_up".into()),
        ..Evidence::turn("t2", "t2/root", 20_663, 4, 4)
    };
    let d = draft(Kind::WastedRetries, ErrorClass::InvalidRequest, e);
    let r = remedy(&d, &["HTTP 422".into()]);
    assert!(r.summary.starts_with("Fail fast"), "{}", r.summary);
    assert!(r.summary.contains("\"HTTP 422\""), "{}", r.summary);
    assert!(r.cut_off.contains("3 retries"), "{}", r.cut_off);
    // A storm of a deterministic class is the same advice.
    let s = draft(Kind::RetryStorm, ErrorClass::Auth, storm_turn());
    assert!(remedy(&s, &[]).summary.starts_with("Fail fast"));
}

#[test]
fn a_retry_after_success_is_told_to_check_the_side_effect() {
    let d = draft(
        Kind::RetryAfterSuccess,
        ErrorClass::Ok,
        Evidence::turn("t3", "t3/root", 20_663, 2, 0),
    );
    let r = remedy(&d, &[]);
    assert!(r.summary.contains("idempotency key"), "{}", r.summary);
    assert!(r.change.contains("search_flights"), "{}", r.change);
}

#[test]
fn stacked_retries_are_told_to_keep_one_layer_naming_the_parents() {
    let e = Evidence {
        rhythm: Some("layers 3×3".into()),
        parents: vec!["aa01".into(), "aa02".into(), "aa03".into()],
        ..Evidence::turn("t4", "t4/root", 20_663, 9, 9)
    };
    let d = draft(Kind::StackedRetries, ErrorClass::Timeout, e);
    let r = remedy(&d, &[]);
    assert!(
        r.summary.starts_with("Keep one retry layer"),
        "{}",
        r.summary
    );
    assert!(
        r.summary.contains("\"aa01\", \"aa02\", \"aa03\""),
        "{}",
        r.summary
    );
    assert!(
        r.cut_off.contains("9 calls under 3 retrying parents"),
        "{}",
        r.cut_off
    );
}

#[test]
fn drafts_stored_before_remedies_read_as_having_none() {
    let d = draft(Kind::RetryStorm, ErrorClass::Unavailable, storm_turn());
    let mut v = serde_json::to_value(&d).unwrap();
    v.as_object_mut().unwrap().remove("remedy");
    let old: SignalDraft = serde_json::from_value(v).unwrap();
    assert!(old.remedy.is_none());
}

fn driven(driver: &str, framework: Option<&str>) -> Evidence {
    Evidence {
        driver: Some(super::driver::DriverEvidence {
            driver: driver.into(),
            model_calls: if driver == "code" { 0 } else { 14 },
            input_tokens: if driver == "code" { 0 } else { 8_400 },
            output_tokens: if driver == "code" { 0 } else { 126 },
            cost_usd: (driver != "code").then_some(0.0223),
            unpriced_calls: 0,
            models: vec![],
            framework: framework.map(str::to_string),
        }),
        ..storm_turn()
    }
}

#[test]
fn a_retry_chain_s_remedy_follows_its_driver() {
    // Code: the wrapper, not the model.
    let d = draft(
        Kind::RetryStorm,
        ErrorClass::Unavailable,
        driven("code", None),
    );
    let r = remedy(&d, &[]);
    assert!(
        r.change.starts_with("Code retried search_flights"),
        "{}",
        r.change
    );
    assert!(r.change.contains("fix the retry wrapper"), "{}", r.change);
    assert!(!r.change.contains("tells the model"), "{}", r.change);
    assert!(
        r.summary
            .ends_with("Driver: code retried: fix the retry wrapper."),
        "{}",
        r.summary
    );

    // The model, under pydantic-ai: the error to return, its setting, the
    // round trips and tokens spent.
    let d = draft(
        Kind::RetryStorm,
        ErrorClass::Unavailable,
        driven("model", Some("pydantic-ai")),
    );
    let r = remedy(&d, &[]);
    for w in [
        "return an error that tells the model not to repeat the call",
        "pydantic-ai",
        "UsageLimits(tool_calls_limit=",
        "14 model round trips, 8400 input and 126 output tokens, $0.0223",
    ] {
        assert!(r.change.contains(w), "{w:?} not in {}", r.change);
    }
    assert!(!r.change.contains("fix the retry wrapper"), "{}", r.change);

    // The model under a framework its scope did not name: the generic cap.
    let d = draft(
        Kind::WastedRetries,
        ErrorClass::InvalidRequest,
        driven("model", None),
    );
    let r = remedy(&d, &[]);
    assert!(
        r.change
            .contains("cap tool calls per turn in the agent framework"),
        "{}",
        r.change
    );

    // Mixed: both.
    let d = draft(
        Kind::RetryStorm,
        ErrorClass::Unavailable,
        driven("mixed", Some("LangGraph or LangChain")),
    );
    let r = remedy(&d, &[]);
    assert!(r.change.contains("fix the retry wrapper"), "{}", r.change);
    assert!(r.change.contains("recursion_limit"), "{}", r.change);

    // No driver (a result kept before the rule): the remedy as before.
    let d = draft(Kind::RetryStorm, ErrorClass::Unavailable, storm_turn());
    assert!(!remedy(&d, &[]).summary.contains("Driver"));
}

#[test]
fn frameworks_are_named_by_their_model_spans_scope() {
    use super::driver::framework;
    assert_eq!(
        framework("pydantic-ai").map(|f| f.name),
        Some("pydantic-ai")
    );
    assert_eq!(
        framework("openinference.instrumentation.langchain").map(|f| f.name),
        Some("LangGraph or LangChain")
    );
    // One scope for both: the remedy names both caps.
    let lc = framework("openinference.instrumentation.langchain").unwrap();
    assert!(lc.setting.contains("recursion_limit") && lc.setting.contains("max_iterations"));
    // The AI SDK's older cap, under either scope.
    for scope in ["ai", "gen_ai"] {
        assert!(
            framework(scope).unwrap().setting.contains("maxSteps"),
            "{scope}"
        );
    }
    assert_eq!(
        framework("strands.telemetry.tracer").map(|f| f.name),
        Some("Strands Agents")
    );
    assert_eq!(
        framework("gcp.vertex.agent").map(|f| f.name),
        Some("Google ADK")
    );
    // A dotted name below a scope, never a prefix of another word.
    assert_eq!(framework("aiohttp"), None);
    assert_eq!(framework("strandsx"), None);
}

/// A draft of `kind` over evidence chains with these drivers.
fn draft_of(kind: Kind, class: ErrorClass, drivers: &[&str]) -> SignalDraft {
    let mut d = draft(kind, class, driven(drivers[0], Some("pydantic-ai")));
    d.evidence = drivers
        .iter()
        .enumerate()
        .map(|(i, dr)| Evidence {
            calls: 15 - i,
            ..driven(dr, Some("pydantic-ai"))
        })
        .collect();
    d
}

#[test]
fn a_signal_s_driver_counts_all_its_chains_and_says_the_split() {
    // The worst chain is code, nine others the model: mixed, with the split.
    let mut drivers = vec!["code"];
    drivers.extend(["model"; 9]);
    let d = draft_of(Kind::RetryStorm, ErrorClass::Unavailable, &drivers);
    let r = remedy(&d, &[]);
    assert!(
        r.change.contains("Both code and the model retried"),
        "{}",
        r.change
    );
    assert!(
        r.change.contains("(model in 9 of 10 chains, code in 1)"),
        "{}",
        r.change
    );
    // Model calls and tokens summed over the chains.
    assert!(
        r.change
            .contains("126 model round trips, 75600 input and 1134 output tokens"),
        "{}",
        r.change
    );
    assert!(
        r.summary.contains("Driver: code and the model retried"),
        "{}",
        r.summary
    );
    // All agreeing: that driver, no split.
    let d = draft_of(Kind::RetryStorm, ErrorClass::Unavailable, &["model"; 3]);
    let r = remedy(&d, &[]);
    assert!(
        r.change.starts_with("The model asked again"),
        "{}",
        r.change
    );
    assert!(!r.change.contains(" of 3 chains"), "{}", r.change);
}

#[test]
fn a_model_driven_remedy_gives_no_backoff_advice() {
    for (kind, class) in [
        (Kind::RetryStorm, ErrorClass::Unavailable),
        (Kind::RetryStorm, ErrorClass::Unknown),
        (Kind::WastedRetries, ErrorClass::InvalidRequest),
    ] {
        let d = draft_of(kind, class, &["model", "model"]);
        let r = remedy(&d, &[]);
        for text in [&r.change, &r.summary] {
            let lower = text.to_lowercase();
            for w in ["backoff", "back off", "jitter", "retry-after"] {
                assert!(!lower.contains(w), "{kind:?}: {w:?} in {text}");
            }
        }
        assert!(
            r.change
                .contains("return an error that tells the model not to repeat the call"),
            "{}",
            r.change
        );
        assert!(
            r.change.contains("UsageLimits(tool_calls_limit="),
            "{}",
            r.change
        );
        assert!(r.summary.starts_with("The model retried"), "{}", r.summary);
    }
    // Mixed: both the wrapper's backoff and the model's error.
    let d = draft_of(
        Kind::RetryStorm,
        ErrorClass::Unavailable,
        &["model", "code"],
    );
    let r = remedy(&d, &[]);
    assert!(r.change.contains("backoff"), "{}", r.change);
    assert!(
        r.change.contains("tells the model not to repeat"),
        "{}",
        r.change
    );
}

#[test]
fn costs_show_three_significant_digits_and_say_when_partly_priced() {
    use super::driver::{cost_words, usd};
    assert_eq!(usd(0.0223), "$0.0223");
    assert_eq!(usd(0.000_012_34), "$0.0000123");
    assert_eq!(usd(12.5), "$12.50");
    assert_eq!(usd(1234.0), "$1234.00");
    assert_eq!(usd(0.0), "$0.00");
    assert_eq!(cost_words(Some(0.0223), 0, 14), ", $0.0223");
    assert_eq!(
        cost_words(Some(0.0223), 2, 14),
        ", $0.0223 (2 of 14 calls unpriced)"
    );
    assert_eq!(cost_words(None, 14, 14), "");
    // In the remedy: a cost of a few millionths is not $0.0000.
    let mut e = driven("model", None);
    let dr = e.driver.as_mut().unwrap();
    dr.cost_usd = Some(0.000_004_2);
    dr.unpriced_calls = 3;
    let r = remedy(&draft(Kind::RetryStorm, ErrorClass::Unavailable, e), &[]);
    assert!(
        r.change.contains("$0.00000420 (3 of 14 calls unpriced)"),
        "{}",
        r.change
    );
}
