"""Builds an `Outcome` from a Python exception: type, message, trace, HTTP status and
headers, error codes, errno, exit code and timeout/cancellation, read from the attributes
that httpx, requests, urllib, aiohttp, grpc, subprocess and the OpenAI/Anthropic SDKs
set, without importing any of them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno as errno_names
import json
import math
import re
import socket
import ssl
import subprocess
import traceback
import urllib.error
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import grpc

from rebound._checks import check_amount, check_id, check_uint32
from rebound.v1 import rebound_pb2 as pb
from rebound.verdict import Kind

__all__ = ["build_outcome", "check_outcome", "exception_type_name", "RETRY_HEADERS"]

RETRY_HEADERS = (
    "retry-after",
    "retry-after-ms",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "grpc-retry-pushback-ms",
    "x-should-retry",
)
"""The response headers the sidecar reads; only these are taken from an exception's response
or the `headers` keyword, so cookies and tokens in other headers never leave the process."""

MAX_MESSAGE_CHARS = 8 * 1024
"""The message is cut to this; the sidecar shows 200 characters of it anyway."""
MAX_DETAIL_CHARS = 64 * 1024
"""The detail (trace, process output) is cut to this, keeping head and tail, to keep reports small."""
MAX_BODY_CHARS = 1024
"""Of a 4xx response's body, what follows the message's first line: it says which argument to fix."""
MAX_JSON_BODY = 64 * 1024
"""The longest response body read for a provider's error code."""
MAX_CHAIN = 16
"""How many linked exceptions (cause, context, wrapped reasons) are searched for signals."""

# Exception class names that mean "did not finish in time", from requests, httpx, urllib3,
# aiohttp, subprocess and the provider SDKs; matched on every class in the MRO.
_TIMEOUT_SUFFIXES = ("Timeout", "TimeoutError", "TimeoutException", "TimeoutExpired", "DeadlineExceeded")
# Packages whose exceptions are the LLM provider failing, not a tool.
_PROVIDER_PACKAGES = frozenset({"openai", "anthropic", "litellm"})
_INT32 = (-(2**31), 2**31 - 1)
# getaddrinfo's failures (socket.gaierror) carry EAI_* numbers, not errnos: errno.errorcode does not
# know them, or names the wrong error (EAI_NONAME is -2 on Linux, 8, ENOEXEC's number, on macOS).
# Node's names for them, which the sidecar's rules know as network failures, as the Go client writes them.
_DNS_CODES: dict[int, str] = {
    getattr(socket, name): code
    for name, code in (("EAI_NONAME", "ENOTFOUND"), ("EAI_NODATA", "ENOTFOUND"), ("EAI_AGAIN", "EAI_AGAIN"))
    if hasattr(socket, name)
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def exception_type_name(exc: BaseException) -> str:
    """The exception's type as `module.QualName` (`requests.exceptions.ReadTimeout`); builtins
    go without their module (`TimeoutError`)."""
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def build_outcome(
    tool: str,
    error: Optional[BaseException] = None,
    *,
    ok: Optional[bool] = None,
    kind: Optional[Kind] = None,
    message: Optional[str] = None,
    exception_type: Optional[str] = None,
    http_status: Optional[int] = None,
    headers: Optional[Mapping[str, str]] = None,
    code: Optional[str] = None,
    grpc_code: Optional[int] = None,
    exit_code: Optional[int] = None,
    detail: Optional[str] = None,
    attempt: int = 0,
    duration: Optional[float] = None,
    cost: float = 0.0,
    call_id: Optional[str] = None,
) -> pb.Outcome:
    """Builds the outcome of one call of `tool`: a success when `error` is None and no failure
    field is given, else a failure read from `error`, with the keyword arguments winning over
    what the exception says. `duration` is in seconds. Raises ValueError naming a bad field."""
    check_id("tool", tool)
    if error is not None and not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception, not {type(error).__name__}")
    failure_given = any(
        v is not None for v in (kind, message, exception_type, http_status, code, grpc_code, detail)
    ) or bool(exit_code)
    if ok is None:
        ok = error is None and not failure_given
    elif ok and (error is not None or failure_given):
        raise ValueError("ok=True contradicts the error or failure fields given")

    # Checked even for a success, which does not send them: a wrong argument is the caller's to know.
    checked_headers = None if headers is None else _check_headers(headers)
    o = pb.Outcome(tool=tool, ok=ok)
    if call_id is not None:
        if call_id:
            check_id("call_id", call_id)
        o.call_id = call_id
    o.attempt = check_uint32("attempt", attempt)
    if duration is not None:
        o.duration_ms = round(check_amount("duration", duration) * 1000)
    o.cost = check_amount("cost", cost)
    if ok:
        return o

    if error is not None:
        _fill_from_exception(o, error)
    if kind is not None:
        o.kind = _check_kind(kind).proto
    if message is not None:
        o.message = _clean(_cut_head(_check_str("message", message), MAX_MESSAGE_CHARS))
    if exception_type is not None:
        o.exception_type = _clean(_check_str("exception_type", exception_type))
    if http_status is not None:
        o.http_status = _check_http_status("http_status", http_status)
    if checked_headers is not None:
        o.headers.clear()
        o.headers.update(dict(_retry_headers(checked_headers)))
    if code is not None:
        o.code = _clean(_check_str("code", code))
    if grpc_code is not None:
        if isinstance(grpc_code, bool) or not isinstance(grpc_code, int) or not 0 <= grpc_code <= 16:
            raise ValueError(f"grpc_code = {grpc_code!r}: a gRPC status code is 0 to 16")
        o.grpc_code = grpc_code
    if exit_code is not None:
        if isinstance(exit_code, bool) or not isinstance(exit_code, int) or not _INT32[0] <= exit_code <= _INT32[1]:
            raise ValueError(f"exit_code = {exit_code!r}: must be a 32-bit int")
        o.exit_code = exit_code
    if detail is not None:
        o.detail = _clean(_cut_middle(_check_str("detail", detail), MAX_DETAIL_CHARS))
    return o


def check_outcome(o: Any) -> pb.Outcome:
    """Returns `o` if it is an Outcome the sidecar would accept (an outcome built by hand goes
    through the same checks as `build_outcome`'s); raises TypeError or ValueError naming the
    field otherwise, so that a bad outcome fails the same way whether or not the sidecar is up."""
    if not isinstance(o, pb.Outcome):
        raise TypeError(f"outcome must be a rebound.v1.rebound_pb2.Outcome, not {type(o).__name__}")
    check_id("tool", o.tool)
    if o.call_id:
        check_id("call_id", o.call_id)
    check_amount("cost", o.cost)
    if o.HasField("grpc_code") and not 0 <= o.grpc_code <= 16:
        raise ValueError(f"grpc_code = {o.grpc_code}: a gRPC status code is 0 to 16")
    _check_http_status("http_status", o.http_status)
    if o.kind not in pb.OutcomeKind.values():
        raise ValueError(f"kind = {o.kind}: not a known OutcomeKind")
    return o


def _fill_from_exception(o: pb.Outcome, exc: BaseException) -> None:
    """Reads what an exception says into `o`: the outermost exception (or the one failure an
    exception group holds alone) names the type and message (with its cause's message when it has
    none of its own); the first exception in its chain that carries a signal provides that signal."""
    shown = _shown(exc)
    o.exception_type = _clean(exception_type_name(shown))
    o.message = _clean(_cut_head(_said(shown), MAX_MESSAGE_CHARS))
    o.detail = _clean(_cut_middle(_detail(shown, exc), MAX_DETAIL_CHARS))
    o.kind = _kind(shown).proto

    status: Optional[int] = None
    headers: Optional[Mapping[str, Any]] = None
    for e in _chain(exc):
        if status is None:
            status, found = _http_signal(e)
            headers = headers or found
        if not o.code:
            o.code = _clean(_code(e))
        if not o.HasField("grpc_code"):
            g = _grpc_code(e)
            if g is not None:
                o.grpc_code = g
        if not o.HasField("exit_code"):
            rc = getattr(e, "returncode", None)
            if isinstance(e, subprocess.CalledProcessError) and isinstance(rc, int) and _INT32[0] <= rc <= _INT32[1]:
                o.exit_code = rc
    if status is not None:
        o.http_status = status
        # A code that only repeats the status (LiteLLM's `.code` is "429") says less than the body's.
        if not o.code or o.code == str(status):
            o.code = _clean(_response_code(exc)) or o.code
        body = _client_error_body(exc) if 400 <= status <= 499 else ""
        if body and body not in o.message:
            # httpx and requests say the status and the URL; the body says which argument to fix
            # (a 422's field and what it allows). Their next lines only point to docs.
            first = o.message.splitlines()[0] if o.message else ""
            o.message = _clean(_cut_head(f"{first}: {body}" if first else body, MAX_MESSAGE_CHARS))
    if headers:
        for name, value in _retry_headers(headers):
            o.headers[name] = value


def _said(exc: BaseException) -> str:
    """The message `exc` says: its own; else its type's name and what the nearest exception linked
    to it says (`raise ToolFailed() from err` says nothing itself, nor does pika's
    AMQPConnectionError around a refused connection); else its type's name."""
    own = str(exc)
    if own:
        return own
    name = type(exc).__name__
    for e in _chain(exc):
        try:
            linked = str(e).strip()
        except Exception:  # a broken __str__ in a cause; the trace in the detail shows the rest
            continue
        if linked:
            return f"{name}: {linked}"
    return name


def _members(e: BaseException) -> tuple[BaseException, ...]:
    """The exceptions `e` holds as a group: its `exceptions`, a list or tuple of them (Python 3.11's
    exception groups, which asyncio.TaskGroup and anyio's task groups raise, and the `exceptiongroup`
    backport's before 3.11; trio's MultiError); else none."""
    held = _attr(e, "exceptions")
    if isinstance(held, (list, tuple)) and held and all(isinstance(x, BaseException) for x in held):
        return tuple(held)
    return ()


def _shown(exc: BaseException) -> BaseException:
    """The exception that says what failed: the one a group holds alone (a task group wraps a
    failed task's exception in one: "unhandled errors in a TaskGroup (1 sub-exception)"), else
    `exc` itself."""
    while len(members := _members(exc)) == 1:
        exc = members[0]
    return exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and those linked to it, nearest first: `__cause__`, `__context__` (unless
    suppressed), urllib3's `.reason`, pika's `.exception` (its connector errors keep the socket's
    error there), exceptions passed as arguments (requests wraps this way) and those an exception
    group holds."""
    seen: set[int] = set()
    queue = [exc]
    while queue and len(seen) < MAX_CHAIN:
        e = queue.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        linked = [e.__cause__]
        if not e.__suppress_context__:
            linked.append(e.__context__)
        linked.append(_attr(e, "reason"))
        linked.append(_attr(e, "exception"))
        linked.extend(a for a in (_attr(e, "args") or ()) if isinstance(a, BaseException))
        linked.extend(_members(e))
        queue.extend(x for x in linked if isinstance(x, BaseException))


def _kind(exc: BaseException) -> Kind:
    """Timeout and cancellation by type, anywhere in the chain; a provider SDK's exception is a
    provider error; anything else is a tool error."""
    for e in _chain(exc):
        if isinstance(e, (asyncio.CancelledError, concurrent.futures.CancelledError, KeyboardInterrupt)):
            return Kind.CANCELLED
        if isinstance(e, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
            return Kind.TIMEOUT
        if _timeout_by_name(type(e)):
            return Kind.TIMEOUT
    if type(exc).__module__.split(".")[0] in _PROVIDER_PACKAGES:
        return Kind.PROVIDER_ERROR
    return Kind.TOOL_ERROR


def _timeout_by_name(cls: type) -> bool:
    """A timeout by its class's name, or a base class's: libraries subclass their timeouts
    (`class ReadTimeout(Timeout)`). A connection error is not one even when it derives from a
    timeout class, as urllib3's NewConnectionError (a refused connection) derives from
    ConnectTimeoutError for historical reasons."""
    if cls.__name__.endswith(_TIMEOUT_SUFFIXES):
        return True
    if "Connection" in cls.__name__:
        return False
    return any(c.__name__.endswith(_TIMEOUT_SUFFIXES) for c in cls.__mro__[1:])


def _http_signal(e: BaseException) -> tuple[Optional[int], Optional[Mapping[str, Any]]]:
    """The HTTP status and response headers an exception carries: `.response` (httpx, requests,
    OpenAI, Anthropic), `.status_code`, aiohttp's `.status`/`.headers`, urllib's HTTPError,
    botocore's parsed response (`ResponseMetadata`: `HTTPStatusCode`, `HTTPHeaders`)."""
    response = _attr(e, "response")
    metadata = response.get("ResponseMetadata") if isinstance(response, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    headers = _mapping(_attr(response, "headers")) or _mapping(metadata.get("HTTPHeaders"))
    for candidate in (
        _attr(response, "status_code"),
        _attr(response, "status"),
        _attr(e, "status_code"),
        _attr(e, "status"),
        e.code if isinstance(e, urllib.error.HTTPError) else None,
        metadata.get("HTTPStatusCode"),
    ):
        if _is_http_status(candidate):
            return candidate, headers or _mapping(_attr(e, "headers"))
    return None, headers


def _body_code(body: Any) -> str:
    """A provider's error code in a parsed JSON body: its `error.code`, else its `error.type`
    (OpenAI's `{"error": {"code": "insufficient_quota"}}`, Anthropic's `{"error": {"type":
    "overloaded_error"}}`); empty for any other body."""
    inner = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(inner, Mapping):
        for key in ("code", "type"):
            value = inner.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def _response_code(exc: BaseException) -> str:
    """The provider's code in the JSON body of the response an exception carries (httpx, requests:
    `.response.text`), which their errors do not carry themselves: OpenAI's `insufficient_quota` on
    a 429 called through httpx is a used-up quota, not a rate limit to retry."""
    for e in _chain(exc):
        response = _attr(e, "response")
        text = _attr(response, "text")
        # A JSON error body is short; a long one is no provider's error object.
        if (isinstance(_attr(response, "status_code"), int) and isinstance(text, str) and len(text) <= MAX_JSON_BODY
                and text.lstrip().startswith("{")):
            try:
                return _body_code(json.loads(text))
            except ValueError:
                return ""
    return ""


def _client_error_body(exc: BaseException) -> str:
    """The body of the 4xx response an exception carries (httpx, requests: `.response.text`),
    folded onto one line and cut; empty when there is none or it cannot be read (a stream)."""
    for e in _chain(exc):
        response = _attr(e, "response")
        status = _attr(response, "status_code")
        if not (isinstance(status, int) and 400 <= status <= 499):
            continue
        text = _attr(response, "text")
        if isinstance(text, str) and text.strip():
            return _cut_head(" ".join(text.split()), MAX_BODY_CHARS)
    return ""


def _attr(obj: Any, name: str) -> Any:
    """`getattr` that treats a failing property as missing: these attributes are only hints.
    (requests' `Response.status` does not exist; some SDKs compute attributes lazily.)"""
    if obj is None:
        return None
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _code(e: BaseException) -> str:
    """An error code string: `.code` when it is a string (OpenAI's `insufficient_quota`) or a
    JSON-RPC error code (the MCP SDK's `MCPError.code`, `-32602`); azure-core's `.error_code`
    (Storage's `BlobNotFound`) or `.error.code` (Resource Manager's `AuthorizationFailed`; the MCP
    SDK's `McpError.error.code` before 2.0); botocore's `ClientError.response["Error"]["Code"]`
    (`ThrottlingException`); the Anthropic body's error type (`overloaded_error`);
    else the errno's name (`ECONNREFUSED`) of an OS error, or Node's name for a failed DNS lookup
    (`ENOTFOUND`, `EAI_AGAIN`)."""
    for code in (_attr(e, "code"), _attr(e, "error_code"), _attr(_attr(e, "error"), "code")):
        if isinstance(code, str) and code.strip():
            return code.strip()
        if isinstance(code, int) and not isinstance(code, bool) and _JSON_RPC_CODES[0] <= code <= _JSON_RPC_CODES[1]:
            return str(code)
    # botocore's ClientError keeps the parsed response: {"Error": {"Code": "ThrottlingException", ...}}.
    response = _attr(e, "response")
    error = response.get("Error") if isinstance(response, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("Code"), str) and error["Code"].strip():
        return str(error["Code"]).strip()
    code = _body_code(_attr(e, "body"))
    if code:
        return code
    err = _attr(e, "errno")
    if not isinstance(err, int) or isinstance(err, bool):
        return ""
    if isinstance(e, socket.gaierror):
        return _DNS_CODES.get(err, "")
    # ssl.SSLError is an OSError whose errno is OpenSSL's error number: SSL_ERROR_SSL (1) read as
    # an errno is EPERM, and the sidecar would escalate a TLS failure as permission_denied.
    if isinstance(e, OSError) and not isinstance(e, ssl.SSLError):
        return errno_names.errorcode.get(err, "")
    return ""


_JSON_RPC_CODES = (-32768, -32000)
"""The error codes JSON-RPC reserves (MCP's among them: -32602 invalid params, -32603 internal)."""


def _grpc_code(e: BaseException) -> Optional[int]:
    """The status code of a failed gRPC call (grpc.RpcError's `code()`)."""
    if isinstance(e, grpc.RpcError):
        code = getattr(e, "code", None)
        if callable(code):
            try:
                value = code()
            except Exception:  # a half-built RpcError; the code is only a hint
                return None
            if isinstance(value, grpc.StatusCode):
                number = value.value[0]
                return number if isinstance(number, int) and 0 <= number <= 16 else None
    return None


def _detail(shown: BaseException, raised: BaseException) -> str:
    """The trace of what was raised (a group's shows its members'), after the output of a
    failed process when the exception shown is one."""
    parts = []
    if isinstance(shown, (subprocess.CalledProcessError, subprocess.TimeoutExpired)):
        for name in ("stderr", "output"):
            text = _text(getattr(shown, name, None))
            if text.strip():
                parts.append(f"{name}:\n{text.rstrip()}\n")
    parts.append("".join(traceback.format_exception(type(raised), raised, raised.__traceback__)))
    return "\n".join(parts)


def _retry_headers(headers: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for name, value in headers.items():
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(name, str) and name.strip().lower() in RETRY_HEADERS:
            text = _clean(_text(value))
            if text:
                # The name is one of RETRY_HEADERS, so plain ASCII.
                yield name.strip().lower(), text


def _mapping(value: Any) -> Optional[Mapping[str, Any]]:
    """A header collection as a mapping: httpx.Headers, requests' CaseInsensitiveDict,
    email.message.Message (urllib) and multidict all have `items()`."""
    if value is None or not callable(getattr(value, "items", None)):
        return None
    try:
        return dict(value.items())
    except Exception:  # headers are a hint; an odd collection is not worth failing the report
        return None


def _is_http_status(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599


def _check_http_status(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (value == 0 or 100 <= value <= 599):
        raise ValueError(f"{field} = {value!r}: an HTTP status is 100 to 599 (0 for none)")
    return int(value)


def _check_kind(value: Any) -> Kind:
    """The `kind` keyword: a `Kind` (or its int value)."""
    accepted = ", ".join(f"Kind.{k.name}" for k in Kind if k is not Kind.UNSPECIFIED)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"kind must be a rebound.Kind, not {type(value).__name__} {value!r}: one of {accepted}")
    try:
        return Kind(value)
    except ValueError:
        raise ValueError(f"kind = {value!r}: not a rebound.Kind; one of {accepted}") from None


def _check_headers(headers: Any) -> dict[str, str]:
    """Headers given by the caller: a mapping (anything with `items()`) of str to str."""
    if not callable(getattr(headers, "items", None)):
        raise TypeError(f"headers must be a mapping of str to str, not {type(headers).__name__}")
    return {_check_str("headers key", k): _check_str(f"headers[{k!r}]", v) for k, v in headers.items()}


def _check_str(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, float) and math.isnan(value):
        return ""
    return str(value)


def _clean(text: str) -> str:
    """`text` with each lone surrogate written U+FFFD, as Go's strings.ToValidUTF8 and JavaScript's
    toWellFormed write invalid text. Process output decoded with errors="surrogateescape" and file
    names from os.fsdecode carry them, and protobuf refuses any text that is not valid UTF-8, so one
    stray byte in a tool's output would otherwise fail the report instead of being judged."""
    return _SURROGATE.sub("\ufffd", text)


def _cut_head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _cut_middle(text: str, limit: int) -> str:
    """Keeps the head and the tail, where a trace names its exception and innermost frames."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n… {len(text) - limit} characters elided …\n{text[-tail:]}"
