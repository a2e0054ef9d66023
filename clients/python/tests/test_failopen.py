"""Fail-open against the real sidecar: stopped mid-test (SIGKILL or SIGTERM), frozen (SIGSTOP)
or never there, the client answers with its local fallback policy, logs one warning, and uses
the sidecar again, without being recreated, once it is back on the same address."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

import httpx
import pytest

import rebound
from rebound import Action, FallbackPolicy, Verdict
from rebound.v1 import rebound_pb2 as pb
from tests.conftest import LIVE_TIMEOUT, RecordedLogs, unique
from tests.servers import Reply, http_server, refused_address
from tests.sidecar import Sidecar

# The seed policy with short delays, so that local retries do not slow the tests.
FAST = FallbackPolicy(base_delay=0.01, max_delay=0.1)
BACK_WITHIN = 15.0
"""Seconds the client may take to use a restarted sidecar (a debug build starts in a few)."""


def http_error(status: int, headers: dict[str, str] = {}) -> httpx.HTTPStatusError:
    """A real httpx.HTTPStatusError, from a loopback server answering `status`."""
    with http_server([Reply(status, "failed", headers)]) as url:
        try:
            httpx.get(url, timeout=5).raise_for_status()
        except httpx.HTTPStatusError as exc:
            return exc
    pytest.fail(f"no error for HTTP {status}")


@pytest.fixture(scope="module")
def unavailable() -> httpx.HTTPStatusError:
    """A real httpx 503 error, made once for the module."""
    return http_error(503)


def until_sidecar(report: Callable[[], Verdict]) -> Verdict:
    """Reports until the sidecar, not the fallback, answers; fails after BACK_WITHIN seconds."""
    deadline = time.monotonic() + BACK_WITHIN
    while True:
        v = report()
        if not v.fallback:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"still answered locally {BACK_WITHIN:.0f} s after the sidecar came back")
        time.sleep(0.05)


@pytest.mark.parametrize("transport", ["unix-sigkill", "tcp-sigterm"])
def test_the_sidecar_stops_mid_run_and_comes_back(
    transport: str, socket_dir: str, unavailable: httpx.HTTPStatusError, logs: RecordedLogs
) -> None:
    listen = f"unix:{os.path.join(socket_dir, 'rebound.sock')}" if transport.startswith("unix") else "127.0.0.1:0"
    first = Sidecar.start(listen)
    addr = first.grpc  # for TCP, the port the first one got: the second one takes it over
    search, fetch = unique("search"), unique("fetch")
    client = rebound.Client(addr, timeout=LIVE_TIMEOUT, fallback_policy=FAST)
    session = client.session(unique("py-failopen"), tools=[search, fetch])
    reporter = session.reporter()
    try:
        v = session.report(search, error=unavailable)
        assert not v.fallback and v.action is Action.RETRY and not v.rule.startswith("fallback.")
        assert not reporter.report(search).fallback
        session.report(search)

        if transport.endswith("sigkill"):
            first.kill()  # the open stream breaks with it
        else:
            # A graceful stop waits for open streams to drain (10 s by default): close the
            # stream first, and open the next reporter while the sidecar is down.
            reporter.close()
            first.stop()
            reporter = session.reporter()

        # Report: the local policy retries a 503 with the fast backoff, at once.
        start = time.monotonic()
        v = session.report(search, error=unavailable)
        elapsed = time.monotonic() - start
        assert v.fallback and v.action is Action.RETRY and 8 <= v.delay_ms <= 12, str(v)
        assert v.rule == "fallback.http_502"
        assert elapsed < 1.0, f"the fallback verdict took {elapsed:.2f} s: the agent was held up"
        assert client.fallback_count == 1

        # run: the failure above counts, so this call fails once more, is retried, and succeeds.
        attempts = []

        def flaky() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                raise unavailable
            return "results"

        assert session.run(search, flaky) == "results" and len(attempts) == 2

        # Three failures of one tool in a row escalate locally.
        session.report(fetch, error=unavailable)
        session.report(fetch, error=unavailable)
        def failing() -> None:
            raise unavailable

        with pytest.raises(rebound.EscalationError) as info:
            session.run(fetch, failing)
        assert info.value.verdict.fallback and "3 times in a row" in info.value.report
        assert "(unavailable) (reason consecutive_failures) [local fallback]" in str(info.value)

        # The other calls answer locally too.
        v = reporter.report(search)
        assert v.fallback and v.action is Action.CONTINUE
        cx = session.context()
        assert cx.fallback and f'<error tool="{fetch}" type="unavailable">' in cx.text
        assert session.admit(search).allowed
        assert len(logs.at(logging.WARNING)) == 1, logs.text()
        assert "local fallback policy decides" in logs.at(logging.WARNING)[0].getMessage()
        assert client.fallback_count >= 8

        # Back on the same address: the same client, session and reporter use it again.
        second = Sidecar.start(addr)
        try:
            v = until_sidecar(lambda: session.report(search, error=unavailable))
            assert not v.rule.startswith("fallback.")
            assert not until_sidecar(lambda: reporter.report(search)).fallback
            # The declaration was sent again: the new sidecar knows the session's tools.
            v = session.report("serch", kind=rebound.Kind.UNKNOWN_TOOL, message="Tool serch not found")
            assert not v.fallback and v.action is Action.RECLASSIFY and search in v.snippet
            assert any("answers again" in r.getMessage() for r in logs.at(logging.INFO)), logs.text()
            assert len(logs.at(logging.WARNING)) == 1, logs.text()
            reporter.close()
        finally:
            second.stop()
    finally:
        reporter.close()
        client.close()
        if first.proc.poll() is None:
            first.kill()


def test_a_frozen_sidecar_times_out_at_the_default_deadline(
    sidecar: Sidecar, unavailable: httpx.HTTPStatusError, logs: RecordedLogs
) -> None:
    # The shared sidecar, frozen for a moment: nothing else runs meanwhile.
    client = rebound.Client(sidecar.grpc)  # the default 250 ms deadline
    assert client.wait_for_ready(LIVE_TIMEOUT)
    session = client.session(unique("py-frozen"))
    reporter = session.reporter()
    try:
        assert not reporter.report(unique("warm")).fallback
        sidecar.pause()
        try:
            reports: list[tuple[str, Callable[[], Verdict]]] = [
                ("Report", lambda: session.report(unique("a"), error=unavailable)),
                ("Reporter.report", lambda: reporter.report(unique("b"), error=unavailable)),
            ]
            for what, report in reports:
                start = time.monotonic()
                v = report()
                elapsed = time.monotonic() - start
                assert v.fallback and v.action is Action.RETRY, f"{what}: {v}"
                assert 0.2 <= elapsed < 1.0, f"{what} took {elapsed:.2f} s with a 250 ms deadline"
            # Several in flight on one stream: all answered locally within about one deadline.
            start = time.monotonic()
            pending = [reporter.send(unique(f"db{i}"), error=unavailable) for i in range(3)]
            assert all(p.result().fallback for p in pending)
            assert time.monotonic() - start < 1.0
        finally:
            sidecar.resume()
        assert not until_sidecar(lambda: session.report(unique("after"))).fallback
        assert not until_sidecar(lambda: reporter.report(unique("after"))).fallback
        assert len(logs.at(logging.WARNING)) == 1, logs.text()
    finally:
        reporter.close()
        client.close()


def test_nothing_listens(logs: RecordedLogs) -> None:
    host, port = refused_address()
    with rebound.Client(f"{host}:{port}") as client:
        with client.session(unique("py-nothing"), tools=["llm"]) as session:
            v = session.report("llm", error=http_error(429, {"Retry-After": "2"}))
            assert v.fallback and v.action is Action.RETRY and 2000 <= v.delay_ms <= 2400
            assert v.proto.retry.provider_delay
            summary = session.end()
    assert (summary.calls, summary.retries) == (1, 1)
    assert client.fallback_count >= 2
    assert len(logs.at(logging.WARNING)) == 1, logs.text()


def test_a_repeated_call_id_is_answered_once_by_the_fallback_as_by_the_sidecar(
    sidecar: Sidecar, unavailable: httpx.HTTPStatusError
) -> None:
    # A retried request or a replayed log reports the same call again: the sidecar answers with
    # the earlier verdict and counts nothing twice. The fallback counted three failures in a row.
    host, port = refused_address()
    for addr in (sidecar.grpc, f"{host}:{port}"):
        with rebound.Client(addr, timeout=LIVE_TIMEOUT, fallback_policy=FAST) as client:
            with client.session(unique("py-repeat")) as session:
                tool = unique("charge")
                verdicts = [session.report(tool, error=unavailable, call_id="same-call") for _ in range(3)]
                summary = session.end()
        answered = "the fallback" if verdicts[0].fallback else "the sidecar"
        assert [v.fallback for v in verdicts] == [addr != sidecar.grpc] * 3
        assert [v.breaker.consecutive_failures for v in verdicts] == [1, 1, 1], answered
        assert [v.proto.replayed for v in verdicts] == [False, True, True], answered
        assert {(v.action, v.delay_ms, v.call_id) for v in verdicts} == {(Action.RETRY, verdicts[0].delay_ms, "same-call")}
        assert (summary.calls, summary.errors, summary.retries) == (1, 1, 1), answered


def test_a_session_the_fallback_escalated_or_aborted_says_so_in_admit(logs: RecordedLogs) -> None:
    host, port = refused_address()
    with rebound.Client(f"{host}:{port}") as client:
        with client.session(unique("py-admit")) as session:
            assert session.admit("search").session_state == pb.SESSION_STATE_ACTIVE
            v = session.report("search", error=http_error(401))
            assert v.fallback and v.action is Action.ESCALATE
            admitted = session.admit("search")
            assert admitted.allowed and admitted.session_state == pb.SESSION_STATE_ESCALATED
            v = session.report("search", kind=rebound.Kind.CANCELLED, message="cancelled by the user")
            assert v.fallback and v.action is Action.ABORT
            refused = session.admit("search")
            assert not refused.allowed and refused.reason == pb.REASON_SESSION_STOPPED


def test_the_fallback_gives_the_declared_labels_back_as_the_sidecar_does(sidecar: Sidecar) -> None:
    # The sidecar returns a session's StartSession labels in its escalation reports (a field,
    # and a `Labels:` line right after the text's first line, sorted by key in UTF-8 byte
    # order) and in its EndSession summary; the fallback does the same with the labels the
    # session declared. The keys' order differs from UTF-16's for the last two.
    # A value's line break and a secret stay out of the text, as on the sidecar.
    labels = {"user": "alice", "run": "nightly-42", "Z": "1", "é": "2", "\U0001f600": "3", "\uff5a": "4"}
    labels |= {"note": "a\nb", "token": "abcdef0123456789"}
    line = "Labels: Z=1, note=a b, run=nightly-42, token=[REDACTED:token], user=alice, é=2, \uff5a=4, \U0001f600=3"
    host, port = refused_address()
    lines: dict[bool, str] = {}
    for addr in (sidecar.grpc, f"{host}:{port}"):
        with rebound.Client(addr, timeout=LIVE_TIMEOUT, fallback_policy=FAST) as client:
            with client.session(unique("py-labels"), labels=labels) as session:
                v = session.report(unique("crm"), error=http_error(401))
                summary = session.end()
        assert v.fallback == (addr != sidecar.grpc) and v.action is Action.ESCALATE and v.escalation is not None
        assert dict(v.escalation.labels) == labels
        first, second, *_ = v.escalation.text.split("\n")
        assert first.startswith("Rebound escalation: ") if not v.fallback else first == v.escalation.summary
        lines[v.fallback] = second
        assert dict(summary.labels) == labels and summary.escalations == 1
    assert lines == {False: line, True: line}
    assert v.fallback and v.escalation is not None
    assert v.escalation.text.split("\n")[2].startswith("last error: "), v.escalation.text
    # A session that declared none: no field, no line, as on the sidecar.
    with rebound.Client(f"{host}:{port}", fallback_policy=FAST) as client:
        with client.session(unique("py-labels")) as session:
            v = session.report("crm", error=http_error(401))
            assert v.escalation is not None and not v.escalation.labels
            assert "Labels:" not in v.escalation.text
            assert not session.end().labels


def test_the_fallback_carries_on_the_sidecars_count_of_identical_errors() -> None:
    # Two timeouts answered by the sidecar, then it stops: the fallback counts on from two, and
    # the fifth identical error (its seconds differ) ends the run, as the sidecar would have.
    sidecar = Sidecar.start()
    tool = unique("search")
    try:
        with rebound.Client(sidecar.grpc, timeout=LIVE_TIMEOUT, fallback_policy=FAST) as client:
            session = client.session(unique("py-identical"), tools=[tool])

            def timed_out(seconds: float) -> Verdict:
                return session.report(tool, kind=rebound.Kind.TIMEOUT, message=f"read timed out after {seconds}s")

            answered = [timed_out(30.1), timed_out(30.4)]
            assert [(v.fallback, v.action, v.breaker.identical_errors) for v in answered] == [
                (False, Action.RETRY, 1), (False, Action.RETRY, 2)
            ]
            sidecar.stop()
            local = [timed_out(s) for s in (29.8, 31.0, 30.2)]
            assert all(v.fallback for v in local)
            assert [(v.action, v.reason) for v in local] == [
                (Action.ESCALATE, rebound.Reason.CONSECUTIVE_FAILURES),
                (Action.ESCALATE, rebound.Reason.CONSECUTIVE_FAILURES),
                (Action.ABORT, rebound.Reason.IDENTICAL_ERRORS),
            ]
            assert local[-1].breaker.identical_errors == 5 and local[-1].breaker.steps == 5

            with pytest.raises(rebound.AbortError) as info:
                session.run(tool, lambda: "results")
            assert info.value.verdict.reason is rebound.Reason.SESSION_STOPPED and info.value.result == "results"
            assert not session.admit(tool).allowed
            summary = session.end()
        assert (summary.calls, summary.errors, summary.escalations, summary.state) == (6, 5, 2, pb.SESSION_STATE_STOPPED)
    finally:
        if sidecar.proc.poll() is None:
            sidecar.kill()


def test_the_fallback_enforces_the_declared_limits() -> None:
    host, port = refused_address()
    with rebound.Client(f"{host}:{port}", fallback_policy=FAST) as client:
        with client.session(unique("py-limits"), step_limit=2) as session:
            assert session.report("search").action is Action.CONTINUE
            with pytest.raises(rebound.AbortError) as info:
                session.run("search", lambda: "results")
            v = info.value.verdict
            assert v.fallback and v.reason is rebound.Reason.STEP_LIMIT and info.value.result == "results"
            assert v.snippet == "<error>\nThe session reached its step limit; end the run.\n</error>"
        with client.session(unique("py-limits"), cost_limit=1.0) as session:
            assert session.report("llm", cost=0.6).action is Action.CONTINUE
            v = session.report("llm", error=TimeoutError("read timed out"), cost=0.6)
            assert (v.action, v.reason) == (Action.ABORT, rebound.Reason.COST_LIMIT)


def test_async_client_fails_open_and_comes_back(
    socket_dir: str, unavailable: httpx.HTTPStatusError, logs: RecordedLogs
) -> None:
    addr = f"unix:{os.path.join(socket_dir, 'rebound.sock')}"
    tool = unique("search")

    async def main(first: Sidecar) -> Sidecar:
        async with rebound.AsyncClient(addr, timeout=LIVE_TIMEOUT, fallback_policy=FAST) as client:
            session = client.session(unique("py-async-failopen"), tools=[tool])
            async with session.reporter() as reporter:
                assert not (await session.report(tool)).fallback
                assert not (await reporter.report(tool)).fallback
                first.kill()
                start = time.monotonic()
                v = await session.report(tool, error=unavailable)
                assert v.fallback and v.action is Action.RETRY and 8 <= v.delay_ms <= 12
                assert time.monotonic() - start < 1.0
                assert (await reporter.report(tool)).fallback
                calls = []

                async def flaky() -> str:
                    calls.append(1)
                    if len(calls) == 1:
                        raise unavailable
                    return "ok"

                assert await session.run(tool, flaky) == "ok" and len(calls) == 2
                assert (await session.context()).fallback
                second = Sidecar.start(addr)
                deadline = time.monotonic() + BACK_WITHIN
                while (await session.report(tool)).fallback:
                    assert time.monotonic() < deadline, "the async client did not use the restarted sidecar"
                    await asyncio.sleep(0.05)
                while (await reporter.report(tool)).fallback:
                    assert time.monotonic() < deadline, "the async reporter did not use the restarted sidecar"
                    await asyncio.sleep(0.05)
        return second

    first = Sidecar.start(addr)
    try:
        second = asyncio.run(main(first))
    finally:
        first.kill()
    # Stopped once the client is closed: a graceful stop waits for open streams.
    second.stop()
    assert len(logs.at(logging.WARNING)) == 1, logs.text()
