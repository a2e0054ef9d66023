"""A session is one agent run: `Session` (blocking) and `AsyncSession` (asyncio). Each
reports tool outcomes and gets verdicts, runs tool calls acting on those verdicts, and asks
for the error context of the next LLM turn. Both fail open (see `rebound.client`)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, TypeVar, cast, overload

import grpc

from rebound._checks import check_uint32
from rebound.client import details, status_code
from rebound.errors import AbortError, EscalationError, RecoverError
from rebound.fallback import DeclaredLimits
from rebound.local import Counted, LocalState
from rebound.outcome import build_outcome, check_outcome
from rebound.v1 import rebound_pb2 as pb
from rebound.v1 import rebound_pb2_grpc as pb_grpc
from rebound.verdict import Action, ErrorContext, Kind, Verdict

if TYPE_CHECKING:
    # Only for annotations (strings at run time), so Python 3.9 needs no typing_extensions.
    from typing_extensions import ParamSpec

    P = ParamSpec("P")
    from rebound.client import _Core
    from rebound.stream import AsyncReporter, Reporter

__all__ = ["Session", "AsyncSession", "Call", "AsyncCall"]

T = TypeVar("T")

log = logging.getLogger("rebound")


class _State:
    """What both kinds of session share: ids, the declaration, call ids and the local memory.
    It makes no calls to the sidecar."""

    def __init__(self, core: _Core, session_id: str, declare: Optional[pb.StartSessionRequest]) -> None:
        self.core = core
        self.id = session_id
        self.declare = declare
        # Set once the sidecar holds `declare`. The sidecar can lose a session without telling:
        # it restarts (calls fall back meanwhile) or evicts it (idle expiry, capacity) and makes
        # it anew, undeclared, on the next report. Either sign (`lost`) clears this, and the
        # declaration is sent again before the next report.
        self.declared = declare is None
        # Counts the times the sidecar may have lost the session. A declaration counts only in
        # the epoch it was sent in: a StartSession the sidecar accepted before it lost the
        # session can be answered after the client noticed the loss, and must not count then.
        self._epoch = 0
        # Whether the sidecar has ever accepted the declaration: refusing it again later (a
        # config reload removed its profile) must not stop the run.
        self._accepted = False
        # Whether the sidecar (not the fallback) has answered a report since the last loss.
        self._heard = False
        # Call ids only need to be unique within the session; a random prefix keeps two
        # processes that reuse a session id apart.
        self._prefix = secrets.token_hex(6)
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.local = LocalState(core.clock(), DeclaredLimits.of(declare), declare.labels if declare else {})

    def prepare(self, o: pb.Outcome) -> Counted:
        """Fills in the session and call ids and counts the outcome locally; returns what the
        fallback policy would read for it."""
        check_outcome(o)
        if o.session_id and o.session_id != self.id:
            raise ValueError(f"session_id {o.session_id!r}: outcome reported to session {self.id!r}")
        o.session_id = self.id
        if not o.call_id:
            with self._lock:
                o.call_id = f"{self._prefix}-{next(self._counter)}"
        return self.local.observe(o)

    def sending(self) -> int:
        """The epoch of a declaration about to be sent."""
        with self._lock:
            return self._epoch

    def started(self, epoch: int) -> None:
        """The sidecar accepted the declaration sent in `epoch`."""
        self.core.answered()
        with self._lock:
            self._accepted = True
            if epoch == self._epoch:
                self.declared = True

    def start_failed(self, epoch: int, err: grpc.RpcError) -> bool:
        """Sorts a failed StartSession sent in `epoch`. The first declaration refused as bad
        input raises ValueError, as any bad argument does. A declaration the sidecar accepted
        before and now refuses (a config reload removed its profile) is logged and taken as
        held, so that the run goes on as the sidecar has the session: True, the sidecar
        answered. Anything else is left to the fallback: False."""
        if status_code(err) is grpc.StatusCode.INVALID_ARGUMENT:
            with self._lock:
                again = self._accepted
                if again and epoch == self._epoch:
                    self.declared = True
            if again:
                self.core.answered()
                log.warning(
                    "rebound: the sidecar refused to declare session %r again (%s); the session goes "
                    "on without its declaration",
                    self.id, details(err),
                )
                return True
        self.core.failed("StartSession", err)
        return False

    def lost(self) -> None:
        """Notes that the sidecar may have forgotten the session."""
        with self._lock:
            self._lost()

    def _lost(self) -> None:
        # Called with the lock held. The next declaration may make the session anew, so the
        # first verdict after it may count step 1 without any new loss.
        self._epoch += 1
        self._heard = False
        if self.declare is not None:
            self.declared = False

    def accept(self, o: pb.Outcome, v: pb.Verdict) -> Verdict:
        """A verdict from the sidecar."""
        self.core.answered()
        # The sidecar counts this session's outcomes: a count of one after an earlier verdict
        # means it restarted or evicted the session and made a new one, without the declared
        # tools and limits. Declare again before the next call. Verdicts that arrive out of
        # order (threads, streams) may cause a needless StartSession, which is idempotent; a
        # replayed verdict (a repeated call id) is an old one and says nothing about it.
        with self._lock:
            if self._heard and v.breaker.steps == 1 and not v.replayed:
                self._lost()
            else:
                self._heard = True
        self.local.record(o, v)
        return Verdict(v)

    def fallback(self, o: pb.Outcome, counted: Counted) -> Verdict:
        """Answers an outcome with the local policy."""
        self.core.fell_back()
        # The sidecar may have restarted and forgotten the session.
        self.lost()
        # A repeated call id gets its earlier verdict, as the sidecar would answer it.
        v = self.local.recall(o)
        if v is None:
            v = self.core.policy.decide(
                o,
                counted.consecutive,
                now=self.core.clock(),
                random=self.core.random(),
                session=counted.session,
                limits=self.local.limits,
                labels=self.local.labels,
            )
        self.local.record(o, v)
        return Verdict(v, fallback=True)

    def context_request(self, max_tokens: int) -> pb.ContextRequest:
        """The Context request, checked."""
        return pb.ContextRequest(session_id=self.id, max_tokens=check_uint32("max_tokens", max_tokens))

    def context_answer(self, resp: pb.ContextResponse) -> ErrorContext:
        """The sidecar's context answer, which also ends a fallback period."""
        self.core.answered()
        return ErrorContext(resp.text, resp.errors_shown, resp.errors_hidden, resp.tokens)

    def admit_fallback(self) -> pb.AdmitResponse:
        """Admit's answer when the sidecar does not give one: allowed (fail open), unless a
        verdict this client saw aborted the session, as the sidecar would say."""
        self.core.fell_back()
        state = self.local.state()
        if state == pb.SESSION_STATE_STOPPED:
            return pb.AdmitResponse(
                allowed=False,
                reason=pb.REASON_SESSION_STOPPED,
                session_state=state,
                message="the session was aborted; start a new one (local fallback: the Rebound sidecar did not answer)",
            )
        return pb.AdmitResponse(
            allowed=True,
            session_state=state,
            message="allowed by the local fallback: the Rebound sidecar did not answer",
        )

    def summary(self, resp: Optional[pb.EndSessionResponse]) -> pb.SessionSummary:
        """The session summary: the sidecar's when it had the session, else the local one."""
        if resp is not None and resp.found:
            return resp.summary
        # Expired on the sidecar, restarted, or unreachable: what this client saw is the best summary left.
        return self.local.summary(self.core.clock())


def _reportable(exc: BaseException) -> bool:
    """Exceptions worth reporting as a tool's outcome: errors and cancellation, not the
    interpreter shutting a generator or exiting."""
    return isinstance(exc, (Exception, KeyboardInterrupt, asyncio.CancelledError))


def _check_callable(fn: object) -> None:
    """`run`'s check on `fn`: passing the tool's result instead of the tool must not be
    reported as the tool failing."""
    if not callable(fn):
        raise TypeError(f"fn must be callable (the tool function, not its result), not {type(fn).__name__}: {_name(fn)}")


def _name(fn: object) -> str:
    """`fn` for an error message: its qualified name, else its repr cut short."""
    name = getattr(fn, "__qualname__", None)
    if isinstance(name, str):
        return name
    text = repr(fn)
    return text if len(text) <= 60 else text[:60] + "…"


def _after(
    tool: str,
    verdict: Verdict,
    error: Optional[BaseException],
    attempt: int,
    max_attempts: int,
    result: Any = None,
) -> Optional[float]:
    """What `run` does after one attempt, which raised `error` or returned `result`: None when
    done, else the seconds to sleep before the next attempt; raises the verdict's exception
    when the run cannot go on the same way (with `result`, which a stop must not lose)."""
    action = verdict.action
    if action is Action.ESCALATE:
        raise EscalationError(tool, verdict, error, attempts=attempt, result=result) from error
    if action is Action.ABORT:
        raise AbortError(tool, verdict, error, attempts=attempt, result=result) from error
    if error is None:
        return None
    if action is Action.CONTINUE:
        raise error
    if action is Action.RETRY:
        if attempt >= max_attempts:
            raise RecoverError(tool, verdict, error, attempts=attempt) from error
        return verdict.delay
    # Recover, replan, reclassify, and any action newer than this client: back to the LLM.
    raise RecoverError(tool, verdict, error, attempts=attempt) from error


class Session:
    """One agent run on a `Client`; safe to share between threads. Use as a context manager:
    entering declares the session (StartSession), exiting ends it (EndSession)."""

    def __init__(
        self, core: _Core, stub: pb_grpc.ReboundStub, session_id: str, declare: Optional[pb.StartSessionRequest]
    ) -> None:
        self._s = _State(core, session_id, declare)
        self._stub = stub

    @property
    def id(self) -> str:
        """The session's id."""
        return self._s.id

    def start(self) -> Optional[pb.StartSessionResponse]:
        """Declares the session now (idempotent) and returns the limits in force; None when the
        sidecar did not answer (the declaration is then sent again before a later report), or
        refused to declare again a session it had accepted before (logged; the run goes on)."""
        return self._start()[1]

    def _start(self) -> tuple[bool, Optional[pb.StartSessionResponse]]:
        """StartSession: whether the sidecar answered, and its answer when it accepted."""
        req = self._s.declare or pb.StartSessionRequest(session_id=self._s.id)
        epoch = self._s.sending()
        try:
            resp: pb.StartSessionResponse = self._stub.StartSession(req, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            return self._s.start_failed(epoch, err), None
        self._s.started(epoch)
        return True, resp

    def _declare(self) -> bool:
        """Sends the declaration unless the sidecar holds it; False when the sidecar did not answer."""
        return self._s.declared or self._start()[0]

    def report(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> Verdict:
        """Reports one call of `tool`: a success, or a failure built from `error` (see
        `rebound.build_outcome` for the keyword fields, which win over what the exception says).
        Raises ValueError for bad input only; when the sidecar does not answer in time, the
        local fallback policy decides (`verdict.fallback`)."""
        return self.report_outcome(build_outcome(tool, error, **fields))

    def report_outcome(self, outcome: pb.Outcome) -> Verdict:
        """Reports an outcome built by hand; fills in the session id and, when empty, a call id."""
        counted = self._s.prepare(outcome)
        if not self._declare():
            # The sidecar just failed to answer: do not make the agent wait a second deadline.
            return self._s.fallback(outcome, counted)
        try:
            v: pb.Verdict = self._stub.Report(outcome, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            self._s.core.failed("Report", err)
            return self._s.fallback(outcome, counted)
        return self._s.accept(outcome, v)

    def call(self, tool: str, **fields: Any) -> Call:
        """A `with` block that is one call of `tool`: it reports success, or the exception that
        leaves the block (which goes on propagating); the verdict is then `call.verdict`."""
        build_outcome(tool, **fields)  # check the fields now, not after the tool ran
        return Call(self, tool, fields)

    def run(self, tool: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Calls `fn(*args, **kwargs)` as one call of `tool` and acts on the verdicts: it sleeps
        and calls again while they say retry, and returns the first successful result.
        Otherwise it raises `RecoverError` (recover, replan, reclassify: give its `snippet` to
        the LLM), `EscalationError` or `AbortError`, each caused by the tool's exception; when
        a verdict stops the run after a successful call (a limit reached), the exception has
        no cause and carries the tool's return value as `result`.
        Cancellation (KeyboardInterrupt) is reported and re-raised as it is. Raises TypeError,
        reporting nothing, when `fn` is not callable or returns an awaitable (a coroutine
        function needs `AsyncSession.run`)."""
        build_outcome(tool)
        _check_callable(fn)
        for attempt in itertools.count(1):
            start = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                verdict = self.report(tool, exc, attempt=attempt, duration=time.monotonic() - start)
                delay = _after(tool, verdict, exc, attempt, self._s.core.max_attempts)
                assert delay is not None
                time.sleep(delay)
                continue
            except KeyboardInterrupt as exc:
                self.report(tool, exc, attempt=attempt, duration=time.monotonic() - start)
                raise
            if inspect.isawaitable(result):
                # A programming error, not the tool's outcome: nothing is reported.
                if inspect.iscoroutine(result):
                    result.close()  # no "coroutine was never awaited" warning on top
                raise TypeError(
                    f"fn {_name(fn)} returned an awaitable ({type(result).__name__}), which Session.run "
                    "cannot await: run coroutine functions with AsyncSession.run (rebound.AsyncClient)"
                )
            verdict = self.report(tool, attempt=attempt, duration=time.monotonic() - start)
            _after(tool, verdict, None, attempt, self._s.core.max_attempts, result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def admit(self, tool: str) -> pb.AdmitResponse:
        """Asks whether `tool` may be called now (its breaker may be open, the session
        stopped). When the sidecar does not answer, the call is allowed."""
        build_outcome(tool)
        try:
            resp: pb.AdmitResponse = self._stub.Admit(
                pb.AdmitRequest(session_id=self._s.id, tool=tool), timeout=self._s.core.timeout
            )
        except grpc.RpcError as err:
            self._s.core.failed("Admit", err)
            return self._s.admit_fallback()
        self._s.core.answered()
        return resp

    def context(self, *, max_tokens: int = 0) -> ErrorContext:
        """The compacted error context for the session's next LLM turn (`str()` is the text,
        empty when nothing is unresolved). `max_tokens` asks for a token budget. When the
        sidecar does not answer, the text is built from the errors this client has seen."""
        req = self._s.context_request(max_tokens)
        try:
            resp: pb.ContextResponse = self._stub.Context(req, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            self._s.core.failed("Context", err)
            self._s.core.fell_back()
            return self._s.local.context()
        return self._s.context_answer(resp)

    def end(self) -> pb.SessionSummary:
        """Ends the session on the sidecar and returns its summary; when the sidecar does not
        answer, the summary this client kept."""
        try:
            resp: pb.EndSessionResponse = self._stub.EndSession(
                pb.EndSessionRequest(session_id=self._s.id), timeout=self._s.core.timeout
            )
        except grpc.RpcError as err:
            self._s.core.failed("EndSession", err)
            self._s.core.fell_back()
            return self._s.summary(None)
        self._s.core.answered()
        return self._s.summary(resp)

    def reporter(self) -> Reporter:
        """A streaming reporter over one Observe stream, for high report rates."""
        from rebound.stream import Reporter

        return Reporter(self, self._s, self._stub)

    def __enter__(self) -> Session:
        if self._s.declare is not None:
            self.start()
        return self

    def __exit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.end()


class Call:
    """One tool call in a `with session.call(tool) as call:` block. Set `cost` (or other
    outcome fields through `session.call`) inside the block; read `verdict` after it."""

    def __init__(self, session: Session, tool: str, fields: Mapping[str, Any]) -> None:
        self.tool = tool
        """The tool being called."""
        self.cost: float = fields.get("cost", 0.0)
        """What the call cost, in the agent's own unit."""
        self.verdict: Optional[Verdict] = None
        """The verdict, once the block has been left."""
        self._session = session
        self._fields = {k: v for k, v in fields.items() if k != "cost"}
        self._start = 0.0

    def __enter__(self) -> Call:
        self._start = time.monotonic()
        return self

    def __exit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> Literal[False]:
        if ev is not None and not _reportable(ev):
            return False
        fields = {"duration": time.monotonic() - self._start, **self._fields, "cost": self.cost}
        self.verdict = self._session.report(self.tool, ev, **fields)
        return False  # the tool's exception goes on: the caller decides with call.verdict


class AsyncSession:
    """One agent run on an `AsyncClient`, used from its event loop. Use with `async with`:
    entering declares the session (StartSession), exiting ends it (EndSession)."""

    def __init__(
        self,
        core: _Core,
        stub: Callable[[], pb_grpc.ReboundStub],
        session_id: str,
        declare: Optional[pb.StartSessionRequest],
    ) -> None:
        self._s = _State(core, session_id, declare)
        self._stub = stub

    @property
    def id(self) -> str:
        """The session's id."""
        return self._s.id

    async def start(self) -> Optional[pb.StartSessionResponse]:
        """Declares the session now; see `Session.start`."""
        return (await self._start())[1]

    async def _start(self) -> tuple[bool, Optional[pb.StartSessionResponse]]:
        """StartSession; see `Session._start`."""
        req = self._s.declare or pb.StartSessionRequest(session_id=self._s.id)
        epoch = self._s.sending()
        try:
            resp: pb.StartSessionResponse = await self._stub().StartSession(req, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            return self._s.start_failed(epoch, err), None
        self._s.started(epoch)
        return True, resp

    async def _declare(self) -> bool:
        """Sends the declaration unless the sidecar holds it; see `Session._declare`."""
        return self._s.declared or (await self._start())[0]

    async def report(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> Verdict:
        """Reports one call of `tool`; see `Session.report`."""
        return await self.report_outcome(build_outcome(tool, error, **fields))

    async def report_outcome(self, outcome: pb.Outcome) -> Verdict:
        """Reports an outcome built by hand; see `Session.report_outcome`."""
        counted = self._s.prepare(outcome)
        if not await self._declare():
            return self._s.fallback(outcome, counted)
        try:
            v: pb.Verdict = await self._stub().Report(outcome, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            self._s.core.failed("Report", err)
            return self._s.fallback(outcome, counted)
        return self._s.accept(outcome, v)

    def call(self, tool: str, **fields: Any) -> AsyncCall:
        """An `async with` block that is one call of `tool`; see `Session.call`."""
        build_outcome(tool, **fields)
        return AsyncCall(self, tool, fields)

    @overload
    async def run(self, tool: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    @overload
    async def run(self, tool: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    async def run(self, tool: str, fn: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Awaits `fn(*args, **kwargs)` (a coroutine function, or a plain function) as one call
        of `tool` and acts on the verdicts, sleeping with asyncio; see `Session.run` (a stop
        after a successful call carries the awaited value as `result`). Cancellation is
        reported and re-raised as it is."""
        build_outcome(tool)
        _check_callable(fn)
        for attempt in itertools.count(1):
            start = time.monotonic()
            try:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                verdict = await self.report(tool, exc, attempt=attempt, duration=time.monotonic() - start)
                delay = _after(tool, verdict, exc, attempt, self._s.core.max_attempts)
                assert delay is not None
                await asyncio.sleep(delay)
                continue
            except (asyncio.CancelledError, KeyboardInterrupt) as exc:
                await self.report(tool, exc, attempt=attempt, duration=time.monotonic() - start)
                raise
            verdict = await self.report(tool, attempt=attempt, duration=time.monotonic() - start)
            _after(tool, verdict, None, attempt, self._s.core.max_attempts, result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def admit(self, tool: str) -> pb.AdmitResponse:
        """Asks whether `tool` may be called now; see `Session.admit`."""
        build_outcome(tool)
        try:
            resp: pb.AdmitResponse = await self._stub().Admit(
                pb.AdmitRequest(session_id=self._s.id, tool=tool), timeout=self._s.core.timeout
            )
        except grpc.RpcError as err:
            self._s.core.failed("Admit", err)
            return self._s.admit_fallback()
        self._s.core.answered()
        return resp

    async def context(self, *, max_tokens: int = 0) -> ErrorContext:
        """The error context for the next LLM turn; see `Session.context`."""
        req = self._s.context_request(max_tokens)
        try:
            resp: pb.ContextResponse = await self._stub().Context(req, timeout=self._s.core.timeout)
        except grpc.RpcError as err:
            self._s.core.failed("Context", err)
            self._s.core.fell_back()
            return self._s.local.context()
        return self._s.context_answer(resp)

    async def end(self) -> pb.SessionSummary:
        """Ends the session; see `Session.end`."""
        try:
            resp: pb.EndSessionResponse = await self._stub().EndSession(
                pb.EndSessionRequest(session_id=self._s.id), timeout=self._s.core.timeout
            )
        except grpc.RpcError as err:
            self._s.core.failed("EndSession", err)
            self._s.core.fell_back()
            return self._s.summary(None)
        self._s.core.answered()
        return self._s.summary(resp)

    def reporter(self) -> AsyncReporter:
        """A streaming reporter over one Observe stream, for high report rates."""
        from rebound.stream import AsyncReporter

        return AsyncReporter(self, self._s, self._stub)

    async def __aenter__(self) -> AsyncSession:
        if self._s.declare is not None:
            await self.start()
        return self

    async def __aexit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.end()


class AsyncCall:
    """One tool call in an `async with session.call(tool) as call:` block; see `Call`."""

    def __init__(self, session: AsyncSession, tool: str, fields: Mapping[str, Any]) -> None:
        self.tool = tool
        """The tool being called."""
        self.cost: float = fields.get("cost", 0.0)
        """What the call cost, in the agent's own unit."""
        self.verdict: Optional[Verdict] = None
        """The verdict, once the block has been left."""
        self._session = session
        self._fields = {k: v for k, v in fields.items() if k != "cost"}
        self._start = 0.0

    async def __aenter__(self) -> AsyncCall:
        self._start = time.monotonic()
        return self

    async def __aexit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> Literal[False]:
        if ev is not None and not _reportable(ev):
            return False
        fields = {"duration": time.monotonic() - self._start, **self._fields, "cost": self.cost}
        self.verdict = await self._session.report(self.tool, ev, **fields)
        return False
