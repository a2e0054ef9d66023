#!/usr/bin/env bash
# Regenerates src/gen/ (TypeScript messages and the @grpc/grpc-js client) from
# proto/rebound/v1/rebound.proto.
#
# Installs its own pinned generators:
#   buf       @bufbuild/buf from npm (it ships the compiler as a prebuilt binary), in .tools/ (gitignored);
#             kept out of package.json because the npm registry this project uses carries only some
#             of buf's per-platform packages, and a lockfile that names the missing ones breaks npm ci
#   ts-proto  the protoc plugin, pinned in package.json's devDependencies (npm ci into node_modules/)
# Same inputs, same versions, same bytes: the output has no timestamps or absolute paths.
#
# Usage: generate.sh           regenerate in place
#        generate.sh --check   regenerate into a temporary folder and fail if the checked-in code differs
set -euo pipefail

BUF_VERSION=1.75.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$here/.tools"

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cd "$here"
# shellcheck source=npm-deps.sh
source "$here/npm-deps.sh"
install_npm_deps

buf="$tools/node_modules/.bin/buf"
if [[ ! -x "$buf" || "$("$buf" --version 2>/dev/null)" != "$BUF_VERSION" ]]; then
  echo "== installing buf $BUF_VERSION into $tools"
  rm -rf "$tools"
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-save --no-audit --no-fund --loglevel=error "@bufbuild/buf@$BUF_VERSION"
fi
# buf's cache stays inside the gitignored folder, not in the user's home.
export BUF_CACHE_DIR="$tools/cache"

generate_into() { # base folder: src/gen/ goes under it
  # The input is the proto module by relative path, so nothing machine-specific reaches the output.
  "$buf" generate ../../proto --template buf.gen.yaml --output "$1"
}

if $check; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  generate_into "$scratch"
  if ! diff -ru "$here/src/gen" "$scratch/src/gen"; then
    echo "clients/ts/src/gen is out of date: run clients/ts/generate.sh" >&2
    exit 1
  fi
  echo "clients/ts/src/gen is up to date"
else
  # Only generated files live in src/gen/, so clearing it drops stale output too.
  rm -rf "$here/src/gen"
  generate_into "$here"
  echo "generated $(cd "$here" && find src/gen -type f | sort | tr '\n' ' ')"
fi
