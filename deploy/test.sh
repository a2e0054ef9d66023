#!/usr/bin/env bash
# Validates everything under deploy/ without a cluster, then scrapes a real sidecar with a real Prometheus.
# Installs what it needs (pinned): kubernetes-validate (PyPI, in deploy/.venv), kustomize (Go module
# proxy, in deploy/.tools), Debian's prometheus package (promtool and the server) when root.
set -euo pipefail
DEPLOY="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$DEPLOY")"
REBOUND_BIN="${REBOUND_BIN:-$ROOT/target/debug/rebound}"
K8S_VERSION=1.31.0
KUBERNETES_VALIDATE=1.31.0
KUSTOMIZE=v5.4.3
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { echo "--- $*"; }

install_tools() {
  step "installing kubernetes-validate $KUBERNETES_VALIDATE, kustomize $KUSTOMIZE, promtool"
  if [ ! -x "$DEPLOY/.venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$DEPLOY/.venv"
    "$DEPLOY/.venv/bin/pip" install -q "kubernetes-validate==$KUBERNETES_VALIDATE" pyyaml
  fi
  if [ ! -x "$DEPLOY/.tools/kustomize" ]; then
    GOBIN="$DEPLOY/.tools" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE"
  fi
  if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
      echo "promtool and prometheus are needed (Debian: apt-get install prometheus)" >&2
      return 1
    fi
  fi
  [ -x "$REBOUND_BIN" ] || (cd "$ROOT" && cargo build --bin rebound)
}

validate() {
  "$DEPLOY/.venv/bin/kubernetes-validate" --kubernetes-version "$K8S_VERSION" --strict "$@"
}

check_manifests() {
  step "kustomize build of the base and of the component on an existing app; Kubernetes $K8S_VERSION schemas, strict"
  "$DEPLOY/.tools/kustomize" build "$DEPLOY/kubernetes/base" > "$WORK/base.yaml"
  "$DEPLOY/.tools/kustomize" build "$DEPLOY/kubernetes/examples/existing-app" > "$WORK/component.yaml"
  validate "$WORK/base.yaml" "$WORK/component.yaml" "$DEPLOY/kubernetes/base/deployment.yaml" \
    "$DEPLOY/kubernetes/examples/existing-app/deployment.yaml"
  step "the rendered pods run Rebound as a native sidecar with gRPC probes"
  "$DEPLOY/.venv/bin/python" - "$WORK/base.yaml" "$WORK/component.yaml" <<'PY'
import sys, yaml
for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert deployments, f"{path}: no Deployment"
    assert any(d["kind"] == "ConfigMap" and "rebound.toml" in d.get("data", {}) for d in docs), f"{path}: no config"
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        sidecars = [c for c in spec.get("initContainers", []) if c["name"] == "rebound"]
        assert len(sidecars) == 1, f"{path}: {d['metadata']['name']} has no rebound init container"
        c = sidecars[0]
        assert c.get("restartPolicy") == "Always", "not a native sidecar"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["grpc"]["port"] == 50051, probe
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
        assert sc["capabilities"]["drop"] == ["ALL"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
        assert c["resources"]["requests"] and c["resources"]["limits"]
        assert {p["name"] for p in c["ports"]} == {"grpc", "metrics"}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["rebound-config"]["configMap"]["name"].startswith("rebound-config"), "config not mounted"
    print(f"{path}: ok")
PY
}

check_monitoring_resources() {
  step "PodMonitor and PrometheusRule: shape, and the PrometheusRule carries exactly rules.yml"
  "$DEPLOY/.venv/bin/python" - "$DEPLOY/monitoring" <<'PY'
import sys, yaml
d = sys.argv[1]
pm = yaml.safe_load(open(f"{d}/podmonitor.yaml"))
assert pm["apiVersion"] == "monitoring.coreos.com/v1" and pm["kind"] == "PodMonitor"
endpoints = pm["spec"]["podMetricsEndpoints"]
assert endpoints and all(e["port"] == "metrics" and e["path"] == "/metrics" for e in endpoints)
pr = yaml.safe_load(open(f"{d}/prometheusrule.yaml"))
assert pr["apiVersion"] == "monitoring.coreos.com/v1" and pr["kind"] == "PrometheusRule"
assert pr["spec"] == yaml.safe_load(open(f"{d}/rules.yml")), "prometheusrule.yaml and rules.yml differ"
for group in pr["spec"]["groups"]:
    for rule in group["rules"]:
        assert rule["annotations"].get("runbook"), f"{rule['alert']} has no runbook"
print("monitoring resources: ok")
PY
}

check_rules() {
  step "promtool check rules and test rules"
  promtool check rules "$DEPLOY/monitoring/rules.yml"
  (cd "$DEPLOY/monitoring/tests" && promtool test rules alerts_test.yml)
}

check_dashboard() {
  step "the dashboard parses and queries only rebound metrics"
  "$DEPLOY/.venv/bin/python" - "$DEPLOY/monitoring/dashboard.json" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
assert len(exprs) >= 10
for e in exprs:
    assert re.search(r"rebound_[a-z_]+", e), e
print(f"dashboard: {len(dash['panels'])} panels ok")
PY
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

real_prometheus_scrape() {
  step "a real Prometheus scrapes a real sidecar that has seen traffic"
  "$REBOUND_BIN" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 > "$WORK/ready" 2> "$WORK/sidecar.log" &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$WORK/ready" ] && break; sleep 0.1; done
  local grpc metrics
  grpc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc"])' "$WORK/ready")
  metrics=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"])' "$WORK/ready")
  # Traffic from the Go client's example agent loop (real tools failing in scripted ways).
  (cd "$ROOT/clients/go" && go run ./examples/agentloop -addr "$grpc" > "$WORK/agentloop.log" 2>&1) || {
    cat "$WORK/agentloop.log"; return 1; }
  local port
  port=$(free_port)
  cat > "$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: rebound
    static_configs:
      - targets: ["$metrics"]
YML
  prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$port" > "$WORK/prometheus.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 60); do
    local value
    value=$(python3 - "$port" <<'PY' 2>/dev/null || echo 0
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query=sum(rebound_outcomes_total)"
result = json.load(urllib.request.urlopen(url, timeout=2))["data"]["result"]
print(result[0]["value"][1] if result else 0)
PY
)
    if python3 -c "import sys; sys.exit(0 if float('$value') > 0 else 1)"; then
      echo "Prometheus at 127.0.0.1:$port reads sum(rebound_outcomes_total) = $value"
      return 0
    fi
    sleep 1
  done
  echo "Prometheus never saw rebound_outcomes_total above zero" >&2
  tail -20 "$WORK/prometheus.log" >&2
  return 1
}

install_tools
check_manifests
check_monitoring_resources
check_rules
check_dashboard
real_prometheus_scrape
echo "deploy: all checks passed"
