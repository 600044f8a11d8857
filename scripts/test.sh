#!/usr/bin/env bash
# Everything the project checks, from a fresh machine: installs what the
# tests need (pinned Python venvs for the real OpenTelemetry exporters, over
# HTTP and gRPC and through opentelemetry-instrument, pydantic-ai, Playwright
# and the MCP Python SDK's client; one venv per agent framework of the
# conformance suite: Google ADK, the OpenAI Agents SDK, pydantic-ai with MCP
# tools, Strands Agents, smolagents, LangGraph; the pinned npm packages of the Vercel AI
# SDK, of the OpenTelemetry JS gRPC exporter and of the MCP TypeScript SDK;
# Debian's chromium for the dashboard), then
# runs rustfmt, clippy -D warnings and every test, in one release build.
#
#   STORMWATCH_CACHE   where the venvs and npm packages live
#                      (default ~/.cache/stormwatch, reused between runs)
#   CARGO_TARGET_DIR   the cargo build; default the repository's target/,
#                      the one `cargo run --release -- serve --demo` builds,
#                      so the README's two commands compile polars once
set -euo pipefail
cd "$(dirname "$0")/.."

export STORMWATCH_CACHE="${STORMWATCH_CACHE:-$HOME/.cache/stormwatch}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
mkdir -p "$STORMWATCH_CACHE"

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "python venvs for the OpenTelemetry SDK exporters (HTTP, gRPC, opentelemetry-instrument) and the MCP client"
command -v python3 >/dev/null || { echo "python3 is required (the interop tests run the Python OpenTelemetry SDK)" >&2; exit 1; }
bash scripts/py/setup_venvs.sh
export STORMWATCH_PY_PROTO="$STORMWATCH_CACHE/venv-proto/bin/python"
export STORMWATCH_PY_JSON="$STORMWATCH_CACHE/venv-json/bin/python"
export STORMWATCH_PY_GRPC="$STORMWATCH_CACHE/venv-grpc/bin/python"
export STORMWATCH_PY_FRAMEWORKS="$STORMWATCH_CACHE/venv-frameworks/bin/python"
export STORMWATCH_PY_MCP="$STORMWATCH_CACHE/venv-mcp/bin/python"
export STORMWATCH_PY_S3="$STORMWATCH_CACHE/venv-s3/bin/python"
for fw in adk oai-agents pydantic-mcp strands smolagents langgraph; do
  var="STORMWATCH_PY_$(echo "$fw" | tr 'a-z-' 'A-Z_')"
  export "$var=$STORMWATCH_CACHE/venv-$fw/bin/python"
done

step "npm packages: the Vercel AI SDK framework tests, the OpenTelemetry JS gRPC exporter, the MCP TypeScript SDK"
bash scripts/frameworks/setup_node.sh
export STORMWATCH_NODE="$(command -v node)"

step "chromium for the dashboard's browser tests"
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [[ "$(id -u)" == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
export STORMWATCH_CHROMIUM="$(command -v chromium)"
export STORMWATCH_PY_BROWSER="$STORMWATCH_CACHE/venv-browser/bin/python"

step "nginx for the shared store's load-balancer test"
if ! command -v nginx >/dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
  sudo=""
  [[ "$(id -u)" == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
fi
export STORMWATCH_NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

step "rustfmt"
cargo fmt --all -- --check

step "build and test (release)"
cargo test --release --locked --workspace --no-run
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --release --locked --workspace -- --test-threads 2 2>&1 | tee "$log"

step "the benchmark's DuckDB SQL and the Python port agree with stormwatch sweep"
"$STORMWATCH_CACHE/venv-bench/bin/python" scripts/bench/check_sql.py \
  --stormwatch "$CARGO_TARGET_DIR/release/stormwatch"

step "schemathesis against /api/openapi.json"
bash scripts/schemathesis.sh "$CARGO_TARGET_DIR/release/stormwatch"

step "clippy -D warnings"
cargo clippy --release --locked --workspace --all-targets -- -D warnings

step "done"
# One closing line for whoever reads the end of this output.
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result:' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
echo "tests: ${passed} passed, ${failed} failed"
