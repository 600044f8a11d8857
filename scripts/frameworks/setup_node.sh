#!/usr/bin/env bash
# Install (or reuse) the pinned npm packages of scripts/frameworks/vercel-ai/
# into its node_modules/ (gitignored), with `npm ci` from the committed
# package-lock.json: exact versions and integrity hashes, nothing resolved anew.
# It runs again only when package-lock.json's sha256 differs from the stamp
# left in node_modules/ (or node_modules/ is missing). `--prefer-offline` takes
# packages from npm's cache when they are there. Silent on success; on failure
# npm's output goes to stderr and the exit status is non-zero.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/vercel-ai"
stamp="$dir/node_modules/.stormwatch-lock.sha256"

die() { echo "setup_node.sh: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || die "node is required (the Vercel AI SDK framework tests run it)"
command -v npm >/dev/null 2>&1 || die "npm is required to install scripts/frameworks/vercel-ai/"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "node >= 20 is required (found $(node --version))"

if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.setup_node.lock"
  flock 9
fi

want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
log="$(mktemp "${TMPDIR:-/tmp}/stormwatch-npm.XXXXXX.log")"
# AI SDK 7 declares node >= 22 and npm warns about it (EBADENGINE) on node 20;
# it runs there, and the test checks that it does.
if ! (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline >"$log" 2>&1); then
  echo "setup_node.sh: npm ci failed in $dir" >&2
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
printf '%s\n' "$want" >"$stamp"
