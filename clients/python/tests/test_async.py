"""The asyncio API against the real sidecar: report, call, run (coroutine and plain
functions), typed errors, cancellation, context, admit and end. Tool failures are real httpx
exceptions from a loopback HTTP server."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

import rebound
from rebound import Action, Category, Kind
from rebound.v1 import rebound_pb2 as pb
from tests.conftest import LIVE_TIMEOUT, forget, unique
from tests.servers import Reply, http_server
from tests.sidecar import Sidecar


async def fetch(url: str) -> str:
    """An async tool: GET url; a 4xx or 5xx answer raises httpx.HTTPStatusError."""
    async with httpx.AsyncClient(timeout=5) as http:
        return (await http.get(url)).raise_for_status().text


@pytest.mark.asyncio
async def test_report_call_context_end(sidecar: Sidecar, session_id: str) -> None:
    tool = unique("search")
    async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        async with c.session(session_id, tools=["search"]) as s:
            assert (await s.report(tool)).action is Action.CONTINUE
            with http_server([Reply(503, "overloaded")]) as url:
                with pytest.raises(httpx.HTTPStatusError):
                    async with s.call(tool) as call:
                        await fetch(url)
            assert call.verdict is not None
            assert (call.verdict.action, call.verdict.category) == (Action.RETRY, Category.UNAVAILABLE)
            cx = await s.context()
            assert f'<error tool="{tool}" type="unavailable">' in cx.text and not cx.fallback
            v = await s.report("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
            assert v.action is Action.RECLASSIFY and "search" in v.snippet
            assert (await s.admit(tool)).allowed
            summary = await s.end()
    assert (summary.calls, summary.errors) == (3, 2)
    assert c.fallback_count == 0


@pytest.mark.asyncio
async def test_run_retries_a_coroutine_after_the_delays(sidecar: Sidecar, session_id: str) -> None:
    tool = unique("llm")
    slow_down = Reply(429, "rate limited", {"retry-after-ms": "120"})
    calls: list[float] = []

    async def complete(url: str, *, prompt: str) -> str:
        calls.append(time.monotonic())
        return await fetch(f"{url}/complete?prompt={prompt}")

    with http_server([slow_down, Reply(200, "hello")]) as url:
        async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
            s = c.session(session_id)
            assert await s.run(tool, complete, url, prompt="hi") == "hello"
            # A plain function works too.
            assert await s.run(tool, lambda: 42) == 42
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.120


@pytest.mark.asyncio
async def test_run_raises_typed_errors(sidecar: Sidecar, session_id: str) -> None:
    auth, repo = unique("crm"), unique("repo")
    async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        s = c.session(session_id, step_limit=3)
        with http_server([Reply(403, "forbidden")]) as url:
            with pytest.raises(rebound.EscalationError) as esc:
                await s.run(auth, fetch, url)
        assert esc.value.verdict.category is Category.PERMISSION_DENIED
        assert isinstance(esc.value.__cause__, httpx.HTTPStatusError)
        with http_server([Reply(422, "bad argument: limit")]) as url:
            with pytest.raises(rebound.RecoverError) as rec:
                await s.run(repo, fetch, url)
        assert rec.value.verdict.category is Category.VALIDATION and rec.value.snippet
        with pytest.raises(rebound.AbortError) as abort:
            await s.run(repo, lambda: "ok")  # the third outcome reaches the step limit
        assert abort.value.verdict.breaker.reason == pb.REASON_STEP_LIMIT and abort.value.result == "ok"
        assert esc.value.result is None and rec.value.result is None


@pytest.mark.asyncio
async def test_run_counts_the_attempts_that_led_to_an_abort(sidecar: Sidecar, session_id: str) -> None:
    tool = unique("fetch")
    with http_server([Reply(503, "overloaded", {"retry-after-ms": "20"}), Reply(200, "ok")]) as url:
        async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
            async with c.session(session_id, step_limit=2) as s:
                with pytest.raises(rebound.AbortError) as abort:
                    await s.run(tool, fetch, url)  # the retry succeeds and reaches the step limit
    assert abort.value.attempts == 2 and abort.value.verdict.breaker.reason == pb.REASON_STEP_LIMIT
    # The coroutine's awaited value, not the coroutine, and no cause: the call succeeded.
    assert abort.value.result == "ok" and abort.value.error is None and abort.value.__cause__ is None
    assert str(abort.value) == f"rebound: abort after {tool!r} (reason step_limit) after 2 attempts"


@pytest.mark.asyncio
async def test_run_refuses_a_non_callable_and_reports_nothing(sidecar: Sidecar, session_id: str) -> None:
    async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        async with c.session(session_id) as s:
            with pytest.raises(TypeError, match="fn must be callable"):
                await s.run(unique("search"), "results for q")  # type: ignore[call-overload]
            assert (await s.end()).calls == 0


@pytest.mark.asyncio
async def test_the_session_is_declared_again_when_the_sidecar_forgot_it(sidecar: Sidecar, session_id: str) -> None:
    async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        async with c.session(session_id, tools=["search", "fetch"]) as s:
            assert (await s.report("search")).breaker.steps == 1
            forget(sidecar, session_id)
            assert (await s.report("search")).breaker.steps == 1
            v = await s.report("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
    assert (v.action, v.fallback) == (Action.RECLASSIFY, False)
    assert "Did you mean `search`?" in v.snippet and "`fetch`" in v.snippet, v.snippet


@pytest.mark.asyncio
async def test_cancellation_is_reported_and_propagates(sidecar: Sidecar, session_id: str) -> None:
    tool = unique("shell")
    async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as c:
        s = c.session(session_id)
        started = asyncio.Event()

        async def long_running() -> None:
            started.set()
            await asyncio.sleep(30)

        task: asyncio.Future[None] = asyncio.ensure_future(s.run(tool, long_running))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The sidecar saw a cancellation, which stops the session.
        v = await s.report(tool)
        assert v.action is Action.ABORT and v.proto.breaker.reason == pb.REASON_SESSION_STOPPED
