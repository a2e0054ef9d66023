#!/usr/bin/env bash
# Fresh-machine entry point for the Go client: download modules, vet, run the
# tests (race detector on) against the real sidecar, then run the example
# agent loop against a sidecar this script starts.
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
cd "$here"

echo "== go mod download"
go mod download
echo "== go vet"
go vet ./...
echo "== 32-bit: go vet (386), go build (arm)"
# An int compared with a constant above its 32-bit range does not compile there.
GOARCH=386 go vet ./...
GOARCH=arm go build ./...
echo "== go test -race"
go test -race -count=1 ./...

echo "== example: agent loop against a sidecar"
# No -addr: the client dials $REBOUND_ADDR, which with-sidecar sets, as the deploy manifests do.
../../scripts/with-sidecar go run ./examples/agentloop
echo "== Go client: all checks passed"
