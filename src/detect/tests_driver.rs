//! The driver rule (detection.md §4.2, "Driver"): code, model, mixed; a
//! model call overlapping an attempt is not between two; tokens and cost
//! summed over the model calls between rounds; the price table, and a
//! span's own cost before it.

use std::collections::BTreeMap;

use super::chains::{rounds, Attempt};
use super::driver::{drive, CostParams, Driver, ModelCall, ModelPrice};
use crate::model::ErrorClass;

const MS: i64 = 1_000_000;

/// Attempts of 100 ms each at these starts (ms), all failing but the last.
fn attempts(starts: &[i64]) -> Vec<Attempt<'static>> {
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| Attempt {
            class: if i + 1 == starts.len() {
                ErrorClass::Ok
            } else {
                ErrorClass::Unavailable
            },
            args: None,
            result: None,
            start_ns: s * MS,
            end_ns: (s + 100) * MS,
            retry_after_ms: None,
            wait_from_ns: None,
        })
        .collect()
}

fn model(start_ms: i64, end_ms: i64, input: i64, output: i64) -> ModelCall {
    ModelCall {
        start_ns: start_ms * MS,
        end_ns: end_ms * MS,
        model: Some("gpt-4o".into()),
        scope: Some("pydantic-ai".into()),
        input_tokens: Some(input),
        output_tokens: Some(output),
        cost_usd: None,
    }
}

fn prices() -> CostParams {
    CostParams {
        models: BTreeMap::from([(
            "gpt-4o".to_string(),
            ModelPrice {
                input_per_mtok: 2.5,
                output_per_mtok: 10.0,
            },
        )]),
    }
}

#[test]
fn attempts_back_to_back_are_code() {
    let a = attempts(&[0, 200, 400, 600]);
    // A model call before the first attempt and one after the last are
    // not between attempts.
    let models = [model(-500, -10, 50, 5), model(710, 900, 50, 5)];
    let d = drive(&rounds(&a), &models, &prices());
    assert_eq!(d.driver, Driver::Code);
    assert_eq!((d.model_calls, d.input_tokens, d.output_tokens), (0, 0, 0));
    assert_eq!(d.cost_usd, None);
}

#[test]
fn a_model_call_in_every_gap_is_model_with_its_tokens_and_cost() {
    let a = attempts(&[0, 1000, 2000, 3000]);
    let models = [
        model(150, 900, 100, 10),
        model(1100, 1900, 200, 20),
        model(2100, 2900, 300, 30),
    ];
    let d = drive(&rounds(&a), &models, &prices());
    assert_eq!(d.driver, Driver::Model);
    assert_eq!(
        (d.model_calls, d.input_tokens, d.output_tokens),
        (3, 600, 60)
    );
    // 600 input tokens at $2.5/M and 60 output at $10/M.
    let cost = d.cost_usd.expect("priced");
    assert!(
        (cost - (600.0 * 2.5 + 60.0 * 10.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert_eq!(d.unpriced_calls, 0);
    assert_eq!(d.models, vec!["gpt-4o".to_string()]);
    assert_eq!(d.scope.as_deref(), Some("pydantic-ai"));
}

#[test]
fn some_gaps_with_a_model_call_are_mixed() {
    let a = attempts(&[0, 200, 1000, 1200]);
    let models = [model(350, 900, 10, 1)];
    let d = drive(&rounds(&a), &models, &CostParams::default());
    assert_eq!(d.driver, Driver::Mixed);
    assert_eq!(d.model_calls, 1);
    // No price table and no cost on the span: no cost.
    assert_eq!((d.cost_usd, d.unpriced_calls), (None, 1));
}

#[test]
fn a_model_call_overlapping_an_attempt_is_not_between_two() {
    let a = attempts(&[0, 1000, 2000]);
    let models = [
        // Starts inside the first attempt.
        model(50, 900, 10, 1),
        // Ends inside the third.
        model(1150, 2050, 10, 1),
    ];
    let d = drive(&rounds(&a), &models, &prices());
    assert_eq!(d.driver, Driver::Code);
    assert_eq!(d.model_calls, 0);
}

#[test]
fn the_one_millisecond_slack_of_whole_millisecond_starts() {
    // A model call that seems to start 1 ms before the attempt ended (the
    // JS SDK's whole milliseconds) and to end 1 ms after the next began.
    let a = attempts(&[0, 1000]);
    let models = [model(99, 1001, 10, 1)];
    let d = drive(&rounds(&a), &models, &prices());
    assert_eq!(d.driver, Driver::Model);
}

#[test]
fn a_span_s_own_cost_wins_over_the_price_table() {
    let a = attempts(&[0, 1000, 2000]);
    let mut own = model(150, 900, 1000, 100);
    own.cost_usd = Some(0.5);
    let mut unknown = model(1150, 1900, 1000, 100);
    unknown.model = Some("not-in-the-table".into());
    let d = drive(&rounds(&a), &[own, unknown], &prices());
    assert_eq!(d.driver, Driver::Model);
    assert_eq!((d.cost_usd, d.unpriced_calls), (Some(0.5), 1));
    assert_eq!(
        d.models,
        vec!["gpt-4o".to_string(), "not-in-the-table".to_string()]
    );
}

#[test]
fn a_chain_of_one_round_is_code_with_nothing() {
    let a = attempts(&[0]);
    let d = drive(&rounds(&a), &[model(200, 300, 1, 1)], &prices());
    assert_eq!(d.driver, Driver::Code);
    assert_eq!(d.model_calls, 0);
}
