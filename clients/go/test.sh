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
echo "== go test -race"
go test -race -count=1 ./...

echo "== example: agent loop against a sidecar"
scratch="$(mktemp -d)"
sidecar_pid=""
cleanup() {
  if [[ -n "$sidecar_pid" ]] && kill -0 "$sidecar_pid" 2>/dev/null; then
    kill -TERM "$sidecar_pid" 2>/dev/null || true
    wait "$sidecar_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT

"$REBOUND_BIN" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 >"$scratch/stdout" 2>"$scratch/stderr" &
sidecar_pid=$!
# The sidecar prints one ready line with its address on stdout.
addr=""
for _ in $(seq 300); do
  addr="$(sed -n 's/^{"event":"ready","grpc":"\([^"]*\)".*/\1/p' "$scratch/stdout" | head -n1)"
  [[ -n "$addr" ]] && break
  if ! kill -0 "$sidecar_pid" 2>/dev/null; then
    echo "test.sh: the sidecar exited before it was ready:" >&2
    cat "$scratch/stderr" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$addr" ]]; then
  echo "test.sh: the sidecar printed no ready line within 30 s" >&2
  exit 1
fi
go run ./examples/agentloop -addr "$addr"

kill -TERM "$sidecar_pid"
status=0
wait "$sidecar_pid" || status=$?
sidecar_pid=""
if [[ "$status" -ne 0 ]]; then
  echo "test.sh: the sidecar exited $status after SIGTERM" >&2
  cat "$scratch/stderr" >&2
  exit 1
fi
echo "== Go client: all checks passed"
