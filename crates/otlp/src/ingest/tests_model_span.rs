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
