#!/usr/bin/env bash
# Regenerates the Python client's protobuf and gRPC modules from proto/rebound/v1/rebound.proto
# into src/rebound/v1/, so that the proto package rebound.v1 is the Python package rebound.v1.
#
# Installs its own pinned generator (grpcio-tools, which bundles protoc) into
# clients/python/.venv-gen (gitignored). Running it twice changes nothing.
#
# Usage: generate.sh           regenerate in place
#        generate.sh --check   regenerate into a temporary folder and fail if the checked-in code differs
set -euo pipefail

# The runtime ranges in pyproject.toml follow from this pin: the generated code checks
# grpcio >= this version and protobuf >= the protoc version bundled with it (6.31.1).
# 1.80 is the last grpcio line that supports Python 3.9. The generator's own dependencies
# are pinned too, so that the venv is the same on every machine.
GRPCIO_TOOLS_VERSION=1.80.0
GENERATOR_PINS="grpcio-tools==$GRPCIO_TOOLS_VERSION grpcio==1.80.0 protobuf==6.33.6 setuptools==80.9.0 typing_extensions==4.16.0"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv-gen"
out="$here/src"

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# The stamp file guards against a venv left by older pins.
if [[ "$(cat "$venv/.pins" 2>/dev/null)" != "$GENERATOR_PINS" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # one argument per pin
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $GENERATOR_PINS
  echo "$GENERATOR_PINS" >"$venv/.pins"
fi

generate_into() { # output root: rebound/v1/ goes under it
  mkdir -p "$1/rebound/v1"
  # Run from the proto root with a relative file name so that no machine-specific
  # (absolute) path reaches the generated files.
  (cd "$repo/proto" && "$venv/bin/python" -m grpc_tools.protoc \
    --proto_path=. \
    --python_out="$1" \
    --pyi_out="$1" \
    --grpc_python_out="$1" \
    rebound/v1/rebound.proto)
  # protoc writes no __init__.py; the package needs one for the generated imports (rebound.v1).
  printf '"""Code generated from proto/rebound/v1/rebound.proto by clients/python/generate.sh. DO NOT EDIT."""\n' \
    >"$1/rebound/v1/__init__.py"
}

if $check; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  generate_into "$scratch"
  if ! diff -ru "$out/rebound/v1" "$scratch/rebound/v1"; then
    echo "clients/python/src/rebound/v1 is out of date: run clients/python/generate.sh" >&2
    exit 1
  fi
  echo "clients/python/src/rebound/v1 is up to date"
else
  # Only generated files live in rebound/v1/, so clearing it drops stale output too.
  rm -rf "$out/rebound/v1"
  generate_into "$out"
  echo "generated $(cd "$out" && ls rebound/v1/* | tr '\n' ' ')"
fi
