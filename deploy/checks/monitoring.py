"""Checks of the monitoring resources that promtool and the CRD decoder do not
cover: the PrometheusRule ships exactly rules.yml, every alert has a runbook
that exists and a unit test that makes it fire, the PodMonitor scrapes the
sidecar's metrics port, and the Grafana dashboard is well formed.

    python3 monitoring.py resources REPO_ROOT OUT_SPEC.yml
    python3 monitoring.py dashboard REPO_ROOT
"""

import json
import re
from pathlib import Path

from common import alert_rules, dashboard_targets, load_yaml, metric_names, require, run

MONITORING = "deploy/monitoring"
OPERATIONS = "docs/operations.md"


def github_anchors(markdown):
    """The anchors GitHub makes of a Markdown file's headings."""
    anchors = set()
    for line in markdown.splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            text = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def check_alert_tests(root, alerts):
    """Every alert has a unit test where it fires and one where it stays quiet."""
    fired, quiet = set(), set()
    tests = sorted((root / MONITORING / "tests").glob("*.yaml"))
    require(tests, f"no promtool unit tests in {MONITORING}/tests/*.yaml")
    for path in tests:
        suite = load_yaml(path)
        require(any(Path(f).name == "rules.yml" for f in suite.get("rule_files", [])),
                f"{path.name}: must test rules.yml, the file that ships")
        for test in suite["tests"]:
            for case in test.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = [a["alert"] for a in alerts]
    require(not set(names) - fired, f"alerts no unit test makes fire: {sorted(set(names) - fired)}")
    require(not set(names) - quiet, f"alerts no unit test expects to stay quiet: {sorted(set(names) - quiet)}")
    require(not (fired | quiet) - set(names), f"unit tests name unknown alerts: {sorted((fired | quiet) - set(names))}")
    print(f"{MONITORING}/tests: {len(tests)} files; each of the {len(names)} alerts fires in one case "
          f"and stays quiet in another")


def check_resources(root, out_spec):
    """PrometheusRule == rules.yml (written to OUT_SPEC for promtool), runbooks, tests, PodMonitor."""
    root = Path(root)
    monitoring = root / MONITORING
    rule = load_yaml(monitoring / "prometheusrule.yaml")
    require(rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule",
            "prometheusrule.yaml is not a monitoring.coreos.com/v1 PrometheusRule")
    plain = load_yaml(monitoring / "rules.yml")
    require(rule["spec"] == plain, "prometheusrule.yaml's spec and rules.yml differ: keep them identical")
    Path(out_spec).write_text(json.dumps(rule["spec"], indent=2), encoding="utf-8")

    alerts = alert_rules(monitoring / "rules.yml")
    require(len(alerts) >= 5, f"expected at least 5 alerts, found {len(alerts)}")
    anchors = github_anchors((root / OPERATIONS).read_text(encoding="utf-8"))
    for alert in alerts:
        name = alert["alert"]
        annotations = alert.get("annotations", {})
        require(alert.get("labels", {}).get("severity") in ("critical", "warning", "info"),
                f"{name}: severity label must be critical, warning or info")
        require(annotations.get("summary"), f"{name}: no summary annotation")
        runbook = annotations.get("runbook", "")
        require(runbook and "\n" not in runbook.strip(), f"{name}: the runbook annotation must be one line")
        links = re.findall(rf"{re.escape(OPERATIONS)}#([\w-]+)", runbook)
        require(links, f"{name}: the runbook must point at {OPERATIONS}#<section>")
        for anchor in links:
            require(anchor in anchors, f"{name}: {OPERATIONS} has no section #{anchor}")
    check_alert_tests(root, alerts)

    monitor = load_yaml(monitoring / "podmonitor.yaml")
    require(monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "PodMonitor",
            "podmonitor.yaml is not a monitoring.coreos.com/v1 PodMonitor")
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    require(endpoints, "the PodMonitor has no endpoint")
    for endpoint in endpoints:
        require(endpoint.get("port") == "metrics" and endpoint.get("path", "/metrics") == "/metrics",
                "the PodMonitor must scrape the port named metrics at /metrics")
        keeps = [r for r in endpoint.get("relabelings", [])
                 if r.get("action", "replace").lower() == "keep"
                 and r.get("sourceLabels") == ["__meta_kubernetes_pod_container_name"]]
        require(keeps and all(re.fullmatch(k["regex"], "rebound") for k in keeps),
                "the PodMonitor must keep only the container named rebound (other containers may name a port metrics)")
    print(f"{MONITORING}: PrometheusRule spec == rules.yml; {len(alerts)} alerts with severity, summary and a "
          f"runbook whose {OPERATIONS} section exists; the PodMonitor scrapes rebound's metrics port")


def check_dashboard(root):
    """The dashboard is JSON Grafana can import: unique ids, panels on the 24-column grid
    without overlaps, every query on the data source variable, every variable defined."""
    dashboard = json.loads((Path(root) / MONITORING / "dashboard.json").read_text(encoding="utf-8"))
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        require(key in dashboard, f"dashboard.json has no {key}")
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    require(len(ids) == len(set(ids)), "dashboard panel ids are not unique")
    cells = set()
    for p in panels:
        g = p["gridPos"]
        require(g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0,
                f"panel {p['title']!r} is off the 24-column grid")
        cell = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        require(not cells & cell, f"panel {p['title']!r} overlaps another")
        cells |= cell
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    builtin = {"__rate_interval", "__interval", "__range"}
    targets = dashboard_targets(dashboard)
    require(len(targets) >= 15, f"expected at least 15 queries, found {len(targets)}")
    for title, target in targets:
        expr = target["expr"]
        require(target.get("refId"), f"{title}: a target without refId")
        require(target.get("datasource", {}).get("uid") == "${datasource}",
                f"{title}: a query not on the ${{datasource}} variable")
        for var in re.findall(r"\$\{?(\w+)", expr):
            require(var in variables or var in builtin, f"{title}: unknown variable ${var}")
        require(expr.count("(") == expr.count(")"), f"{title}: unbalanced parentheses in {expr}")
    wanted = {"rebound_outcomes_total", "rebound_retry_delay_seconds_bucket", "rebound_breaker_state",
              "rebound_escalations_total", "rebound_sessions_active", "rebound_rpc_duration_seconds_bucket"}
    used = set().union(*(metric_names(t["expr"]) for _, t in targets))
    require(wanted <= used, f"the dashboard lacks {sorted(wanted - used)}")
    print(f"{MONITORING}/dashboard.json: {len(panels)} panels, {len(targets)} queries on "
          f"{len(used)} Rebound metrics, all on the grid and on the data source variable")


if __name__ == "__main__":
    run({"resources": check_resources, "dashboard": check_dashboard})
