//! Who is knocking (detection.md §4.2, "Driver"): whether a retry chain's
//! attempts were made by code — a retry wrapper, a decorator, a loop, the
//! attempts back to back with no model call between them — or by the
//! model, the framework having handed each error back and the model having
//! called the tool again (a model round trip of the same turn between
//! every two rounds), or both (`mixed`). For a model-driven chain the
//! model round trips between its rounds, their tokens and their cost are
//! the price of the knocking. Pure: the model spans and the price table
//! come in as arguments.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::chains::{Round, OVERLAP_SLACK_NS};

/// One model round trip of a turn (a model span, docs/detection.md §1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCall {
    pub start_ns: i64,
    pub end_ns: i64,
    /// The model it named.
    pub model: Option<String>,
    /// The instrumentation scope that made the span: the framework.
    pub scope: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// What the span itself says it cost.
    pub cost_usd: Option<f64>,
}

/// One model's prices, in USD per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// `[cost]` in the config file: prices per model name (as the model spans
/// name it), empty by default. A model span's own recorded cost wins.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostParams {
    pub models: BTreeMap<String, ModelPrice>,
}

impl CostParams {
    /// What a model call cost: its own recorded cost, else its tokens at
    /// its model's price (a token count not recorded counts none); `None`
    /// when neither is known.
    pub fn cost_of(&self, m: &ModelCall) -> Option<f64> {
        if let Some(c) = m.cost_usd {
            return Some(c);
        }
        let price = self.price_of(m.model.as_deref()?)?;
        if m.input_tokens.is_none() && m.output_tokens.is_none() {
            return None;
        }
        let tokens = |t: Option<i64>| t.unwrap_or(0).max(0) as f64 / 1e6;
        Some(
            tokens(m.input_tokens) * price.input_per_mtok
                + tokens(m.output_tokens) * price.output_per_mtok,
        )
    }
}

impl CostParams {
    /// The price of `model`: its own entry, else the longest configured
    /// name that is a prefix of it followed by `-`, `@`, `:` or nothing — a
    /// dated response model (`gpt-4o-2024-08-06`, `claude-3-5-sonnet@20240620`)
    /// takes its family's price (`gpt-4o`), never a longer family's
    /// (`gpt-4o-mini` is not priced as `gpt-4o` when both are configured).
    pub fn price_of(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        self.models
            .iter()
            .filter(|(name, _)| {
                model
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '@', ':']))
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| p)
    }
}

/// Who made a chain's retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// No model call between any two rounds: a retry wrapper or a loop.
    Code,
    /// A model call between every two rounds: the model asked again.
    Model,
    /// Some retries of each.
    Mixed,
}

impl Driver {
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Code => "code",
            Driver::Model => "model",
            Driver::Mixed => "mixed",
        }
    }
}

/// A chain's driver and what its model round trips cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Drive {
    pub driver: Driver,
    /// Model calls between the chain's rounds.
    pub model_calls: usize,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// The cost of those model calls that have one (own or priced);
    /// `None` when none has.
    pub cost_usd: Option<f64>,
    /// Of those model calls, how many have no cost.
    pub unpriced_calls: usize,
    /// The models they named, sorted.
    pub models: Vec<String>,
    /// The instrumentation scope of the first of them: the framework that
    /// handed the errors back to the model.
    pub scope: Option<String>,
}

/// Whether a model call that started at `start_ns` lies in the gap from
/// `after_ns` (the end of one round) to `before_ns` (the start of the
/// next): its start within the gap, allowing the 1 ms the JS SDK's
/// whole-millisecond start times may be off on either side. Its end may
/// come later: a streaming runner executes the tool the model asked for
/// before the stream's span closes. A model call that started during an
/// attempt is not between two.
pub fn between(start_ns: i64, after_ns: i64, before_ns: i64) -> bool {
    start_ns + OVERLAP_SLACK_NS >= after_ns && start_ns <= before_ns + OVERLAP_SLACK_NS
}

/// The gaps between successive rounds: (end of one, start of the next).
pub fn gaps(rounds: &[Round]) -> Vec<(i64, i64)> {
    rounds
        .windows(2)
        .map(|w| (w[0].end_ns, w[1].start_ns))
        .collect()
}

/// Per gap between successive `rounds`, whether a model call (by its start,
/// `model_starts`) lies in it: the per-retry driver the trace view and the
/// MCP server show, `model` where true, else `code`.
pub fn rounds_asked(rounds: &[Round], model_starts: &[i64]) -> Vec<bool> {
    gaps(rounds)
        .into_iter()
        .map(|(after, before)| model_starts.iter().any(|&s| between(s, after, before)))
        .collect()
}

/// The driver of a chain of `rounds` (in order, two or more for any retry)
/// among its turn's `models` (any order). A chain of one round has no
/// retry: `code`, with no model call.
pub fn drive(rounds: &[Round], models: &[ModelCall], cost: &CostParams) -> Drive {
    drive_gaps(&gaps(rounds), models, cost)
}

/// [`drive`] over the gaps between rounds: (end of one, start of the next).
pub fn drive_gaps(gaps: &[(i64, i64)], models: &[ModelCall], cost: &CostParams) -> Drive {
    let mut counted = vec![false; models.len()];
    let mut with_model = 0;
    for &(after, before) in gaps {
        let mut any = false;
        for (k, m) in models.iter().enumerate() {
            if between(m.start_ns, after, before) {
                any = true;
                counted[k] = true;
            }
        }
        with_model += usize::from(any);
    }
    let driver = if gaps.is_empty() || with_model == 0 {
        Driver::Code
    } else if with_model == gaps.len() {
        Driver::Model
    } else {
        Driver::Mixed
    };
    let mut d = Drive {
        driver,
        model_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
        unpriced_calls: 0,
        models: Vec::new(),
        scope: None,
    };
    for m in models
        .iter()
        .zip(&counted)
        .filter(|(_, c)| **c)
        .map(|(m, _)| m)
    {
        d.model_calls += 1;
        d.input_tokens += m.input_tokens.unwrap_or(0).max(0);
        d.output_tokens += m.output_tokens.unwrap_or(0).max(0);
        match cost.cost_of(m) {
            Some(c) => *d.cost_usd.get_or_insert(0.0) += c,
            None => d.unpriced_calls += 1,
        }
        if d.scope.is_none() {
            d.scope = m.scope.clone();
        }
        if let Some(name) = &m.model {
            if !d.models.contains(name) {
                d.models.push(name.clone());
            }
        }
    }
    d.models.sort();
    d
}
