"""The connection to one Rebound sidecar: `Client` (blocking) and `AsyncClient` (asyncio).

Both fail open: every call to the sidecar has a short deadline (250 ms by default), and when
the sidecar cannot be reached or answers too late the session's local fallback policy decides
instead, and a warning is logged once (logger "rebound"). The gRPC channel keeps reconnecting in
the background once a connection attempt has failed (backoff capped at 1 s), and a channel that
went idle reconnects on the next call, so the sidecar is used again as soon as it is back,
without a new client."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional

import grpc
import grpc.aio

from rebound._checks import (
    MAX_LABEL_VALUE_BYTES,
    MAX_LABELS,
    MAX_TOOLS,
    check_amount,
    check_id,
    check_uint32,
)
from rebound.fallback import FallbackPolicy
from rebound.v1 import rebound_pb2 as pb
from rebound.v1 import rebound_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from rebound.session import AsyncSession, Session

__all__ = ["Client", "AsyncClient", "DEFAULT_ADDRESS", "DEFAULT_TIMEOUT", "DEFAULT_MAX_ATTEMPTS"]

DEFAULT_ADDRESS = "127.0.0.1:50051"
"""Where the sidecar listens unless told otherwise (or $REBOUND_ADDR says)."""
DEFAULT_TIMEOUT = 0.25
"""Seconds each call to the sidecar may take before the local fallback policy decides."""
DEFAULT_MAX_ATTEMPTS = 10
"""The most calls `Session.run` makes for one tool call: a guard against a policy that would
retry for ever."""

log = logging.getLogger("rebound")

# The sidecar is local: when it comes back, the agent should use it within about a second,
# not after gRPC's default reconnect backoff (up to 120 s). gRPC core retries a failed
# connection on its own, in the background, with this backoff. gRPC core also sends every
# call through the proxy that $https_proxy or $http_proxy names, set for the agent's own
# HTTP calls; a proxy must never sit between an agent and its loopback sidecar (a proxy that
# cannot reach it would turn every verdict into a fallback).
_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_http_proxy", 0),
)


def _channel_args(target: str, extra: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The channel arguments for a target: fast reconnects, and for a Unix socket the
    `localhost` authority. gRPC core sends the socket's path as the HTTP/2 :authority, which the
    sidecar's HTTP/2 stack (h2) rejects as malformed (RST_STREAM, PROTOCOL_ERROR), so every call
    would fail; grpc-go and Kubernetes use `localhost` for Unix sockets, and so does this client.
    The caller's `extra` options come last and win."""
    options = list(_CHANNEL_OPTIONS)
    if target.startswith("unix:"):
        options.append(("grpc.default_authority", "localhost"))
    options.extend(extra)
    return options


def grpc_target(address: str) -> str:
    """Checks a sidecar address ("host:port" or "unix:/path/to.sock") and returns the gRPC target."""
    if not isinstance(address, str):
        raise TypeError(f"address must be a str, not {type(address).__name__}")
    if address.startswith("unix:"):
        if not address[len("unix:"):].strip("/"):
            raise ValueError(f"address {address!r}: a Unix socket needs a path (unix:/path/to.sock)")
        return address
    scheme, sep, rest = address.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        # gRPC would take "http" for a host name and fail every call, each one falling back.
        raise ValueError(
            f"address {address!r}: not a URL; want host:port or unix:/path/to.sock (did you mean {rest.split('/')[0]!r}?)"
        )
    host, sep, port = address.rpartition(":")
    if not sep or not host or host in ("[]",):
        raise ValueError(f"address {address!r}: want host:port or unix:/path/to.sock")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"address {address!r}: port {port!r} is not 1 to 65535")
    return address


class _Core:
    """What the blocking and the asyncio client share: settings, the fallback counter, and the
    bookkeeping that turns RPC failures into one warning."""

    def __init__(
        self,
        address: Optional[str],
        timeout: float,
        fallback_policy: Optional[FallbackPolicy],
        max_attempts: int,
        clock: Callable[[], float],
        rng: Callable[[], float],
    ) -> None:
        # An empty $REBOUND_ADDR counts as unset, as in the Go and TypeScript clients.
        self.address = address if address is not None else os.environ.get("REBOUND_ADDR", "").strip() or DEFAULT_ADDRESS
        self.target = grpc_target(self.address)
        if check_amount("timeout", timeout) <= 0:
            raise ValueError(f"timeout = {timeout}: must be a positive number of seconds")
        self.timeout = float(timeout)
        if fallback_policy is not None and not isinstance(fallback_policy, FallbackPolicy):
            raise TypeError(f"fallback_policy must be a FallbackPolicy, not {type(fallback_policy).__name__}")
        self.policy = fallback_policy or FallbackPolicy()
        if check_uint32("max_attempts", max_attempts) < 1:
            raise ValueError(f"max_attempts = {max_attempts}: must be at least 1")
        self.max_attempts = max_attempts
        self.clock = clock
        self.random = rng
        self._lock = threading.Lock()
        self._fallbacks = 0
        self._degraded = False
        self._warned = False

    @property
    def fallback_count(self) -> int:
        """How many answers the local fallback policy gave."""
        with self._lock:
            return self._fallbacks

    def fell_back(self) -> None:
        """Counts one decision made locally because the sidecar did not answer."""
        with self._lock:
            self._fallbacks += 1

    def failed(self, op: str, err: grpc.RpcError) -> None:
        """Sorts an RPC error: a bad argument is the caller's to fix and raises ValueError;
        anything else (unreachable, too slow, a sidecar fault) is logged and left to the fallback."""
        code = status_code(err)
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            raise ValueError(f"rebound {op}: {details(err)}") from None
        self.unreachable(op, code.name if code is not None else type(err).__name__)

    def unreachable(self, op: str, why: str) -> None:
        """Notes that the sidecar did not answer `op`; warns the first time."""
        with self._lock:
            newly = not self._degraded
            self._degraded = True
            first = not self._warned
            self._warned = True
        if not newly:
            return
        if first:
            # Once per client: an agent reporting hundreds of calls must not flood its log.
            log.warning(
                "rebound: sidecar at %s did not answer %s (%s); the local fallback policy decides "
                "until it does, reconnecting in the background",
                self.address, op, why,
            )
        else:
            log.debug("rebound: sidecar at %s did not answer %s (%s) again", self.address, op, why)

    def answered(self) -> None:
        """Notes that the sidecar answered, ending a fallback period."""
        with self._lock:
            was = self._degraded
            self._degraded = False
        if was:
            log.info("rebound: sidecar at %s answers again", self.address)


def status_code(err: grpc.RpcError) -> Optional[grpc.StatusCode]:
    """The status code of a failed call, None when it has none."""
    code = getattr(err, "code", None)
    if callable(code):
        try:
            value = code()
        except Exception:  # a half-built error: treat it as unreachable
            return None
        return value if isinstance(value, grpc.StatusCode) else None
    return None


def details(err: grpc.RpcError) -> str:
    """The message of a failed call."""
    get = getattr(err, "details", None)
    text = get() if callable(get) else None
    return text if isinstance(text, str) else str(err)


def declaration(
    session_id: str,
    tools: Optional[Iterable[str]],
    step_limit: int,
    cost_limit: float,
    error_limit: int,
    profile: str,
    labels: Optional[Mapping[str, str]],
) -> Optional[pb.StartSessionRequest]:
    """The StartSession request for a session, checked; None when there is nothing to declare
    (the sidecar creates a session on first use)."""
    check_id("session_id", session_id)
    req = pb.StartSessionRequest(session_id=session_id)
    if tools is not None:
        if isinstance(tools, str):
            raise TypeError("tools must be a list of names, not a str")
        names = list(tools)
        if len(names) > MAX_TOOLS:
            raise ValueError(f"tools: {len(names)} tools: at most {MAX_TOOLS}")
        for i, name in enumerate(names):
            check_id(f"tools[{i}]", name)
        req.tools.extend(names)
    req.step_limit = check_uint32("step_limit", step_limit)
    req.cost_limit = check_amount("cost_limit", cost_limit)
    req.error_limit = check_uint32("error_limit", error_limit)
    if profile:
        req.profile = check_id("profile", profile)
    if labels is not None:
        if not isinstance(labels, Mapping):
            raise TypeError(f"labels must be a mapping of str to str, not {type(labels).__name__}")
        if len(labels) > MAX_LABELS:
            raise ValueError(f"labels: {len(labels)} labels: at most {MAX_LABELS}")
        for key, value in labels.items():
            check_id("labels key", key)
            if not isinstance(value, str) or len(value.encode("utf-8")) > MAX_LABEL_VALUE_BYTES:
                raise ValueError(f"labels[{key!r}]: the value must be a str of at most {MAX_LABEL_VALUE_BYTES} bytes")
            req.labels[key] = value
    if req == pb.StartSessionRequest(session_id=session_id):
        return None
    return req


class Client:
    """A blocking connection to one Rebound sidecar; safe to share between threads.

    `address` is "host:port" or "unix:/path/to.sock" (default $REBOUND_ADDR, else
    127.0.0.1:50051). The constructor does not wait for the sidecar: it may start later or be
    down, and the sessions fall back locally until it answers. Use as a context manager, or
    call `close()`."""

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        fallback_policy: Optional[FallbackPolicy] = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        channel_options: Sequence[tuple[str, Any]] = (),
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._core = _Core(address, timeout, fallback_policy, max_attempts, clock, rng)
        self._channel = grpc.insecure_channel(self._core.target, options=_channel_args(self._core.target, channel_options))
        self._stub = pb_grpc.ReboundStub(self._channel)

    @property
    def address(self) -> str:
        """The sidecar's address."""
        return self._core.address

    @property
    def fallback_count(self) -> int:
        """How many calls the local fallback policy answered because the sidecar did not."""
        return self._core.fallback_count

    def session(
        self,
        session_id: str,
        *,
        tools: Optional[Iterable[str]] = None,
        step_limit: int = 0,
        cost_limit: float = 0.0,
        error_limit: int = 0,
        profile: str = "",
        labels: Optional[Mapping[str, str]] = None,
    ) -> Session:
        """The session named `session_id` (one agent run). The declaration (the agent's tools,
        limits, profile, labels; 0 keeps the sidecar's default) goes to the sidecar on entering
        the `with` block, or before the first report. Exiting the block ends the session."""
        from rebound.session import Session

        req = declaration(session_id, tools, step_limit, cost_limit, error_limit, profile, labels)
        return Session(self._core, self._stub, session_id, req)

    def wait_for_ready(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the connection to the sidecar; True once it is up."""
        future = grpc.channel_ready_future(self._channel)
        try:
            future.result(timeout=check_amount("timeout", timeout))
            return True
        except grpc.FutureTimeoutError:
            future.cancel()
            return False

    def close(self) -> None:
        """Closes the connection; this client's sessions must not be used afterwards."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


class AsyncClient:
    """An asyncio connection to one Rebound sidecar, for use from one event loop.

    Same arguments as `Client`. The channel is opened on first use inside the running loop;
    use as an async context manager, or `await close()`."""

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        fallback_policy: Optional[FallbackPolicy] = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        channel_options: Sequence[tuple[str, Any]] = (),
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._core = _Core(address, timeout, fallback_policy, max_attempts, clock, rng)
        self._options = _channel_args(self._core.target, channel_options)
        self._channel: Optional[grpc.aio.Channel] = None
        self._stub: Optional[pb_grpc.ReboundStub] = None
        self._closed = False

    @property
    def address(self) -> str:
        """The sidecar's address."""
        return self._core.address

    @property
    def fallback_count(self) -> int:
        """How many calls the local fallback policy answered because the sidecar did not."""
        return self._core.fallback_count

    def session(
        self,
        session_id: str,
        *,
        tools: Optional[Iterable[str]] = None,
        step_limit: int = 0,
        cost_limit: float = 0.0,
        error_limit: int = 0,
        profile: str = "",
        labels: Optional[Mapping[str, str]] = None,
    ) -> AsyncSession:
        """The session named `session_id`; see `Client.session`. Use with `async with`."""
        from rebound.session import AsyncSession

        req = declaration(session_id, tools, step_limit, cost_limit, error_limit, profile, labels)
        return AsyncSession(self._core, self.stub, session_id, req)

    def stub(self) -> pb_grpc.ReboundStub:
        """The generated stub on this client's channel, opening the channel on first use."""
        if self._closed:
            raise RuntimeError("rebound: the AsyncClient is closed")
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(self._core.target, options=self._options)
            self._stub = pb_grpc.ReboundStub(self._channel)
            # Start connecting now, so that the first report does not wait for the handshake.
            self._channel.get_state(try_to_connect=True)
        return self._stub

    async def wait_for_ready(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the connection to the sidecar; True once it is up."""
        self.stub()
        assert self._channel is not None
        try:
            await asyncio.wait_for(self._channel.channel_ready(), check_amount("timeout", timeout))
            return True
        except asyncio.TimeoutError:
            return False

    async def close(self) -> None:
        """Closes the connection; this client's sessions must not be used afterwards."""
        self._closed = True
        if self._channel is not None:
            await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        self.stub()
        return self

    async def __aexit__(
        self, et: Optional[type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()
