"""Fixtures: one real sidecar shared by the tests that only talk to it (each in sessions and
tool names of its own), clients on it, and unique names."""

from __future__ import annotations

import itertools
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator

import pytest

import rebound
from rebound.v1 import rebound_pb2 as pb
from rebound.v1 import rebound_pb2_grpc as pb_grpc
from tests.sidecar import Sidecar

LIVE_TIMEOUT = 3.0
"""The call deadline for tests that expect the sidecar's own answer: generous, because a debug
sidecar on a shared two-core CI machine can take longer than the 250 ms production default
(the fail-open tests set their own)."""

_RUN = f"{os.getpid()}-{int(time.time())}"
_counter = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test or run uses: session ids, and tool names (tool breakers and retry
    budgets are shared by all sessions of a sidecar, so each test fails tools of its own)."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', prefix)}-{_RUN}-{next(_counter)}"


def forget(sidecar: Sidecar, session_id: str) -> None:
    """Makes the sidecar forget a session behind the client's back, as a restart or an eviction
    (idle expiry, capacity) would: a raw EndSession on a channel of its own."""
    # Imported here, not at the top: grpc must first be imported after rebound, which turns
    # gRPC's fork handlers off (see rebound/__init__.py), and conftest is imported first.
    import grpc

    with grpc.insecure_channel(sidecar.grpc) as channel:
        stub = pb_grpc.ReboundStub(channel)
        ended = stub.EndSession(pb.EndSessionRequest(session_id=session_id), timeout=LIVE_TIMEOUT)
    assert ended.found, f"the sidecar had no session {session_id!r} to forget"


@pytest.fixture(scope="session")
def sidecar() -> Iterator[Sidecar]:
    """The real sidecar most tests talk to, on an ephemeral loopback port."""
    with Sidecar.start() as s:
        yield s


@pytest.fixture
def client(sidecar: Sidecar) -> Iterator[rebound.Client]:
    """A blocking client on the shared sidecar."""
    with rebound.Client(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        yield c


@pytest.fixture
def socket_dir() -> Iterator[str]:
    """A short temporary directory for Unix sockets."""
    # A short directory: a Unix socket path must fit in about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="rb") as d:
        yield d


@pytest.fixture
def session_id(request: pytest.FixtureRequest) -> str:
    """A session id unique to the test."""
    return unique(f"py-{request.node.name}")


class RecordedLogs:
    """The records the client logged under the "rebound" logger during a test."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def at(self, level: int) -> list[logging.LogRecord]:
        """The client's records at exactly `level`."""
        return [r for r in self._caplog.records if r.name == "rebound" and r.levelno == level]

    def text(self) -> str:
        """Everything the client logged, for failure messages."""
        return "\n".join(f"{r.levelname} {r.getMessage()}" for r in self._caplog.records if r.name == "rebound")


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> RecordedLogs:
    """The client's log records, captured from DEBUG up."""
    caplog.set_level(logging.DEBUG, logger="rebound")
    return RecordedLogs(caplog)
