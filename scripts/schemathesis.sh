#!/usr/bin/env bash
# Schemathesis against stormwatch's own OpenAPI document (/api/openapi.json).
#
#   scripts/schemathesis.sh [STORMWATCH_BINARY]
#
# 1. Creates (or reuses) a venv with a pinned Schemathesis in
#    $STORMWATCH_CACHE/venv-schema (STORMWATCH_CACHE defaults to
#    ~/.cache/stormwatch; PYTHON, default python3, is the base interpreter).
# 2. Starts `stormwatch serve --demo` (the binary is $1, by default
#    ${CARGO_TARGET_DIR:-target}/release/stormwatch) on a fresh temporary data
#    dir and two free loopback ports, and waits for GET /healthz.
# 3. Runs every Schemathesis phase and check that applies (see CHECKS below)
#    with a fixed seed and a bounded number of examples per operation
#    (SCHEMATHESIS_MAX_EXAMPLES, default 500).
# 4. Stops the server with SIGTERM and requires it to exit 0.
# Exits non-zero on any failure, after printing Schemathesis's report (and the
# server's log when the server misbehaved).
set -euo pipefail

# Resolve the binary before leaving the caller's directory.
bin="${1:-${CARGO_TARGET_DIR:-target}/release/stormwatch}"
[[ "$bin" == */* ]] || bin="./$bin"
[[ -x "$bin" ]] || { echo "schemathesis.sh: no executable stormwatch at $bin (build it, or pass its path)" >&2; exit 2; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
# The repository root: serve reads dashboards/overview.toml from here.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cache="${STORMWATCH_CACHE:-$HOME/.cache/stormwatch}"
venv="$cache/venv-schema"
python="${PYTHON:-python3}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-500}"
seed=20260729

# Schemathesis 4.32.5 and its dependencies as `pip freeze` gave them in a
# clean Python 3.11 venv. The venv is rebuilt whenever this list changes.
pins='schemathesis==4.32.5
anyio==4.16.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
graphql-core==3.3.2
harfile==0.6.0
hypothesis==6.170.17
hypothesis-graphql==0.13.5
idna==3.20
iniconfig==2.3.1
jsonschema_rs==0.60.3
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
packaging==26.4
pluggy==1.7.0
Pygments==2.21.0
pyrate-limiter==4.5.1
pytest==9.2.0
PyYAML==6.0.4
requests==2.34.2
rich==15.0.0
sortedcontainers==2.4.0
typing_extensions==4.16.0
urllib3==2.8.0
Werkzeug==3.1.9'

# Every check of `--checks all` but one:
#   positive_data_acceptance wants a 2xx/404 for every request the document
#   allows, but some rules cannot be said in OpenAPI 3.0 and the server rightly
#   answers 400 for them (each a parameter's description): `days` together
#   with `from` or `to`, `from` after `to` or more than 366 days before it, a
#   `page` past the trace's last page, an `until` that is not an RFC 3339 time
#   or date (or is past the year 2262).
# (ignored_auth and object_level_authorization have nothing to check while the
# API has no securitySchemes; they stay on for when it has.)
EXCLUDED_CHECKS=positive_data_acceptance

die() { echo "schemathesis.sh: $*" >&2; exit 1; }

# --- the venv --------------------------------------------------------------
stamp="$(printf '%s\n' "$pins" | sha256sum | cut -d' ' -f1)"
if ! { [[ -x "$venv/bin/schemathesis" ]] && [[ "$(cat "$venv/.pins.sha256" 2>/dev/null)" == "$stamp" ]]; }; then
  echo "== creating $venv (schemathesis 4.32.5)"
  mkdir -p "$cache"
  "$python" -m venv --clear "$venv"
  printf '%s\n' "$pins" >"$venv/requirements.txt"
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$venv/bin/python" -m pip install -q --no-warn-script-location -r "$venv/requirements.txt"
  printf '%s\n' "$stamp" >"$venv/.pins.sha256"
fi
"$venv/bin/schemathesis" --version

# --- the server ------------------------------------------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/stormwatch-schemathesis.XXXXXX")"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# Two distinct free ports (bound together, so they differ).
ports="$("$venv/bin/python" -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')"
read -r otlp_port http_port <<<"$ports"
base="http://127.0.0.1:$http_port"
server_log="$tmp/server.log"

echo "== starting $bin serve --demo on $base"
# With an API token, as a production server runs: every request carries it,
# and the auth checks send some without it.
token="schemathesis-$RANDOM$RANDOM"
STORMWATCH_API_TOKEN="$token" "$bin" serve --demo --data-dir "$tmp/data" \
  --otlp-addr "127.0.0.1:$otlp_port" --otlp-grpc-addr none --http-addr "127.0.0.1:$http_port" \
  --log-format json >"$server_log" 2>&1 &
server_pid=$!

show_server_log() { echo "--- server log (last 40 lines)" >&2; tail -n 40 "$server_log" >&2; }

healthy() {
  "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
    "$base/healthz" 2>/dev/null
}
deadline=$((SECONDS + 120))
until healthy; do
  kill -0 "$server_pid" 2>/dev/null || { show_server_log; die "the server exited before answering /healthz"; }
  ((SECONDS < deadline)) || { show_server_log; die "no answer from $base/healthz after 120 s"; }
  sleep 0.2
done

# --- schemathesis ----------------------------------------------------------
echo "== schemathesis run $base/api/openapi.json"
# All four phases (examples, coverage, fuzzing, stateful). Reproducible: a
# fixed seed, no example database carried between runs, one worker.
# --continue-on-failure reports every failing case, not only the first.
# Run from the temporary dir: Schemathesis keeps its crash cache in
# ./.schemathesis and would read a ./schemathesis.toml; the report's curl
# lines reproduce a failure.
status=0
start=$SECONDS
(cd "$tmp" && exec "$venv/bin/schemathesis" run "$base/api/openapi.json" \
  --checks all --exclude-checks "$EXCLUDED_CHECKS" \
  --max-examples "$max_examples" --seed "$seed" \
  --generation-database none \
  --workers 1 --continue-on-failure \
  --request-timeout 30 \
  --header "Authorization: Bearer $token" \
  --no-color) \
  || status=$?
echo "== schemathesis finished in $((SECONDS - start)) s with status $status"

# The token was sent: the API answered, not only the token check. (Without
# this, a run whose every request got the documented 401 would pass.)
answered="$("$venv/bin/python" - "$base/metrics" "$token" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
ok = unauth = 0
for line in urllib.request.urlopen(req, timeout=10).read().decode().splitlines():
    if line.startswith("stormwatch_http_responses_total{"):
        code = line.split('code="')[1].split('"')[0]
        n = int(float(line.rsplit(" ", 1)[1]))
        ok += n if code.startswith("2") else 0
        unauth += n if code == "401" else 0
print(ok, unauth)
PY
)"
read -r answered_ok answered_401 <<<"$answered"
echo "== the API answered $answered_ok requests with 2xx and $answered_401 with 401"
if ((answered_ok < 1000)); then
  status=1
  echo "schemathesis.sh: only $answered_ok successful answers; the token did not reach the API" >&2
fi

# --- shutdown --------------------------------------------------------------
kill -TERM "$server_pid"
server_status=0
wait "$server_pid" || server_status=$?
server_pid=""
if [[ "$server_status" != 0 ]]; then
  show_server_log
  die "the server exited with status $server_status after SIGTERM (expected 0)"
fi
if grep -q '"level":"ERROR"' "$server_log"; then
  echo "--- server errors" >&2
  grep '"level":"ERROR"' "$server_log" >&2 || true
fi
[[ "$status" == 0 ]] || die "schemathesis found failures (status $status)"
echo "== schemathesis: no failures; the server stopped cleanly"
