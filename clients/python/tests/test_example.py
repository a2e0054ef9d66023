"""The example agent loop's command line."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

import rebound
from tests.sidecar import REPO


def example() -> ModuleType:
    """examples/agent_loop.py, imported (it is a script, not a package module)."""
    path = REPO / "clients" / "python" / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_address_defaults_to_rebound_addr_unless_it_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = example()
    # A manifest's `value: ""` counts as unset, as in the client.
    monkeypatch.setenv("REBOUND_ADDR", "")
    assert loop.parse_args([]).addr == rebound.DEFAULT_ADDRESS
    monkeypatch.setenv("REBOUND_ADDR", "127.0.0.1:47811")
    assert loop.parse_args([]).addr == "127.0.0.1:47811"
    assert loop.parse_args(["--addr", "unix:/run/rebound.sock"]).addr == "unix:/run/rebound.sock"
