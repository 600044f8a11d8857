#!/usr/bin/env bash
# The crash trials (issue 15): build the release binary, make sure the pinned
# DuckDB venv is there, and run scripts/crash_trials.py with the arguments
# given (--trials 20 --seed 1 by default in the script).
#
#   scripts/crash_trials.sh [--trials N] [--seed S] [--json out.json] ...
#
# The venv is $STORMWATCH_CACHE/venv-bench (default ~/.cache/stormwatch),
# from scripts/bench/requirements.txt (duckdb), stamped like
# scripts/py/setup_venvs.sh stamps it, so the two reuse each other's venv.
# The binary is built in $CARGO_TARGET_DIR (default ./target) and copied to
# a temporary directory first, so a concurrent build cannot swap it mid-run.
# Pass --stormwatch PATH to skip the build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${STORMWATCH_CACHE:-${HOME:?HOME is not set and STORMWATCH_CACHE is not given}/.cache/stormwatch}"
python="${PYTHON:-python3}"
req="$here/bench/requirements.txt"
venv="$cache/venv-bench"
stamp="$venv/.stormwatch-requirements.sha256"

"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "crash_trials.sh: '$python' must be Python >= 3.11 (set PYTHON)" >&2; exit 2; }
want="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$req")"
if ! { [[ -x "$venv/bin/python" ]] && [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want" ]] \
       && "$venv/bin/python" -c 'import duckdb' 2>/dev/null; }; then
  mkdir -p "$cache"
  rm -f "$stamp"
  "$python" -m venv --clear "$venv"
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$venv/bin/python" -m pip install -q -r "$req"
  "$venv/bin/python" -c 'import duckdb'
  printf '%s\n' "$want" >"$stamp"
fi

args=("$@")
if [[ " $* " != *" --stormwatch "* ]]; then
  target="${CARGO_TARGET_DIR:-$repo/target}"
  (cd "$repo" && CARGO_TARGET_DIR="$target" cargo build --release)
  bin_dir="$(mktemp -d "${TMPDIR:-/tmp}/stormwatch-crash-bin.XXXXXX")"
  cp "$target/release/stormwatch" "$bin_dir/stormwatch"
  args=(--stormwatch "$bin_dir/stormwatch" "${args[@]}")
fi
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -z "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] || commit="$commit+dirty"
echo "crash_trials.sh: commit $commit" >&2
exec "$venv/bin/python" "$here/crash_trials.py" "${args[@]}"
