//! Model spans (docs/detection.md §1, "Model spans") in the captured runs
//! of real frameworks (`fixtures/frameworks/`): every chat / LLM /
//! doGenerate span is one, with its model; no tool call, agent span or
//! framework step is; the row oracle agrees with the columnar path.

use super::{json, normalize, rows};

fn fixture(name: &str) -> Vec<crate::model::SpanRow> {
    let path = format!(
        "{}/../../fixtures/frameworks/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let req = json::decode(&bytes).expect("fixture decodes");
    let batch = normalize(&req).batch;
    let oracle = rows::normalize_rows(&req);
    let got = batch.rows();
    assert_eq!(got.len(), oracle.len());
    for (a, b) in got.iter().zip(&oracle) {
        assert_eq!((a.is_model, &a.model_name), (b.is_model, &b.model_name));
    }
    got
}

/// (span name, model name) of each model span, in order, deduplicated.
fn models(name: &str) -> Vec<(String, Option<String>)> {
    let rows = fixture(name);
    for r in &rows {
        if r.is_model {
            assert!(!r.is_tool_call && !r.is_agent, "{name}: {}", r.name);
        } else {
            assert!(r.model_name.is_none(), "{name}: {}", r.name);
        }
    }
    let mut out: Vec<(String, Option<String>)> = rows
        .iter()
        .filter(|r| r.is_model)
        .map(|r| (r.name.clone(), r.model_name.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn count(name: &str) -> usize {
    fixture(name).iter().filter(|r| r.is_model).count()
}

fn one(span: &str) -> Vec<(String, Option<String>)> {
    vec![(span.to_string(), Some("scripted".to_string()))]
}

#[test]
fn each_framework_s_model_calls_are_model_spans() {
    // GenAI `chat` (pydantic-ai, Strands both conventions, AI SDK 7).
    assert_eq!(models("pydantic-ai-storm"), one("chat scripted"));
    assert_eq!(models("strands-storm"), one("chat"));
    assert_eq!(models("strands-storm-latest"), one("chat"));
    assert_eq!(models("vercel-ai-7-storm"), one("chat scripted"));
    // GenAI `generate_content` (ADK).
    assert_eq!(
        models("adk-storm-default"),
        one("generate_content scripted")
    );
    // OpenInference LLM (LangGraph, OpenAI Agents SDK, smolagents).
    assert_eq!(models("langgraph-storm"), one("ScriptedChatModel"));
    assert_eq!(models("oai-agents-storm"), one("response"));
    assert_eq!(models("oai-agents-healthy-genai"), one("response"));
    assert_eq!(models("smolagents-storm"), one("ScriptedModel.generate"));
    // The AI SDK 6's provider call, not its `ai.generateText` around it.
    assert_eq!(
        models("vercel-ai-6-storm"),
        one("ai.generateText.doGenerate")
    );
    // MCP spans are no model spans.
    assert_eq!(models("pydantic-ai-mcp-storm"), one("chat scripted"));
}

#[test]
fn one_model_span_per_model_call() {
    // One model round trip per step: each tool call's, and the last
    // answer's (pydantic-ai's storm makes twelve calls, the others eight;
    // smolagents' last step is its `final_answer`).
    for (name, n) in [
        ("pydantic-ai-storm", 13),
        ("adk-storm-default", 9),
        ("oai-agents-storm", 9),
        ("strands-storm", 9),
        ("smolagents-storm", 9),
        ("langgraph-storm", 9),
    ] {
        assert_eq!(count(name), n, "{name}");
    }
}

fn kv(pairs: &[(&str, &str)]) -> Vec<opentelemetry_proto::tonic::common::v1::KeyValue> {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    pairs
        .iter()
        .map(|(k, v)| KeyValue {
            key: (*k).into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue((*v).into())),
            }),
            ..Default::default()
        })
        .collect()
}

#[test]
fn older_genai_spans_without_an_operation_name_are_model_spans() {
    use super::model_span::is_model;
    let older = |extra: &[(&str, &str)]| {
        let mut a = vec![("gen_ai.request.model", "gpt-4o")];
        a.extend_from_slice(extra);
        kv(&a)
    };
    // A provider and a requested model: a model span.
    assert!(is_model(
        &older(&[("gen_ai.system", "openai")]),
        false,
        false
    ));
    assert!(is_model(
        &older(&[("gen_ai.provider.name", "anthropic")]),
        false,
        false
    ));
    // Not without a provider, or without a requested model.
    assert!(!is_model(&older(&[]), false, false));
    assert!(!is_model(&kv(&[("gen_ai.system", "openai")]), false, false));
    // Embeddings, by any convention's word for them.
    for kind in [
        ("gen_ai.operation.name", "embeddings"),
        ("openinference.span.kind", "EMBEDDING"),
        ("ai.operationId", "ai.embed.doEmbed"),
        ("llm.request.type", "embedding"),
    ] {
        assert!(
            !is_model(&older(&[("gen_ai.system", "openai"), kind]), false, false),
            "{kind:?}"
        );
    }
    // A tool or agent span carrying `chat`, or the older attributes.
    let chat = kv(&[
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.system", "openai"),
        ("gen_ai.request.model", "gpt-4o"),
    ]);
    assert!(!is_model(&chat, true, false));
    assert!(!is_model(&chat, false, true));
    assert!(!is_model(
        &older(&[("gen_ai.system", "openai")]),
        true,
        false
    ));
    assert!(!is_model(
        &older(&[("gen_ai.system", "openai")]),
        false,
        true
    ));
    // Token counts alone say nothing.
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    let tokens: Vec<KeyValue> = ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"]
        .iter()
        .map(|k| KeyValue {
            key: (*k).into(),
            value: Some(AnyValue {
                value: Some(Value::IntValue(10)),
            }),
            ..Default::default()
        })
        .collect();
    assert!(!is_model(&tokens, false, false));
}
