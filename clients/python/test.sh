#!/usr/bin/env bash
# Fresh-machine entry point for the Python client: make a venv with the pinned dependencies
# (constraints.txt) and the client installed from this folder, type-check with mypy --strict,
# run the tests against the real sidecar, then run the example agent loop against a sidecar
# this script starts. (Drift of the generated code is checked by `generate.sh --check` and by
# scripts/test's drift suite, which regenerates every client.)
#
# The sidecar binary is $REBOUND_BIN, by default the repository's target/debug/rebound.
# The interpreter is $PYTHON (default python3), 3.9 or newer.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REBOUND_BIN="${REBOUND_BIN:-$repo/target/debug/rebound}"
if [[ ! -x "$REBOUND_BIN" ]]; then
  echo "test.sh: no sidecar binary at $REBOUND_BIN (build it with cargo build, or set REBOUND_BIN)" >&2
  exit 1
fi
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "test.sh: $python is missing or older than Python 3.9" >&2
  exit 1
fi
cd "$here"

echo "== venv with pinned dependencies"
venv="$here/.venv"
# The stamp holds what the venv was made from; anything else means a fresh venv.
stamp="$("$python" -c 'import sys; print(sys.version)' | head -n1) $(cat constraints.txt pyproject.toml | cksum)"
if [[ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # PIP_CONSTRAINT also pins the build backend in pip's isolated build environment.
  PIP_CONSTRAINT="$here/constraints.txt" "$venv/bin/python" -m pip install \
    --quiet --disable-pip-version-check -e ".[test]"
  echo "$stamp" >"$venv/.stamp"
fi
py="$venv/bin/python"

echo "== mypy --strict"
"$py" -m mypy

echo "== pytest against the real sidecar ($REBOUND_BIN)"
"$py" -m pytest -q

echo "== example: agent loop against a sidecar"
../../scripts/with-sidecar "$py" examples/agent_loop.py
echo "== Python client: all checks passed"
