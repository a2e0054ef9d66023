"""Checks against the real sidecar and a real Prometheus, both on loopback.

    python3 live.py drive GRPCURL GRPC_ADDR
    python3 live.py reload CONFIG_DIR METRICS_ADDR
    python3 live.py exported REPO_ROOT METRICS_ADDR
    python3 live.py prometheus REPO_ROOT PROMETHEUS_ADDR NAMESPACE
"""

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from common import CheckFailed, alert_rules, dashboard_targets, metric_names, require, run

MONITORING = "deploy/monitoring"
#: How long a live condition may take before the check gives up.
DEADLINE_SECONDS = 60


def grpcurl(tool, addr, method, *messages):
    """Calls one method with grpcurl (server reflection, no proto file) and returns the
    JSON responses."""
    args = [tool, "-plaintext", "-max-time", "10"]
    if messages:
        args += ["-d", "\n".join(json.dumps(m) for m in messages)]
    result = subprocess.run([*args, addr, *method.split()], capture_output=True, text=True, check=False)
    require(result.returncode == 0, f"grpcurl {method}: exit {result.returncode}: {result.stderr.strip()}")
    decoder, text, out = json.JSONDecoder(), result.stdout.strip(), []
    while text:
        value, end = decoder.raw_decode(text)
        out.append(value)
        text = text[end:].lstrip()
    return out


def drive(tool, addr):
    """Drives outcomes of every kind the dashboard shows through the sidecar, checking the
    verdicts a user would act on: successes, retries, a tool breaker that opens, Admit
    refusing the fenced tool, an escalation, a retry budget spent, a stream, a session end."""
    run_id = f"deploy-{os.getpid()}"
    listing = subprocess.run([tool, "-plaintext", addr, "list"], capture_output=True, text=True, check=True).stdout
    for service in ("rebound.v1.Rebound", "grpc.health.v1.Health"):
        require(service in listing.split(), f"reflection does not list {service}: {listing!r}")
    for service in ("", "rebound.v1.Rebound"):
        (health,) = grpcurl(tool, addr, "grpc.health.v1.Health/Check", {"service": service})
        require(health.get("status") == "SERVING", f"health of {service!r} is {health}, as a probe sees it")

    def report(**outcome):
        (verdict,) = grpcurl(tool, addr, "rebound.v1.Rebound/Report", outcome)
        return verdict

    ok = report(session_id=f"{run_id}-ok", tool="search", ok=True)
    require(ok["action"] == "ACTION_CONTINUE", f"a success answered {ok['action']}")

    # One tool failing in five sessions trips its fleet-wide breaker (default: 5 in a row).
    verdicts = [report(session_id=f"{run_id}-s{i}", tool="search", http_status=503,
                       message="503 Service Unavailable") for i in range(5)]
    require(verdicts[0]["action"] == "ACTION_RETRY" and verdicts[0]["retry"]["delayMs"],
            f"a first 503 answered {verdicts[0]['action']}")
    require(verdicts[-1]["breaker"]["toolState"] == "BREAKER_STATE_OPEN",
            f"five 503s in a row left the tool breaker {verdicts[-1]['breaker'].get('toolState')}")
    (admit,) = grpcurl(tool, addr, "rebound.v1.Rebound/Admit", {"session_id": f"{run_id}-s0", "tool": "search"})
    require(not admit.get("allowed") and admit.get("reason") == "REASON_TOOL_BREAKER_OPEN",
            f"Admit let a fenced tool through: {admit}")

    auth = report(session_id=f"{run_id}-auth", tool="llm", http_status=401, message="401 Unauthorized")
    require(auth["action"] == "ACTION_ESCALATE", f"a 401 answered {auth['action']}")

    # Timeouts of another tool in fresh sessions spend the retry budget (the test sidecar
    # runs with a small one, set through REBOUND_RETRY_BUDGET_MAX_TOKENS).
    budget = [report(session_id=f"{run_id}-b{i}", tool="fetch", kind="OUTCOME_KIND_TIMEOUT",
                     message="Read timed out. (read timeout=30)") for i in range(4)]
    require(any(v["action"] != "ACTION_RETRY" for v in budget),
            f"four timeouts in fresh sessions were all retried: {[v['action'] for v in budget]}")

    stream = grpcurl(tool, addr, "rebound.v1.Rebound/Observe",
                     {"session_id": f"{run_id}-stream", "call_id": "1", "tool": "sql", "ok": True},
                     {"session_id": f"{run_id}-stream", "call_id": "2", "tool": "sql",
                      "message": "relation \"users\" does not exist", "code": "42P01"})
    require(len(stream) == 2 and stream[0]["action"] == "ACTION_CONTINUE",
            f"Observe answered {[v.get('action') for v in stream]} to two outcomes")
    (context,) = grpcurl(tool, addr, "rebound.v1.Rebound/Context", {"session_id": f"{run_id}-stream"})
    require("<error " in json.dumps(context), f"Context of a failed session has no <error> snippet: {context}")
    (summary,) = grpcurl(tool, addr, "rebound.v1.Rebound/EndSession", {"session_id": f"{run_id}-stream"})
    require(summary, "EndSession returned nothing")
    print(f"drove the sidecar at {addr}: continue, retry, a tool breaker opened, Admit refused, escalate, "
          f"retry budget spent ({[v['action'] for v in budget]}), an Observe stream, Context, EndSession")


def scrape(metrics_addr):
    """The /metrics text of the sidecar."""
    with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=5) as response:
        require(response.status == 200, f"/metrics answered {response.status}")
        require(response.headers.get_content_type() == "text/plain",
                f"/metrics content type {response.headers.get('Content-Type')}")
        return response.read().decode("utf-8")


def samples(text):
    """{sample name: [(labels, value)]} of a Prometheus text exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def counter_value(metrics_addr, name, **labels):
    """The value of one labelled sample, 0 when absent."""
    for sample_labels, value in samples(scrape(metrics_addr)).get(name, []):
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            return value
    return 0.0


def wait_for(condition, what):
    """Polls a condition until it holds or the deadline passes."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    require(False, f"timed out after {DEADLINE_SECONDS}s waiting for {what}")


def swap_config(config_dir, text, stamp):
    """Updates the mounted ConfigMap as the kubelet does: a new timestamped folder, then an
    atomic rename of a fresh ..data symlink over the old one."""
    config_dir = Path(config_dir)
    version = config_dir / f"..2026_01_01_00_00_{stamp:02d}.000000001"
    version.mkdir()
    (version / "rebound.toml").write_text(text, encoding="utf-8")
    tmp = config_dir / "..data_tmp"
    os.symlink(version.name, tmp)
    os.rename(tmp, config_dir / "..data")


def reload(config_dir, metrics_addr):
    """A bad ConfigMap update is refused and counted as an error; putting the good one
    back loads and counts as ok: what ReboundConfigReloadFailed and the dashboard read."""
    good = (Path(config_dir) / "rebound.toml").read_text(encoding="utf-8")
    name = "rebound_config_reloads_total"
    errors, oks = counter_value(metrics_addr, name, result="error"), counter_value(metrics_addr, name, result="ok")
    swap_config(config_dir, good + "\n[sessions]\nno_such_key = 1\n", 1)
    wait_for(lambda: counter_value(metrics_addr, name, result="error") == errors + 1,
             f'{name}{{result="error"}} to count the bad ConfigMap')
    swap_config(config_dir, good, 2)
    wait_for(lambda: counter_value(metrics_addr, name, result="ok") == oks + 1,
             f'{name}{{result="ok"}} to count the good ConfigMap put back')
    print(f"ConfigMap symlink swaps: a bad config counted as result=error, the good one as result=ok")


def used_names(root):
    """The Rebound sample names the dashboard and the alert rules query."""
    root = Path(root)
    return (metric_names((root / MONITORING / "dashboard.json").read_text(encoding="utf-8"))
            | metric_names((root / MONITORING / "rules.yml").read_text(encoding="utf-8")))


# Exported only under a config the sidecar checked here does not run (`[state] backend = "redis"`;
# `[breakers] shadow = true`): each is looked for in the sidecar's source instead, so that a misspelt
# name still fails.
CONFIG_ONLY = {"rebound_state_backend_up", "rebound_shadow_verdicts_total"}


def exported(root, metrics_addr):
    """Every Rebound sample name the dashboard and the alerts use is on /metrics."""
    wanted = used_names(root)
    require(len(wanted) >= 10, f"found only {sorted(wanted)} in the dashboard and rules")
    source = (Path(root) / "src" / "metrics.rs").read_text(encoding="utf-8")
    for name in sorted(wanted & CONFIG_ONLY):
        require(f'"{name}"' in source, f"{name}: not a metric of src/metrics.rs")
    present = samples(scrape(metrics_addr))
    missing = sorted(wanted - CONFIG_ONLY - set(present))
    if missing:
        print("METRICS USED BY THE DASHBOARD OR ALERTS BUT NOT EXPORTED BY THE SIDECAR:")
        for name in missing:
            print(f"  - {name}")
    require(not missing, f"{len(missing)} metric name(s) not exported: {missing}")
    print(f"/metrics exports all {len(wanted - CONFIG_ONLY)} Rebound sample names the dashboard and alerts use "
          f"(and src/metrics.rs has the {len(wanted & CONFIG_ONLY)} that Redis or shadow mode adds)")


def query(prometheus_addr, promql):
    """One instant query through Prometheus' HTTP API; returns the result vector."""
    url = f"http://{prometheus_addr}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
    except urllib.error.HTTPError as error:
        body = json.load(error)
    require(body.get("status") == "success", f"query {promql!r} failed: {body.get('error')}")
    return body["data"]["result"]


def prometheus(root, prometheus_addr, namespace):
    """A real Prometheus scraping the sidecar sees rebound_outcomes_total above zero, every
    dashboard query returns series carrying the labels its legend names, and the alert
    rules evaluate without error."""
    outcomes = []

    def outcomes_seen():
        try:
            outcomes[:] = query(prometheus_addr, "sum(rebound_outcomes_total)")
        except (OSError, ValueError, CheckFailed):  # Prometheus still starting
            return False
        return bool(outcomes) and float(outcomes[0]["value"][1]) > 0

    wait_for(outcomes_seen, "Prometheus to scrape rebound_outcomes_total above zero")
    print(f"Prometheus at {prometheus_addr}: sum(rebound_outcomes_total) = {outcomes[0]['value'][1]}")
    # rate() needs two samples in its window; the test scrapes every second.
    wait_for(lambda: query(prometheus_addr, 'count_over_time(up{container="rebound"}[1m]) >= 3'),
             "three scrapes of the sidecar")

    dashboard = json.loads((Path(root) / MONITORING / "dashboard.json").read_text(encoding="utf-8"))
    values = {"namespace": namespace, "pod": ".*", "tool": ".*", "__rate_interval": "1m"}
    config_only = []
    for title, target in dashboard_targets(dashboard):
        expr = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], target["expr"])
        result = query(prometheus_addr, expr)
        if not result and metric_names(expr) <= CONFIG_ONLY:
            # A panel of what this sidecar's config does not export: the query must still parse (above).
            config_only.append(title)
            continue
        require(result, f"dashboard panel {title!r}: {expr} returned no series")
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
            require(all(label in series["metric"] for series in result),
                    f"dashboard panel {title!r}: legend label {label} is missing from {expr}")
    print(f"every one of the {len(dashboard_targets(dashboard))} dashboard queries returns series with its legend labels"
          + (f", but {config_only}, which only another config exports" if config_only else ""))

    # The variables' label_values(SELECTOR, LABEL), asked of Prometheus' series API as Grafana asks it.
    expected = {"namespace": namespace, "pod": f"{namespace}-0"}
    for variable in dashboard["templating"]["list"]:
        query_text = variable.get("definition") or ""
        found = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query_text)
        if not found:
            continue
        selector = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], found.group(1))
        url = (f"http://{prometheus_addr}/api/v1/label/{found.group(2)}/values?"
               + urllib.parse.urlencode({"match[]": selector}))
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                offered = json.load(response)["data"]
        except urllib.error.HTTPError as error:
            raise CheckFailed(f"dashboard variable {variable['name']}: {query_text}: {error}") from error
        want = expected.get(variable["name"])
        require(offered and (want is None or want in offered),
                f"dashboard variable {variable['name']}: {query_text} offers {offered}, not {want or 'any value'}")
    print("every dashboard variable offers the scraped sidecar's values")

    names = {a["alert"] for a in alert_rules(Path(root) / MONITORING / "rules.yml")}
    loaded = []

    def rules_evaluated():
        url = f"http://{prometheus_addr}/api/v1/rules"
        with urllib.request.urlopen(url, timeout=5) as response:
            groups = json.load(response)["data"]["groups"]
        loaded[:] = [r for g in groups for r in g["rules"]]
        return {r["name"] for r in loaded} == names and all(
            not r.get("lastEvaluation", "").startswith("0001") for r in loaded)

    wait_for(rules_evaluated, "Prometheus to load and evaluate rules.yml")
    broken = [f"{r['name']}: {r.get('lastError')}" for r in loaded if r.get("health") != "ok"]
    require(not broken, f"alert rules fail to evaluate on real data: {broken}")
    print(f"Prometheus loaded and evaluated all {len(loaded)} alert rules without error")


if __name__ == "__main__":
    run({"drive": drive, "reload": reload, "exported": exported, "prometheus": prometheus})
