"""The blocking API against the real sidecar: report, call, run, admit, context, end, and
the checks on input. Tool failures are real httpx (and requests) exceptions from a loopback HTTP
server."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import threading
import warnings
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests

import rebound
from rebound import Action, Category, Kind, Reason
from rebound.v1 import rebound_pb2 as pb
from tests.conftest import LIVE_TIMEOUT, RecordedLogs, forget, unique
from tests.servers import Reply, http_server, refused_address
from tests.sidecar import Sidecar


def fetch(url: str) -> str:
    """A tool: GET url; a 4xx or 5xx answer raises httpx.HTTPStatusError."""
    return httpx.get(url, timeout=5).raise_for_status().text


@pytest.fixture
def session(client: rebound.Client, session_id: str) -> Iterator[rebound.Session]:
    """A session of its own on the shared sidecar, ended after the test."""
    with client.session(session_id) as s:
        yield s


def test_report_success_and_a_rate_limit(session: rebound.Session) -> None:
    tool = unique("llm")
    v = session.report(tool)
    assert (v.action, v.category, v.fallback) == (Action.CONTINUE, Category.UNSPECIFIED, False)
    with http_server([Reply(429, "slow down", {"Retry-After": "7"})]) as url:
        with pytest.raises(httpx.HTTPStatusError) as info:
            fetch(url)
    v = session.report(tool, error=info.value)
    assert (v.action, v.category, v.retryable) == (Action.RETRY, Category.RATE_LIMITED, True)
    assert 7000 <= v.delay_ms <= 8400 and v.proto.retry.provider_delay
    assert v.delay == v.delay_ms / 1000
    assert v.snippet.startswith(f'<error tool="{tool}" type="rate_limited">\n')
    assert str(v).startswith("retry rate_limited in ")


def test_call_block_reports_success_or_the_exception(session: rebound.Session) -> None:
    tool = unique("repo")
    with http_server([Reply(404, "no such repository")]) as url:
        with pytest.raises(httpx.HTTPStatusError):
            with session.call(tool) as call:
                fetch(url + "/repos/acme/nope")
    assert call.verdict is not None
    assert (call.verdict.action, call.verdict.category) == (Action.RECOVER, Category.NOT_FOUND)
    with session.call(tool) as ok:
        ok.cost = 0.5
    assert ok.verdict is not None and ok.verdict.action is Action.CONTINUE
    summary = session.end()
    assert (summary.calls, summary.errors, summary.cost) == (2, 1, 0.5)
    assert dict(summary.errors_by_category) == {"not_found": 1}


def test_run_sleeps_the_given_delays_and_returns_the_result(client: rebound.Client, session_id: str) -> None:
    tool = unique("search")
    slow_down = Reply(429, "rate limited", {"retry-after-ms": "150"})
    calls: list[float] = []

    def search(url: str, *, q: str) -> str:
        calls.append(time.monotonic())
        return fetch(f"{url}/search?q={q}")

    with http_server([slow_down, slow_down, Reply(200, "3 results")]) as url:
        with client.session(session_id) as s:
            assert s.run(tool, search, url, q="rebound") == "3 results"
            summary = s.end()
    assert len(calls) == 3
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert all(gap >= 0.150 for gap in gaps), f"retried after {gaps} s; the provider asked for 0.15 s"
    assert (summary.calls, summary.errors, summary.retries) == (3, 2, 2)


def test_run_raises_escalation_with_the_verdict_and_the_cause(session: rebound.Session) -> None:
    tool = unique("crm")
    calls = []

    def crm(url: str) -> str:
        calls.append(url)
        return fetch(url)

    with http_server([Reply(401, '{"error": "invalid api key"}')]) as url:
        with pytest.raises(rebound.EscalationError) as info:
            session.run(tool, crm, url)
    err = info.value
    assert len(calls) == 1, "auth must not be retried"
    assert err.action is Action.ESCALATE and err.verdict.category is Category.AUTH
    assert isinstance(err.__cause__, httpx.HTTPStatusError) and err.error is err.__cause__
    assert err.tool == tool and err.report and err.verdict.escalation is not None
    assert "escalate" in str(err) and "(auth) (reason category_policy)" in str(err)


@pytest.mark.parametrize("library", ["httpx", "requests"])
def test_the_message_redacts_the_tools_error(session: rebound.Session, library: str) -> None:
    # An API that takes its key in the query string: both libraries put the URL in the message.
    key = "sk-proj-" + "Zq8xW2mN4vB6" * 4
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}})

    def list_models(url: str) -> str:
        if library == "httpx":
            return httpx.get(url, timeout=5).raise_for_status().text
        response = requests.get(url, timeout=5)
        response.raise_for_status()
        return response.text

    with http_server([Reply(401, body, {"Content-Type": "application/json"})]) as base:
        with pytest.raises(rebound.EscalationError) as info:
            session.run(unique("models"), list_models, f"{base}/v1/models?api_key={key}")
    err = info.value
    assert key in str(err.error) and err.__cause__ is err.error, "the tool's own exception stays as raised"
    assert key not in str(err) and "api_key=[REDACTED:openai_key]" in str(err), str(err)
    assert key not in err.snippet and key not in err.report


def test_run_counts_the_attempts_that_led_to_an_escalation_or_an_abort(client: rebound.Client, session_id: str) -> None:
    failing, flaky = unique("search"), unique("fetch")
    slow_down = Reply(503, "overloaded", {"retry-after-ms": "20"})
    with client.session(session_id, step_limit=5) as s:
        # The third failure in a row escalates.
        with http_server([slow_down]) as url:
            with pytest.raises(rebound.EscalationError) as esc:
                s.run(failing, fetch, url)
        assert esc.value.attempts == 3
        assert "(unavailable) (reason consecutive_failures) after 3 attempts" in str(esc.value)
        # Steps 4 and 5: a failure, then the retry reaches the step limit.
        with http_server([slow_down, Reply(200, "ok")]) as url:
            with pytest.raises(rebound.AbortError) as abort:
                s.run(flaky, fetch, url)
        assert abort.value.attempts == 2 and abort.value.verdict.breaker.reason == pb.REASON_STEP_LIMIT
        assert esc.value.result is None and abort.value.result == "ok"


def test_reason_has_every_reason_of_the_proto() -> None:
    # The message of a VerdictError shows the label: a reason missing here would read as none.
    assert {r.name: int(r) for r in Reason} == {name[len("REASON_"):]: v for name, v in pb.Reason.items()}
    assert Reason.of(999) is Reason.UNSPECIFIED  # from a newer sidecar


def test_run_raises_recover_with_the_snippet(session: rebound.Session) -> None:
    tool = unique("repo")
    with http_server([Reply(404, "not found")]) as url:
        with pytest.raises(rebound.RecoverError) as info:
            session.run(tool, fetch, url)
    assert info.value.action is Action.RECOVER and info.value.attempts == 1
    assert info.value.snippet.startswith(f'<error tool="{tool}"')


def test_run_aborts_at_the_step_limit_and_keeps_the_result(client: rebound.Client, session_id: str) -> None:
    tool = unique("db")
    with client.session(session_id, step_limit=2) as s:
        assert s.run(tool, lambda: ["row 1"]) == ["row 1"]
        with pytest.raises(rebound.AbortError) as info:
            s.run(tool, lambda: ["row 2"])
        # Stopped, the session aborts every call from then on, and a tool returning None is
        # still told from a failure by `error`.
        with pytest.raises(rebound.AbortError) as again:
            s.run(tool, lambda: None)
    assert info.value.error is None and info.value.__cause__ is None
    assert info.value.result == ["row 2"], "the successful call's result was lost"
    assert info.value.verdict.reason is Reason.STEP_LIMIT
    assert again.value.error is None and again.value.result is None
    assert again.value.verdict.reason is Reason.SESSION_STOPPED
    # The message says why the call that succeeded stopped the run.
    assert str(info.value) == f"rebound: abort after {tool!r} (reason step_limit)"
    assert str(again.value) == f"rebound: abort after {tool!r} (reason session_stopped)"


def test_run_gives_up_after_max_attempts(sidecar: Sidecar, session_id: str) -> None:
    tool = unique("llm")
    calls = []

    def llm(url: str) -> str:
        calls.append(url)
        return fetch(url)

    with rebound.Client(sidecar.grpc, timeout=LIVE_TIMEOUT, max_attempts=2) as c:
        with http_server([Reply(429, "slow down", {"retry-after-ms": "20"})]) as url:
            with pytest.raises(rebound.RecoverError) as info:
                c.session(session_id).run(tool, llm, url)
    assert len(calls) == 2 and info.value.attempts == 2
    assert info.value.verdict.action is Action.RETRY  # the sidecar would retry; the guard stopped


def test_run_refuses_what_it_cannot_call_and_reports_nothing(session: rebound.Session) -> None:
    tool = unique("search")

    async def search_async(q: str) -> str:
        return f"results for {q}"

    with pytest.raises(TypeError, match=r"fn must be callable \(the tool function, not its result\), not str"):
        session.run(tool, "results for q")  # type: ignore[arg-type]  # search("q") instead of search
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match=r"fn .*search_async returned an awaitable \(coroutine\).*AsyncSession"):
            session.run(tool, search_async, "q")  # type: ignore[unused-coroutine]  # the mistake under test
        gc.collect()
    assert not [w.message for w in caught if "never awaited" in str(w.message)], "the coroutine was not closed"
    # Neither is the tool's outcome: the sidecar saw nothing.
    assert session.end().calls == 0


def test_keyboard_interrupt_is_reported_and_reraised(session: rebound.Session) -> None:
    tool = unique("shell")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.run(tool, interrupted)
    # Cancellation aborted the session on the sidecar: every further report is an abort.
    with pytest.raises(rebound.AbortError) as info:
        session.run(tool, lambda: None)
    assert info.value.verdict.breaker.reason == pb.REASON_SESSION_STOPPED


def test_unknown_tool_is_reclassified_with_the_declared_tools(client: rebound.Client, session_id: str) -> None:
    with client.session(session_id, tools=["search", "fetch_page"]) as s:
        v = s.report("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
    assert (v.action, v.category) == (Action.RECLASSIFY, Category.UNKNOWN_TOOL)
    assert "search" in v.snippet


def test_the_session_is_declared_again_when_the_sidecar_forgot_it(
    client: rebound.Client, sidecar: Sidecar, session_id: str
) -> None:
    with client.session(session_id, tools=["search", "fetch"]) as s:
        assert s.report("search").breaker.steps == 1
        # The sidecar forgets the session (a restart, idle expiry, eviction) between two calls
        # that both reach it: nothing falls back.
        forget(sidecar, session_id)
        again = s.report("search")
        assert again.breaker.steps == 1 and not again.fallback  # a new session, without the tools
        v = s.report("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
    assert (v.action, v.fallback) == (Action.RECLASSIFY, False)
    assert "Did you mean `search`?" in v.snippet and "`fetch`" in v.snippet, v.snippet
    assert client.fallback_count == 0


def test_context_shows_unresolved_errors_until_the_tool_succeeds(session: rebound.Session) -> None:
    tool = unique("db")
    assert str(session.context()) == ""
    session.report(tool, error=ConnectionRefusedError(111, "Connection refused"))
    cx = session.context()
    assert not cx.fallback and cx.errors_shown == 1 and f'<error tool="{tool}" type="network">' in cx.text
    session.report(tool)
    assert session.context().text == ""


def test_admit_and_start(client: rebound.Client, session_id: str) -> None:
    s = client.session(session_id, tools=["search"], step_limit=50, cost_limit=2.5, labels={"team": "qa"})
    started = s.start()
    assert started is not None and started.created and started.step_limit == 50 and started.cost_limit == 2.5
    again = s.start()
    assert again is not None and not again.created  # idempotent
    admitted = s.admit("search")
    assert admitted.allowed and admitted.session_state == pb.SESSION_STATE_ACTIVE
    s.end()


def test_a_repeated_call_id_is_answered_once(session: rebound.Session) -> None:
    tool = unique("pay")
    first = session.report(tool, error=RuntimeError("card declined"), call_id="charge-1")
    again = session.report(tool, error=RuntimeError("card declined"), call_id="charge-1")
    assert again.proto.replayed and again.action is first.action
    assert session.end().calls == 1


def test_a_proxy_set_for_the_agent_does_not_come_between_it_and_the_sidecar(
    sidecar: Sidecar, session_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gRPC core sends a channel's calls through $https_proxy or $http_proxy, set for the agent's
    # own HTTP calls; here a proxy that cannot be reached, so every verdict would be a fallback.
    host, port = refused_address()
    for name in ("https_proxy", "http_proxy"):
        monkeypatch.setenv(name, f"http://{host}:{port}")
    for name in ("grpc_proxy", "no_grpc_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with rebound.Client(sidecar.grpc, timeout=LIVE_TIMEOUT) as client, client.session(session_id) as session:
        v = session.report(unique("search"))
    assert not v.fallback and client.fallback_count == 0

    async def main() -> tuple[rebound.Verdict, int]:
        async with rebound.AsyncClient(sidecar.grpc, timeout=LIVE_TIMEOUT) as client:
            async with client.session(f"{session_id}-async") as session:
                return await session.report(unique("search")), client.fallback_count

    v, fallbacks = asyncio.run(main())
    assert not v.fallback and fallbacks == 0


def test_threads_share_a_session(session: rebound.Session) -> None:
    tool = unique("search")
    verdicts: list[rebound.Verdict] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            v = session.report(tool)
            with lock:
                verdicts.append(v)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(verdicts) == 160 and not any(v.fallback for v in verdicts)
    assert len({v.call_id for v in verdicts}) == 160, "call ids must be unique in the session"
    assert session.end().calls == 160


def test_the_sidecar_rejecting_an_argument_raises_not_falls_back(
    client: rebound.Client, session_id: str, logs: RecordedLogs
) -> None:
    with pytest.raises(ValueError, match="profile"):
        with client.session(session_id, profile="gold"):
            pass
    assert client.fallback_count == 0 and not logs.at(30)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda c: c.session(""), "session_id must not be empty"),
        (lambda c: c.session("s", tools="search"), "tools must be a list"),
        (lambda c: c.session("s", tools=["ok", ""]), r"tools\[1\] must not be empty"),
        (lambda c: c.session("s", step_limit=-1), "step_limit = -1"),
        (lambda c: c.session("s", cost_limit=float("inf")), "cost_limit = inf"),
        (lambda c: c.session("s", labels=[("a", "b")]), "labels must be a mapping"),
        (lambda c: c.session("s", labels={"k": "v" * 1025}), "at most 1024 bytes"),
        (lambda c: c.session("s").report(""), "tool must not be empty"),
        (lambda c: c.session("s").report_outcome(pb.Outcome(tool="t", session_id="other")), "reported to session"),
        (lambda c: c.session("s").context(max_tokens=-1), "max_tokens = -1"),
    ],
)
def test_bad_input_raises_before_any_call(client: rebound.Client, make: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        make(client)
    assert client.fallback_count == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"address": "localhost"}, "want host:port"),
        ({"address": "127.0.0.1:0"}, "port '0'"),
        ({"address": "unix:"}, "needs a path"),
        ({"address": "http://127.0.0.1:50051"}, r"address 'http://127.0.0.1:50051': not a URL; want host:port .*'127.0.0.1:50051'"),
        ({"address": "https://localhost:50051/"}, "address 'https://localhost:50051/': not a URL"),
        ({"address": "127.0.0.1:1", "timeout": 0}, "timeout = 0"),
        ({"address": "127.0.0.1:1", "max_attempts": 0}, "max_attempts = 0"),
        ({"address": "127.0.0.1:1", "fallback_policy": "fast"}, "fallback_policy must be"),
    ],
)
def test_bad_client_settings(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        rebound.Client(**kwargs)


def test_tools_can_start_processes_while_a_channel_is_open(session: rebound.Session) -> None:
    # grpc/grpc#43055: with gRPC's fork handlers on, a forked child may abort before exec. A
    # preexec_fn makes subprocess fork on every Python version (3.9 always does).
    assert not session.report(unique("warm")).fallback
    codes = [subprocess.run(["true"], preexec_fn=lambda: None).returncode for _ in range(200)]
    assert codes.count(0) == len(codes), f"{len(codes) - codes.count(0)} of {len(codes)} children died: {set(codes)}"


def test_address_defaults_to_rebound_addr_as_the_deploy_manifests_set_it(
    sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REBOUND_ADDR", sidecar.grpc)
    with rebound.Client(timeout=LIVE_TIMEOUT) as client:
        assert client.address == sidecar.grpc
        assert not client.session(unique("env")).report(unique("tool")).fallback
    monkeypatch.delenv("REBOUND_ADDR")
    with rebound.Client() as client:
        assert client.address == rebound.DEFAULT_ADDRESS
    # Set but empty (a manifest's `value: ""`) counts as unset; spaces around it are not part of it.
    monkeypatch.setenv("REBOUND_ADDR", " ")
    with rebound.Client() as client:
        assert client.address == rebound.DEFAULT_ADDRESS
    monkeypatch.setenv("REBOUND_ADDR", f" {sidecar.grpc}\n")
    with rebound.Client() as client:
        assert client.address == sidecar.grpc
