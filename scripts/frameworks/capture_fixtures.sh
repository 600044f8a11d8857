#!/usr/bin/env bash
# Regenerate fixtures/frameworks/*.json: run every framework scenario once
# against capture_otlp.py and keep what it sent, as OTLP JSON, string values
# over 400 characters cut. Needs what scripts/test.sh installs
# (venv-frameworks, scripts/frameworks/vercel-ai/node_modules).
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${STORMWATCH_CACHE:-$HOME/.cache/stormwatch}"
py="${STORMWATCH_PY_FRAMEWORKS:-$cache/venv-frameworks/bin/python}"
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
