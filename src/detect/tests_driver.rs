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
        // Starts inside the third.
        model(2050, 2090, 10, 1),
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

#[test]
fn a_streaming_model_call_counts_by_its_start_though_it_ends_after_the_next_round() {
    // A streaming runner executes the tool the model asked for before the
    // stream's span closes: the model call starts in the gap and ends
    // after the next attempt began (or even ended).
    let a = attempts(&[0, 1000, 2000]);
    let models = [model(300, 1150, 10, 1), model(1200, 2500, 20, 2)];
    let d = drive(&rounds(&a), &models, &prices());
    assert_eq!(d.driver, Driver::Model);
    assert_eq!((d.model_calls, d.input_tokens), (2, 30));
    // Its start within the 1 ms slack on either side of the gap counts;
    // beyond it, not.
    let at = |start_ms: f64| {
        let mut m = model(0, 5000, 1, 1);
        m.start_ns = (start_ms * MS as f64) as i64;
        drive(&rounds(&a[..2]), &[m], &prices()).driver
    };
    assert_eq!(at(99.0), Driver::Model);
    assert_eq!(at(1001.0), Driver::Model);
    assert_eq!(at(98.5), Driver::Code);
    assert_eq!(at(1001.5), Driver::Code);
    assert!(super::driver::between(1001 * MS, 100 * MS, 1000 * MS));
}

#[test]
fn a_dated_model_name_takes_its_family_s_price() {
    let mut cost = prices();
    cost.models.insert(
        "gpt-4o-mini".into(),
        ModelPrice {
            input_per_mtok: 0.15,
            output_per_mtok: 0.6,
        },
    );
    let price = |name: &str| cost.price_of(name).map(|p| p.input_per_mtok);
    // Exact, then the longest configured prefix ending at `-`, `@`, `:`.
    assert_eq!(price("gpt-4o"), Some(2.5));
    assert_eq!(price("gpt-4o-2024-08-06"), Some(2.5));
    assert_eq!(price("gpt-4o-mini-2024-07-18"), Some(0.15));
    assert_eq!(price("gpt-4o@2024-08-06"), Some(2.5));
    assert_eq!(price("gpt-4o:latest"), Some(2.5));
    // A prefix not ending at a separator is another model.
    assert_eq!(price("gpt-4omni"), None);
    assert_eq!(price("gpt-4"), None);
    // And the driver prices a dated response model.
    let mut m = model(150, 900, 1_000_000, 0);
    m.model = Some("gpt-4o-2024-08-06".into());
    let d = drive(&rounds(&attempts(&[0, 1000])), &[m], &cost);
    assert_eq!((d.cost_usd, d.unpriced_calls), (Some(2.5), 0));
}

#[test]
fn wasted_retries_are_driven_per_round_not_per_call() {
    use super::calls::Call;
    // Three calls of one request: the second and third overlap (one
    // round), a model call in the one gap between rounds. Per call, the
    // "gap" from the second to the third has no model call (mixed); per
    // round, every gap has one (model).
    let call = |start_ms: i64, end_ms: i64| Call {
        turn: "t1".into(),
        trace_id: "t".into(),
        span_id: format!("{start_ms}"),
        parent_span_id: None,
        tool: "book".into(),
        service: "svc".into(),
        start_ns: start_ms * MS,
        end_ns: end_ms * MS,
        class: ErrorClass::InvalidRequest,
        args_hash: Some("a".into()),
        result_hash: None,
        session_id: None,
        cost_usd: None,
        seq: 0,
        retry_after_ms: None,
        wait_from_ns: None,
    };
    let calls = [call(0, 100), call(1000, 1100), call(1050, 1150)];
    let models = BTreeMap::from([("t1".to_string(), vec![model(300, 900, 10, 1)])]);
    let w = super::retries::wasted_retries_driven(&calls, &models, &prices());
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].drive.driver, Driver::Model);
    assert_eq!(w[0].drive.model_calls, 1);
}
