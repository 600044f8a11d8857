//! Who is knocking, as signals and remedies say it (detection.md §4.2,
//! "Driver"): a chain's driver and its model round trips as evidence, and
//! the remedy's words by driver — the wrapper to fix when code retried,
//! the error to return and the framework's own cap when the model did,
//! named from the model spans' instrumentation scope.

use serde::{Deserialize, Serialize};

use crate::detect::{Drive, Driver};

/// A retry chain's driver in a signal's evidence (also an MCP answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DriverEvidence {
    /// `code` (no model call between attempts: a retry wrapper or loop),
    /// `model` (a model call between every two: the model asked again) or
    /// `mixed`.
    pub driver: String,
    /// Model calls between the chain's attempts, and their tokens.
    pub model_calls: usize,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// What those model calls cost (their spans' own cost, else `[cost]`
    /// prices); absent when none could be priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Of those model calls, how many had no cost.
    #[serde(default)]
    pub unpriced_calls: usize,
    /// The models they named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The framework that handed the errors back to the model, when its
    /// instrumentation scope names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
}

impl From<&Drive> for DriverEvidence {
    fn from(d: &Drive) -> Self {
        DriverEvidence {
            driver: d.driver.as_str().to_string(),
            model_calls: d.model_calls,
            input_tokens: d.input_tokens,
            output_tokens: d.output_tokens,
            cost_usd: d.cost_usd,
            unpriced_calls: d.unpriced_calls,
            models: d.models.clone(),
            framework: d
                .scope
                .as_deref()
                .and_then(framework)
                .map(|f| f.name.to_string()),
        }
    }
}

/// A framework and its own cap on a run's model and tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framework {
    pub name: &'static str,
    /// Where the framework caps how often the model may call again.
    pub setting: &'static str,
}

/// Frameworks by the instrumentation scope of their model spans (the
/// scope, or a dotted name below it), each setting checked in the
/// framework's code at the version the conformance suite runs.
pub const FRAMEWORKS: [(&str, Framework); 8] = [
    (
        "pydantic-ai",
        Framework {
            name: "pydantic-ai",
            setting: "the tool's `retries` (`@agent.tool(retries=…)`, or `Agent(retries=…)`: how many times a `ModelRetry` goes back to the model) and `UsageLimits(tool_calls_limit=…, request_limit=…)` passed as the run's `usage_limits`",
        },
    ),
    (
        "openinference.instrumentation.langchain",
        Framework {
            name: "LangGraph or LangChain",
            setting: "LangGraph's `recursion_limit` (`graph.invoke(…, {\"recursion_limit\": …})`), or LangChain AgentExecutor's `max_iterations` (`AgentExecutor(…, max_iterations=…)`)",
        },
    ),
    (
        "openinference.instrumentation.openai_agents",
        Framework {
            name: "OpenAI Agents SDK",
            setting: "`max_turns` (`Runner.run(agent, …, max_turns=…)`)",
        },
    ),
    (
        "openinference.instrumentation.smolagents",
        Framework {
            name: "smolagents",
            setting: "the agent's `max_steps` (`ToolCallingAgent(…, max_steps=…)`)",
        },
    ),
    (
        "gcp.vertex.agent",
        Framework {
            name: "Google ADK",
            setting: "`RunConfig(max_llm_calls=…)` passed to the runner",
        },
    ),
    (
        "strands",
        Framework {
            name: "Strands Agents",
            setting: "the invocation's `limits={\"turns\": …}` (`agent(…, limits=…)`), or a `BeforeToolCallEvent` hook that sets `cancel_tool`",
        },
    ),
    (
        "ai",
        Framework {
            name: "Vercel AI SDK",
            setting: "`stopWhen: stepCountIs(…)` on `generateText` / `streamText` (`maxSteps` before AI SDK 5)",
        },
    ),
    (
        "gen_ai",
        Framework {
            name: "Vercel AI SDK",
            setting: "`stopWhen: stepCountIs(…)` on `generateText` / `streamText` (`maxSteps` before AI SDK 5)",
        },
    ),
];

/// The framework a model span's scope names.
pub fn framework(scope: &str) -> Option<Framework> {
    FRAMEWORKS.iter().find_map(|(s, f)| {
        (scope == *s || scope.strip_prefix(s).is_some_and(|r| r.starts_with('.'))).then_some(*f)
    })
}

/// The framework whose name the evidence carries.
fn framework_named(name: &str) -> Option<Framework> {
    FRAMEWORKS
        .iter()
        .find_map(|(_, f)| (f.name == name).then_some(*f))
}

/// A cost in USD to three significant digits (at least cents):
/// `$0.0223`, `$0.0000120`, `$12.50`.
pub fn usd(c: f64) -> String {
    if !(c.is_finite() && c > 0.0) {
        return format!("${:.2}", c.max(0.0));
    }
    let decimals = (2 - c.log10().floor() as i64).max(2) as usize;
    format!("${c:.decimals$}")
}

/// The cost of model calls in words, saying when only part of them were
/// priced: `, $0.0223`, `, $0.0223 (2 of 14 calls unpriced)`; empty when
/// none was.
pub fn cost_words(cost_usd: Option<f64>, unpriced: usize, calls: usize) -> String {
    match cost_usd {
        Some(c) if unpriced > 0 => format!(", {} ({unpriced} of {calls} calls unpriced)", usd(c)),
        Some(c) => format!(", {}", usd(c)),
        None => String::new(),
    }
}

/// A signal's driver over all its evidence chains: the one driver they
/// all have, else `mixed`; the model round trips, tokens and cost summed;
/// and, when the chains disagree, the split in words ("model in 9 of 10
/// chains, code in 1"). `None` when no chain has a known driver.
pub fn of_signal<'a>(
    chains: impl IntoIterator<Item = &'a DriverEvidence>,
) -> Option<(DriverEvidence, Option<String>)> {
    let mut n = [0usize; 3];
    let mut all: Option<DriverEvidence> = None;
    for e in chains {
        let k = match e.driver.as_str() {
            "model" => 0,
            "code" => 1,
            "mixed" => 2,
            _ => continue,
        };
        n[k] += 1;
        let Some(a) = all.as_mut() else {
            all = Some(e.clone());
            continue;
        };
        a.model_calls += e.model_calls;
        a.input_tokens += e.input_tokens;
        a.output_tokens += e.output_tokens;
        a.cost_usd = match (a.cost_usd, e.cost_usd) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        };
        a.unpriced_calls += e.unpriced_calls;
        for m in &e.models {
            if !a.models.contains(m) {
                a.models.push(m.clone());
            }
        }
        if a.framework.is_none() {
            a.framework = e.framework.clone();
        }
    }
    let mut all = all?;
    all.models.sort();
    let total: usize = n.iter().sum();
    let names = ["model", "code", "mixed"];
    let agree = n.iter().position(|&c| c == total).map(|k| names[k]);
    all.driver = agree.unwrap_or("mixed").to_string();
    let split = agree.is_none().then(|| {
        let mut parts: Vec<String> = Vec::new();
        for k in 0..3 {
            if n[k] > 0 {
                parts.push(if parts.is_empty() {
                    format!("{} in {} of {total} chains", names[k], n[k])
                } else {
                    format!("{} in {}", names[k], n[k])
                });
            }
        }
        parts.join(", ")
    });
    Some((all, split))
}

/// The remedy's words for who made the retries, or `None` for a chain of
/// unknown driver: (what to change, a short clause for the summary).
/// `split` says how the signal's chains divide when they disagree.
pub fn remedy_words(
    e: &DriverEvidence,
    tool: &str,
    split: Option<&str>,
) -> Option<(String, String)> {
    let driver = match e.driver.as_str() {
        "code" => Driver::Code,
        "model" => Driver::Model,
        "mixed" => Driver::Mixed,
        _ => return None,
    };
    let cap = match e.framework.as_deref().and_then(framework_named) {
        Some(f) => format!(
            "cap the model's calls per turn in {}: {}",
            f.name, f.setting
        ),
        None => {
            "cap tool calls per turn in the agent framework (its step, turn or tool-call limit)"
                .to_string()
        }
    };
    let tokens = if e.model_calls > 0 {
        let cost = cost_words(e.cost_usd, e.unpriced_calls, e.model_calls);
        format!(
            " ({} model round trips, {} input and {} output tokens{cost})",
            e.model_calls, e.input_tokens, e.output_tokens
        )
    } else {
        String::new()
    };
    Some(match driver {
        Driver::Code => (
            format!("Code retried {tool}, not the model: no model call sits between the attempts, so fix the retry wrapper (decorator, loop, client option) — cap its attempts, back off, retry only classes that waiting fixes."),
            "code retried: fix the retry wrapper".to_string(),
        ),
        Driver::Model => (
            format!("The model asked again after each failure{tokens}: return an error that tells the model not to repeat the call (what failed, that retrying will not help, what to do instead), and {cap}."),
            "the model retried: return an error that says not to repeat, and cap tool calls per turn".to_string(),
        ),
        Driver::Mixed => (
            format!(
                "Both code and the model retried {tool}{}{tokens}: fix the retry wrapper (cap its attempts, back off), return an error that tells the model not to repeat the call, and {cap}.",
                split.map(|s| format!(" ({s})")).unwrap_or_default()
            ),
            "code and the model retried: fix the wrapper and cap tool calls per turn".to_string(),
        ),
    })
}
