#!/usr/bin/env bash
# Regenerate fixtures/frameworks/*.json: run every framework scenario once
# against capture_otlp.py and keep what it sent, as OTLP JSON, string values
# over 400 characters cut. Needs what scripts/test.sh installs (the
# framework venvs, scripts/frameworks/vercel-ai/node_modules). Each harness
# starts its MCP server (scripts/frameworks/mcp_fare_server.py) itself, with
# its own interpreter, exporting to the same endpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${STORMWATCH_CACHE:-$HOME/.cache/stormwatch}"
py="${STORMWATCH_PY_FRAMEWORKS:-$cache/venv-frameworks/bin/python}"
adk="${STORMWATCH_PY_ADK:-$cache/venv-adk/bin/python}"
oai="${STORMWATCH_PY_OAI_AGENTS:-$cache/venv-oai-agents/bin/python}"
pym="${STORMWATCH_PY_PYDANTIC_MCP:-$cache/venv-pydantic-mcp/bin/python}"
strands="${STORMWATCH_PY_STRANDS:-$cache/venv-strands/bin/python}"
smol="${STORMWATCH_PY_SMOLAGENTS:-$cache/venv-smolagents/bin/python}"
langgraph="${STORMWATCH_PY_LANGGRAPH:-$cache/venv-langgraph/bin/python}"
node="${STORMWATCH_NODE:-node}"
out=fixtures/frameworks
mkdir -p "$out"
capture() {
  local name="$1"; shift
  "$py" scripts/frameworks/capture_otlp.py --max-value-len 400 --out "$out/$name.json" -- "$@" >/dev/null
}
for scenario in storm healthy; do
  capture "pydantic-ai-$scenario" "$py" scripts/frameworks/pydantic_ai_agent.py "$scenario" --endpoint '{endpoint}'
  for sdk in 6 7; do
    capture "vercel-ai-$sdk-$scenario" "$node" scripts/frameworks/vercel-ai/agent.mjs --sdk "$sdk" "$scenario" --endpoint '{endpoint}'
  done
done
for scenario in storm-reflect storm-dict storm-default storm-handoff healthy; do
  capture "adk-$scenario" "$adk" scripts/frameworks/adk_agent.py "$scenario" --endpoint '{endpoint}'
done
for scenario in storm storm-redacted healthy mcp-storm; do
  capture "oai-agents-$scenario" "$oai" scripts/frameworks/oai_agents_agent.py "$scenario" --endpoint '{endpoint}'
done
capture oai-agents-healthy-genai "$oai" scripts/frameworks/oai_agents_agent.py healthy --genai-semconv --endpoint '{endpoint}'
for scenario in mcp-storm mcp-healthy; do
  capture "pydantic-ai-$scenario" "$pym" scripts/frameworks/pydantic_ai_mcp_agent.py "$scenario" --endpoint '{endpoint}'
done
# An MCP dependency's outage (scripts/frameworks/mcp_quote_server.py, four tools), then its recovery.
capture pydantic-ai-mcp-retry "$pym" scripts/frameworks/pydantic_ai_mcp_retry_agent.py mcp-retry --endpoint '{endpoint}'
for scenario in mcp-outage mcp-recovered; do
  capture "pydantic-ai-$scenario" "$pym" scripts/frameworks/pydantic_ai_mcp_outage_agent.py "$scenario" --endpoint '{endpoint}'
done
for scenario in storm healthy storm-latest healthy-latest mcp-storm; do
  capture "strands-$scenario" "$strands" scripts/frameworks/strands_agent.py "$scenario" --endpoint '{endpoint}'
done
for scenario in storm healthy; do
  capture "smolagents-$scenario" "$smol" scripts/frameworks/smolagents_agent.py "$scenario" --endpoint '{endpoint}'
done
for scenario in storm healthy storm-toolexception storm-subagents; do
  capture "langgraph-$scenario" "$langgraph" scripts/frameworks/langgraph_agent.py "$scenario" --endpoint '{endpoint}'
done
# Control flow, no failure: a human-in-the-loop interrupt() and its resume,
# the deprecated NodeInterrupt, a user's cancellation.
for scenario in interrupt node-interrupt cancelled; do
  capture "langgraph-$scenario" "$langgraph" scripts/frameworks/langgraph_interrupt_agent.py "$scenario" --endpoint '{endpoint}'
done
