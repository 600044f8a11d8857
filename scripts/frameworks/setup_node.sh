#!/usr/bin/env bash
# Install (or reuse) the pinned npm packages of the tests' Node projects,
# each into its own node_modules/ (gitignored), with `npm ci` from its
# committed package-lock.json: exact versions and integrity hashes, nothing
# resolved anew.
#   scripts/frameworks/vercel-ai/    the Vercel AI SDK (tests/it/frameworks.rs)
#   scripts/interop/node-grpc/       the OTLP/gRPC trace exporter of the
#                                    OpenTelemetry JS SDK (tests/it/interop_node.rs)
#   scripts/interop/mcp-ts/          the MCP TypeScript SDK's client
#                                    (tests/it/mcp_clients.rs)
# A project is installed again only when its package-lock.json's sha256
# differs from the stamp left in its node_modules/ (or node_modules/ is
# missing). `--prefer-offline` takes packages from npm's cache when they are
# there. Silent on success; on failure npm's output goes to stderr and the
# exit status is non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "setup_node.sh: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || die "node is required (the Vercel AI SDK, OTLP/gRPC interop and MCP client tests run it)"
command -v npm >/dev/null 2>&1 || die "npm is required to install the tests' Node projects"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "node >= 20 is required (found $(node --version))"

# ensure_npm DIR: `npm ci` in DIR unless its stamp matches its lock file.
ensure_npm() {
  local dir="$1"
  local stamp="$dir/node_modules/.stormwatch-lock.sha256"
  [[ -f "$dir/package-lock.json" ]] || die "missing $dir/package-lock.json"
  (
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
  )
}

ensure_npm "$here/vercel-ai"
ensure_npm "$here/../interop/node-grpc"
ensure_npm "$here/../interop/mcp-ts"
