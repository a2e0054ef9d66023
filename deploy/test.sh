#!/usr/bin/env bash
# Validates everything under deploy/ without a cluster or a container engine, then runs the real
# sidecar the way the manifests run it and has a real Prometheus scrape it. Each step below is one
# function; the list at the bottom is the checklist.
#
# Installs what it needs, pinned: Python packages (checks/requirements.txt) in deploy/.venv;
# kustomize, grpcurl and the CRD checker (Go module proxy) in deploy/.tools; Debian's prometheus
# package (promtool and the server) through apt-get when missing. Needs python3, go, and the
# sidecar binary built first (`cargo build --bin rebound`; scripts/test's rust suite does it).
#
# Usage: deploy/test.sh          REBOUND_BIN overrides the binary (default target/debug/rebound).
set -euo pipefail

DEPLOY="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$DEPLOY")"
REBOUND_BIN="${REBOUND_BIN:-$ROOT/target/debug/rebound}"

K8S_VERSION=1.31.0
KUSTOMIZE_VERSION=v5.4.3
GRPCURL_VERSION=v1.9.4
# The namespace label the test scrape adds, as the PodMonitor's scrape would.
TEST_NAMESPACE=rebound-test

VENV="$DEPLOY/.venv"
TOOLS="$DEPLOY/.tools"
PY="$VENV/bin/python"
CHECKS="$DEPLOY/checks"
WORK="$(mktemp -d)"

# Processes this script started, by pid (one per line), stopped on exit.
PIDS_FILE="$WORK/pids"
: > "$PIDS_FILE"

cleanup() {
  local pid
  while read -r pid; do
    kill -TERM "$pid" 2>/dev/null || true
  done < "$PIDS_FILE"
  while read -r pid; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  done < "$PIDS_FILE"
  rm -rf "$WORK"
}
trap cleanup EXIT

py() { (cd "$CHECKS" && "$PY" "$@"); }

# --- tools -------------------------------------------------------------------------------------

# go install MODULE@VERSION into deploy/.tools unless that exact version is already there.
go_install() {
  local binary="$1" package="$2" version="$3"
  if ! go version -m "$TOOLS/$binary" 2>/dev/null | grep -q "[[:space:]]${version}[[:space:]]"; then
    echo "go install $package@$version"
    GOBIN="$TOOLS" go install "$package@$version"
  fi
}

install_tools() {
  command -v python3 >/dev/null || { echo "python3 is needed" >&2; return 1; }
  command -v go >/dev/null || { echo "go is needed (kustomize, grpcurl and the CRD checker are Go)" >&2; return 1; }
  local stamp
  stamp="$(sha256sum "$CHECKS/requirements.txt" | cut -d' ' -f1)"
  if [ "$(cat "$VENV/.requirements" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$CHECKS/requirements.txt"
    echo "$stamp" > "$VENV/.requirements"
  fi
  # The schemas must come with the wheel: nothing is fetched while validating.
  local schemas
  schemas="$("$PY" -c 'import kubernetes_validate, os; print(os.path.dirname(kubernetes_validate.__file__))')/kubernetes-json-schema/v$K8S_VERSION-local-strict"
  [ -d "$schemas" ] || { echo "kubernetes-validate has no offline strict schemas for $K8S_VERSION" >&2; return 1; }

  mkdir -p "$TOOLS"
  go_install kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION"
  go_install grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl "$GRPCURL_VERSION"
  (cd "$CHECKS/crd" && go build -buildvcs=false -o "$TOOLS/crd" .)

  if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "promtool and prometheus are needed: apt-get install prometheus" >&2; return 1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
  [ -x "$REBOUND_BIN" ] || { echo "no sidecar binary at $REBOUND_BIN: run cargo build --bin rebound first" >&2; return 1; }
  echo "kubernetes-validate (schemas $K8S_VERSION offline), hadolint $("$VENV/bin/hadolint" --version | awk '{print $NF}'),"\
    "kustomize $KUSTOMIZE_VERSION, grpcurl $GRPCURL_VERSION, $(promtool --version 2>&1 | head -1)"
}

# --- the image ---------------------------------------------------------------------------------

check_dockerfile() {
  "$VENV/bin/hadolint" --failure-threshold info "$DEPLOY/docker/Dockerfile"
  echo "hadolint: no findings"
  py image.py dockerfile "$ROOT"
}

check_build_context() {
  py image.py context "$ROOT"
}

# --- Kubernetes --------------------------------------------------------------------------------

render_kustomizations() {
  "$TOOLS/kustomize" build "$DEPLOY/kubernetes/base" > "$WORK/base.yaml"
  "$TOOLS/kustomize" build "$DEPLOY/kubernetes/examples/existing-app" > "$WORK/component.yaml"
  echo "kustomize build: kubernetes/base and the sidecar component on kubernetes/examples/existing-app"
}

check_kubernetes_schemas() {
  # The component's sidecar.yaml is a partial Deployment (a patch); it is checked as rendered.
  local output
  output="$("$VENV/bin/kubernetes-validate" --kubernetes-version "$K8S_VERSION" --strict \
    "$WORK/base.yaml" "$WORK/component.yaml" \
    "$DEPLOY/kubernetes/base/deployment.yaml" "$DEPLOY/kubernetes/examples/existing-app/deployment.yaml" 2>&1)" \
    || { echo "$output"; return 1; }
  echo "$output"
  # A kind without a schema is only a warning to kubernetes-validate: here it is a failure.
  if grep -q '^WARN' <<<"$output"; then echo "a manifest was not validated" >&2; return 1; fi
}

check_sidecar_manifests() {
  py manifests.py sidecar "$ROOT" "$WORK/base.yaml" "$WORK/component.yaml" \
    "$DEPLOY/kubernetes/examples/existing-app/deployment.yaml"
}

check_sidecar_configs() {
  local config
  for config in "$DEPLOY"/kubernetes/*/rebound.toml "$DEPLOY"/kubernetes/components/*/rebound.toml; do
    "$REBOUND_BIN" check-config "$config"
    echo "rebound check-config ${config#"$ROOT/"}: valid"
  done
}

# --- monitoring --------------------------------------------------------------------------------

check_monitoring_crds() {
  # No Kubernetes schema covers the Prometheus Operator's kinds: they are decoded strictly
  # into the operator's own Go types (unknown fields and wrong types fail; durations parsed).
  "$TOOLS/crd" "$DEPLOY/monitoring/podmonitor.yaml" "$DEPLOY/monitoring/prometheusrule.yaml"
  py monitoring.py resources "$ROOT" "$WORK/prometheusrule-spec.yml"
}

check_alert_rules() {
  promtool check rules "$DEPLOY/monitoring/rules.yml" "$WORK/prometheusrule-spec.yml"
  promtool test rules "$DEPLOY"/monitoring/tests/*.yaml
}

check_dashboard() {
  py monitoring.py dashboard "$ROOT"
}

# --- the real sidecar and a real Prometheus ----------------------------------------------------

# Reads one field of the sidecar's ready line.
ready_field() {
  python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$WORK/sidecar.out" "$1"
}

start_sidecar() {
  # The base manifest's container: the image's ENTRYPOINT with its args and env, the ConfigMap
  # laid out as the kubelet mounts it, loopback port 0 for the pod's ports. A small retry
  # budget (an environment override) so that a few timeouts spend it.
  local argv=()
  mapfile -d '' argv < <(py manifests.py launch "$ROOT" "$WORK/base.yaml" "$REBOUND_BIN" "$WORK/etc-rebound")
  [ "${#argv[@]}" -gt 2 ] || return 1
  echo "${argv[*]}"
  # A watcher records the exit status, since the steps run in subshells and only a parent can wait.
  (
    REBOUND_RETRY_BUDGET_MAX_TOKENS=4 "${argv[@]}" > "$WORK/sidecar.out" 2> "$WORK/sidecar.log" &
    child=$!
    echo "$child" >> "$PIDS_FILE"
    echo "$child" > "$WORK/sidecar.pid"
    status=0
    wait "$child" || status=$?
    echo "$status" > "$WORK/sidecar.status"
  ) &
  for _ in $(seq 120); do
    [ -s "$WORK/sidecar.out" ] && break
    if [ -s "$WORK/sidecar.status" ]; then
      echo "the sidecar exited $(cat "$WORK/sidecar.status") before it was ready" >&2
      cat "$WORK/sidecar.log" >&2
      return 1
    fi
    sleep 0.5
  done
  [ -s "$WORK/sidecar.out" ] || { echo "no ready line within 60 s" >&2; cat "$WORK/sidecar.log" >&2; return 1; }
  echo "ready: $(head -1 "$WORK/sidecar.out")"
}

check_sidecar_traffic() {
  py live.py drive "$TOOLS/grpcurl" "$(ready_field grpc)"
}

check_configmap_reload() {
  py live.py reload "$WORK/etc-rebound" "$(ready_field metrics)"
}

check_exported_metrics() {
  py live.py exported "$ROOT" "$(ready_field metrics)"
}

check_real_prometheus() {
  local port
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  cat > "$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $DEPLOY/monitoring/rules.yml
scrape_configs:
  - job_name: rebound
    static_configs:
      - targets: ["$(ready_field metrics)"]
        # The labels the PodMonitor's scrape adds, which the alerts and the dashboard use.
        labels: {namespace: $TEST_NAMESPACE, pod: $TEST_NAMESPACE-0, container: rebound}
YML
  prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$port" > "$WORK/prometheus.log" 2>&1 &
  local pid=$!
  echo "$pid" >> "$PIDS_FILE"
  if ! py live.py prometheus "$ROOT" "127.0.0.1:$port" "$TEST_NAMESPACE"; then
    tail -20 "$WORK/prometheus.log" >&2
    return 1
  fi
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
}

check_sidecar_stops() {
  # SIGTERM, as the kubelet sends it: health turns NOT_SERVING, streams drain, exit 0.
  kill -TERM "$(cat "$WORK/sidecar.pid")"
  for _ in $(seq 60); do [ -s "$WORK/sidecar.status" ] && break; sleep 0.5; done
  [ -s "$WORK/sidecar.status" ] || { echo "still running 30 s after SIGTERM" >&2; return 1; }
  local status
  status="$(cat "$WORK/sidecar.status")"
  [ "$status" = 0 ] || { echo "exited $status after SIGTERM" >&2; tail -5 "$WORK/sidecar.log" >&2; return 1; }
  echo "SIGTERM: the sidecar drained and exited 0"
}

# --- the checklist -----------------------------------------------------------------------------

passed=0
failed=0
failures=()

# Runs one step in a subshell with errexit in force (bash ignores -e inside a function called
# from an if), records the result, and stops the run when a step others need has failed.
step() {
  local kind="$1" name="$2" status=0
  echo
  echo "--- $name"
  set +e
  (set -e; "$name")
  status=$?
  set -e
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
  else
    echo "--- $name: FAILED"
    failed=$((failed + 1))
    failures+=("$name")
    if [ "$kind" = needed ]; then
      echo "deploy: $name is needed by the steps after it; stopping"
      echo "deploy: $passed passed, $failed failed"
      exit 1
    fi
  fi
}

step needed install_tools
step check check_dockerfile
step check check_build_context
step needed render_kustomizations
step check check_kubernetes_schemas
step check check_sidecar_manifests
step check check_sidecar_configs
step check check_monitoring_crds
step check check_alert_rules
step check check_dashboard
step needed start_sidecar
step check check_sidecar_traffic
step check check_configmap_reload
step check check_exported_metrics
step check check_real_prometheus
step check check_sidecar_stops

echo
[ "$failed" = 0 ] || echo "deploy: failed steps: ${failures[*]}"
echo "deploy: $passed passed, $failed failed"
[ "$failed" = 0 ]
