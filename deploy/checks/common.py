"""Helpers shared by the deploy checks: loading YAML, failing with a readable
message, and finding the Rebound metric names a PromQL text uses."""

import re
import sys
from pathlib import Path

import yaml

#: A Rebound metric or sample name inside PromQL or JSON text.
METRIC_NAME = re.compile(r"\brebound_[a-z0-9_]*[a-z0-9]")


class CheckFailed(Exception):
    """A check found something wrong; the message says what and where."""


def require(condition, message):
    """Raises CheckFailed with the message when the condition is false."""
    if not condition:
        raise CheckFailed(message)


def load_yaml_documents(path):
    """Every non-empty YAML document of a file."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def load_yaml(path):
    """The single YAML document of a file."""
    docs = load_yaml_documents(path)
    require(len(docs) == 1, f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0]


def metric_names(text):
    """The Rebound sample names (rebound_x_bucket stays as written) used in a text."""
    return set(METRIC_NAME.findall(text))


def alert_rules(rules_path):
    """The alerting rules of a plain Prometheus rules file, in order."""
    groups = load_yaml(rules_path)["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def dashboard_targets(dashboard):
    """(panel title, target) for every query target of a Grafana dashboard, rows included."""
    found = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                found.append((panel.get("title", "?"), target))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    return found


def run(checks):
    """Runs named check functions from the command line: `python3 X.py NAME [ARGS...]`."""
    if len(sys.argv) < 2 or sys.argv[1] not in checks:
        print(f"usage: {Path(sys.argv[0]).name} {{{','.join(checks)}}} [ARGS...]", file=sys.stderr)
        sys.exit(2)
    try:
        checks[sys.argv[1]](*sys.argv[2:])
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
