"""The streaming reporters over Observe against the real sidecar: many outcomes in flight on
one stream, answered in order, with the same verdicts as unary reports."""

from __future__ import annotations

import asyncio
import threading

import pytest

import rebound
from rebound import Action, Category, Kind
from tests.conftest import LIVE_TIMEOUT, forget, unique
from tests.sidecar import Sidecar


def test_many_in_flight_are_answered_in_order(client: rebound.Client, session_id: str) -> None:
    tool, db, fetch = unique("search"), unique("db"), unique("fetch")
    # Two failures of other tools among successes: no breaker trips, the session stays active.
    failures: dict[int, tuple[str, BaseException]] = {
        10: (db, ConnectionResetError(104, "Connection reset by peer")),
        50: (fetch, TimeoutError("The read operation timed out")),
    }
    session = client.session(session_id)
    with session.reporter() as reporter:
        pending = [reporter.send(*failures.get(i, (tool, None))) for i in range(100)]
        verdicts = [p.result() for p in pending]
    assert [v.call_id for v in verdicts] == [p.outcome.call_id for p in pending]
    assert not any(v.fallback for v in verdicts)
    assert (verdicts[10].action, verdicts[10].category) == (Action.RETRY, Category.NETWORK)
    assert (verdicts[50].action, verdicts[50].category) == (Action.RETRY, Category.TIMEOUT)
    assert sum(v.action is Action.CONTINUE for v in verdicts) == 98
    assert all(p.done() for p in pending)
    summary = session.end()
    assert (summary.calls, summary.errors) == (100, 2)


def test_a_reporter_declares_the_session_again_when_the_sidecar_forgot_it(
    client: rebound.Client, sidecar: Sidecar, session_id: str
) -> None:
    session = client.session(session_id, tools=["search", "fetch"])
    with session.reporter() as reporter:
        assert reporter.report("search").breaker.steps == 1
        forget(sidecar, session_id)
        assert reporter.report("search").breaker.steps == 1
        v = reporter.report("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
    assert (v.action, v.fallback) == (Action.RECLASSIFY, False)
    assert "Did you mean `search`?" in v.snippet and "`fetch`" in v.snippet, v.snippet
    session.end()


def test_threads_share_a_reporter(client: rebound.Client, session_id: str) -> None:
    tool = unique("search")
    session = client.session(session_id)
    results: list[rebound.Verdict] = []
    lock = threading.Lock()
    with session.reporter() as reporter:

        def worker() -> None:
            for _ in range(25):
                v = reporter.report(tool)
                with lock:
                    results.append(v)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 100 and all(v.action is Action.CONTINUE and not v.fallback for v in results)


def test_a_closed_reporter_refuses_sends(client: rebound.Client, session_id: str) -> None:
    reporter = client.session(session_id).reporter()
    reporter.report(unique("t"))
    reporter.close()
    with pytest.raises(RuntimeError, match="closed"):
        reporter.send("t")


def test_async_reporter_in_order(sidecar: Sidecar, session_id: str) -> None:
    tool, failing = unique("search"), unique("db")

    async def main() -> list[rebound.Verdict]:
        async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
            session = c.session(session_id)
            async with session.reporter() as reporter:
                pending = [
                    await reporter.send(failing if i == 10 else tool, TimeoutError("timed out") if i == 10 else None)
                    for i in range(50)
                ]
                verdicts = [await p.result() for p in pending]
                assert [v.call_id for v in verdicts] == [p.outcome.call_id for p in pending]
                assert (await session.end()).calls == 50
                return verdicts

    verdicts = asyncio.run(main())
    assert not any(v.fallback for v in verdicts)
    assert (verdicts[10].action, verdicts[10].category) == (Action.RETRY, Category.TIMEOUT)
    assert sum(v.action is Action.CONTINUE for v in verdicts) == 49
