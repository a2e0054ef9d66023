"""Real Python failures for holdout-real.jsonl: each case runs a library against something on
this machine (a loopback HTTP server started here, a temporary SQLite file, a file path) and
prints the outcome an agent would report, one JSON line per case, labelled beforehand.

Run: python3 python_cases.py > python.jsonl  (needs requests, httpx, aiohttp, openai, anthropic,
pydantic, jsonschema, boto3, langchain-core, openai-agents, litellm, pandas, duckdb, pillow, sqlalchemy, docker, google-genai, slack_sdk, azure-storage-blob, azure-mgmt-resource,
azure-identity, google-auth, python-telegram-bot, grpcio, mcp, huggingface_hub and playwright from PyPI, and Debian's chromium, which
playwright drives; for the data stores' section also pymongo, elasticsearch, qdrant-client, paramiko, websockets,
PyMySQL, neo4j, psycopg[binary] and asyncpg, and for the brokers' pika, kafka-python, aiokafka,
cassandra-driver and clickhouse-connect, and for the agent frameworks' pydantic-ai-slim, langgraph, smolagents,
instructor and tenacity). The random ports are written as 8787 (the server), 8799 (a closed
port) and 8798 (a port that accepts connections and never answers) in the output.

The outcome is read from the exception as the Python client's build_outcome reads it
(clients/python/src/rebound/outcome.py): `module.QualName` type, `str(exc)`, the HTTP status, an
error code (`.code`, the body's error code or type, an errno name), a process's exit code;
without `kind` and the traceback, so the rules must work from the type, the words and the signals.
"""

import asyncio
import contextlib
import errno
import io
import json
import logging
import os
import socket
import ssl
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version

SERVER_PORT_TEXT = "8787"
CLOSED_PORT_TEXT = "8799"
SILENT_PORT_TEXT = "8798"

# Routes of the loopback server: path -> (status, headers, body). The bodies are in the style of
# the provider each route imitates; the exception texts built from them are the libraries' own.
OPENAI_BODY = lambda message, typ, code: {"error": {"message": message, "type": typ, "param": None, "code": code}}
# A chat completion whose one choice is `message`.
OPENAI_COMPLETION = lambda message: {"id": "chatcmpl-2", "object": "chat.completion", "created": 1764460800, "model": "gpt-4o-mini",
                                     "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                                     "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}}
ANTHROPIC_BODY = lambda typ, message: {"type": "error", "error": {"type": typ, "message": message}, "request_id": "req_011CTest"}
GEMINI_BODY = lambda code, status, message, details=(): {"error": {"code": code, "message": message, "status": status, **({"details": list(details)} if details else {})}}
# The Gemini API's 429 says the same words for every quota and names the ones hit in its details
# (a quota per minute, or per day, with the per-minute one beside it as the API lists them).
GEMINI_429 = lambda quota_ids: GEMINI_BODY(429, "RESOURCE_EXHAUSTED",
    "You exceeded your current quota, please check your plan and billing details. For more information on this error, "
    "head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n"
    "* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\n"
    "Please retry in 23.472316927s.",
    [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": q, "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}, "quotaValue": "10"} for q in quota_ids]},
     {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "23s"}])
# Azure Storage's error body, as its REST API documents it (the message's RequestId and Time lines too).
AZURE_STORAGE = lambda code, message: (
    f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{message}\n'
    "RequestId:8c1f3b2a-001e-0042-2f3a-1b2c3d000000\nTime:2026-11-29T22:30:00.0000000Z</Message></Error>")
XML = {"Content-Type": "application/xml"}
ES_HEADERS = {"X-Elastic-Product": "Elasticsearch"}
ES_ERROR = lambda typ, reason, status, more={}: {"error": {"root_cause": [{"type": typ, "reason": reason, **more}], "type": typ, "reason": reason, **more}, "status": status}
# The Hugging Face Hub's refusals: its error code and message in headers (X-Error-Code,
# X-Error-Message), the message in the body too.
HF_GATED = ("Access to model meta-llama/Llama-3.1-8B is restricted and you are not in the authorized list. "
            "Visit https://huggingface.co/meta-llama/Llama-3.1-8B to ask for access.")
HF = lambda status, code, message: (status, {"X-Error-Code": code, "X-Error-Message": message}, {"error": message})
ROUTES = {
    "/hf/1": HF(403, "GatedRepo", HF_GATED),
    "/hf/2": HF(404, "RepoNotFound", "Repository not found"),
    "/hf/3": HF(404, "EntryNotFound", "Entry not found"),
    "/plain/401": (401, {}, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
    "/plain/403": (403, {}, {"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest", "status": "403"}),
    "/plain/404": (404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}),
    "/plain/413": (413, {}, {"error": "request entity too large"}),
    "/plain/422": (422, {}, {"message": "Validation Failed", "errors": [{"resource": "Issue", "code": "missing_field", "field": "title"}]}),
    "/plain/429": (429, {"Retry-After": "7"}, {"error": {"message": "Too many requests", "type": "rate_limited"}}),
    "/plain/500": (500, {}, {"error": {"message": "Something went wrong on our end.", "type": "api_error"}}),
    "/plain/502": (502, {}, "<html><body><h1>502 Bad Gateway</h1></body></html>"),
    "/plain/503": (503, {"Retry-After": "30"}, {"error": "service unavailable"}),
    "/plain/402": (402, {}, {"error": {"code": "payment_required", "message": "Your plan's monthly credits are used up."}}),
    "/openai/empty400": (400, {}, ""),
    "/openai/empty408": (408, {}, ""),
    "/openai/empty413": (413, {}, ""),
    "/openai/context": (400, {}, OPENAI_BODY("This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded")),
    "/openai/key": (401, {}, OPENAI_BODY("Incorrect API key provided: sk-proj-****************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")),
    "/openai/model": (404, {}, OPENAI_BODY("The model `gpt-9-turbo` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")),
    "/openai/rate": (429, {"retry-after": "2", "x-ratelimit-reset-requests": "1.2s"}, OPENAI_BODY("Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.", "requests", "rate_limit_exceeded")),
    "/openai/tpm": (429, {}, OPENAI_BODY("Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", "tokens", "rate_limit_exceeded")),
    "/openai/quota": (429, {}, OPENAI_BODY("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota")),
    "/openai/500": (500, {}, OPENAI_BODY("The server had an error while processing your request. Sorry about that!", "server_error", None)),
    "/openai/503": (503, {}, OPENAI_BODY("The engine is currently overloaded, please try again later.", "server_error", None)),
    "/openai/policy": (400, {}, OPENAI_BODY("Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.", "invalid_request_error", "content_policy_violation")),
    # A model that calls a tool the agent does not have.
    "/openai/toolcall": (200, {}, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1764460800, "model": "gpt-4o-mini",
                                   "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
                                       {"id": "call_1", "type": "function", "function": {"name": "search_web", "arguments": "{\"query\": \"rust\"}"}}]}}],
                                   "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}}),
    "/openai/badparam": (400, {}, OPENAI_BODY("Invalid value for 'temperature': expected a number between 0 and 2, got 3.5.", "invalid_request_error", "invalid_value")),
    # A model asked for structured output (instructor's tool mode): it answers in prose, with arguments
    # that break the schema, or with arguments cut off mid-JSON.
    "/openai/prose": (200, {}, OPENAI_COMPLETION({"role": "assistant", "content": "The user is thirty years old."})),
    "/openai/badargs": (200, {}, OPENAI_COMPLETION({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "User", "arguments": "{\"name\": \"Ann\", \"age\": \"thirty\"}"}}]})),
    "/openai/cutjson": (200, {}, OPENAI_COMPLETION({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "User", "arguments": "{\"name\": \"Ann\", \"age\": 3"}}]})),
    "/anthropic/529": (529, {}, ANTHROPIC_BODY("overloaded_error", "Overloaded")),
    "/anthropic/empty529": (529, {}, ""),
    "/anthropic/long": (400, {}, ANTHROPIC_BODY("invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum")),
    "/anthropic/401": (401, {}, ANTHROPIC_BODY("authentication_error", "invalid x-api-key")),
    "/anthropic/403": (403, {}, ANTHROPIC_BODY("permission_error", "Your API key does not have permission to use the specified resource.")),
    "/anthropic/404": (404, {}, ANTHROPIC_BODY("not_found_error", "model: claude-9-opus")),
    "/anthropic/429": (429, {"retry-after": "12", "anthropic-ratelimit-requests-remaining": "0"}, ANTHROPIC_BODY("rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.")),
    "/anthropic/500": (500, {}, ANTHROPIC_BODY("api_error", "Internal server error")),
    "/anthropic/413": (413, {}, ANTHROPIC_BODY("request_too_large", "Request exceeds the maximum allowed number of bytes.")),
    "/anthropic/credit": (400, {}, ANTHROPIC_BODY("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")),
    # The error types of Anthropic's API reference ("Errors": 402 billing_error, 504 timeout_error).
    "/anthropic/402": (402, {}, ANTHROPIC_BODY("billing_error", "There is an issue with your account's billing. Please add a payment method to continue.")),
    "/anthropic/504": (504, {}, ANTHROPIC_BODY("timeout_error", "Request timed out while processing. Please try again.")),
    "/slack/1": (200, {}, {"ok": False, "error": "not_in_channel"}),
    "/slack/2": (200, {}, {"ok": False, "error": "invalid_auth"}),
    "/slack/3": (200, {}, {"ok": False, "error": "missing_scope", "needed": "channels:history", "provided": "chat:write"}),
    "/slack/4": (200, {}, {"ok": False, "error": "channel_not_found"}),
    "/slack/5": (429, {"Retry-After": "30"}, {"ok": False, "error": "ratelimited"}),
    # AWS's query-protocol error (STS), and its S3 REST one: botocore raises ClientError with the code in its text.
    "/aws/sts-expired": (403, {}, '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>ExpiredToken</Code><Message>The security token included in the request is expired</Message></Error><RequestId>4c1d1e1a-0000-4000-8000-000000000000</RequestId></ErrorResponse>'),
    "/aws/s3-nokey": (404, {}, '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>reports/q3.csv</Key><RequestId>TX1</RequestId><HostId>H1</HostId></Error>'),
    # Azure Storage's errors (its XML, its x-ms-error-code header) and Resource Manager's (JSON),
    # numbered so that the URL gives nothing away.
    "/azure/1": (404, {"x-ms-error-code": "BlobNotFound", **XML}, AZURE_STORAGE("BlobNotFound", "The specified blob does not exist.")),
    "/azure/2": (403, {"x-ms-error-code": "AuthenticationFailed", **XML}, AZURE_STORAGE("AuthenticationFailed", "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.")),
    "/azure/3": (403, {"x-ms-error-code": "AuthorizationPermissionMismatch", **XML}, AZURE_STORAGE("AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission.")),
    "/azure/4": (503, {"x-ms-error-code": "ServerBusy", **XML}, AZURE_STORAGE("ServerBusy", "The server is busy.")),
    "/azure/5": (403, {}, {"error": {"code": "AuthorizationFailed", "message": "The client '00000000-0000-0000-0000-000000000001' with object id '00000000-0000-0000-0000-000000000001' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourcegroups/read' over scope '/subscriptions/00000000-0000-0000-0000-000000000002/resourcegroups/rg-agent' or the scope is invalid. If access was recently granted, please refresh your credentials."}}),
    "/azure/6": (404, {}, {"error": {"code": "ResourceGroupNotFound", "message": "Resource group 'rg-agent' could not be found."}}),
    "/azure/7": (401, {}, {"error": {"code": "ExpiredAuthenticationToken", "message": "The access token expiry UTC time '11/29/2026 21:00:00' is earlier than current UTC time '11/29/2026 22:30:00'."}}),
    "/azure/8": (429, {"Retry-After": "17"}, {"error": {"code": "TooManyRequests", "message": "The request is being throttled as the limit has been reached for operation type - Read_ObservationWindow_00:05:00. For more information, refer to - https://aka.ms/armthrottling"}}),
    # Google's OAuth token endpoint refusing a refresh token (RFC 6749's invalid_grant): revoked, and as
    # it often answers, with no more than "Bad Request" (googleapis/google-auth-library-python#1142).
    "/google/1": (400, {}, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}),
    "/google/2": (400, {}, {"error": "invalid_grant", "error_description": "Bad Request"}),
    # The Telegram Bot API's flood control (python-telegram-bot reads its parameters.retry_after).
    "/telegram/1": (429, {}, {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 23", "parameters": {"retry_after": 23}}),
    "/gemini/minute": (429, {}, GEMINI_429(["GenerateRequestsPerMinutePerProjectPerModel-FreeTier"])),
    "/gemini/day": (429, {}, GEMINI_429(["GenerateRequestsPerDayPerProjectPerModel-FreeTier", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"])),
    "/gemini/long": (400, {}, GEMINI_BODY(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).")),
    "/gemini/key": (400, {}, GEMINI_BODY(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}])),
    "/gemini/503": (503, {}, GEMINI_BODY(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")),
    # Elasticsearch 8's error bodies (its client checks the product header).
    "/es/401": (401, ES_HEADERS, ES_ERROR("security_exception", "unable to authenticate user [agent] for REST request [/docs/_search]", 401)),
    "/es/404": (404, ES_HEADERS, ES_ERROR("index_not_found_exception", "no such index [docs]", 404, {"resource.type": "index_or_alias", "resource.id": "docs", "index_uuid": "_na_", "index": "docs"})),
    "/es/400": (400, ES_HEADERS, ES_ERROR("parsing_exception", "unknown query [mach]", 400, {"line": 1, "col": 19})),
    "/es/429": (429, ES_HEADERS, ES_ERROR("es_rejected_execution_exception", "rejected execution of coordinating operation [coordinating_and_primary_bytes=0, replica_bytes=0, all_bytes=0, coordinating_operation_bytes=52428800, max_coordinating_and_primary_bytes=53687091]", 429)),
    # Qdrant 1.x's: its API key check answers in plain text, the rest in its JSON status.
    "/qdrant/401": (401, {"Content-Type": "text/plain"}, "Must provide an API key or an Authorization bearer token"),
    "/qdrant/403": (403, {}, {"status": {"error": "Forbidden: Global access is required"}, "time": 0.0}),
    "/qdrant/404": (404, {}, {"status": {"error": "Not found: Collection `docs` doesn't exist!"}, "time": 0.000021}),
    "/qdrant/400": (400, {}, {"status": {"error": "Wrong input: Vector dimension error: expected dim: 384, got 3"}, "time": 0.00004}),
}


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the dropped connections break their pipes on purpose


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self):
        path = self.path.split("?")[0]
        for prefix in ("/chat/completions", "/v1/messages"):
            if path.endswith(prefix):
                path = path[: -len(prefix)]
        if path.startswith("/aws/"):
            path = "/".join(path.split("/")[:3])  # /aws/{route}/ (STS), /aws/{route}/{bucket}/{key} (S3)
        if path.startswith("/azure/"):
            path = "/".join(path.split("/")[:3])  # /azure/{route}/{container}/{blob}, /azure/{route}/subscriptions/...
        if path.startswith(("/es/", "/qdrant/")):
            path = "/".join(path.split("/")[:3])  # /es/{route}/{index}/_search, /qdrant/{route}/collections/...
        if path.startswith("/hf/"):
            path = "/".join(path.split("/")[:3])  # /hf/{route}/{org}/{repo}/resolve/main/{file}
        if path.startswith("/telegram/"):
            path = "/".join(path.split("/")[:3])  # /telegram/{route}/bot{token}/{method}
        if path.startswith("/slack/"):
            path = path.rsplit("/", 1)[0]  # slack_sdk's {base_url}{method}: /slack/{route}/chat.postMessage
        # google-genai's /v1/models/{model}:generateContent (/v1beta/ at Google's own address)
        path = path.split("/models/")[0].removesuffix("/v1").removesuffix("/v1beta")
        if path.startswith("/slow"):
            time.sleep(3)
        if path.startswith("/drop"):
            # Close without any response.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, headers, body = ROUTES.get(path, (200, {}, {"ok": True}))
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        # A route may name its own (Azure Storage's XML is application/xml, which its SDK reads).
        headers = {"Content-Type": "text/html" if isinstance(body, str) else "application/json", **headers}
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_HEAD = _answer


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


SERVER = Server(("127.0.0.1", 0), Handler)
PORT = SERVER.server_address[1]
CLOSED = free_port()
# A port that accepts connections and never answers: a server that hangs.
SILENT_LISTENER = socket.socket()
SILENT_LISTENER.bind(("127.0.0.1", 0))
SILENT_LISTENER.listen(64)
SILENT = SILENT_LISTENER.getsockname()[1]
held_connections = []


def hold_connections():
    while True:
        held_connections.append(SILENT_LISTENER.accept())


threading.Thread(target=hold_connections, daemon=True).start()
URL = f"http://127.0.0.1:{PORT}"
threading.Thread(target=SERVER.serve_forever, daemon=True).start()


def type_name(exc):
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ in ("builtins", "__main__") else f"{cls.__module__}.{cls.__qualname__}"


def chain(exc):
    seen, queue = set(), [exc]
    while queue:
        e = queue.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        linked = [e.__cause__, None if e.__suppress_context__ else e.__context__, getattr(e, "reason", None)]
        linked += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        queue += [x for x in linked if isinstance(x, BaseException)]


def code_of(e):
    for code in (getattr(e, "code", None), getattr(e, "error_code", None), getattr(getattr(e, "error", None), "code", None)):
        if isinstance(code, str) and code.strip():
            return code.strip()
        if isinstance(code, int) and not isinstance(code, bool) and -32768 <= code <= -32000:
            return str(code)
    response = getattr(e, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    if isinstance(error, dict) and isinstance(error.get("Code"), str) and error["Code"].strip():
        return error["Code"].strip()
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        for key in ("code", "type"):
            if isinstance(body["error"].get(key), str):
                return body["error"][key]
    n = getattr(e, "errno", None)
    if isinstance(e, socket.gaierror):
        return {socket.EAI_NONAME: "ENOTFOUND", socket.EAI_AGAIN: "EAI_AGAIN"}.get(n, "")
    # ssl.SSLError's errno is OpenSSL's, not an errno (the client skips it too).
    if isinstance(e, OSError) and not isinstance(e, ssl.SSLError) and isinstance(n, int):
        return errno.errorcode.get(n, "")
    return ""


def status_of(e):
    response = getattr(e, "response", None)
    metadata = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
    for candidate in (getattr(response, "status_code", None), getattr(response, "status", None),
                      getattr(e, "status_code", None), getattr(e, "status", None),
                      e.code if isinstance(e, urllib.error.HTTPError) else None, metadata.get("HTTPStatusCode")):
        if isinstance(candidate, int) and not isinstance(candidate, bool) and 100 <= candidate <= 599:
            return candidate
    return None


def fixed(text):
    return text.replace(str(PORT), SERVER_PORT_TEXT).replace(str(CLOSED), CLOSED_PORT_TEXT).replace(str(SILENT), SILENT_PORT_TEXT)


def grpc_code_of(e):
    code = getattr(e, "code", None)
    if type(e).__module__.startswith("grpc") and callable(code):
        value = code().value[0]
        return value if 0 < value <= 16 else None
    return None


def outcome_of(exc):
    o = {"exception_type": type_name(exc), "message": fixed(str(exc) or type(exc).__name__)}
    status = code = exit_code = grpc_code = None
    for e in chain(exc):
        status = status or status_of(e)
        code = code or code_of(e)
        grpc_code = grpc_code or grpc_code_of(e)
        if exit_code is None and isinstance(e, subprocess.CalledProcessError):
            exit_code = e.returncode
    if status:
        o["http_status"] = status
    if code:
        o["code"] = code
    if grpc_code:
        o["grpc_code"] = grpc_code
    if exit_code is not None:
        o["exit_code"] = exit_code
        if exc.stderr:
            o["detail"] = "stderr:\n" + fixed(exc.stderr if isinstance(exc.stderr, str) else exc.stderr.decode())
    return o


def emit(id, category, source, outcome, tags=()):
    """Prints one labelled case (retryable as its category is)."""
    retryable = category in ("timeout", "rate_limited", "network", "unavailable", "internal")
    line = {"id": id, "source": source, "category": category, "retryable": retryable, "tags": list(tags),
            "outcome": outcome}
    print(json.dumps(line, ensure_ascii=False))


def case(id, category, source, run):
    try:
        run()
    except BaseException as exc:  # the failure is the data
        emit(id, category, source, outcome_of(exc))
        return
    print(f"{id}: did not fail", file=sys.stderr)


def case_as_text(id, category, source, run):
    """A case as an agent reports it when it passes the error on as text alone: the last line of
    `traceback.format_exception_only`, which names the type before the message, and nothing else."""
    try:
        run()
    except BaseException as exc:  # the failure is the data
        text = fixed(traceback.format_exception_only(exc)[-1].strip())
        emit(id, category, source, {"message": text}, ["type-in-message"])
        return
    print(f"{id}: did not fail", file=sys.stderr)


def as_nobody(run):
    """Runs `run` in a child process as user nobody (this machine's scripts run as root, whom no
    file mode stops) and raises the exception it raised, brought back by pickle."""
    def go():
        import pickle
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            try:
                run()
                error = None
            except Exception as exc:
                error = exc
            os.write(write, pickle.dumps(error))
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        error = pickle.loads(data)
        if error is not None:
            raise error
    return go


def v(name):
    return f"{name} {version(name)}"


# ---------------------------------------------------------------- requests
import requests

R = v("requests")
case("r-py-requests-refused", "network", R, lambda: requests.get(f"http://127.0.0.1:{CLOSED}/", timeout=2))
case("r-py-requests-read-timeout", "timeout", R, lambda: requests.get(f"{URL}/slow", timeout=0.5))
case("r-py-requests-dns", "network", R, lambda: requests.get("http://api.nonexistent.invalid/v1", timeout=2))
case("r-py-requests-tls-on-plain", "network", R, lambda: requests.get(f"https://127.0.0.1:{PORT}/", timeout=2))
case("r-py-requests-dropped", "network", R, lambda: requests.get(f"{URL}/drop", timeout=2))
for status, category in [(401, "auth"), (403, "permission_denied"), (404, "not_found"), (413, "context_length"),
                         (422, "validation"), (429, "rate_limited"), (500, "internal"), (502, "unavailable"),
                         (503, "unavailable")]:
    case(f"r-py-requests-{status}", category, R, lambda s=status: requests.get(f"{URL}/plain/{s}", timeout=2).raise_for_status())

# ---------------------------------------------------------------- httpx
import httpx

H = v("httpx")
case("r-py-httpx-refused", "network", H, lambda: httpx.get(f"http://127.0.0.1:{CLOSED}/", timeout=2))
case("r-py-httpx-read-timeout", "timeout", H, lambda: httpx.get(f"{URL}/slow", timeout=0.5))
case("r-py-httpx-dropped", "network", H, lambda: httpx.get(f"{URL}/drop", timeout=2))
case("r-py-httpx-403", "permission_denied", H, lambda: httpx.get(f"{URL}/plain/403").raise_for_status())
case("r-py-httpx-422", "validation", H, lambda: httpx.post(f"{URL}/plain/422").raise_for_status())
case("r-py-httpx-402", "quota_exceeded", H, lambda: httpx.post(f"{URL}/plain/402").raise_for_status())

# ---------------------------------------------------------------- aiohttp
import aiohttp

A = v("aiohttp")


def aio(path, timeout=None, port=None):
    async def go():
        t = aiohttp.ClientTimeout(sock_read=timeout) if timeout else aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=t) as s:
            async with s.get(f"http://127.0.0.1:{port or PORT}{path}", raise_for_status=True) as r:
                await r.read()
    return lambda: asyncio.run(go())


case("r-py-aiohttp-refused", "network", A, aio("/", port=CLOSED))
case("r-py-aiohttp-429", "rate_limited", A, aio("/plain/429"))
case("r-py-aiohttp-dropped", "network", A, aio("/drop"))
case("r-py-aiohttp-sock-read-timeout", "timeout", A, aio("/slow", timeout=0.5))

# ---------------------------------------------------------------- urllib (standard library)
U = f"urllib (CPython {sys.version.split()[0]})"
case("r-py-urllib-refused", "network", U, lambda: urllib.request.urlopen(f"http://127.0.0.1:{CLOSED}/", timeout=2))
case("r-py-urllib-404", "not_found", U, lambda: urllib.request.urlopen(f"{URL}/plain/404", timeout=2))
case("r-py-urllib-503", "unavailable", U, lambda: urllib.request.urlopen(f"{URL}/plain/503", timeout=2))
case("r-py-urllib-timeout", "timeout", U, lambda: urllib.request.urlopen(f"{URL}/slow", timeout=0.5))

# ---------------------------------------------------------------- openai SDK against the loopback server
import openai

O = v("openai")


def oa(route, timeout=5.0, base=None):
    client = openai.OpenAI(api_key="sk-test", base_url=base or f"{URL}/openai/{route}", max_retries=0, timeout=timeout)
    return lambda: client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])


case("r-py-openai-context", "context_length", O, oa("context"))
case("r-py-openai-key", "auth", O, oa("key"))
case("r-py-openai-model", "not_found", O, oa("model"))
case("r-py-openai-rate", "rate_limited", O, oa("rate"))
case("r-py-openai-quota", "quota_exceeded", O, oa("quota"))
case("r-py-openai-tpm-too-large", "context_length", O, oa("tpm"))
case("r-py-openai-500", "internal", O, oa("500"))
case("r-py-openai-503", "unavailable", O, oa("503"))
case("r-py-openai-policy", "content_filter", O, oa("policy"))
case("r-py-openai-badparam", "validation", O, oa("badparam"))
case("r-py-openai-refused", "network", O, oa("", base=f"http://127.0.0.1:{CLOSED}/v1"))
case("r-py-openai-timeout", "timeout", O, oa("", timeout=0.5, base=f"{URL}/slow"))
# Statuses with no body, passed on as text: the SDK's `Error code: 400` is all they say.
# The OpenAI Agents SDK running an agent on that model: the tool it named is not the agent's.
import agents


def agent_run(route):
    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{URL}/openai/{route}", max_retries=0)

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    model = agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    agent = agents.Agent(name="Assistant", instructions="Answer.", tools=[get_weather], model=model)
    return lambda: asyncio.run(agents.Runner.run(agent, "The weather in Paris?", max_turns=3))


case("r-py-openai-agents-unknown-tool", "unknown_tool", v("openai-agents"), agent_run("toolcall"))

case_as_text("r-py-text-openai-empty-400", "validation", O, oa("empty400"))
case_as_text("r-py-text-openai-empty-408", "timeout", O, oa("empty408"))
case_as_text("r-py-text-openai-empty-413", "context_length", O, oa("empty413"))
case_as_text("r-py-text-openai-tpm-too-large", "context_length", O, oa("tpm"))

# ---------------------------------------------------------------- LiteLLM (its OpenAI provider) against the loopback server
import litellm

litellm.suppress_debug_info = True  # its "Give Feedback / Get Help" banner goes to stdout
L = v("litellm")


def ll(route, timeout=5.0, base=None):
    return lambda: litellm.completion(model="openai/gpt-4o", api_key="sk-test", api_base=base or f"{URL}/openai/{route}",
                                      messages=[{"role": "user", "content": "hi"}], num_retries=0, max_retries=0,
                                      timeout=timeout)


case("r-py-litellm-context", "context_length", L, ll("context"))
case("r-py-litellm-key", "auth", L, ll("key"))
case("r-py-litellm-model", "not_found", L, ll("model"))
case("r-py-litellm-rate", "rate_limited", L, ll("rate"))
case("r-py-litellm-quota", "quota_exceeded", L, ll("quota"))
case("r-py-litellm-500", "internal", L, ll("500"))
case("r-py-litellm-503", "unavailable", L, ll("503"))
case("r-py-litellm-policy", "content_filter", L, ll("policy"))
case("r-py-litellm-refused", "network", L, ll("", base=f"http://127.0.0.1:{CLOSED}/v1"))
case("r-py-litellm-timeout", "timeout", L, ll("", timeout=0.5, base=f"{URL}/slow"))
case_as_text("r-py-text-litellm-rate", "rate_limited", L, ll("rate"))
case_as_text("r-py-text-litellm-quota", "quota_exceeded", L, ll("quota"))


def over_budget():
    # LiteLLM's own spending limit (litellm.max_budget), past which it refuses every call: a used-up budget.
    litellm.max_budget, litellm._current_cost = 0.01, 0.02
    try:
        ll("rate")()
    finally:
        litellm.max_budget, litellm._current_cost = 0.0, 0.0


case("r-py-litellm-budget", "quota_exceeded", L, over_budget)

# ---------------------------------------------------------------- anthropic SDK against the loopback server
import anthropic

N = v("anthropic")


def an(route, timeout=5.0, base=None):
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=base or f"{URL}/anthropic/{route}", max_retries=0, timeout=timeout)
    return lambda: client.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])


case("r-py-anthropic-529", "unavailable", N, an("529"))
case("r-py-anthropic-long", "context_length", N, an("long"))
case("r-py-anthropic-401", "auth", N, an("401"))
case("r-py-anthropic-403", "permission_denied", N, an("403"))
case("r-py-anthropic-404", "not_found", N, an("404"))
case("r-py-anthropic-429", "rate_limited", N, an("429"))
case("r-py-anthropic-500", "internal", N, an("500"))
case("r-py-anthropic-413", "context_length", N, an("413"))
case("r-py-anthropic-credit", "quota_exceeded", N, an("credit"))
case("r-py-anthropic-402", "quota_exceeded", N, an("402"))
case("r-py-anthropic-504", "timeout", N, an("504"))
case("r-py-anthropic-refused", "network", N, an("", base=f"http://127.0.0.1:{CLOSED}"))
case_as_text("r-py-text-anthropic-empty-529", "unavailable", N, an("empty529"))

# ---------------------------------------------------------------- slack_sdk against the loopback server
# Slack answers most refusals with HTTP 200 and {"ok": false, "error": "<code>"}; the SDK raises SlackApiError,
# whose text quotes that body (the Python client reads no code from it). The routes are numbered: their
# names would be in the URL the text quotes.
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

SL = v("slack_sdk")


def sl(route):
    client = WebClient(token="xoxb-test", base_url=f"{URL}/slack/{route}/")
    client.retry_handlers = [h for h in client.retry_handlers if not isinstance(h, RateLimitErrorRetryHandler)]
    return lambda: client.chat_postMessage(channel="C123", text="hi")


case("r-py-slack-not-in-channel", "permission_denied", SL, sl("1"))
case("r-py-slack-invalid-auth", "auth", SL, sl("2"))
case("r-py-slack-missing-scope", "permission_denied", SL, sl("3"))
case("r-py-slack-channel-not-found", "not_found", SL, sl("4"))
case("r-py-slack-ratelimited", "rate_limited", SL, sl("5"))

# ---------------------------------------------------------------- google-genai (Gemini) against the loopback server
from google import genai
from google.genai import types as genai_types

G = v("google-genai")


def gm(route):
    options = genai_types.HttpOptions(base_url=f"{URL}/gemini/{route}", retry_options=genai_types.HttpRetryOptions(attempts=1))
    client = genai.Client(api_key="test-key", http_options=options)
    return lambda: client.models.generate_content(model="gemini-2.5-flash", contents="hi")


case("r-py-gemini-per-minute", "rate_limited", G, gm("minute"))
case("r-py-gemini-per-day", "quota_exceeded", G, gm("day"))
case("r-py-gemini-long", "context_length", G, gm("long"))
case("r-py-gemini-key", "auth", G, gm("key"))
case("r-py-gemini-503", "unavailable", G, gm("503"))
case_as_text("r-py-text-gemini-per-minute", "rate_limited", G, gm("minute"))
case_as_text("r-py-text-gemini-long", "context_length", G, gm("long"))

# ---------------------------------------------------------------- standard library and local files
P = f"CPython {sys.version.split()[0]}"
case("r-py-json-bad", "format", P, lambda: json.loads('{"query": "weather", "units": metric}'))
case("r-py-json-empty", "format", P, lambda: json.loads(""))
case("r-py-open-missing", "not_found", P, lambda: open("/srv/agent/reports/q3.csv"))
PRIVATE = tempfile.mkdtemp()  # 0700, root's
open(os.path.join(PRIVATE, "notes.txt"), "w").close()
case("r-py-open-denied", "permission_denied", P, as_nobody(lambda: open(os.path.join(PRIVATE, "notes.txt"))))
case("r-py-open-directory", "not_found", P, lambda: open("/tmp"))
case("r-py-mkdir-exists", "conflict", P, lambda: os.mkdir("/tmp"))
case("r-py-asyncio-wait-for", "timeout", P, lambda: asyncio.run(asyncio.wait_for(asyncio.sleep(5), 0.1)))
case("r-py-subprocess-ls", "not_found", P,
     lambda: subprocess.run(["ls", "/srv/agent/missing"], check=True, capture_output=True, text=True))
case("r-py-subprocess-timeout", "timeout", P, lambda: subprocess.run(["sleep", "5"], timeout=0.2))
case("r-py-int-parse", "validation", P, lambda: int("twelve"))


def recurse(n):
    return recurse(n + 1)


async def cancelled():
    task = asyncio.create_task(asyncio.sleep(5))
    await asyncio.sleep(0)
    task.cancel()
    await task


# The same kind of failures sent as text alone (`Type: message`), with no type beside them.
case_as_text("r-py-text-keyerror", "validation", P, lambda: {"limit": 5}["query"])
case_as_text("r-py-text-recursion", "internal", P, lambda: recurse(0))
case_as_text("r-py-text-cancelled", "cancelled", P, lambda: asyncio.run(cancelled()))
case_as_text("r-py-text-json-bad", "format", P, lambda: json.loads('{"query": "weather", "units": metric}'))

S = f"sqlite3 (SQLite {sqlite3.sqlite_version}, CPython {sys.version.split()[0]})"
db = os.path.join(tempfile.mkdtemp(), "agent.db")
setup = sqlite3.connect(db)
setup.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE)")
setup.execute("INSERT INTO users (email) VALUES ('a@example.com')")
setup.commit()
case("r-py-sqlite-no-table", "not_found", S, lambda: setup.execute("SELECT * FROM orders"))
case("r-py-sqlite-unique", "conflict", S, lambda: setup.execute("INSERT INTO users (email) VALUES ('a@example.com')"))
case("r-py-sqlite-syntax", "validation", S, lambda: setup.execute("SELEC * FROM users"))
case("r-py-sqlite-no-column", "not_found", S, lambda: setup.execute("SELECT name FROM users"))
setup.rollback()
holder = sqlite3.connect(db, isolation_level=None)
holder.execute("BEGIN EXCLUSIVE")
waiter = sqlite3.connect(db, timeout=0.1)
case("r-py-sqlite-locked", "conflict", S, lambda: waiter.execute("INSERT INTO users (email) VALUES ('b@example.com')"))
holder.rollback()

# ---------------------------------------------------------------- validation libraries
import pydantic


class SearchArgs(pydantic.BaseModel):
    query: str
    limit: int


case("r-py-pydantic", "validation", v("pydantic"), lambda: SearchArgs.model_validate({"limit": "ten"}))
import jsonschema

case("r-py-jsonschema", "validation", v("jsonschema"), lambda: jsonschema.validate(
    {"query": "x", "limit": -1}, {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}}))

# ---------------------------------------------------------------- boto3 with no credentials
for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(name, None)
os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
import boto3

case("r-py-boto3-no-credentials", "auth", v("boto3"), lambda: boto3.client(
    "s3", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{CLOSED}").list_buckets())

# With credentials (fake), against the loopback server answering as AWS would.
def aws(service, route):
    return boto3.client(service, region_name="us-east-1", endpoint_url=f"{URL}/aws/{route}",
                        aws_access_key_id="AKIAEXAMPLEEXAMPLE00", aws_secret_access_key="secret/example/example/example",
                        config=__import__("botocore.config").config.Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


case("r-py-boto3-sts-expired", "auth", v("boto3"), lambda: aws("sts", "sts-expired").get_caller_identity())
case("r-py-boto3-s3-nokey", "not_found", v("boto3"), lambda: aws("s3", "s3-nokey").get_object(Bucket="b", Key="reports/q3.csv"))
case_as_text("r-py-text-boto3-sts-expired", "auth", v("boto3"), lambda: aws("sts", "sts-expired").get_caller_identity())

# ---------------------------------------------------------------- Azure SDKs
# azure-storage-blob and azure-mgmt-resource against the loopback server answering as Azure Storage
# and Resource Manager do, with a fake key and a fake token; azure-identity with no configuration.
from azure.core.credentials import AccessToken
from azure.identity import EnvironmentCredential
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.storage.blob import BlobClient

AZ = f"{v('azure-core')}, {v('azure-storage-blob')}"
ARM = f"{v('azure-core')}, {v('azure-mgmt-resource')}"


def blob(route):
    key = {"account_name": "devstoreaccount1", "account_key": "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="}
    client = BlobClient(account_url=f"{URL}/azure/{route}", container_name="reports", blob_name="q3.csv",
                        credential=key, retry_total=0)
    return lambda: client.download_blob()


class FakeToken:
    def get_token(self, *scopes, **kwargs):
        return AccessToken("eyJ0eXAiOiJKV1QifQ.e30.fake", 4102444800)


def arm(route):
    client = ResourceManagementClient(FakeToken(), "00000000-0000-0000-0000-000000000002",
                                      base_url=f"{URL}/azure/{route}", retry_total=0)
    # The policy refuses a bearer token over plain HTTP unless told the loopback is fine.
    return lambda: client.resource_groups.get("rg-agent", enforce_https=False)


case("r-py-azure-blob-not-found", "not_found", AZ, blob(1))
case("r-py-azure-storage-auth", "auth", AZ, blob(2))
case("r-py-azure-storage-permission", "permission_denied", AZ, blob(3))
case("r-py-azure-storage-busy", "unavailable", AZ, blob(4))
case("r-py-azure-arm-authorization", "permission_denied", ARM, arm(5))
case("r-py-azure-arm-no-group", "not_found", ARM, arm(6))
case("r-py-azure-arm-expired-token", "auth", ARM, arm(7))
case("r-py-azure-arm-throttled", "rate_limited", ARM, arm(8))
for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME"):
    os.environ.pop(name, None)
logging.getLogger("azure.identity").setLevel(logging.CRITICAL)
case("r-py-azure-no-credentials", "auth", v("azure-identity"),
     lambda: EnvironmentCredential().get_token("https://management.azure.com/.default"))
case_as_text("r-py-text-azure-storage-auth", "auth", AZ, blob(2))
case_as_text("r-py-text-azure-arm-authorization", "permission_denied", ARM, arm(5))
case_as_text("r-py-text-azure-arm-expired-token", "auth", ARM, arm(7))

# ---------------------------------------------------------------- google-auth
# A user's OAuth credentials whose refresh token was revoked, refreshed against the loopback server
# answering as Google's token endpoint does.
from google.auth.transport.requests import Request as GoogleRequest
from google.oauth2.credentials import Credentials as GoogleCredentials


def google_refresh(route):
    credentials = GoogleCredentials(token=None, refresh_token="1//0e-fake-refresh-token", client_secret="fake-secret",
                                    client_id="1234.apps.googleusercontent.com", token_uri=f"{URL}/google/{route}")
    return lambda: credentials.refresh(GoogleRequest())


case("r-py-google-auth-revoked", "auth", v("google-auth"), google_refresh(1))
case("r-py-google-auth-invalid-grant", "auth", v("google-auth"), google_refresh(2))
case_as_text("r-py-text-google-auth-invalid-grant", "auth", v("google-auth"), google_refresh(2))

# ---------------------------------------------------------------- python-telegram-bot
import telegram


def telegram_send(route):
    async def send():
        await telegram.Bot("123456:ABC-fake-token", base_url=f"{URL}/telegram/{route}/bot").send_message(chat_id=1, text="hi")
    return lambda: asyncio.run(send())


case("r-py-telegram-flood", "rate_limited", v("python-telegram-bot"), telegram_send(1))
case_as_text("r-py-text-telegram-flood", "rate_limited", v("python-telegram-bot"), telegram_send(1))

# ---------------------------------------------------------------- a port another socket holds
def bind_taken():
    with socket.socket() as again:
        again.bind(("127.0.0.1", PORT))


case("r-py-bind-in-use", "conflict", P, bind_taken)

# ---------------------------------------------------------------- smtplib
# A loopback SMTP server refusing the login as Gmail does (its 535 reply, two lines).
import smtplib


def smtp_refusing_logins():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve():
        while True:
            conn, _ = listener.accept()
            with conn, conn.makefile("rwb") as f:
                f.write(b"220 smtp.example.com ESMTP ready\r\n")
                f.flush()
                for line in f:
                    verb = line.split(b" ", 1)[0].strip().upper()
                    if verb == b"EHLO":
                        f.write(b"250-smtp.example.com at your service\r\n250-AUTH LOGIN PLAIN\r\n250 8BITMIME\r\n")
                    elif verb == b"AUTH":
                        f.write(b"535-5.7.8 Username and Password not accepted. For more information, go to\r\n"
                                b"535 5.7.8  https://support.google.com/mail/?p=BadCredentials a1b2c3 - gsmtp\r\n")
                    elif verb == b"QUIT":
                        f.write(b"221 2.0.0 closing connection\r\n")
                        f.flush()
                        break
                    else:
                        f.write(b"250 2.0.0 OK\r\n")
                    f.flush()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


SMTP_PORT = smtp_refusing_logins()


def smtp_login():
    with smtplib.SMTP("127.0.0.1", SMTP_PORT, timeout=5) as smtp:
        smtp.login("agent@example.com", "wrong-app-password")


case("r-py-smtp-auth", "auth", P, smtp_login)
case_as_text("r-py-text-smtp-auth", "auth", P, smtp_login)

# ---------------------------------------------------------------- huggingface_hub
# Downloading a model's file from the loopback server answering as the Hub does: a gated model the
# token was not granted, a repository that does not exist, a file the repository does not have.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-home-")
from huggingface_hub import hf_hub_download


def hf(route, repo="meta-llama/Llama-3.1-8B", filename="config.json"):
    return lambda: hf_hub_download(repo, filename, endpoint=f"{URL}/hf/{route}", token="hf_fakefakefakefakefakefakefakefake")


HFV = v("huggingface_hub")
case("r-py-hf-gated", "permission_denied", HFV, hf(1))
case_as_text("r-py-text-hf-gated", "permission_denied", HFV, hf(1))
case("r-py-hf-repo-not-found", "not_found", HFV, hf(2, repo="acme/no-such-model"))
case("r-py-hf-entry-not-found", "not_found", HFV, hf(3, filename="tokenizer.model"))

# ---------------------------------------------------------------- grpcio
# A loopback gRPC server whose handlers fail as a tool's backend does: an exception the handler does
# not map (grpcio answers UNKNOWN, "Exception calling application: ..."), an abort with a status, a
# deadline the caller set. The outcome as the Python client reads a grpc.RpcError: its str() and code().
from concurrent import futures

import grpc


def grpc_handler(request, context):
    what = request.decode()
    if what == "fetch":
        return requests.get(f"http://127.0.0.1:{CLOSED}/v1/search", timeout=2).content
    if what == "config":
        with open("/etc/agent-tools/search.yaml") as f:
            return f.read().encode()
    if what == "ratio":
        return str(len(what) / 0).encode()
    if what == "missing":
        context.abort(grpc.StatusCode.NOT_FOUND, "document 'q3-report' not found")
    time.sleep(2)
    return b"late"


GRPC_SERVER = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
GRPC_SERVER.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
    "tools.Tools", {"Call": grpc.unary_unary_rpc_method_handler(grpc_handler)})])
GRPC_PORT = GRPC_SERVER.add_insecure_port("127.0.0.1:0")
GRPC_SERVER.start()
GRPC_CALL = grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}").unary_unary("/tools.Tools/Call")
G = v("grpcio")


def grpc_call(what, timeout=5):
    return lambda: GRPC_CALL(what.encode(), timeout=timeout)


def fixed_grpc(line):
    # The peer's port and the time in grpcio's debug string change at every run.
    import re
    return re.sub(r'created_time:"[^"]*"', 'created_time:"2026-11-30T02:00:00.000000000+00:00"',
                  line.replace(str(GRPC_PORT), "8788"))


for case_id, category, what, timeout in [
    ("r-py-grpc-unknown-refused", "network", "fetch", 5),
    ("r-py-grpc-unknown-no-file", "not_found", "config", 5),
    ("r-py-grpc-unknown-zero-division", "internal", "ratio", 5),
    ("r-py-grpc-not-found", "not_found", "missing", 5),
    ("r-py-grpc-deadline", "timeout", "slow", 0.5),
]:
    try:
        grpc_call(what, timeout)()
        print(f"{case_id}: did not fail", file=sys.stderr)
    except grpc.RpcError as exc:
        o = outcome_of(exc)
        o["message"] = fixed_grpc(o["message"])
        emit(case_id, category, G, o)
GRPC_SERVER.stop(None)

# ---------------------------------------------------------------- the MCP Python SDK
# Its client against its own server, in process: JSON-RPC errors raised as MCPError (a numeric code,
# the message as str()), and a tool's failure answered as a result marked isError, whose text an
# agent reports as the message.
import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

MCP_SERVER = MCPServer("tools")


@MCP_SERVER.tool()
def add(a: int, b: int) -> int:
    return a + b


@MCP_SERVER.tool()
async def slow() -> str:
    await anyio.sleep(5)
    return "late"


M = v("mcp")


def mcp_call(call):
    """The call's isError text, or its error raised again outside the session (inside it, the
    session's task group would wrap it in an ExceptionGroup on the way out)."""
    async def go():
        async with Client(MCP_SERVER) as client:
            try:
                result = await call(client)
            except Exception as exc:  # the failure is the data
                return exc
            return result.content[0].text if result.is_error else None

    def run():
        answer = anyio.run(go)
        if isinstance(answer, Exception):
            raise answer
        return answer
    return run


case("r-py-mcp-unknown-resource", "not_found", M, mcp_call(lambda c: c.read_resource("file:///notes/q3.txt")))
case("r-py-mcp-timeout", "timeout", M, mcp_call(lambda c: c.call_tool("slow", {}, read_timeout_seconds=0.5)))
for case_id, category, call in [
    ("r-py-mcp-result-unknown-tool", "unknown_tool", lambda c: c.call_tool("serch_web", {"query": "x"})),
    ("r-py-mcp-result-bad-arguments", "validation", lambda c: c.call_tool("add", {"a": "two"})),
]:
    emit(case_id, category, M, {"message": mcp_call(call)()}, ["message-only"])

# ---------------------------------------------------------------- SDKs and frameworks with no API key
# Raised before any request, from the client's or the framework's own configuration check.
for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "TAVILY_API_KEY"):
    os.environ.pop(name, None)
from langchain_core.utils import get_from_dict_or_env


def anthropic_without_key():
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{CLOSED}", max_retries=0)
    client.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])


case("r-py-openai-no-key", "auth", O, lambda: openai.OpenAI())
case("r-py-anthropic-no-key", "auth", N, anthropic_without_key)
case("r-py-langchain-no-key", "auth", v("langchain-core"), lambda: get_from_dict_or_env({}, "openai_api_key", "OPENAI_API_KEY"))
case_as_text("r-py-text-langchain-no-key", "auth", v("langchain-core"),
             lambda: get_from_dict_or_env({}, "tavily_api_key", "TAVILY_API_KEY"))
os.environ.pop("SERPAPI_API_KEY", None)
case("r-py-environ-no-key", "auth", P, lambda: os.environ["SERPAPI_API_KEY"])
case_as_text("r-py-text-environ-no-key", "auth", P, lambda: os.environ["SERPAPI_API_KEY"])
case("r-py-dict-no-key", "validation", P, lambda: {"query": "weather"}["api_key"])
# A name the installed library does not have (code written for another version of it).
case("r-py-import-name", "not_found", P, lambda: exec("from json import loads_fast"))
case_as_text("r-py-text-import-name", "not_found", P, lambda: exec("from json import loads_fast"))

# ---------------------------------------------------------------- data tools: pandas, DuckDB, Pillow, SQLAlchemy, docker
import docker
import duckdb
import pandas
import sqlalchemy
from PIL import Image

data = tempfile.mkdtemp()
with open(f"{data}/rows.csv", "w") as f:
    f.write('a,b\n1,2\n3,4,5\n')
open(f"{data}/empty.csv", "w").close()
with open(f"{data}/chart.png", "w") as f:
    f.write("not an image")
PD = v("pandas")
case("r-py-pandas-missing-file", "not_found", PD, lambda: pandas.read_csv(f"{data}/sales.csv"))
case("r-py-pandas-bad-row", "format", PD, lambda: pandas.read_csv(f"{data}/rows.csv"))
case("r-py-pandas-empty-file", "format", PD, lambda: pandas.read_csv(f"{data}/empty.csv"))
case("r-py-pandas-no-column", "validation", PD, lambda: pandas.DataFrame({"a": [1, 2]})["price"])
DUCK = v("duckdb")
db = duckdb.connect()
db.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
case("r-py-duckdb-no-table", "not_found", DUCK, lambda: db.execute("SELECT * FROM sales"))
case("r-py-duckdb-no-column", "not_found", DUCK, lambda: db.execute("SELECT price FROM orders"))
case("r-py-duckdb-syntax", "validation", DUCK, lambda: db.execute("SELEC id FROM orders"))
case("r-py-duckdb-cast", "validation", DUCK, lambda: db.execute("SELECT 'abc'::INTEGER"))
case("r-py-duckdb-no-file", "not_found", DUCK, lambda: db.execute(f"SELECT * FROM read_csv('{data}/sales.csv')"))
case("r-py-pillow-not-an-image", "validation", v("pillow"), lambda: Image.open(f"{data}/chart.png"))
engine = sqlalchemy.create_engine(f"sqlite:///{data}/app.db")
with engine.connect() as connection:
    case("r-py-sqlalchemy-no-table", "not_found", v("sqlalchemy"),
         lambda: connection.execute(sqlalchemy.text("SELECT * FROM users")))
# The docker SDK with no daemon on this machine (no /var/run/docker.sock): its connection fails.
case("r-py-docker-no-daemon", "network", v("docker"), lambda: docker.from_env())

# ---------------------------------------------------------------- data stores, vector search, SSH and WebSockets
# Their clients at the closed port, at the port that never answers, and the HTTP ones at the loopback
# server, whose /es/ and /qdrant/ routes answer as Elasticsearch 8 and Qdrant 1.x do.
import pymongo

MONGO = v("pymongo")
case("r-py-pymongo-refused", "network", MONGO,
     lambda: pymongo.MongoClient(f"mongodb://127.0.0.1:{CLOSED}/", serverSelectionTimeoutMS=500).admin.command("ping"))
case("r-py-pymongo-no-answer", "timeout", MONGO,
     lambda: pymongo.MongoClient(f"mongodb://127.0.0.1:{SILENT}/", serverSelectionTimeoutMS=800,
                                 connectTimeoutMS=300, socketTimeoutMS=300).admin.command("ping"))
# A password with an @ in it, not percent-encoded, and a scheme pymongo does not know: the tool's
# configured URI, which no retry fixes.
case("r-py-pymongo-unescaped-password", "validation", MONGO, lambda: pymongo.MongoClient("mongodb://app:p@ss@127.0.0.1/db"))
case("r-py-pymongo-scheme", "validation", MONGO, lambda: pymongo.MongoClient("mongo://127.0.0.1/db"))

import elasticsearch

ES = v("elasticsearch")
es = lambda route: elasticsearch.Elasticsearch(f"{URL}/es/{route}", max_retries=0, retry_on_status=())
case("r-py-elasticsearch-refused", "network", ES, lambda: elasticsearch.Elasticsearch(f"http://127.0.0.1:{CLOSED}", max_retries=0).info())
case("r-py-elasticsearch-no-answer", "timeout", ES,
     lambda: elasticsearch.Elasticsearch(f"http://127.0.0.1:{SILENT}", max_retries=0, request_timeout=0.5).info())
for route, category in [("401", "auth"), ("404", "not_found"), ("400", "validation"), ("429", "rate_limited")]:
    case(f"r-py-elasticsearch-{route}", category, ES,
         lambda r=route: es(r).search(index="docs", query={"match": {"title": "rust"}}))

from qdrant_client import QdrantClient

QDRANT = v("qdrant-client")
qdrant = lambda route, **kw: QdrantClient(url=URL, prefix=f"qdrant/{route}", check_compatibility=False, **kw)
case("r-py-qdrant-refused", "network", QDRANT,
     lambda: QdrantClient(url=f"http://127.0.0.1:{CLOSED}", check_compatibility=False).get_collections())
case("r-py-qdrant-no-answer", "timeout", QDRANT,
     lambda: QdrantClient(url=f"http://127.0.0.1:{SILENT}", timeout=1, check_compatibility=False).get_collections())
case("r-py-qdrant-401", "auth", QDRANT, lambda: qdrant("401").get_collections())
for route, category in [("403", "permission_denied"), ("404", "not_found"), ("400", "validation")]:
    case(f"r-py-qdrant-{route}", category, QDRANT, lambda r=route: qdrant(r).query_points("docs", query=[0.1, 0.2, 0.3]))

import paramiko

SSH_CLIENT = v("paramiko")


def ssh(port):
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    return lambda: client.connect("127.0.0.1", port=port, username="agent", password="x", timeout=1, banner_timeout=1,
                                  auth_timeout=1)


logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # its transport thread logs the failure too
case("r-py-paramiko-refused", "network", SSH_CLIENT, ssh(CLOSED))
# The loopback HTTP server is no SSH server: what pointing a tool at the wrong port gives.
case("r-py-paramiko-not-ssh", "network", SSH_CLIENT, ssh(PORT))
case("r-py-paramiko-no-answer", "timeout", SSH_CLIENT, ssh(SILENT))

import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import serve as ws_serve

WS = v("websockets")


def websocket(port=None, handler=None, reject=None):
    """A client's exchange with a closed port, the silent one, or a websockets server of its own here."""
    async def exchange(port):
        async with ws_connect(f"ws://127.0.0.1:{port}/events", open_timeout=1) as ws:
            await ws.send("subscribe")
            await ws.recv()

    async def go():
        if port:
            return await exchange(port)
        async with ws_serve(handler or (lambda ws: ws.wait_closed()), "127.0.0.1", 0, process_request=reject) as server:
            await exchange(server.sockets[0].getsockname()[1])
    return lambda: asyncio.run(go())


case("r-py-websockets-refused", "network", WS, websocket(port=CLOSED))
case("r-py-websockets-no-answer", "timeout", WS, websocket(port=SILENT))
case("r-py-websockets-403", "permission_denied", WS, websocket(reject=lambda conn, request: conn.respond(403, "Forbidden\n")))
# The server closing the socket with a close code: 1011 is its internal error; 1008 a policy violation,
# here a key it refuses, as streaming APIs close a socket whose key is wrong.
case("r-py-websockets-1011", "internal", WS, websocket(handler=lambda ws: ws.close(1011, "internal error")))
case("r-py-websockets-1008-key", "auth", WS, websocket(handler=lambda ws: ws.close(1008, "invalid api key")))

import pymysql

MYSQL = v("PyMySQL")
case("r-py-pymysql-refused", "network", MYSQL, lambda: pymysql.connect(host="127.0.0.1", port=CLOSED, user="agent", password="x"))
case("r-py-pymysql-no-answer", "timeout", MYSQL,
     lambda: pymysql.connect(host="127.0.0.1", port=SILENT, user="agent", password="x", connect_timeout=1, read_timeout=1))

import neo4j

NEO4J = v("neo4j")
case("r-py-neo4j-refused", "network", NEO4J,
     lambda: neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{CLOSED}", auth=("neo4j", "x")).verify_connectivity())
case("r-py-neo4j-no-answer", "timeout", NEO4J,
     lambda: neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{SILENT}", auth=("neo4j", "x"), connection_timeout=1).verify_connectivity())

import asyncpg
import psycopg

PSYCOPG, ASYNCPG = v("psycopg"), v("asyncpg")
case("r-py-psycopg-refused", "network", PSYCOPG, lambda: psycopg.connect(f"host=127.0.0.1 port={CLOSED} user=agent dbname=app"))
case("r-py-psycopg-no-answer", "timeout", PSYCOPG,
     lambda: psycopg.connect(f"host=127.0.0.1 port={SILENT} user=agent dbname=app connect_timeout=1"))
case("r-py-asyncpg-refused", "network", ASYNCPG,
     lambda: asyncio.run(asyncpg.connect(host="127.0.0.1", port=CLOSED, user="agent", database="app")))
case("r-py-asyncpg-no-answer", "timeout", ASYNCPG,
     lambda: asyncio.run(asyncpg.connect(host="127.0.0.1", port=SILENT, user="agent", database="app", timeout=1)))

# ---------------------------------------------------------------- message brokers and column stores
import pika

PIKA = v("pika")
pika_params = lambda port: pika.ConnectionParameters(host="127.0.0.1", port=port, connection_attempts=1, socket_timeout=1,
                                                     blocked_connection_timeout=1, stack_timeout=1)
case("r-py-pika-refused", "network", PIKA, lambda: pika.BlockingConnection(pika_params(CLOSED)))
case("r-py-pika-no-answer", "timeout", PIKA, lambda: pika.BlockingConnection(pika_params(SILENT)))

import kafka

KAFKA = v("kafka-python")
case("r-py-kafka-refused", "network", KAFKA,
     lambda: kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{CLOSED}", request_timeout_ms=1000, max_block_ms=1000))
case("r-py-kafka-no-answer", "timeout", KAFKA,
     lambda: kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{SILENT}", request_timeout_ms=1000, max_block_ms=1000))

import aiokafka


async def aiokafka_start(port):
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=1000)
    try:
        await producer.start()
    finally:
        await producer.stop()

AIOKAFKA = v("aiokafka")
case("r-py-aiokafka-refused", "network", AIOKAFKA, lambda: asyncio.run(aiokafka_start(CLOSED)))

from cassandra.cluster import Cluster

CASSANDRA = v("cassandra-driver")
case("r-py-cassandra-refused", "network", CASSANDRA,
     lambda: Cluster(["127.0.0.1"], port=CLOSED, connect_timeout=1, protocol_version=4).connect())
case("r-py-cassandra-no-answer", "timeout", CASSANDRA,
     lambda: Cluster(["127.0.0.1"], port=SILENT, connect_timeout=1, protocol_version=4).connect())

import clickhouse_connect

CLICKHOUSE = v("clickhouse-connect")
case("r-py-clickhouse-refused", "network", CLICKHOUSE,
     lambda: clickhouse_connect.get_client(host="127.0.0.1", port=CLOSED, connect_timeout=1))
case("r-py-clickhouse-no-answer", "timeout", CLICKHOUSE,
     lambda: clickhouse_connect.get_client(host="127.0.0.1", port=SILENT, connect_timeout=1, send_receive_timeout=1))

# ---------------------------------------------------------------- agent frameworks
# What the frameworks an agent is built with raise when its model calls a tool wrongly: a tool it does
# not have, arguments the tool's schema refuses, arguments that are not JSON, prose where a tool call or
# code was wanted. pydantic-ai and smolagents run their own agent loops on a model scripted in-process
# (pydantic-ai's FunctionModel, a smolagents Model subclass), LangGraph its ToolNode on a model's message,
# instructor its retries against the loopback server. Labelled by what the agent must change.
import pydantic_ai
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel


def case_with_trace(id, category, source, run):
    """A case with its traceback as the detail, as the Python client sends it: pydantic-ai raises the
    same words for every tool its model kept calling wrongly, and names the cause only in the chain."""
    try:
        run()
    except BaseException as exc:  # the failure is the data
        trace = "".join(traceback.format_exception(exc)).replace(sys.prefix, "/venv")
        emit(id, category, source, {**outcome_of(exc), "detail": fixed(trace)}, ["trace"])
        return
    print(f"{id}: did not fail", file=sys.stderr)


class PaiCity(pydantic.BaseModel):
    name: str
    population: int


def pai_run(reply, output_type=str):
    """A pydantic-ai agent with one tool, get_weather(city), whose model always answers `reply`."""
    agent = pydantic_ai.Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[reply])), output_type=output_type, retries=1)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return lambda: agent.run_sync("The weather in Paris?")


PAI = v("pydantic-ai-slim")
case_with_trace("r-py-pydantic-ai-unknown-tool", "unknown_tool", PAI, pai_run(ToolCallPart("get_wether", {"city": "Paris"})))
case_with_trace("r-py-pydantic-ai-bad-args", "validation", PAI, pai_run(ToolCallPart("get_weather", {"town": "Paris"})))
case_with_trace("r-py-pydantic-ai-bad-json", "format", PAI, pai_run(ToolCallPart("get_weather", '{"city": "Paris"')))
case_with_trace("r-py-pydantic-ai-prose", "format", PAI,
                pai_run(TextPart("Paris has about two million people."), output_type=PaiCity))

from langchain_core.messages import AIMessage
from langchain_core.tools import tool as lc_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


@lc_tool
def lc_get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def tool_node(name, args, handle_tool_errors=True):
    """LangGraph's ToolNode running a model's call of tool `name`: with handle_tool_errors (its default) the
    failure comes back as the error ToolMessage's text, which an agent passes on as the outcome's message."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([lc_get_weather], handle_tool_errors=handle_tool_errors))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    call = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call_1", "type": "tool_call"}])
    return lambda: graph.compile().invoke({"messages": [call]})


def tool_message(id, category, source, run):
    reply = run()["messages"][-1]
    if getattr(reply, "status", None) != "error":
        print(f"{id}: did not fail", file=sys.stderr)
        return
    emit(id, category, source, {"message": reply.content})


LANGGRAPH = v("langgraph")
tool_message("r-py-langgraph-unknown-tool", "unknown_tool", LANGGRAPH, tool_node("get_wether", {"city": "Paris"}))
tool_message("r-py-langgraph-bad-args", "validation", LANGGRAPH, tool_node("lc_get_weather", {"town": "Paris"}))
case("r-py-langgraph-bad-args-raised", "validation", LANGGRAPH,
     tool_node("lc_get_weather", {"town": "Paris"}, handle_tool_errors=False))

import smolagents
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole


@smolagents.tool
def sm_get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@smolagents.tool
def sm_search(query: str) -> str:
    """Searches the web.

    Args:
        query: What to look for.
    """
    return urllib.request.urlopen(f"http://127.0.0.1:{CLOSED}/search?q={query}", timeout=2).read().decode()


class ScriptedModel(smolagents.Model):
    """A model that answers every step the same: a tool call (name, arguments) or text."""

    def __init__(self, reply):
        super().__init__(model_id="scripted")
        self.reply = reply

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        if isinstance(self.reply, tuple):
            call = ChatMessageToolCall(id="call_1", type="function", function=ChatMessageToolCallFunction(name=self.reply[0], arguments=self.reply[1]))
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.reply)


def smol_step(agent_type, reply):
    """Runs one step of a smolagents agent and raises the error it recorded for that step (the agent
    hands it to its model and goes on; a step callback would report it)."""
    def run():
        agent = agent_type(tools=[sm_get_weather, sm_search], model=ScriptedModel(reply), max_steps=1, verbosity_level=0)
        # What it prints of its steps is not this script's output.
        with contextlib.redirect_stdout(io.StringIO()):
            agent.run("What is the weather in Paris?")
        errors = [step.error for step in agent.memory.steps if getattr(step, "error", None) is not None]
        if errors:
            raise errors[0]
    return run


SMOL = v("smolagents")
case("r-py-smolagents-unknown-tool", "unknown_tool", SMOL, smol_step(smolagents.ToolCallingAgent, ("get_wether", {"city": "Paris"})))
case("r-py-smolagents-bad-args", "validation", SMOL, smol_step(smolagents.ToolCallingAgent, ("sm_get_weather", {"town": "Paris"})))
case("r-py-smolagents-tool-refused", "network", SMOL, smol_step(smolagents.ToolCallingAgent, ("sm_search", {"query": "rust"})))
case("r-py-smolagents-no-code", "format", SMOL, smol_step(smolagents.CodeAgent, "The weather is probably sunny."))
case("r-py-smolagents-syntax", "format", SMOL,
     smol_step(smolagents.CodeAgent, "Thought: ask the tool\n<code>\nprint(sm_get_weather(city='Paris'\n</code>"))
case("r-py-smolagents-unknown-function", "unknown_tool", SMOL,
     smol_step(smolagents.CodeAgent, "Thought: ask the tool\n<code>\nprint(get_wether(city='Paris'))\n</code>"))

import instructor


class InstructorUser(pydantic.BaseModel):
    name: str
    age: int


def extract(route):
    client = instructor.from_openai(openai.OpenAI(api_key="sk-test", base_url=f"{URL}/openai/{route}", max_retries=0))
    return lambda: client.chat.completions.create(model="gpt-4o-mini", response_model=InstructorUser, max_retries=1,
                                                  messages=[{"role": "user", "content": "Ann is thirty."}])


INSTRUCTOR = f"{v('instructor')}, {v('openai')}"
case("r-py-instructor-prose", "format", INSTRUCTOR, extract("prose"))
case("r-py-instructor-bad-args", "validation", INSTRUCTOR, extract("badargs"))
case("r-py-instructor-cut-json", "format", INSTRUCTOR, extract("cutjson"))

# tenacity's @retry around a tool's call, out of attempts: RetryError names the last attempt's exception
# only by its class (`RetryError[<Future at 0x... state=finished raised ConnectError>]`); the chain has it.
import tenacity


def with_retries(call):
    @tenacity.retry(stop=tenacity.stop_after_attempt(2), wait=tenacity.wait_none())
    def run():
        return call()
    return run


TENACITY = v("tenacity")
case_with_trace("r-py-tenacity-refused", "network", f"{TENACITY}, {v('httpx')}",
                with_retries(lambda: httpx.get(f"http://127.0.0.1:{CLOSED}/search")))
case_with_trace("r-py-tenacity-timeout", "timeout", f"{TENACITY}, {v('httpx')}",
                with_retries(lambda: httpx.get(f"{URL}/slow", timeout=0.5)))

# ---------------------------------------------------------------- playwright, driving Debian's chromium
import shutil
from playwright.sync_api import sync_playwright

with sync_playwright() as browsers:
    chromium = shutil.which("chromium")
    browser = browsers.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    PW = f"{v('playwright')}, chromium {browser.version} (Debian)"
    page = browser.new_page()
    case("r-py-playwright-refused", "network", PW, lambda: page.goto(f"http://127.0.0.1:{CLOSED}/"))
    case("r-py-playwright-dns", "network", PW, lambda: page.goto("http://api.nonexistent.invalid/"))
    # A locator that names two elements: Playwright refuses to guess which one to click.
    page.set_content("<form><button>Save</button><button>Cancel</button></form>")
    case("r-py-playwright-strict-mode", "validation", PW, lambda: page.locator("button").click(timeout=2000))
    # A cookie banner over the page takes every click until the click times out: the page's state is in the way.
    page.set_content('<button id="save">Save</button>'
                     '<div id="cookie-banner" style="position:fixed;inset:0;background:#0008">We use cookies</div>')
    case("r-py-playwright-click-intercepted", "conflict", PW, lambda: page.locator("#save").click(timeout=2000))
    browser.close()
