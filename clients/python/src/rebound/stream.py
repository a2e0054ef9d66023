"""Streaming reporters over one `Observe` stream, for agents that report at high rates: no
per-call RPC setup, and any number of outcomes in flight. The sidecar answers in order, one
verdict per outcome.

They fail open like the rest of the client: an outcome whose verdict does not arrive within the
call timeout, or whose stream breaks, is answered by the local fallback policy, and the next
send opens a new stream."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import grpc
import grpc.aio

from rebound.client import status_code
from rebound.outcome import build_outcome
from rebound.v1 import rebound_pb2 as pb
from rebound.v1 import rebound_pb2_grpc as pb_grpc
from rebound.verdict import Verdict

if TYPE_CHECKING:
    from rebound.local import Counted
    from rebound.session import AsyncSession, Session, _State

__all__ = ["Reporter", "PendingVerdict", "AsyncReporter", "AsyncPendingVerdict"]

_END = object()
"""Ends a stream's request iterator (half-closes the stream)."""


def _broken(state: _State, error: Optional[BaseException], why: str) -> Optional[ValueError]:
    """Sorts why a stream ended with outcomes unanswered: a bad argument becomes the pending
    outcomes' error; anything else is logged once and left to the fallback."""
    if isinstance(error, grpc.RpcError):
        code = status_code(error)
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            details = error.details() if callable(getattr(error, "details", None)) else str(error)
            return ValueError(f"rebound Observe: {details}")
        why = code.name if code is not None else why
    state.core.unreachable("Observe", why)
    return None


class PendingVerdict:
    """An outcome sent on a `Reporter` whose verdict may not have arrived yet."""

    def __init__(self, outcome: pb.Outcome, counted: Counted, deadline: float, on_timeout: Callable[[], None]) -> None:
        self.outcome = outcome
        """The outcome sent (with its session and call ids filled in)."""
        self._counted = counted  # for the fallback, should it have to answer
        self._deadline = deadline
        self._on_timeout = on_timeout
        self._done = threading.Event()
        self._verdict: Optional[Verdict] = None
        self._error: Optional[BaseException] = None

    def done(self) -> bool:
        """True once the verdict (or the fallback's) is there."""
        return self._done.is_set()

    def result(self) -> Verdict:
        """Waits for the verdict; past the call timeout, the fallback policy's."""
        if not self._done.wait(max(self._deadline - time.monotonic(), 0.0)):
            self._on_timeout()
            self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._verdict is not None
        return self._verdict

    def _set(self, verdict: Optional[Verdict], error: Optional[BaseException] = None) -> None:
        self._verdict, self._error = verdict, error
        self._done.set()


class _Stream:
    """One Observe stream and the outcomes sent on it that await their verdicts, oldest first."""

    def __init__(self, stub: pb_grpc.ReboundStub) -> None:
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.pending: deque[PendingVerdict] = deque()
        self.ended = False
        self.call = stub.Observe(iter(self.requests.get, _END))


class Reporter:
    """Reports one session's outcomes over an Observe stream; safe to share between threads.
    `send` returns at once with a `PendingVerdict`; `report` waits for the verdict. Use as a
    context manager, or `close()` when done."""

    def __init__(self, session: Session, state: _State, stub: pb_grpc.ReboundStub) -> None:
        self._session = session
        self._s = state
        self._stub = stub
        self._lock = threading.Lock()
        self._stream: Optional[_Stream] = None
        self._readers: list[threading.Thread] = []
        self._closed = False

    def send(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> PendingVerdict:
        """Sends the outcome of one call of `tool` (built as `Session.report` does)."""
        return self.send_outcome(build_outcome(tool, error, **fields))

    def send_outcome(self, outcome: pb.Outcome) -> PendingVerdict:
        """Sends an outcome built by hand."""
        if self._closed:
            raise RuntimeError("rebound: the Reporter is closed")
        counted = self._s.prepare(outcome)
        deadline = time.monotonic() + self._s.core.timeout
        if not self._session._declare():
            p = PendingVerdict(outcome, counted, deadline, lambda: None)
            p._set(self._s.fallback(outcome, counted))
            return p
        with self._lock:
            stream = self._stream if self._stream is not None and not self._stream.ended else self._open()
            p = PendingVerdict(outcome, counted, deadline, lambda: self._break(stream, None, "DEADLINE_EXCEEDED"))
            stream.pending.append(p)
            stream.requests.put(outcome)
        return p

    def report(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> Verdict:
        """Sends the outcome of one call of `tool` and waits for its verdict."""
        return self.send(tool, error, **fields).result()

    def close(self) -> None:
        """Waits for the verdicts still due (each within its deadline) and closes the stream."""
        with self._lock:
            self._closed = True
            stream = self._stream
            pending = list(stream.pending) if stream is not None else []
        for p in pending:
            try:
                p.result()
            except ValueError:
                pass  # raised again to whoever waits on that outcome
        if stream is not None:
            stream.requests.put(_END)
        for reader in self._readers:
            reader.join(timeout=self._s.core.timeout)
        if stream is not None:
            self._break(stream, None, "closed")

    def _open(self) -> _Stream:
        stream = _Stream(self._stub)
        reader = threading.Thread(target=self._read, args=(stream,), name="rebound-observe", daemon=True)
        self._readers = [t for t in self._readers if t.is_alive()] + [reader]
        self._stream = stream
        reader.start()
        return stream

    def _read(self, stream: _Stream) -> None:
        error: Optional[BaseException] = None
        why = "stream ended"
        try:
            for v in stream.call:
                with self._lock:
                    if stream.ended:
                        return
                    if not stream.pending:
                        why = "a verdict for no outcome"
                        break
                    p = stream.pending.popleft()
                p._set(self._s.accept(p.outcome, v))
        except grpc.RpcError as err:
            error = err
        self._break(stream, error, why)

    def _break(self, stream: _Stream, error: Optional[BaseException], why: str) -> None:
        """Gives up a stream: its unanswered outcomes go to the fallback policy."""
        with self._lock:
            if stream.ended:
                return
            stream.ended = True
            pending = list(stream.pending)
            stream.pending.clear()
            if self._stream is stream:
                self._stream = None
        stream.requests.put(_END)  # frees gRPC's thread that reads the requests
        stream.call.cancel()
        if not pending:
            return
        bad_input = _broken(self._s, error, why)
        for p in pending:
            if bad_input is not None:
                p._set(None, bad_input)
            else:
                p._set(self._s.fallback(p.outcome, p._counted))

    def __enter__(self) -> Reporter:
        return self

    def __exit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


class AsyncPendingVerdict:
    """An outcome sent on an `AsyncReporter` whose verdict may not have arrived yet."""

    def __init__(self, outcome: pb.Outcome, counted: Counted, deadline: float, stream: Optional[_AsyncStream]) -> None:
        self.outcome = outcome
        """The outcome sent (with its session and call ids filled in)."""
        self._counted = counted  # for the fallback, should it have to answer
        self._deadline = deadline
        self._stream = stream
        self._future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()

    def done(self) -> bool:
        """True once the verdict (or the fallback's) is there."""
        return self._future.done()

    async def result(self) -> Verdict:
        """Waits for the verdict; past the call timeout, the fallback policy's."""
        remaining = max(self._deadline - time.monotonic(), 0.0)
        try:
            return await asyncio.wait_for(asyncio.shield(self._future), remaining)
        except asyncio.TimeoutError:
            if self._stream is not None:
                self._stream.reporter._break(self._stream, None, "DEADLINE_EXCEEDED")
            return await self._future

    def _set(self, verdict: Optional[Verdict], error: Optional[BaseException] = None) -> None:
        if self._future.done():
            return
        if error is not None:
            self._future.set_exception(error)
        else:
            self._future.set_result(verdict)  # type: ignore[arg-type]


class _AsyncStream:
    def __init__(self, reporter: AsyncReporter, call: Any) -> None:
        self.reporter = reporter
        self.call = call
        self.pending: deque[AsyncPendingVerdict] = deque()
        self.ended = False
        self.reader: Optional[asyncio.Task[None]] = None


class AsyncReporter:
    """Reports one session's outcomes over an Observe stream from one event loop; see
    `Reporter`. Use with `async with`, or `await close()` when done."""

    def __init__(self, session: AsyncSession, state: _State, stub: Callable[[], pb_grpc.ReboundStub]) -> None:
        self._session = session
        self._s = state
        self._stub = stub
        self._stream: Optional[_AsyncStream] = None
        self._closed = False
        # Sends are serialised so that the order on the wire is the order of `pending`.
        self._send_lock = asyncio.Lock()

    async def send(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> AsyncPendingVerdict:
        """Sends the outcome of one call of `tool` (built as `Session.report` does)."""
        return await self.send_outcome(build_outcome(tool, error, **fields))

    async def send_outcome(self, outcome: pb.Outcome) -> AsyncPendingVerdict:
        """Sends an outcome built by hand."""
        if self._closed:
            raise RuntimeError("rebound: the AsyncReporter is closed")
        counted = self._s.prepare(outcome)
        deadline = time.monotonic() + self._s.core.timeout
        if not await self._session._declare():
            p = AsyncPendingVerdict(outcome, counted, deadline, None)
            p._set(self._s.fallback(outcome, counted))
            return p
        async with self._send_lock:
            stream = self._stream if self._stream is not None and not self._stream.ended else self._open()
            p = AsyncPendingVerdict(outcome, counted, deadline, stream)
            stream.pending.append(p)
            try:
                await asyncio.wait_for(stream.call.write(outcome), max(deadline - time.monotonic(), 0.0))
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.TimeoutError) as err:
                self._break(stream, err if isinstance(err, grpc.RpcError) else None, type(err).__name__)
        return p

    async def report(self, tool: str, error: Optional[BaseException] = None, **fields: Any) -> Verdict:
        """Sends the outcome of one call of `tool` and waits for its verdict."""
        return await (await self.send(tool, error, **fields)).result()

    async def close(self) -> None:
        """Waits for the verdicts still due (each within its deadline) and closes the stream."""
        self._closed = True
        stream = self._stream
        if stream is None:
            return
        for p in list(stream.pending):
            try:
                await p.result()
            except ValueError:
                pass  # raised again to whoever waits on that outcome
        if not stream.ended:
            try:
                await asyncio.wait_for(stream.call.done_writing(), self._s.core.timeout)
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.TimeoutError):
                pass
        self._break(stream, None, "closed")
        if stream.reader is not None:
            try:
                await stream.reader
            except asyncio.CancelledError:
                pass

    def _open(self) -> _AsyncStream:
        stream = _AsyncStream(self, self._stub().Observe())
        stream.reader = asyncio.get_running_loop().create_task(self._read(stream))
        self._stream = stream
        return stream

    async def _read(self, stream: _AsyncStream) -> None:
        error: Optional[BaseException] = None
        why = "stream ended"
        try:
            while True:
                v: Union[pb.Verdict, object] = await stream.call.read()
                if v is grpc.aio.EOF or stream.ended:
                    break
                if not stream.pending:
                    why = "a verdict for no outcome"
                    break
                p = stream.pending.popleft()
                assert isinstance(v, pb.Verdict)
                p._set(self._s.accept(p.outcome, v))
        except grpc.RpcError as err:
            error = err
        except asyncio.CancelledError:
            pass  # cancelled by _break: the stream is already given up
        self._break(stream, error, why)

    def _break(self, stream: _AsyncStream, error: Optional[BaseException], why: str) -> None:
        """Gives up a stream: its unanswered outcomes go to the fallback policy."""
        if stream.ended:
            return
        stream.ended = True
        pending = list(stream.pending)
        stream.pending.clear()
        if self._stream is stream:
            self._stream = None
        stream.call.cancel()
        if not pending:
            return
        bad_input = _broken(self._s, error, why)
        for p in pending:
            if bad_input is not None:
                p._set(None, bad_input)
            else:
                p._set(self._s.fallback(p.outcome, p._counted))

    async def __aenter__(self) -> AsyncReporter:
        return self

    async def __aexit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()
