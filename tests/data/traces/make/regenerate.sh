#!/usr/bin/env bash
# Regenerates the real files of the trace set (../*.txt whose index entry says "generated"): each
# program here really fails, and what the runtime or tool printed is kept as it was printed.
# Needs python3 (a venv with httpx, requests, pydantic, pytest is made in $WORK), go, node, java, cargo,
# cc and make, npm and git. Paths in the output are this machine's; that is what real traces hold.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(cd "$here/.." && pwd)"
WORK="${WORK:-/tmp/rebound-tracegen}"
mkdir -p "$WORK"

keep() { # keep FILE COMMAND...: run the command, keep stdout and stderr as the file
  local file="$1"; shift
  "$@" >"$out/$file" 2>&1
  echo "$file: exit $?, $(wc -c <"$out/$file") bytes"
}

venv="$WORK/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet httpx==0.28.1 requests==2.32.3 pydantic==2.10.4 pytest==8.3.4 \
    openai==3.54.0 anthropic==2.12.0 sqlalchemy==2.1.9 fastapi==0.165.0 starlette==1.10.0 jinja2==3.1.6 \
    langchain-core==1.7.2 aiohttp==3.14.5
fi
for s in langchain_tool aiohttp_connect openai_429 openai_context_length anthropic_overloaded sqlalchemy_integrity fastapi_500 jinja_undefined \
  httpx_connect requests_connect requests_timeout httpx_429 pydantic_validation json_decode key_error \
  file_not_found raise_from during_handling exception_group asyncio_timeout called_process subprocess_timeout \
  sqlite_integrity recursion attribute_none zero_division; do
  keep "py-${s//_/-}.txt" "$venv/bin/python" "$here/failures.py" "$s"
done
# One tool, the same frames, the model's arguments malformed two ways.
keep py-tool-arguments-truncated.txt "$venv/bin/python" "$here/failures.py" tool_arguments '{"query": "rust sidecar", "limit": 1'
keep py-tool-arguments-single-quoted.txt "$venv/bin/python" "$here/failures.py" tool_arguments "{'query': 'rust sidecar'}"

(cd "$here/go-panics" && go build -o "$WORK/go-panics" .)
for s in nil_map index_range nil_pointer worker_panic json_panic; do
  keep "go-${s//_/-}.txt" "$WORK/go-panics" "$s"
done
keep go-deadlock.txt env GOTRACEBACK=all "$WORK/go-panics" deadlock
(cd "$here/go-http" && go build -o "$WORK/go-http" .)
keep go-http-handler-panic.txt "$WORK/go-http"
keep go-goroutine-dump.txt "$WORK/go-http" goroutine_dump

for s in http_handler type_error fetch_refused json_parse enoent stack_overflow error_cause; do
  keep "node-${s//_/-}.txt" node "$here/node/failures.mjs" "$s"
done

jars=""
for a in jackson-databind jackson-core jackson-annotations; do
  jar="$WORK/$a-2.18.2.jar"
  group=com/fasterxml/jackson/core
  [ -s "$jar" ] || curl -fsSL -o "$jar" "https://repo1.maven.org/maven2/$group/$a/2.18.2/$a-2.18.2.jar"
  jars="$jars:$jar"
done
for s in npe number_format connect_refused caused_by stream_index jackson; do
  keep "java-${s//_/-}.txt" java -cp "${jars#:}" "$here/java/Failures.java" "$s"
done

cargo build --quiet --manifest-path "$here/rust-panics/Cargo.toml" --target-dir "$WORK/rust-target"
for s in unwrap expect index thread; do
  keep "rust-$s-backtrace.txt" env RUST_BACKTRACE=1 "$WORK/rust-target/debug/tracegen" "$s"
done
keep rust-unwrap.txt env RUST_BACKTRACE=0 "$WORK/rust-target/debug/tracegen" unwrap

# Tool output: builds, tests and package managers that fail.
rm -rf "$WORK/agentcrate" && cargo new --quiet --vcs none "$WORK/agentcrate" && cp "$here/tools/broken.rs" "$WORK/agentcrate/src/main.rs"
keep tool-cargo-build.txt cargo build --manifest-path "$WORK/agentcrate/Cargo.toml" --color never
keep tool-make-cc.txt make -C "$here/tools" -B broken
rm -f "$here/tools/broken"
rm -rf "$WORK/gomod" && mkdir -p "$WORK/gomod" && cp "$here/tools/broken.go" "$WORK/gomod/main.go"
(cd "$WORK/gomod" && go mod init example.com/agent >/dev/null 2>&1)
keep tool-go-build.txt sh -c "cd '$WORK/gomod' && go build ./..."
keep tool-tsc.txt sh -c "cd '$WORK' && npx --yes --package typescript@5.7.2 tsc --strict --noEmit --pretty false '$here/tools/broken.ts'"
keep tool-pytest.txt sh -c "cd '$here/tools' && '$venv/bin/python' -m pytest -p no:cacheprovider test_agent.py"
keep tool-pip-install.txt "$venv/bin/pip" install --no-cache-dir rebound-no-such-package==1.0
rm -rf "$WORK/npm" && mkdir -p "$WORK/npm" && echo '{"name":"agent","version":"1.0.0"}' >"$WORK/npm/package.json"
keep tool-npm-eresolve.txt npm install --prefix "$WORK/npm" --no-audit --no-fund react@17.0.2 react-dom@18.3.1
rm -rf "$WORK/git" && git init -q "$WORK/git" && (
  cd "$WORK/git" && git config user.email a@example.com && git config user.name agent &&
  echo 'timeout = 30' >settings.toml && git add . && git commit -qm base &&
  git checkout -qb feature && echo 'timeout = 60' >settings.toml && git commit -qam feature &&
  git checkout -q - && echo 'timeout = 10' >settings.toml && git commit -qam main
)
keep tool-git-merge.txt git -C "$WORK/git" merge feature
