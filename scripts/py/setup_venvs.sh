#!/usr/bin/env bash
# Create (or reuse) the Python venvs the tests use:
#   $STORMWATCH_CACHE/venv-proto    <- scripts/py/requirements-proto.txt (OTLP interop;
#                                      prometheus_client's parsers for /metrics)
#   $STORMWATCH_CACHE/venv-json     <- scripts/py/requirements-json.txt (OTLP interop)
#   $STORMWATCH_CACHE/venv-grpc     <- scripts/py/requirements-grpc.txt (OTLP/gRPC interop:
#                                      the gRPC exporter and opentelemetry-instrument)
#   $STORMWATCH_CACHE/venv-browser  <- scripts/py/requirements-browser.txt (Playwright,
#                                      driving Debian's chromium; no browser download)
#   $STORMWATCH_CACHE/venv-frameworks <- scripts/py/requirements-frameworks.txt (pydantic-ai
#                                      and its OTel instrumentation; needs Python >= 3.11)
#   $STORMWATCH_CACHE/venv-bench    <- scripts/bench/requirements.txt (DuckDB: the sweep
#                                      benchmark's SQL and its cross-check)
#   $STORMWATCH_CACHE/venv-mcp      <- scripts/py/requirements-mcp.txt (the MCP Python SDK's
#                                      client and jsonschema: the MCP client tests)
#   $STORMWATCH_CACHE/venv-s3       <- scripts/py/requirements-s3.txt (moto's S3 server for the
#                                      shared-store tests; DuckDB with httpfs over it)
# The framework conformance suite (tests/it/conformance.rs), one venv per
# framework, each with its own tracing and the OTLP/HTTP exporter:
#   venv-adk          <- requirements-adk.txt (Google ADK 2.x; OTel SDK capped at 1.44 by ADK)
#   venv-oai-agents   <- requirements-oai-agents.txt (OpenAI Agents SDK + OpenInference; MCP SDK 2.x)
#   venv-pydantic-mcp <- requirements-pydantic-mcp.txt (pydantic-ai with MCP tools; MCP SDK 2.x)
#   venv-strands      <- requirements-strands.txt (Strands Agents; MCP SDK 2.x)
#   venv-smolagents   <- requirements-smolagents.txt (smolagents + OpenInference)
#   venv-langgraph    <- requirements-langgraph.txt (LangGraph + OpenInference)
# STORMWATCH_CACHE defaults to $HOME/.cache/stormwatch; PYTHON (default python3,
# must be >= 3.10 with the venv module) is the base interpreter.
#
# A venv is (re)built from scratch, with `python -m venv --clear` and
# `pip install -r`, only when its requirements file's sha256 differs from the
# stamp stored inside it (or the venv is missing/broken). Concurrent runs are
# serialised with flock when it is available. Silent on success; on failure
# the pip/venv output goes to stderr and the exit status is non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${STORMWATCH_CACHE:-${HOME:?HOME is not set and STORMWATCH_CACHE is not given}/.cache/stormwatch}"
python="${PYTHON:-python3}"
stamp_name=".stormwatch-requirements.sha256"

die() { echo "setup_venvs.sh: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "'$python' not found (set PYTHON to a Python >= 3.10)"
"$python" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null \
  || die "'$python' must be Python >= 3.10 with the venv module (the pinned OpenTelemetry packages need 3.10+)"

mkdir -p "$cache"

# Serialise concurrent callers (e.g. several cargo test threads spawning this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.setup_venvs.lock"
  flock 9
fi

sha256_of() {
  "$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
}

# run_quiet LOG CMD...: run CMD with its output in LOG; on failure show LOG on stderr.
run_quiet() {
  local log="$1"; shift
  if ! "$@" >"$log" 2>&1; then
    echo "setup_venvs.sh: command failed: $*" >&2
    cat "$log" >&2
    return 1
  fi
}

ensure_venv() {
  local name="$1" req="$2" check_import="$3"
  local venv="$cache/$name"
  [[ -f "$req" ]] || die "missing requirements file $req"
  local want
  want="$(sha256_of "$req")"

  if [[ -x "$venv/bin/python" ]] \
    && "$venv/bin/python" -c 'pass' >/dev/null 2>&1 \
    && [[ -f "$venv/$stamp_name" ]] \
    && [[ "$(cat "$venv/$stamp_name")" == "$want" ]]; then
    return 0
  fi

  local log
  log="$(mktemp "${TMPDIR:-/tmp}/stormwatch-$name.XXXXXX.log")"
  # Fresh venv every time the pins change, so no stale package survives.
  rm -f "$venv/$stamp_name"
  run_quiet "$log" "$python" -m venv --clear "$venv" || { rm -f "$log"; return 1; }
  run_quiet "$log" env PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$venv/bin/python" -m pip install -q --no-warn-script-location -r "$req" || { rm -f "$log"; return 1; }
  run_quiet "$log" "$venv/bin/python" -c "import $check_import" || { rm -f "$log"; return 1; }
  rm -f "$log"
  printf '%s\n' "$want" >"$venv/$stamp_name"
}

ensure_venv venv-proto "$here/requirements-proto.txt" \
  "opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.instrumentation.requests, prometheus_client.openmetrics.parser"
ensure_venv venv-json "$here/requirements-json.txt" \
  "opentelemetry.sdk.trace, opentelemetry.exporter.otlp.json.http.trace_exporter, opentelemetry.exporter.otlp.json.file"
ensure_venv venv-grpc "$here/requirements-grpc.txt" \
  "opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.grpc.trace_exporter, opentelemetry.distro, grpc"
[[ -x "$cache/venv-grpc/bin/opentelemetry-instrument" ]] \
  || die "venv-grpc has no opentelemetry-instrument (opentelemetry-distro's script)"
ensure_venv venv-browser "$here/requirements-browser.txt" "playwright.sync_api"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "'$python' must be Python >= 3.11 for venv-frameworks (pydantic-ai 2.x needs 3.11+)"
ensure_venv venv-frameworks "$here/requirements-frameworks.txt" \
  "pydantic_ai, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-bench "$here/../bench/requirements.txt" "duckdb"
ensure_venv venv-mcp "$here/requirements-mcp.txt" "mcp.client.client, mcp.client.stdio, jsonschema"
ensure_venv venv-s3 "$here/requirements-s3.txt" "moto.server, duckdb, duckdb_extension_httpfs"
ensure_venv venv-adk "$here/requirements-adk.txt" \
  "google.adk.runners, google.adk.plugins.reflect_retry_tool_plugin, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-oai-agents "$here/requirements-oai-agents.txt" \
  "agents, openinference.instrumentation.openai_agents, mcp.server.mcpserver, mcp.client.stdio, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-pydantic-mcp "$here/requirements-pydantic-mcp.txt" \
  "pydantic_ai.mcp, fastmcp.client, mcp.server.mcpserver, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-strands "$here/requirements-strands.txt" \
  "strands, strands.telemetry, strands.tools.mcp, mcp.client.stdio, mcp.server.mcpserver, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-smolagents "$here/requirements-smolagents.txt" \
  "smolagents, openinference.instrumentation.smolagents, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
ensure_venv venv-langgraph "$here/requirements-langgraph.txt" \
  "langgraph.prebuilt, langchain_core.language_models.chat_models, openinference.instrumentation.langchain, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2"
