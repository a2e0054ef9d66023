#!/usr/bin/env bash
# Regenerates clients/go/reboundpb from proto/rebound/v1/rebound.proto.
#
# Installs its own pinned generators into clients/go/.tools (gitignored):
#   protoc              from PyPI's grpcio-tools, in a venv
#   protoc-gen-go       at the exact google.golang.org/protobuf version go.mod requires,
#                       so generated code and runtime never disagree
#   protoc-gen-go-grpc  pinned below
#
# Usage: generate.sh           regenerate in place
#        generate.sh --check   regenerate into a temporary folder and fail if the checked-in code differs
set -euo pipefail

GRPCIO_TOOLS_VERSION=1.85.1
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
tools="$here/.tools"
module="github.com/rebound-dev/rebound/clients/go"

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

mkdir -p "$tools/bin"

# protoc, from grpcio-tools. The version file guards against a venv left by an older pin.
venv="$tools/venv"
if [[ "$(cat "$venv/.grpcio-tools-version" 2>/dev/null)" != "$GRPCIO_TOOLS_VERSION" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "grpcio-tools==$GRPCIO_TOOLS_VERSION"
  echo "$GRPCIO_TOOLS_VERSION" >"$venv/.grpcio-tools-version"
fi

# protoc-gen-go must match the protobuf runtime the module builds against.
protobuf_version="$(cd "$here" && go list -m -f '{{.Version}}' google.golang.org/protobuf)"
install_plugin() { # name package version
  local stamp="$tools/bin/.$1-version"
  if [[ ! -x "$tools/bin/$1" || "$(cat "$stamp" 2>/dev/null)" != "$3" ]]; then
    GOBIN="$tools/bin" GOFLAGS=-buildvcs=false go install "$2@$3"
    echo "$3" >"$stamp"
  fi
}
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$protobuf_version"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

generate_into() { # output root (the module's root layout: reboundpb/ goes under it)
  # Run from the proto root with a relative file name so nothing machine-specific
  # (an absolute path) can reach the generated files.
  (cd "$repo/proto" && "$venv/bin/python" -m grpc_tools.protoc \
    --proto_path=. \
    --plugin=protoc-gen-go="$tools/bin/protoc-gen-go" \
    --plugin=protoc-gen-go-grpc="$tools/bin/protoc-gen-go-grpc" \
    --go_out="$1" --go_opt=module="$module" \
    --go-grpc_out="$1" --go-grpc_opt=module="$module" \
    rebound/v1/rebound.proto)
}

if $check; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  generate_into "$scratch"
  if ! diff -ru "$here/reboundpb" "$scratch/reboundpb"; then
    echo "clients/go/reboundpb is out of date: run clients/go/generate.sh" >&2
    exit 1
  fi
  echo "clients/go/reboundpb is up to date"
else
  # Only generated files live in reboundpb/, so clearing it drops stale output too.
  rm -rf "$here/reboundpb"
  mkdir -p "$here/reboundpb"
  generate_into "$here"
  echo "generated $(cd "$here" && ls reboundpb/*.go | tr '\n' ' ')"
fi
