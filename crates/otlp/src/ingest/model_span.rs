//! Model spans (docs/detection.md §1, "Model spans"): a span that is one
//! round trip to a language model — a chat or completion request the
//! framework made for the agent — and the model it named. Read at ingest
//! into `is_model` and `model_name`, so the per-turn rules can tell a retry
//! the model asked for (a model call between two attempts) from one a
//! wrapper made (attempts back to back).
//!
//! One entry per convention, first match wins; a tool call or an agent span
//! is never a model span, whatever else it carries (an agent span often
//! records the whole turn's usage and model).

use std::borrow::Cow;

use opentelemetry_proto::tonic::common::v1::KeyValue;

use super::attrs;

/// OTel GenAI `gen_ai.operation.name` values that are one inference call
/// (the spec's `chat`, `text_completion`, `generate_content`; not
/// `embeddings`, `execute_tool`, `invoke_agent`, `create_agent`).
pub const GENAI_OPERATIONS: [&str; 3] = ["chat", "text_completion", "generate_content"];

/// The Vercel AI SDK's (4–6, `experimental_telemetry`) provider-call spans,
/// by `ai.operationId`: the inner `doGenerate` / `doStream` of each step.
pub const VERCEL_OPERATIONS: [&str; 4] = [
    "ai.generateText.doGenerate",
    "ai.streamText.doStream",
    "ai.generateObject.doGenerate",
    "ai.streamObject.doStream",
];

/// OpenLLMetry's `llm.request.type` values that are an inference call.
pub const OPENLLMETRY_TYPES: [&str; 2] = ["chat", "completion"];

/// Attributes that name the model, first found wins: the model that
/// answered before the one asked for.
pub const MODEL_NAME_KEYS: [&str; 5] = [
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.model_name",
    "ai.response.model",
    "ai.model.id",
];

/// Whether a span is one model round trip. `is_tool` and `is_agent` are
/// what ingest already decided for it: either makes it no model span.
pub fn is_model(a: &[KeyValue], is_tool: bool, is_agent: bool) -> bool {
    if is_tool || is_agent {
        return false;
    }
    let is =
        |key: &str, values: &[&str]| attrs::str_ref(a, key).is_some_and(|v| values.contains(&v));
    let has = |key: &str| attrs::str_ref(a, key).is_some();
    is("gen_ai.operation.name", &GENAI_OPERATIONS)
        || is("openinference.span.kind", &["LLM"])
        || is("ai.operationId", &VERCEL_OPERATIONS)
        || is("llm.request.type", &OPENLLMETRY_TYPES)
        || older_genai(&has)
}

/// GenAI spans from before `gen_ai.operation.name`: a provider
/// (`gen_ai.system`, or `gen_ai.provider.name`) and a requested model
/// (`gen_ai.request.model`) — unless another convention's kind says it is
/// something else (an OpenInference `EMBEDDING`, OpenLLMetry's
/// `embedding`, the AI SDK's `ai.embed.doEmbed`), or it has an operation
/// name that is no inference call (`embeddings`).
fn older_genai(has: &dyn Fn(&str) -> bool) -> bool {
    (has("gen_ai.system") || has("gen_ai.provider.name"))
        && has("gen_ai.request.model")
        && !has("gen_ai.operation.name")
        && !has("openinference.span.kind")
        && !has("ai.operationId")
        && !has("llm.request.type")
}

/// The model a model span names, if any.
pub fn model_name(a: &[KeyValue]) -> Option<Cow<'_, str>> {
    MODEL_NAME_KEYS.iter().find_map(|k| attrs::string_cow(a, k))
}
