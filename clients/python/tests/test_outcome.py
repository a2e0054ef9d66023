"""Unit tests of `build_outcome`: what an outcome says for real exceptions raised by httpx,
requests, urllib, subprocess, asyncio, grpc and pika (each produced here by the library itself,
against loopback servers or real processes), and for the shape of the LLM provider SDKs'."""

from __future__ import annotations

import asyncio
import enum
import errno
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

import grpc
import httpx
import pika
import pytest
import requests

import rebound
from rebound import Action, FallbackPolicy, Kind, build_outcome, exception_type_name
from rebound.fallback import classify_coarse
from rebound.outcome import MAX_DETAIL_CHARS, MAX_MESSAGE_CHARS, RETRY_HEADERS, check_outcome
from rebound.v1 import rebound_pb2 as pb
from rebound.verdict import Category
from tests.conftest import unique
from tests.servers import Reply, http_server, plain_server, refused_address, silent_server
from tests.sidecar import REPO

RATE_LIMITED = Reply(
    429,
    '{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}',
    # Set-Cookie and the request id must not travel: only the Retry-After family does.
    {"Retry-After": "7", "retry-after-ms": "7000", "Set-Cookie": "session=secret", "x-request-id": "req_1"},
)


def test_the_headers_kept_are_the_ones_the_sidecar_reads() -> None:
    # src/backoff.rs's PROVIDER_HEADERS: a header added there and not here would never reach it.
    source = (REPO / "src" / "backoff.rs").read_text(encoding="utf-8")
    listed = source.split("pub const PROVIDER_HEADERS", 1)[1].split("];", 1)[0]
    read = {line.strip().strip('",') for line in listed.splitlines()[1:] if line.strip()}
    assert len(read) >= 10, listed
    assert set(RETRY_HEADERS) == read


def raised(fn: Callable[[], Any]) -> BaseException:
    """The exception `fn` raises; fails the test if it raises none."""
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the point is to capture whatever it is
        return exc
    pytest.fail(f"{fn} raised nothing")


# Exceptions raised by httpx (0.28.1) itself.


def test_httpx_status_error_carries_status_and_only_retry_headers() -> None:
    with http_server([RATE_LIMITED]) as url:
        exc = raised(lambda: httpx.get(url + "/v1/chat").raise_for_status())
    assert isinstance(exc, httpx.HTTPStatusError)
    o = build_outcome("llm", exc)
    assert not o.ok
    assert o.exception_type == "httpx.HTTPStatusError"
    assert o.http_status == 429
    assert dict(o.headers) == {"retry-after": "7", "retry-after-ms": "7000"}
    assert "429 Too Many Requests" in o.message
    assert Kind(o.kind) is Kind.TOOL_ERROR
    assert "HTTPStatusError" in o.detail  # the trace


# FastAPI 0.115's 422 body (pydantic 2) for a query parameter past its bound.
VALIDATION_BODY = (
    '{"detail":[{"type":"less_than_equal","loc":["query","limit"],'
    '"msg":"Input should be less than or equal to 100","input":"500","ctx":{"le":100}}]}'
)


def test_a_client_error_s_body_follows_the_status_line_and_says_what_to_fix() -> None:
    with http_server([Reply(422, VALIDATION_BODY), Reply(422, VALIDATION_BODY)]) as url:
        httpx_exc = raised(lambda: httpx.get(url + "/search?limit=500").raise_for_status())
        requests_exc = raised(lambda: requests.get(url + "/search?limit=500", timeout=5).raise_for_status())
    for exc in (httpx_exc, requests_exc):
        o = build_outcome("search", exc)
        assert o.http_status == 422
        assert "422" in o.message and "limit=500" in o.message, o.message
        assert o.message.endswith(": " + VALIDATION_BODY), o.message
        assert "developer.mozilla.org" not in o.message  # httpx's second line only points to docs


# OpenAI's answer to a used-up quota (its API's body, as the openai SDK's own tests quote it).
QUOTA_BODY = (
    '{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",'
    '"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)


def test_a_json_body_s_provider_code_is_the_code() -> None:
    # httpx and requests carry no code: a used-up quota behind a 429 would go as a rate limit, which
    # the fallback (it reads no words) retries. A 5xx body's error type counts too; no JSON, no code.
    overloaded = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    replies = [Reply(429, QUOTA_BODY), Reply(429, QUOTA_BODY), Reply(529, overloaded), Reply(502, "<html>Bad Gateway</html>")]
    with http_server(replies) as url:
        httpx_exc = raised(lambda: httpx.get(url + "/v1/chat/completions").raise_for_status())
        requests_exc = raised(lambda: requests.get(url + "/v1/chat/completions", timeout=5).raise_for_status())
        overloaded_exc = raised(lambda: httpx.get(url + "/v1/messages").raise_for_status())
        gateway_exc = raised(lambda: httpx.get(url + "/search").raise_for_status())
    for exc in (httpx_exc, requests_exc):
        o = build_outcome("llm", exc)
        assert (o.http_status, o.code) == (429, "insufficient_quota"), o
        assert classify_coarse(o)[0] is Category.QUOTA_EXCEEDED
    assert build_outcome("llm", overloaded_exc).code == "overloaded_error"
    assert build_outcome("search", gateway_exc).code == ""


class LiteLLMRateLimitError(Exception):
    """litellm.exceptions.RateLimitError as LiteLLM 1.110 raises it for OpenAI's used-up quota (its
    attributes as a run against a loopback server showed them): the code is the status, written out,
    and the provider's body is on `.response`, an httpx.Response."""

    def __init__(self, message: str, response: httpx.Response) -> None:
        super().__init__(message)
        self.status_code, self.code, self.response = 429, "429", response


def test_a_code_that_only_repeats_the_status_gives_way_to_the_body_s() -> None:
    # LiteLLM's code "429" sent the used-up quota as a rate limit, retried by the fallback.
    with http_server([Reply(429, QUOTA_BODY), Reply(429, '{"error":{"message":"slow down"}}')]) as url:
        quota = httpx.get(url + "/v1/chat/completions")
        plain = httpx.get(url + "/v1/chat/completions")
    message = "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota"
    o = build_outcome("llm", LiteLLMRateLimitError(message, quota))
    assert (o.http_status, o.code) == (429, "insufficient_quota"), o
    assert classify_coarse(o)[0] is Category.QUOTA_EXCEEDED
    # A body with no code leaves the one the exception had.
    assert build_outcome("llm", LiteLLMRateLimitError("litellm.RateLimitError: slow down", plain)).code == "429"


def test_a_server_error_s_body_is_not_added() -> None:
    # A 5xx body is most often an error page, and says nothing the agent can change.
    with http_server([Reply(502, "<html><body>Bad Gateway</body></html>")]) as url:
        exc = raised(lambda: httpx.get(url + "/search").raise_for_status())
    o = build_outcome("search", exc)
    assert o.http_status == 502 and "<html>" not in o.message


def test_httpx_connect_error_names_the_errno() -> None:
    host, port = refused_address()
    exc = raised(lambda: httpx.get(f"http://{host}:{port}/"))
    assert isinstance(exc, httpx.ConnectError)
    o = build_outcome("fetch", exc)
    assert o.exception_type == "httpx.ConnectError"
    assert o.code == "ECONNREFUSED"  # from the OSError at the end of httpx's chain
    assert o.http_status == 0
    assert classify_coarse(o)[0] is Category.NETWORK


def test_httpx_read_timeout_is_a_timeout() -> None:
    with silent_server() as url:
        exc = raised(lambda: httpx.get(url, timeout=0.2))
    assert isinstance(exc, httpx.ReadTimeout)
    o = build_outcome("fetch", exc)
    assert Kind(o.kind) is Kind.TIMEOUT
    assert o.exception_type == "httpx.ReadTimeout"


# Exceptions raised by requests (2.32.5) itself.


def test_requests_http_error_carries_status_and_retry_after() -> None:
    with http_server([Reply(503, "upstream overloaded", {"Retry-After": "3"})]) as url:
        exc = raised(lambda: requests.get(url + "/search", timeout=5).raise_for_status())
    assert isinstance(exc, requests.HTTPError)
    o = build_outcome("search", exc)
    assert o.exception_type == "requests.exceptions.HTTPError"
    assert o.http_status == 503
    assert dict(o.headers) == {"retry-after": "3"}
    assert "503 Server Error" in o.message


def test_requests_connection_error_names_the_errno_through_urllib3() -> None:
    host, port = refused_address()
    exc = raised(lambda: requests.get(f"http://{host}:{port}/", timeout=5))
    assert isinstance(exc, requests.ConnectionError)
    o = build_outcome("fetch", exc)
    assert o.exception_type == "requests.exceptions.ConnectionError"
    # requests wraps urllib3's MaxRetryError, whose reason wraps the refused connect.
    assert o.code == "ECONNREFUSED"
    assert classify_coarse(o) == (Category.NETWORK, "fallback.code_network")


def test_requests_read_timeout_is_a_timeout() -> None:
    with silent_server() as url:
        exc = raised(lambda: requests.get(url, timeout=0.2))
    assert isinstance(exc, requests.ReadTimeout)
    o = build_outcome("fetch", exc)
    assert Kind(o.kind) is Kind.TIMEOUT
    assert o.exception_type == "requests.exceptions.ReadTimeout"


# The standard library.


def test_urllib_http_error_carries_status_and_headers() -> None:
    with http_server([Reply(429, "slow down", {"Retry-After": "1"})]) as url:
        exc = raised(lambda: urllib.request.urlopen(url, timeout=5))
    assert isinstance(exc, urllib.error.HTTPError)
    o = build_outcome("search", exc)
    assert o.exception_type == "urllib.error.HTTPError"
    assert o.http_status == 429
    assert dict(o.headers) == {"retry-after": "1"}
    exc.close()


def test_failed_command_carries_exit_code_and_stderr() -> None:
    exc = raised(
        lambda: subprocess.run(
            [sys.executable, "-c", "import sys; sys.stderr.write('disk quota exceeded\\n'); sys.exit(3)"],
            check=True,
            capture_output=True,
        )
    )
    assert isinstance(exc, subprocess.CalledProcessError)
    o = build_outcome("shell", exc)
    assert o.HasField("exit_code") and o.exit_code == 3
    assert o.exception_type == "subprocess.CalledProcessError"
    assert o.detail.startswith("stderr:\ndisk quota exceeded")


def test_command_timeout_is_a_timeout() -> None:
    exc = raised(lambda: subprocess.run(["sleep", "5"], timeout=0.1))
    assert isinstance(exc, subprocess.TimeoutExpired)
    o = build_outcome("shell", exc)
    assert Kind(o.kind) is Kind.TIMEOUT
    assert not o.HasField("exit_code")


def test_builtin_timeout_and_cancellation() -> None:
    assert Kind(build_outcome("t", TimeoutError("timed out")).kind) is Kind.TIMEOUT
    assert Kind(build_outcome("t", KeyboardInterrupt()).kind) is Kind.CANCELLED

    async def cancelled() -> BaseException:
        task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc
        pytest.fail("the task was not cancelled")

    o = build_outcome("t", asyncio.run(cancelled()))
    assert Kind(o.kind) is Kind.CANCELLED
    assert o.exception_type == "asyncio.exceptions.CancelledError"


def test_connection_refused_oserror() -> None:
    import socket

    host, port = refused_address()
    exc = raised(lambda: socket.create_connection((host, port), timeout=1))
    o = build_outcome("db", exc)
    assert o.exception_type == "ConnectionRefusedError"
    assert o.code == "ECONNREFUSED"


def tls_error() -> ssl.SSLError:
    """A real ssl.SSLError: a TLS handshake with a listener that answers in plain text."""
    with plain_server() as (host, port), socket.create_connection((host, port), timeout=5) as raw:
        exc = raised(lambda: ssl.create_default_context().wrap_socket(raw, server_hostname="localhost"))
    assert isinstance(exc, ssl.SSLError), repr(exc)
    return exc


def test_a_tls_failure_is_not_read_as_an_errno(client: rebound.Client, session_id: str) -> None:
    exc = tls_error()
    # An OSError whose errno is OpenSSL's SSL_ERROR_SSL, which is also EPERM's number.
    assert exc.errno == ssl.SSL_ERROR_SSL == errno.EPERM
    assert build_outcome("fetch", exc).code == ""
    # At the end of httpx's chain, and of requests'.
    with plain_server() as (host, port):
        via_httpx = raised(lambda: httpx.get(f"https://{host}:{port}/", timeout=5))
        via_requests = raised(lambda: requests.get(f"https://{host}:{port}/", timeout=5))
    assert isinstance(via_httpx, httpx.ConnectError) and isinstance(via_requests, requests.exceptions.SSLError)
    for wrapped in (via_httpx, via_requests):
        o = build_outcome("fetch", wrapped)
        assert "WRONG_VERSION_NUMBER" in o.message and o.code == ""
    # The sidecar read EPERM as a permission the agent lacks, and escalated to a human.
    with client.session(session_id) as session:
        v = session.report(unique("fetch"), error=via_httpx)
    assert not v.fallback and v.category is not Category.PERMISSION_DENIED and v.action is not Action.ESCALATE


def test_a_failed_dns_lookup_is_named_as_node_and_the_go_client_name_it() -> None:
    # The reserved .invalid TLD never resolves (RFC 2606): NXDOMAIN, or EAI_AGAIN without a resolver.
    exc = raised(lambda: socket.getaddrinfo("rebound-test.invalid", 443))
    assert isinstance(exc, socket.gaierror)
    names = {socket.EAI_NONAME: "ENOTFOUND", socket.EAI_AGAIN: "EAI_AGAIN"}
    if hasattr(socket, "EAI_NODATA"):
        names[socket.EAI_NODATA] = "ENOTFOUND"
    assert exc.errno in names, repr(exc)
    o = build_outcome("fetch", exc)
    assert o.code == names[exc.errno]
    # A network failure, retried by the fallback as by the sidecar, not sent back to the LLM.
    assert classify_coarse(o) == (Category.NETWORK, "fallback.code_network")
    assert Action.of(FallbackPolicy().decide(o, 1, now=0.0, random=0.5).action) is Action.RETRY
    # At the end of httpx's chain.
    assert build_outcome("fetch", raised(lambda: httpx.get("http://rebound-test.invalid/", timeout=5))).code == o.code


def test_grpc_error_carries_its_status_code() -> None:
    host, port = refused_address()
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        call = channel.unary_unary("/rebound.v1.Rebound/Report")
        exc = raised(lambda: call(b"", timeout=2))
    assert isinstance(exc, grpc.RpcError)
    o = build_outcome("inventory", exc)
    assert o.HasField("grpc_code") and o.grpc_code == grpc.StatusCode.UNAVAILABLE.value[0]
    assert classify_coarse(o)[0] is Category.UNAVAILABLE


# The LLM provider SDKs, by the attributes they set (no dependency on them).


class RateLimitError(Exception):
    """The shape of openai.RateLimitError (openai-python, src/openai/_exceptions.py):
    APIStatusError(message, *, response: httpx.Response, body) sets .response, .status_code
    and .request_id, and APIError sets .code from the error body. Declared in module "openai"
    so that the outcome sees a provider error, as it would for the real SDK."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code
        self.request_id = response.headers.get("x-request-id")
        self.body = body
        self.code = body.get("code")


RateLimitError.__module__ = "openai"


class OverloadedError(Exception):
    """The shape of anthropic.APIStatusError for a 529 (anthropic-sdk-python): .response,
    .status_code, and the full JSON body, whose error.type names the failure."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code
        self.body = body


OverloadedError.__module__ = "anthropic"


def test_openai_shaped_error() -> None:
    with http_server([RATE_LIMITED]) as url:
        response = httpx.get(url + "/v1/chat/completions")
    body = {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}
    o = build_outcome("llm", RateLimitError("Error code: 429", response=response, body=body))
    assert Kind(o.kind) is Kind.PROVIDER_ERROR
    assert o.exception_type == "openai.RateLimitError"
    assert o.http_status == 429
    assert o.code == "insufficient_quota"
    assert dict(o.headers) == {"retry-after": "7", "retry-after-ms": "7000"}


def test_anthropic_shaped_error() -> None:
    with http_server([Reply(529, '{"type":"error"}', {"retry-after": "2"})]) as url:
        response = httpx.get(url + "/v1/messages")
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    o = build_outcome("llm", OverloadedError("Error code: 529", response=response, body=body))
    assert Kind(o.kind) is Kind.PROVIDER_ERROR
    assert o.http_status == 529
    assert o.code == "overloaded_error"
    assert dict(o.headers) == {"retry-after": "2"}


class ErrorData:
    """The shape of the MCP SDK's ErrorData (mcp_types): a JSON-RPC error's code and message."""

    def __init__(self, code: int, message: str) -> None:
        self.code, self.message = code, message


class MCPError(Exception):
    """The shape of the MCP SDK's MCPError (mcp 2.x, mcp/shared/exceptions.py): `.error`, an
    ErrorData, and `.code` read from it; `str()` is the message alone."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message, None)
        self.error = ErrorData(code, message)

    @property
    def code(self) -> int:
        return self.error.code

    def __str__(self) -> str:
        return self.error.message


class McpError(Exception):
    """The shape of the MCP SDK's McpError before 2.0: `.error` alone, an ErrorData."""

    def __init__(self, error: ErrorData) -> None:
        super().__init__(error.message)
        self.error = error


class ODataV4Format:
    """The shape of azure-core's ODataV4Format, the parsed error body of `HttpResponseError.error`."""

    def __init__(self, code: str, message: str) -> None:
        self.code, self.message = code, message


class HttpResponseError(Exception):
    """The shape of azure-core's HttpResponseError (azure/core/exceptions.py): `.status_code`,
    `.error` parsed from Resource Manager's JSON body, and, from azure-storage's error handler,
    `.error_code` (a StorageErrorCode, a str enum)."""

    def __init__(self, message: str, status_code: int, error: Optional[ODataV4Format] = None) -> None:
        super().__init__(message)
        self.status_code, self.error = status_code, error


HttpResponseError.__module__ = "azure.core.exceptions"


class StorageErrorCode(str, enum.Enum):
    """The shape of azure-storage-blob's StorageErrorCode."""

    BLOB_NOT_FOUND = "BlobNotFound"


def test_mcp_and_azure_error_codes() -> None:
    # An MCP server's answer to a resource it does not have (mcp 2.3 against its own in-process
    # server): the JSON-RPC code is a number, sent as text.
    o = build_outcome("notes", MCPError(-32602, "Unknown resource: file:///nope.txt"))
    assert (o.code, o.message) == ("-32602", "Unknown resource: file:///nope.txt")
    assert build_outcome("notes", McpError(ErrorData(-32001, "Request timed out"))).code == "-32001"
    # A number outside JSON-RPC's reserved codes is no error code (urllib's HTTPError.code is a status).
    assert build_outcome("t", MCPError(-31999, "x")).code == ""
    assert build_outcome("t", MCPError(404, "x")).code == ""
    # Resource Manager's code in its parsed body; Storage's from its error handler.
    arm = HttpResponseError(
        "(AuthorizationFailed) The client 'x' does not have authorization to perform action 'y'.\nCode: AuthorizationFailed",
        403,
        ODataV4Format("AuthorizationFailed", "The client 'x' does not have authorization to perform action 'y'."),
    )
    o = build_outcome("azure", arm)
    assert (o.code, o.http_status) == ("AuthorizationFailed", 403)
    blob = HttpResponseError("The specified blob does not exist.\nErrorCode:BlobNotFound", 404)
    blob.error_code = StorageErrorCode.BLOB_NOT_FOUND  # type: ignore[attr-defined]
    assert build_outcome("azure", blob).code == "BlobNotFound"


class ClientError(Exception):
    """The shape of botocore's ClientError (botocore/exceptions.py): `.response`, the parsed error
    response, and the message "An error occurred (<code>) when calling the <operation> operation: ..."."""

    def __init__(self, error_response: dict[str, Any], operation_name: str) -> None:
        error = error_response["Error"]
        super().__init__(
            f"An error occurred ({error['Code']}) when calling the {operation_name} operation: {error['Message']}"
        )
        self.response, self.operation_name = error_response, operation_name


ClientError.__module__ = "botocore.exceptions"


def test_botocore_error_code_and_status() -> None:
    # STS's answer to an expired session token, as boto3 1.44.8 raised it against the loopback server
    # of tests/data/classification/real/python_cases.py.
    response = {
        "Error": {"Type": "Sender", "Code": "ExpiredToken", "Message": "The security token included in the request is expired"},
        "ResponseMetadata": {"HTTPStatusCode": 403, "HTTPHeaders": {"content-type": "text/xml", "retry-after": "3"}},
    }
    o = build_outcome("aws", ClientError(response, "GetCallerIdentity"))
    assert (o.exception_type, o.code, o.http_status) == ("botocore.exceptions.ClientError", "ExpiredToken", 403)
    assert dict(o.headers) == {"retry-after": "3"}
    assert classify_coarse(o)[0] is Category.AUTH
    # requests' HTTPError has a `.response` too, a Response, not a mapping: no code from it.
    assert build_outcome("t", requests.HTTPError("404 Client Error", response=requests.Response())).code == ""


# Chains, overrides and checks.


class SearchFailed(Exception):
    """A tool's own exception type wrapping a library's."""


def test_a_wrapped_exception_gives_its_signals_to_the_outer_one() -> None:
    with http_server([Reply(503, "down", {"Retry-After": "4"})]) as url:
        inner = raised(lambda: requests.get(url, timeout=5).raise_for_status())

    def wrap() -> None:
        raise SearchFailed("search backend failed") from inner

    o = build_outcome("search", raised(wrap))
    assert o.exception_type.endswith("SearchFailed")
    assert o.message == "search backend failed"
    assert o.http_status == 503
    assert dict(o.headers) == {"retry-after": "4"}
    assert "requests.exceptions.HTTPError" in o.detail


class ToolFailed(Exception):
    """A tool's own exception type, raised without a message."""


def test_an_exception_without_a_message_says_its_type_and_its_cause_s_message() -> None:
    host, port = refused_address()
    refused = raised(lambda: socket.create_connection((host, port), timeout=5))

    def wrap() -> None:
        raise ToolFailed() from refused

    o = build_outcome("search", raised(wrap))
    # The cause's message is the OS's ("[Errno 111] Connection refused" on Linux).
    assert o.message == f"ToolFailed: {refused}", o.message
    assert o.code == "ECONNREFUSED"

    def lose() -> None:
        try:
            raise refused
        except OSError:
            raise ToolFailed()  # implicitly chained: the refusal is its __context__

    assert build_outcome("search", raised(lose)).message == f"ToolFailed: {refused}"
    assert build_outcome("search", ToolFailed()).message == "ToolFailed"


def test_pika_s_refused_connection_says_what_its_socket_said(client: rebound.Client, session_id: str) -> None:
    # pika 1.4.4's BlockingConnection against a port where nothing listens: AMQPConnectionError,
    # whose message is empty, around a connector error, also empty, that keeps the socket's
    # ConnectionRefusedError in `.exception`.
    host, port = refused_address()
    exc = raised(lambda: pika.BlockingConnection(pika.ConnectionParameters(host, port, connection_attempts=1)))
    assert type(exc).__name__ == "AMQPConnectionError" and str(exc) == "", repr(exc)
    o = build_outcome("queue", exc)
    assert o.exception_type == "pika.exceptions.AMQPConnectionError"
    assert o.message.startswith("AMQPConnectionError: [Errno ") and o.message.endswith("Connection refused"), o.message
    assert o.code == "ECONNREFUSED"
    with client.session(session_id) as session:
        v = session.report(unique("queue"), error=exc)
    assert not v.fallback and v.category is Category.NETWORK and v.retryable, v


# Exception groups, raised by Python 3.11's asyncio.TaskGroup itself (anyio's task groups, which
# the MCP SDK and httpx's async transports use, raise the same).

needs_groups = pytest.mark.skipif(sys.version_info < (3, 11), reason="exception groups came with Python 3.11")


def task_group_failure(*tasks: Callable[[], Any]) -> BaseException:
    """What an asyncio.TaskGroup running `tasks` (coroutine functions) raises."""

    async def run() -> None:
        async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined, unused-ignore]
            for task in tasks:
                group.create_task(task())

    return raised(lambda: asyncio.run(run()))


def refused_connection() -> Callable[[], Any]:
    host, port = refused_address()
    return lambda: asyncio.open_connection(host, port)


@needs_groups
def test_a_task_group_s_one_failure_is_read_as_that_failure(client: rebound.Client, session_id: str) -> None:
    exc = task_group_failure(refused_connection())
    assert str(exc) == "unhandled errors in a TaskGroup (1 sub-exception)", repr(exc)
    o = build_outcome("db", exc)
    # The group says only that a task failed; the task's exception says what failed.
    assert o.exception_type == "ConnectionRefusedError"
    assert "Connect call failed" in o.message, o.message
    assert o.code == "ECONNREFUSED"
    assert "ExceptionGroup: unhandled errors in a TaskGroup" in o.detail and "ConnectionRefusedError" in o.detail
    assert classify_coarse(o)[0] is Category.NETWORK
    with client.session(session_id) as session:
        v = session.report(unique("db"), error=exc)
    assert not v.fallback and v.category is Category.NETWORK and v.retryable, v


@needs_groups
def test_a_task_group_s_one_timeout_is_a_timeout() -> None:
    async def read_silent() -> None:
        with silent_server() as url:
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                await asyncio.wait_for(reader.read(1), 0.2)
            finally:
                writer.close()

    o = build_outcome("db", task_group_failure(read_silent))
    assert Kind(o.kind) is Kind.TIMEOUT
    assert o.exception_type == "TimeoutError"


@needs_groups
def test_a_task_group_s_several_failures_keep_the_group_and_give_their_signals() -> None:
    exc = task_group_failure(refused_connection(), refused_connection())
    o = build_outcome("db", exc)
    assert o.exception_type == "ExceptionGroup"
    assert o.message == "unhandled errors in a TaskGroup (2 sub-exceptions)"
    assert o.code == "ECONNREFUSED"  # from the first failure the group holds
    assert classify_coarse(o)[0] is Category.NETWORK


def test_keyword_fields_win_over_the_exception() -> None:
    o = build_outcome(
        "llm",
        TimeoutError("slow"),
        kind=Kind.PROVIDER_ERROR,
        message="overridden",
        http_status=504,
        headers={"Retry-After": "1"},
        code="ETIMEDOUT",
        exit_code=2,
        attempt=3,
        duration=1.5,
        cost=0.25,
        call_id="c-1",
    )
    assert (Kind(o.kind), o.message, o.http_status, o.code, o.exit_code) == (Kind.PROVIDER_ERROR, "overridden", 504, "ETIMEDOUT", 2)
    assert dict(o.headers) == {"retry-after": "1"}
    assert (o.attempt, o.duration_ms, o.cost, o.call_id) == (3, 1500, 0.25, "c-1")


def test_the_headers_keyword_keeps_only_the_retry_after_family() -> None:
    # Headers passed straight from a response (requests' resp.headers) carry cookies and tokens.
    o = build_outcome(
        "llm",
        http_status=429,
        headers={
            "Set-Cookie": "session=abc",
            "Authorization": "Bearer sk-x",
            "Retry-After": "3",
            "x-ratelimit-reset-tokens": "6ms",
            "x-ratelimit-remaining-tokens": "0",
        },
    )
    assert dict(o.headers) == {"retry-after": "3", "x-ratelimit-reset-tokens": "6ms", "x-ratelimit-remaining-tokens": "0"}


def test_success_and_failures_without_an_exception() -> None:
    ok = build_outcome("search", duration=0.012, cost=1.0)
    assert ok.ok and ok.duration_ms == 12 and ok.cost == 1.0 and not ok.message
    unknown = build_outcome("serch", kind=Kind.UNKNOWN_TOOL, message="Tool serch not found")
    assert not unknown.ok and Kind(unknown.kind) is Kind.UNKNOWN_TOOL
    with pytest.raises(ValueError, match="ok=True"):
        build_outcome("search", RuntimeError("x"), ok=True)


def test_text_that_is_not_valid_unicode_is_cleaned_not_refused(client: rebound.Client, session_id: str) -> None:
    # A command's output read with errors="surrogateescape" keeps its stray bytes as lone surrogates.
    command = [sys.executable, "-c", "import sys; sys.stderr.buffer.write(b'cannot open caf\\xe9.txt\\n'); sys.exit(2)"]
    exc = raised(lambda: subprocess.run(command, check=True, capture_output=True, text=True, errors="surrogateescape"))
    assert isinstance(exc, subprocess.CalledProcessError) and "caf\udce9" in exc.stderr
    o = build_outcome("shell", exc)
    assert o.detail.startswith("stderr:\ncannot open caf\ufffd.txt")
    # A file name from os.fsdecode, in a message and every other free-text field.
    name = os.fsdecode(b"caf\xe9.txt")
    assert name == "caf\udce9.txt"
    o = build_outcome(
        "read",
        message=f"cannot open {name}",
        exception_type=f"Missing[{name}]",
        code=name,
        detail=name,
        headers={"retry-after": f"7{name}"},
    )
    assert (o.message, o.exception_type, o.code, o.detail) == (
        "cannot open caf\ufffd.txt", "Missing[caf\ufffd.txt]", "caf\ufffd.txt", "caf\ufffd.txt"
    )
    assert dict(o.headers) == {"retry-after": "7caf\ufffd.txt"}
    # session.run raised UnicodeEncodeError from protobuf instead of acting on a verdict.
    def shell() -> str:
        return subprocess.run(command, check=True, capture_output=True, text=True, errors="surrogateescape").stdout

    with client.session(session_id) as session:
        with pytest.raises(rebound.RecoverError) as err:
            session.run(unique("shell"), shell)
    assert not err.value.verdict.fallback and err.value.error is not None


def test_long_text_is_cut() -> None:
    o = build_outcome("t", RuntimeError("m" * (MAX_MESSAGE_CHARS * 2)), detail="d" * (MAX_DETAIL_CHARS * 2))
    assert len(o.message) == MAX_MESSAGE_CHARS + 1 and o.message.endswith("…")
    assert len(o.detail) < MAX_DETAIL_CHARS + 100 and "characters elided" in o.detail


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"tool": ""}, "tool must not be empty"),
        ({"tool": "a\nb"}, "control characters"),
        ({"tool": "x" * 257}, "at most 256 bytes"),
        ({"tool": "t", "http_status": 42}, "http_status = 42"),
        ({"tool": "t", "grpc_code": 17}, "grpc_code = 17"),
        ({"tool": "t", "cost": -1}, "cost = -1"),
        ({"tool": "t", "cost": float("nan")}, "cost = nan"),
        ({"tool": "t", "duration": float("inf")}, "duration = inf"),
        ({"tool": "t", "attempt": -1}, "attempt = -1"),
        ({"tool": "t", "exit_code": 2**31}, "exit_code"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("(", r"\(")):
        build_outcome(**kwargs)


def test_a_bad_kind_names_the_field_the_value_and_the_kinds() -> None:
    with pytest.raises(ValueError, match=r"kind = 99: .*Kind\.TIMEOUT"):
        build_outcome("t", kind=99)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"kind must be a rebound\.Kind, not str 'timeout': .*Kind\.TIMEOUT"):
        build_outcome("t", kind="timeout")  # type: ignore[arg-type]
    assert Kind(build_outcome("t", kind=5).kind) is Kind.TIMEOUT  # type: ignore[arg-type]  # the wire value works


def test_headers_must_be_a_mapping_of_str_even_for_a_success() -> None:
    # A success does not send them, but a wrong argument used to pass unnoticed.
    with pytest.raises(TypeError, match="headers must be a mapping of str to str, not list"):
        build_outcome("t", headers=[("retry-after", "1")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"headers\['retry-after'\] must be a str, not int"):
        build_outcome("t", headers={"retry-after": 5})  # type: ignore[dict-item]
    assert build_outcome("t", http_status=429, headers={"retry-after": "5"}).headers["retry-after"] == "5"


def test_check_outcome_holds_hand_built_outcomes_to_the_same_rules() -> None:
    assert check_outcome(pb.Outcome(tool="search")).tool == "search"
    with pytest.raises(TypeError):
        check_outcome({"tool": "search"})
    with pytest.raises(ValueError, match="http_status = 700"):
        check_outcome(pb.Outcome(tool="search", http_status=700))
    with pytest.raises(ValueError, match="kind = 99"):
        check_outcome(pb.Outcome(tool="search", kind=99))  # type: ignore[arg-type]


def test_exception_type_names() -> None:
    assert exception_type_name(ValueError("x")) == "ValueError"
    assert exception_type_name(httpx.ReadTimeout("x")) == "httpx.ReadTimeout"
    assert exception_type_name(SearchFailed()) == "tests.test_outcome.SearchFailed"
