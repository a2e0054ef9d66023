#!/usr/bin/env bash
# Fresh-machine entry point for the TypeScript client: install the pinned npm
# dependencies (npm ci), type-check everything with tsc --strict (library,
# tests, examples, benchmark, chaos driver), build dist/, run the tests
# (node --test) against the real sidecar, then run the example agent loop
# against a sidecar this script starts.
#
# The sidecar binary is $REBOUND_BIN, by default the repository's target/debug/rebound.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REBOUND_BIN="${REBOUND_BIN:-$repo/target/debug/rebound}"
if [[ ! -x "$REBOUND_BIN" ]]; then
  echo "test.sh: no sidecar binary at $REBOUND_BIN (build it with cargo build, or set REBOUND_BIN)" >&2
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if (( node_major < 20 )); then
  echo "test.sh: Node.js 20 or newer is needed (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
cd "$here"

# shellcheck source=npm-deps.sh
source "$here/npm-deps.sh"
install_npm_deps

echo "== tsc --strict: build dist/"
rm -rf dist build
npx --no-install tsc -p tsconfig.json
echo "== tsc --strict: tests, examples, benchmark and chaos driver"
npx --no-install tsc -p tsconfig.test.json
npx --no-install tsc -p tsconfig.examples.json

echo "== node --test"
node --test --test-reporter=spec --test-timeout=180000 build/test/*.test.js

echo "== example: agent loop against a sidecar"
# A generous deadline: on a loaded CI machine a debug sidecar can be slower than the default 250 ms,
# and this run checks the sidecar's answers (the fail-open tests cover the fallback).
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
../../scripts/with-sidecar sh -c 'node examples/agentloop.mjs --addr "$REBOUND_ADDR" --timeout-ms 3000' | tee "$out"
# The example must have reached the sidecar, not only its local fallback.
if ! grep -q "; 0 local fallback decisions" "$out"; then
  echo "test.sh: the example fell back to the local policy; the sidecar did not answer" >&2
  exit 1
fi
echo "== TypeScript client: all checks passed"
