"""Declaring a session again after the sidecar lost it, against the real sidecar: a
re-declaration the sidecar now refuses does not stop the run, and a fallback period ends with
one StartSession, not two. The stale-StartSession guard is driven on `_State` directly: its
race cannot be timed against a real sidecar."""

from __future__ import annotations

import logging
import os
import random
import time
from pathlib import Path

import grpc
import pytest

import rebound
from rebound.client import _Core
from rebound.outcome import build_outcome
from rebound.session import _State
from rebound.v1 import rebound_pb2 as pb
from tests.conftest import LIVE_TIMEOUT, RecordedLogs, forget, unique
from tests.sidecar import Sidecar

RELOAD_WITHIN = 30.0
"""Seconds the sidecar may take to reload a changed config (it looks every 2 s; CI is slow)."""
BACK_WITHIN = 15.0
"""Seconds the client may take to reach a restarted sidecar."""
START_SESSIONS = 'rebound_rpc_duration_seconds_count{method="StartSession"}'


def wait_for_reload(sidecar: Sidecar) -> None:
    """Waits until the sidecar has reloaded its changed config file once."""
    deadline = time.monotonic() + RELOAD_WITHIN
    while sidecar.metric('rebound_config_reloads_total{result="ok"}') < 1:
        if time.monotonic() > deadline:
            pytest.fail(f"the sidecar did not reload its config within {RELOAD_WITHIN:.0f} s:\n{sidecar.logs()}")
        time.sleep(0.2)


def test_a_refused_redeclaration_is_logged_and_the_run_goes_on(tmp_path: Path, logs: RecordedLogs) -> None:
    config = tmp_path / "rebound.toml"
    config.write_text("[profiles.batch.retry]\nbase_ms = 2000\n")
    tool, session_id = unique("search"), unique("py-profile")
    with Sidecar.start(config=config) as sidecar, rebound.Client(sidecar.grpc, timeout=LIVE_TIMEOUT) as client:
        with client.session(session_id, profile="batch") as s:
            assert s.report(tool).breaker.steps == 1
            # A reload removes the profile while the session runs.
            config.write_text("# the batch profile is gone\n")
            wait_for_reload(sidecar)
            with pytest.raises(ValueError, match="no such profile"):
                client.session(unique("py-profile"), profile="batch").start()  # a first declaration still raises
            forget(sidecar, session_id)
            assert s.report(tool).breaker.steps == 1  # a new session: the client will declare it again
            v = s.report(tool)  # the sidecar refuses the declaration now
            assert not v.fallback and v.breaker.steps == 2, str(v)
            assert s.report(tool).breaker.steps == 3
        warned = logs.at(logging.WARNING)
        assert len(warned) == 1, logs.text()
        message = warned[0].getMessage()
        assert repr(session_id) in message and "no such profile" in message, message
        assert client.fallback_count == 0
        # One StartSession on entering the block, one for the first declaration that raised,
        # one refused re-declaration: the refused one was not sent again on every report.
        assert sidecar.metric(START_SESSIONS) == 3


def test_a_fallback_period_ends_with_one_declaration(socket_dir: str) -> None:
    addr = f"unix:{os.path.join(socket_dir, 'rebound.sock')}"
    tool = unique("search")
    first = Sidecar.start(addr)
    client = rebound.Client(addr, timeout=LIVE_TIMEOUT)
    try:
        s = client.session(unique("py-restart"), tools=[tool])
        assert s.report(tool).breaker.steps == 1
        first.kill()
        assert s.report(tool).fallback
        with Sidecar.start(addr) as second:
            assert client.wait_for_ready(BACK_WITHIN)
            # Declared again on the restarted sidecar, whose first step this is: no new loss.
            v = s.report(tool)
            assert not v.fallback and v.breaker.steps == 1, str(v)
            assert s.report(tool).breaker.steps == 2
            assert second.metric(START_SESSIONS) == 1
    finally:
        client.close()
        first.kill()


def state() -> _State:
    """A declared session's state on a client that makes no calls."""
    core = _Core("127.0.0.1:1", 1.0, None, 10, time.time, random.random)
    return _State(core, "s", pb.StartSessionRequest(session_id="s", tools=["search"]))


def outcome(s: _State) -> pb.Outcome:
    o = build_outcome("search")
    s.prepare(o)
    return o


def fall_back(s: _State) -> None:
    """A report the local policy answers."""
    o = build_outcome("search")
    s.fallback(o, s.prepare(o))


class Refusal(grpc.RpcError):  # type: ignore[misc]
    """The error gRPC raises for an INVALID_ARGUMENT answer, as `_State` reads it."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return '`profile` = "batch": no such profile: the config defines none'


def test_a_declaration_answered_after_a_fallback_does_not_count() -> None:
    s = state()
    epoch = s.sending()  # a StartSession goes out...
    fall_back(s)  # ...a report on another thread falls back: the sidecar may have restarted...
    s.started(epoch)  # ...and then the StartSession is answered, maybe by the sidecar that is gone
    assert not s.declared
    s.started(s.sending())
    assert s.declared


def test_a_declaration_answered_after_a_first_step_verdict_does_not_count() -> None:
    s = state()
    s.started(s.sending())
    s.accept(outcome(s), pb.Verdict(breaker=pb.BreakerStatus(steps=1)))
    epoch = s.sending()
    s.accept(outcome(s), pb.Verdict(breaker=pb.BreakerStatus(steps=1)))  # the sidecar evicted the session
    s.started(epoch)
    assert not s.declared


def test_a_refused_redeclaration_answered_after_a_fallback_does_not_count() -> None:
    s = state()
    s.started(s.sending())
    fall_back(s)
    epoch = s.sending()
    fall_back(s)
    assert s.start_failed(epoch, Refusal())  # the sidecar answered: no fallback for this report
    assert not s.declared
    assert s.start_failed(s.sending(), Refusal())
    assert s.declared
