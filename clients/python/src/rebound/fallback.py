"""The local fallback policy: what the client decides on its own when the sidecar cannot be
reached within the call deadline. It carries the sidecar's seed defaults and classifies by the
structured signals of the sidecar's rules that read one signal alone (src/defaults/rules.toml),
each in the category that rule gives: the outcome's kind; the error codes of every code rule
(providers' codes, errno names, Node's and undici's codes, MCP's JSON-RPC codes); the exception
types of every exception rule; every gRPC code (RESOURCE_EXHAUSTED escalated when its words say a
quota is used up); every HTTP status of the status rules (400 to 416, 422, 428, 429, 431, 451, 499,
500 to 505, 507, 508, 520 to 524 and 529), then any other 4xx (validation) and 5xx (internal); the
exit codes 124, 126, 127, 130, 137 and 143. A parse error raised inside a tool (kind tool_error with
JSONDecodeError and the like) is internal, as the sidecar's rule kind.tool_error.parse says. It
reads no message words: the rules that read words, alone or with a signal, are not carried (a
ValueError is validation whatever it says, a 429 a rate limit even when it names a quota). Each
category answers with the sidecar's policy (src/defaults/categories.toml): timeouts, connection
errors, rate limits and unavailable servers retried, internal errors retried once, credentials,
permissions and quotas escalated, an input too long or filtered replanned, a cancellation aborted,
an unknown tool reclassified (choose another tool), anything else back to the LLM (recover); its
suggestion, or the rule's own where the sidecar's rule gives one. The signals rank as the sidecar
scores them: the outcome's kind, then its error code, exception type, gRPC code, a single HTTP
status, exit code and an HTTP range (`classify_coarse`). Over that plan, the sidecar's session
breakers (src/breaker.rs): identical errors in a row and a step or cost limit abort, failures of
one tool in a row and errors in the session escalate, and a stopped session stays stopped. Every
message it writes is redacted as the sidecar redacts it (see `rebound.redact`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Optional

from rebound.outcome import MAX_MESSAGE_CHARS
from rebound.redact import redact
from rebound.v1 import rebound_pb2 as pb
from rebound.verdict import Action, Category, Kind

__all__ = ["FallbackPolicy", "SessionCounters", "DeclaredLimits"]

_RETRYABLE = frozenset(
    {Category.TIMEOUT, Category.NETWORK, Category.UNAVAILABLE, Category.RATE_LIMITED, Category.INTERNAL}
)

# The retries an internal error gets at most, as the sidecar's categories.toml (max_retries = 1):
# a failure inside the tool may be a fluke once, but seldom goes away when asked again.
_INTERNAL_MAX_RETRIES = 1

# Error codes, as the sidecar's rules that read a code and nothing else list them
# (src/defaults/rules.toml; test_fallback checks each list for drift, with its category): the
# providers' (a quota is not retried but escalated, an input too long or filtered is replanned, an
# overloaded provider is retried with backoff and an error inside it once, a rate limit retried),
# those of a timeout or a failed connection (errno names, Node's and undici's codes: retried), of
# credentials and permissions (escalated), of a missing thing, a bad argument or a conflict
# (recover), a full disk (escalated), a cancellation (aborted) and MCP's JSON-RPC error codes. As on
# the sidecar, a code wins over an exception type, a gRPC code, an HTTP status and an exit code:
# OpenAI sends insufficient_quota with a 429, and a 503 whose connection was reset (ECONNRESET) is a
# network failure. The rules that read a code and words
# (code.validation.quota, code.validation.context_length) are not carried: the fallback reads no
# words there. Looked up trimmed and in ASCII lower case (`_code_key`), as the sidecar matches a code.
_CODE_LISTS = {
    # Rule code.insufficient_quota.
    **dict.fromkeys(
        ["insufficient_quota", "billing_error", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded",
         "QuotaExceeded", "credit_balance_too_low", "ServiceQuotaExceededException", "LimitExceededException",
         "budget_exceeded"],
        (Category.QUOTA_EXCEEDED, "fallback.code_quota"),
    ),
    # Rule code.rate_limit.
    **dict.fromkeys(
        ["rate_limit_exceeded", "rate_limit_error", "RateLimitExceeded", "ThrottlingException", "Throttling",
         "ProvisionedThroughputExceededException", "TooManyRequests", "TooManyRequestsException", "SlowDown",
         "RequestLimitExceeded", "ratelimited", "rate_limited", "429"],
        (Category.RATE_LIMITED, "fallback.code_rate_limit"),
    ),
    # Rule code.context_length.
    **dict.fromkeys(
        ["context_length_exceeded", "string_above_max_length", "max_tokens_exceeded", "request_too_large"],
        (Category.CONTEXT_LENGTH, "fallback.code_context_length"),
    ),
    # Rule code.content_filter.
    **dict.fromkeys(
        ["content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation", "SAFETY", "safety",
         "PROHIBITED_CONTENT"],
        (Category.CONTENT_FILTER, "fallback.code_content_filter"),
    ),
    # Rule code.auth.
    **dict.fromkeys(
        ["invalid_api_key", "authentication_error", "invalid_auth", "not_authed", "ExpiredToken", "ExpiredTokenException",
         "InvalidClientTokenId", "UnrecognizedClientException", "InvalidAccessKeyId", "SignatureDoesNotMatch",
         "token_expired", "unauthorized", "UNAUTHENTICATED", "bad_credentials",
         "InvalidAuthenticationToken", "ExpiredAuthenticationToken", "InvalidAuthenticationTokenTenant",
         "AuthenticationFailed", "InvalidAuthenticationInfo", "NoAuthenticationInformation",
         "invalid_grant", "invalid_client", "unauthorized_client"],
        (Category.AUTH, "fallback.code_auth"),
    ),
    # Rule code.permission.
    **dict.fromkeys(
        ["permission_error", "AccessDenied", "AccessDeniedException", "Forbidden", "insufficient_permissions",
         "missing_scope", "not_allowed_token_type", "PERMISSION_DENIED", "EACCES", "EPERM",
         "AuthorizationFailed", "AuthorizationPermissionMismatch", "AuthorizationFailure",
         "LinkedAuthorizationFailed"],
        (Category.PERMISSION_DENIED, "fallback.code_permission"),
    ),
    # Rule code.not_found.
    **dict.fromkeys(
        ["model_not_found", "not_found_error", "NoSuchKey", "NoSuchBucket", "ResourceNotFoundException", "NotFound",
         "channel_not_found", "resource_missing", "ENOENT", "ENOTDIR", "EISDIR", "NOT_FOUND", "MODULE_NOT_FOUND",
         "ERR_MODULE_NOT_FOUND",
         "ResourceGroupNotFound", "ResourceNotFound", "SubscriptionNotFound", "BlobNotFound",
         "ContainerNotFound", "QueueNotFound", "ShareNotFound"],
        (Category.NOT_FOUND, "fallback.code_not_found"),
    ),
    # Rule code.validation.
    **dict.fromkeys(
        ["ValidationException", "ValidationError", "invalid_arguments",
         "invalid_parameter", "parameter_invalid", "InvalidParameterValue", "invalid_type", "EINVAL",
         "ERR_INVALID_ARG_TYPE", "ERR_INVALID_ARG_VALUE", "ERR_INVALID_URL", "INVALID_ARGUMENT", "MissingParameter",
         "card_declined", "expired_card", "incorrect_cvc", "incorrect_number"],
        (Category.VALIDATION, "fallback.code_validation"),
    ),
    # Rule code.conflict.
    **dict.fromkeys(
        ["ConditionalCheckFailedException", "ResourceInUseException", "BucketAlreadyExists", "BucketAlreadyOwnedByYou",
         "already_exists", "ConflictException", "EEXIST", "ENOTEMPTY", "ALREADY_EXISTS", "name_taken",
         "ContainerAlreadyExists", "BlobAlreadyExists", "ResourceGroupBeingDeleted", "EADDRINUSE",
         "idempotency_error"],
        (Category.CONFLICT, "fallback.code_conflict"),
    ),
    # Rule code.overloaded.
    **dict.fromkeys(
        ["overloaded_error", "ServiceUnavailable", "ServiceUnavailableException", "ModelNotReadyException",
         "server_overloaded", "engine_overloaded", "UNAVAILABLE", "InternalFailure", "ModelStreamErrorException",
         "ServerBusy"],
        (Category.UNAVAILABLE, "fallback.code_overloaded"),
    ),
    # Rule code.internal.
    **dict.fromkeys(
        ["internal_error", "InternalServerError", "InternalServerException", "INTERNAL"],
        (Category.INTERNAL, "fallback.code_internal"),
    ),
    # Rule code.timeout, all under the rule id fallback.code_etimedout, after ETIMEDOUT, the first of them.
    **dict.fromkeys(
        ["ETIMEDOUT", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT",
         "RequestTimeout", "RequestTimeoutException", "timeout", "timeout_error", "DEADLINE_EXCEEDED",
         "ModelTimeoutException"],
        (Category.TIMEOUT, "fallback.code_etimedout"),
    ),
    # Rule code.network.
    **dict.fromkeys(
        ["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ENOTCONN", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH",
         "ENETUNREACH", "ENETDOWN", "EHOSTDOWN", "ERR_TLS_CERT_ALTNAME_INVALID", "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
         "CERT_HAS_EXPIRED", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UND_ERR_SOCKET",
         "UND_ERR_CLOSED", "ERR_SOCKET_CONNECTION_TIMEOUT", "EPROTO"],
        (Category.NETWORK, "fallback.code_network"),
    ),
    # Rule code.quota_disk, with the rule's own suggestion (`_RULE_SUGGESTIONS`).
    **dict.fromkeys(["ENOSPC", "EDQUOT"], (Category.QUOTA_EXCEEDED, "fallback.code_quota_disk")),
    # Rule code.cancelled.
    **dict.fromkeys(
        ["ABORT_ERR", "ERR_CANCELED", "CANCELLED", "canceled", "cancelled"],
        (Category.CANCELLED, "fallback.code_cancelled"),
    ),
    # MCP's JSON-RPC error codes: rules code.mcp.timeout, code.mcp.parse, code.mcp.invalid and
    # code.mcp.method (-32603 is a weak signal, read last: `_WEAK_SIGNALS`).
    "-32001": (Category.TIMEOUT, "fallback.code_mcp_timeout"),
    "-32700": (Category.FORMAT, "fallback.code_mcp_parse"),
    **dict.fromkeys(["-32600", "-32602"], (Category.VALIDATION, "fallback.code_mcp_invalid")),
    "-32601": (Category.NOT_FOUND, "fallback.code_mcp_method"),
}

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# What Rust's `str::trim` takes off: the Unicode White_Space property (str.strip() also takes
# \x1c-\x1f).
_RUST_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def _code_key(code: str) -> str:
    """A code as the sidecar compares it: trimmed, then ASCII letters in lower case (Rust's
    `eq_ignore_ascii_case`: no other letter changes case, so the Kelvin sign is no `k`)."""
    return code.strip(_RUST_WHITE_SPACE).translate(_ASCII_LOWER)


# The lists above by `_code_key` (`SAFETY` and `safety` are one key).
_CODES = {_code_key(code): verdict for code, verdict in _CODE_LISTS.items()}

# Exception types, as the sidecar's rules that read an exception type and nothing else name them,
# in their order (src/defaults/rules.toml, rules exception.cancelled to exception.internal;
# test_fallback checks each list for drift, with its category, and the order). A type matches as
# there (`_by_exception_type`): by its full name or its last part, in its own case, the first rule
# that names it winning. The rules that read a type and words (exception.typeerror.fetch_url,
# exception.typeerror.fetch, exception.rangeerror.stack, exception.valueerror.parse,
# exception.runtimeerror.memory, exception.valueerror.context_length, exception.missing_credentials,
# exception.keyerror.credentials, exception.ratelimiterror.request_too_large,
# exception.timeout.sandbox_gone) are not carried: the fallback reads no words there, so a TypeError
# is validation whatever it says.
_EXCEPTION_TYPE_RULES = (
    # Rule exception.cancelled.
    (
        frozenset({
            "CancelledError", "asyncio.CancelledError", "concurrent.futures.CancelledError", "KeyboardInterrupt",
            "AbortError", "APIUserAbortError", "ClientClosedRequestError", "OperationCanceledException",
            "TaskCanceledException", "InterruptedException", "CancellationException",
        }),
        (Category.CANCELLED, "fallback.type_cancelled"),
    ),
    # Rule exception.timeout.
    (
        frozenset({
            "TimeoutError", "Timeout", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout",
            "TimeoutException", "ReadTimeoutError", "ConnectTimeoutError", "ServerTimeoutError",
            "APITimeoutError", "RequestTimeoutError", "SocketTimeoutException", "HttpTimeoutException",
            "TimeoutExpired", "DeadlineExceeded", "ReadTimeoutException", "asyncio.TimeoutError",
            "socket.timeout",
            "ServiceRequestTimeoutError", "ServiceResponseTimeoutError", "QdrantClientTimeoutError",
        }),
        (Category.TIMEOUT, "fallback.type_timeout"),
    ),
    # Rule exception.network.
    (
        frozenset({
            "ConnectionError", "ConnectError", "ChunkedEncodingError", "IncompleteRead",
            "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError", "BrokenPipeError",
            "NewConnectionError", "ProtocolError", "RemoteProtocolError", "ReadError", "WriteError",
            "NetworkError", "ClientConnectorError", "ClientConnectionError", "ServerDisconnectedError",
            "ClientOSError", "APIConnectionError", "SSLError", "SSLCertVerificationError",
            "ConnectException", "UnknownHostException", "NoRouteToHostException", "SocketException",
            "gaierror", "socket.gaierror", "MaxRetryError", "EndpointConnectionError",
            "ConnectionClosedError",
            "ServiceRequestError", "ServiceResponseError", "NoBrokersAvailable", "OpenAIIoException",
            "AnthropicIoException", "AnthropicIOException", "AMQPConnectionError", "KafkaConnectionError",
        }),
        (Category.NETWORK, "fallback.type_connection"),
    ),
    # Rule exception.rate_limited.
    (
        frozenset({
            "RateLimitError", "openai.RateLimitError", "anthropic.RateLimitError", "TooManyRequests",
            "ThrottlingException", "ResourceExhausted", "RetryAfter", "TelegramRetryAfter", "FloodWaitError",
        }),
        (Category.RATE_LIMITED, "fallback.type_rate_limited"),
    ),
    # Rule exception.unavailable.
    (
        frozenset({
            "ServiceUnavailableError", "ServiceUnavailable", "OverloadedError", "BadGateway", "GatewayTimeout",
            "GatewayTimeoutError",
        }),
        (Category.UNAVAILABLE, "fallback.type_unavailable"),
    ),
    # Rule exception.auth.
    (
        frozenset({
            "AuthenticationError", "openai.AuthenticationError", "anthropic.AuthenticationError", "Unauthenticated",
            "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "ExpiredTokenException",
            "InvalidAuthenticationError", "CredentialsError", "IdentityTokenFileError",
            "ClientAuthenticationError", "CredentialUnavailableError", "AuthenticationRequiredError", "RefreshError",
            "SMTPAuthenticationError",
            "AI_LoadAPIKeyError",
        }),
        (Category.AUTH, "fallback.type_auth"),
    ),
    # Rule exception.permission.
    (
        frozenset({
            "PermissionDeniedError", "PermissionError", "PermissionDenied", "AccessDeniedException", "Forbidden",
            "SecurityException", "UnauthorizedAccessException", "AccessDeniedError",
        }),
        (Category.PERMISSION_DENIED, "fallback.type_permission"),
    ),
    # Rule exception.not_found.
    (
        frozenset({
            "NotFoundError", "FileNotFoundError", "NotFound", "NoSuchKey", "ModuleNotFoundError",
            "FileNotFoundException", "NoSuchFileException", "NoSuchElementException", "ResourceNotFoundException",
            "IsADirectoryError", "NotADirectoryError", "ProcessLookupError", "LookupError",
            "ResourceNotFoundError",
            "AI_NoSuchModelError", "AI_NoSuchProviderError",
        }),
        (Category.NOT_FOUND, "fallback.type_not_found"),
    ),
    # Rule exception.unknown_tool: the Vercel AI SDK's, for a tool the model named that the agent does not have.
    (frozenset({"AI_NoSuchToolError"}), (Category.UNKNOWN_TOOL, "fallback.type_unknown_tool")),
    # Rule exception.validation.
    (
        frozenset({
            "ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "AssertionError",
            "ValidationError", "pydantic.ValidationError", "pydantic_core.ValidationError",
            "UnprocessableEntityError", "RequestHeaderFieldsTooLargeError", "ZodError", "InvalidArgument",
            "IllegalArgumentException", "IllegalStateException", "NumberFormatException", "ArgumentException",
            "ArgumentNullException", "ArgumentOutOfRangeException", "FormatException", "ParamValidationError",
            "UnicodeDecodeError", "UnicodeEncodeError", "UndefinedError", "TemplateSyntaxError",
            "ZeroDivisionError", "OverflowError", "RangeError", "jsonschema.exceptions.ValidationError",
            "AI_InvalidArgumentError", "AI_InvalidPromptError", "AI_UnsupportedFunctionalityError",
            "AI_InvalidMessageRoleError", "AI_MessageConversionError", "AI_InvalidDataContentError",
            "AI_TooManyEmbeddingValuesForCallError", "AI_MissingToolResultsError",
            "UnidentifiedImageError", "PrismaClientValidationError", "InvalidURI", "ParseConfigError",
            "ToolInvocationError", "AgentToolCallError",
        }),
        (Category.VALIDATION, "fallback.type_validation"),
    ),
    # Rule exception.format.
    (
        frozenset({
            "JSONDecodeError", "json.JSONDecodeError", "json.decoder.JSONDecodeError", "OutputParserException",
            "langchain_core.exceptions.OutputParserException", "SyntaxError", "JsonParseException",
            "JsonSyntaxException", "MismatchedInputException", "InvalidFormatException", "JsonMappingException",
            "JsonEOFException", "YAMLError", "ScannerError", "ParserError",
            "AI_InvalidToolInputError", "AI_InvalidToolArgumentsError", "AI_JSONParseError", "AI_TypeValidationError",
            "AI_NoObjectGeneratedError", "AI_InvalidResponseDataError",
            "EmptyDataError", "JsonException", "JsonReaderException", "JsonSerializationException", "AgentParsingError",
        }),
        (Category.FORMAT, "fallback.type_format"),
    ),
    # Rule exception.conflict.
    (
        frozenset({
            "UniqueViolation", "IntegrityError", "FileExistsError", "FileAlreadyExistsException", "ConflictError", "PreconditionFailedError",
            "ConcurrentModificationException", "DuplicateKeyException", "OptimisticLockException",
            "StaleElementReferenceException",
            "ResourceExistsError", "ResourceModifiedError",
            "IdempotencyError", "StripeIdempotencyError",
        }),
        (Category.CONFLICT, "fallback.type_conflict"),
    ),
    # Rule exception.context_length.
    (
        frozenset({"ContextWindowExceededError", "ContextLengthExceededError", "ContentTooLargeError"}),
        (Category.CONTEXT_LENGTH, "fallback.type_context_length"),
    ),
    # Rule exception.content_filter.
    (
        frozenset({
            "ContentPolicyViolationError", "ContentFilterFinishReasonError", "BlockedPromptException",
            "StopCandidateException",
        }),
        (Category.CONTENT_FILTER, "fallback.type_content_filter"),
    ),
    # Rule exception.quota.
    (
        frozenset({
            "QuotaExceededError", "InsufficientQuotaError", "PaymentRequiredError", "MemoryError",
            "OutOfMemoryError", "DiskFullError", "_ArrayMemoryError", "OutOfMemoryException", "BudgetExceededError",
        }),
        (Category.QUOTA_EXCEEDED, "fallback.type_quota"),
    ),
    # Rule exception.internal.
    (
        frozenset({
            "RuntimeError", "NotImplementedError", "RecursionError", "SystemError", "NullPointerException",
            "panic", "InternalError", "HTTPNotImplementedError", "ArrayIndexOutOfBoundsException",
            "IndexOutOfBoundsException", "ClassCastException",
        }),
        (Category.INTERNAL, "fallback.type_internal"),
    ),
)

# A parse error raised inside a tool that ran, as the sidecar's rule kind.tool_error.parse reads
# it (kind tool_error and one of these types, 160: over any code or type): what failed to parse came
# from elsewhere (an error page, a changed format), so it is internal, retried once, with the rule's
# own suggestion, where the same type alone is the model's format error. `build_outcome` gives a
# tool's own exception the kind tool_error, so a json.JSONDecodeError raised by a tool is this case.
# Matched as the types above (test_fallback checks the list for drift).
_TOOL_ERROR_PARSE_TYPES = frozenset({
    "JSONDecodeError", "json.JSONDecodeError", "json.decoder.JSONDecodeError", "SyntaxError", "JsonParseException",
    "JsonSyntaxException", "JsonEOFException", "MismatchedInputException", "JsonException", "JsonReaderException",
})
_TYPE_SEPARATORS = re.compile("[.:]")


def _type_names(exception_type: str) -> tuple[str, str]:
    """A type as the sidecar matches one: trimmed, then its full name and its last part after a
    `.` or `:` (`requests.exceptions.ReadTimeout` and `ReadTimeout`)."""
    name = exception_type.strip(_RUST_WHITE_SPACE)
    return name, _TYPE_SEPARATORS.split(name)[-1]


def _by_exception_type(exception_type: str) -> Optional[tuple[Category, str]]:
    """The category and rule id of a type the rules above name, as the sidecar matches one: the
    type trimmed, then its full name or its last part after a `.` or `:`, case-sensitive, the
    first rule that names either winning (`requests.exceptions.ReadTimeout` is `ReadTimeout`;
    `readtimeout`, `grpc.FutureTimeoutError` and a name that only holds a listed one are none)."""
    name, last = _type_names(exception_type)
    return next((verdict for types, verdict in _EXCEPTION_TYPE_RULES if name in types or last in types), None)


def _by_weak_exception_type(exception_type: str) -> Optional[tuple[Category, str]]:
    """The category and rule id of a type a weak exception rule names (`_WEAK_EXCEPTION_TYPES`),
    matched as `_by_exception_type` matches one."""
    name, last = _type_names(exception_type)
    return next((verdict for _, types, verdict in _WEAK_EXCEPTION_TYPES if name in types or last in types), None)


def _knows_type(exception_type: str) -> bool:
    """Whether the fallback reads `exception_type`: one of its exception rules' types, weak ones too,
    or a parse type."""
    return (
        _by_exception_type(exception_type) is not None
        or _by_weak_exception_type(exception_type) is not None
        or not _TOOL_ERROR_PARSE_TYPES.isdisjoint(_type_names(exception_type))
    )


_TYPE_ENDINGS = ("Error", "Exception", "Interrupt", "Exit", "Timeout")
_TYPE_NAME = re.compile("[A-Za-z0-9_.]+")
_JAVA_THREAD = 'Exception in thread "'


def _type_in_message(message: str) -> str:
    """The type a one-line message begins with, as the sidecar reads one (`type_in_message` in
    src/classify.rs), or "": JavaScript's `String(error)` and Python's `format_exception_only` write
    an error as `TimeoutError: The operation was aborted due to timeout`. The name runs to the first
    `:`, is ASCII letters, digits, `_` and `.`, and ends as a type's name does."""
    if "\n" in message:
        return ""
    line = message.strip(_RUST_WHITE_SPACE)
    if line.startswith(_JAVA_THREAD):
        rest = line[len(_JAVA_THREAD):]
        _, quote, after = rest.partition('" ')
        line = after if quote else rest
    name = line.partition(":")[0]
    return name if name.endswith(_TYPE_ENDINGS) and _TYPE_NAME.fullmatch(name) else ""


def _exception_type(o: pb.Outcome) -> str:
    """The type the fallback reads: the outcome's, or, when it names none the fallback knows (a
    wrapper such as LangChain's `ToolException`, or none at all), the one its message begins with if
    the fallback knows that one, as the sidecar reads a type from a one-line message."""
    if _knows_type(o.exception_type):
        return o.exception_type
    named = _type_in_message(o.message)
    return named if named and _knows_type(named) else o.exception_type


# gRPC status codes (fixed by the gRPC spec) as the sidecar's rules grpc.* name them
# (test_fallback checks for drift); RESOURCE_EXHAUSTED, which also reads words, comes below, and
# UNKNOWN is a weak signal (`_WEAK_SIGNALS`).
_GRPC_CATEGORIES = {
    1: (Category.CANCELLED, "fallback.grpc_cancelled"),
    3: (Category.VALIDATION, "fallback.grpc_invalid_argument"),
    4: (Category.TIMEOUT, "fallback.grpc_deadline_exceeded"),
    5: (Category.NOT_FOUND, "fallback.grpc_not_found"),
    6: (Category.CONFLICT, "fallback.grpc_conflict"),  # ALREADY_EXISTS
    7: (Category.PERMISSION_DENIED, "fallback.grpc_permission_denied"),
    9: (Category.CONFLICT, "fallback.grpc_conflict"),  # FAILED_PRECONDITION
    10: (Category.CONFLICT, "fallback.grpc_conflict"),  # ABORTED
    11: (Category.VALIDATION, "fallback.grpc_invalid_argument"),  # OUT_OF_RANGE
    12: (Category.NOT_FOUND, "fallback.grpc_not_found"),  # UNIMPLEMENTED
    13: (Category.INTERNAL, "fallback.grpc_internal"),
    14: (Category.UNAVAILABLE, "fallback.grpc_unavailable"),
    15: (Category.INTERNAL, "fallback.grpc_internal"),  # DATA_LOSS
    16: (Category.AUTH, "fallback.grpc_unauthenticated"),
}

# The weak signals, which say only that a handler failed or a request was refused: gRPC's UNKNOWN
# (what a server answers for an exception it did not map: grpcio's "Exception calling application:
# ..."), JSON-RPC's internal error, -32603 (what an MCP server answers for whatever a handler threw),
# the class of error OpenAI, Anthropic and Stripe name in a refused request's body
# (invalid_request_error, OAuth's invalid_request: OpenAI's 401 for a missing API key has no other
# code) and in the body of their own failure (server_error, api_error: OpenAI's 500 and its
# overloaded 503 alike), and the exception types that say only which layer failed
# (`_WEAK_EXCEPTION_TYPES`). The sidecar's rules grpc.unknown, code.mcp.internal,
# code.invalid_request, code.server_error and those types' score them 9
# (their priority), below every other signal and below any words, which say what failed; the
# fallback reads no words, so it reads them after every other signal, in that order (listed so).
_GRPC_UNKNOWN = 2
_MCP_INTERNAL = "-32603"
_INVALID_REQUEST = frozenset({"invalid_request_error", "invalid_request"})
_SERVER_ERROR = frozenset({"server_error", "api_error"})
_WEAK_SIGNALS = {
    "grpc.unknown": (Category.INTERNAL, "fallback.grpc_unknown"),
    "code.mcp.internal": (Category.INTERNAL, "fallback.code_mcp_internal"),
    "code.invalid_request": (Category.VALIDATION, "fallback.code_invalid_request"),
    "code.server_error": (Category.INTERNAL, "fallback.code_server_error"),
}
# The sidecar's exception rules of priority 9, in its order: types raised for failures of several
# categories, which a status or words decide (.NET's HttpRequestException for a refused connection
# and a refused status alike, Spring's ResourceAccessException for any I/O error, LangChain4j's
# InvalidRequestException and InternalServerException, named by status class; go-openai's APIError
# for whatever the API answered, and the base class of the OpenAI and Google Python SDKs).
_WEAK_EXCEPTION_TYPES = (
    ("exception.http_request", frozenset({"HttpRequestException", "ResourceAccessException"}),
     (Category.NETWORK, "fallback.type_http_request")),
    ("exception.invalid_request", frozenset({"InvalidRequestException"}),
     (Category.VALIDATION, "fallback.type_invalid_request")),
    ("exception.internal_server", frozenset({"InternalServerException"}),
     (Category.INTERNAL, "fallback.type_internal_server")),
    ("exception.api_error", frozenset({"APIError"}), (Category.INTERNAL, "fallback.type_api_error")),
)

# gRPC RESOURCE_EXHAUSTED: a rate limit (retried with backoff), as the sidecar's rule
# grpc.resource_exhausted says, unless the message or detail names a used-up quota, in any case:
# rule grpc.resource_exhausted.quota's words (plain words, so a substring test is its
# case-insensitive pattern), escalated. test_fallback checks both rules for drift.
_GRPC_RESOURCE_EXHAUSTED = 8
_QUOTA_WORDS = ("billing", "insufficient", "credits", "disk", "storage quota")

# HTTP statuses, as the sidecar's rules that read one status and nothing else list them, in their
# order (rules http.400 to http.502; test_fallback checks each list for drift, with its category).
# Each answers under the rule id of the rule's first status (407 is fallback.http_401), but for
# http.500, whose statuses keep the id fallback.http_5xx they had when every 5xx but the unavailable
# ones fell to the range. The rules that read a status and words (http.400.context_length,
# http.4xx.quota_words, http.402.card_declined, ...) are not carried: the fallback reads no words
# there, so a 429 that says "insufficient quota" is still a rate limit.
_HTTP_STATUSES = {
    # Rule http.400.
    **dict.fromkeys([400, 422], (Category.VALIDATION, "fallback.http_400")),
    # Rule http.401.
    **dict.fromkeys([401, 407], (Category.AUTH, "fallback.http_401")),
    # Rule http.402.
    402: (Category.QUOTA_EXCEEDED, "fallback.http_402"),
    # Rule http.403.
    403: (Category.PERMISSION_DENIED, "fallback.http_403"),
    # Rule http.404.
    **dict.fromkeys([404, 410], (Category.NOT_FOUND, "fallback.http_404")),
    # Rule http.405.
    **dict.fromkeys([405, 406, 411, 414, 415, 416, 431], (Category.VALIDATION, "fallback.http_405")),
    # Rule http.408.
    408: (Category.TIMEOUT, "fallback.http_408"),
    # Rule http.409.
    **dict.fromkeys([409, 412, 428], (Category.CONFLICT, "fallback.http_409")),
    # Rule http.413.
    413: (Category.CONTEXT_LENGTH, "fallback.http_413"),
    # Rule http.429.
    429: (Category.RATE_LIMITED, "fallback.http_429"),
    # Rule http.451.
    451: (Category.CONTENT_FILTER, "fallback.http_451"),
    # Rule http.499.
    499: (Category.CANCELLED, "fallback.http_499"),
    # Rule http.500: an error inside the server, retried once.
    **dict.fromkeys([500, 501, 505, 507, 508], (Category.INTERNAL, "fallback.http_5xx")),
    # Rule http.502: a server that is down, overloaded or behind a failing gateway, retried.
    **dict.fromkeys([502, 503, 504, 520, 521, 522, 523, 524, 529], (Category.UNAVAILABLE, "fallback.http_502")),
}

# A body that did not parse at a server's failing status (a gateway's HTML page where JSON was
# expected: go-openai's json.SyntaxError at a 502), as the sidecar's rules http.500.error_page and
# http.502.error_page read it: the types of kind.tool_error.parse (`_TOOL_ERROR_PARSE_TYPES`) at the
# statuses of http.500 and http.502 (keyed by those rules' ids here), each the status's category.
_ERROR_PAGES = {
    "fallback.http_5xx": (Category.INTERNAL, "fallback.http_500_error_page"),
    "fallback.http_502": (Category.UNAVAILABLE, "fallback.http_502_error_page"),
}

# The HTTP status ranges of the sidecar's rules http.4xx and http.5xx, in their order: read after
# the statuses above and after an exit code (a range scores 38 there, a status or an exit code 40).
_HTTP_RANGES = (
    (400, 499, (Category.VALIDATION, "fallback.http_4xx")),
    (500, 599, (Category.INTERNAL, "fallback.http_5xx")),
)

# Process exit codes, as the sidecar's rules exit.124 to exit.137 list them (test_fallback checks
# for drift): timeout(1)'s 124, a command that cannot run (126) or is not there (127), a process
# ended by SIGINT or SIGTERM (130, 143) and one killed by SIGKILL, most often for want of memory
# (137, with the rule's own suggestion). Read after a single HTTP status, which ties with it at 40
# on the sidecar and whose rules come first, and before an HTTP range.
_EXIT_CODES = {
    124: (Category.TIMEOUT, "fallback.exit_124"),
    126: (Category.PERMISSION_DENIED, "fallback.exit_126"),
    127: (Category.NOT_FOUND, "fallback.exit_127"),
    **dict.fromkeys([130, 143], (Category.CANCELLED, "fallback.exit_130")),
    137: (Category.QUOTA_EXCEEDED, "fallback.exit_137"),
}

# The bytes of a message or detail the sidecar's message patterns read (its default
# classify.text_limit; src/classify.rs, match_text): a longer text's head, or its head and tail.
_TEXT_LIMIT = 1024

# The sidecar's category suggestions (src/defaults/categories.toml; test_fallback checks for drift).
_SUGGESTIONS = {
    Category.TIMEOUT: "Try a simpler query or a smaller input.",
    Category.RATE_LIMITED: "Wait, or use another tool.",
    Category.NETWORK: "Check the host, or use another tool.",
    Category.UNAVAILABLE: "Retry later, or use another tool.",
    Category.INTERNAL: "Try other arguments.",
    Category.AUTH: "Ask a human for credentials.",
    Category.PERMISSION_DENIED: "Ask a human for the missing permission.",
    Category.QUOTA_EXCEEDED: "Ask a human to raise the quota or budget.",
    Category.NOT_FOUND: "Check that it exists; list what is there.",
    Category.VALIDATION: "Fix the arguments to fit the schema.",
    Category.CONFLICT: "Read its current state first.",
    Category.FORMAT: "Reply with a valid tool call in the required format.",
    Category.UNKNOWN_TOOL: "Use one of the available tools.",
    Category.CONTEXT_LENGTH: "Shorten the input: summarise or split it.",
    Category.CONTENT_FILTER: "Rephrase the request or change the plan.",
    Category.CANCELLED: "The run was cancelled.",
}

# The suggestions of the sidecar's rules that give their own (rules kind.no_tool_call,
# kind.invalid_tool_call, code.quota_disk, exit.137 and kind.tool_error.parse), by the fallback's
# rule id: they replace the category's, as on the sidecar (test_fallback checks for drift).
_RULE_SUGGESTIONS = {
    "fallback.kind_no_tool_call": "Respond with a tool call in the required format.",
    "fallback.kind_invalid_tool_call": "Make the tool call's arguments valid JSON that matches the tool's schema.",
    "fallback.code_quota_disk": "Free disk space or ask a human to raise the quota.",
    "fallback.exit_137": "The process was killed (out of memory?): use a smaller input or ask for more memory.",
    "fallback.kind_tool_error_parse": (
        "The tool could not parse what it received (an error page or a changed format?): the call itself was"
        " fine; if it fails again, try another source."
    ),
}

_INSTRUCTIONS = {
    Action.RETRY: "This is a transient failure; the same call will be retried.",
    Action.RECOVER: "Do not repeat the same call unchanged: check the arguments or choose another approach.",
    Action.RECLASSIFY: "Choose another tool: this one does not exist.",
    Action.REPLAN: "Change the plan: this request cannot succeed as it is.",
    Action.ESCALATE: "This needs a human: stop and report the error.",
    Action.ABORT: "The run is over: stop.",
}

MAX_SNIPPET_MESSAGE = 200
"""How much of the message the snippet keeps, as the sidecar's default."""
_MAX_HEADER_SECONDS = 86400.0
"""A provider delay above a day is nonsense; clamping keeps the arithmetic finite."""

# Header values are read with the sidecar's grammar (src/backoff.rs), so that the fallback
# waits when and only when the sidecar would. A number as Rust's f64 parser takes it: float()
# also takes `1_0` and non-ASCII digits, which the sidecar refuses (inf and nan it refuses as
# not finite, as `_number` does).
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
# The three HTTP date forms RFC 9110 (section 5.6.7) has recipients accept, exactly as the
# sidecar's parser (the httpdate crate) takes them: always GMT, so a numeric offset (`+0000`,
# which email.utils would take) is not one, and names are case-sensitive.
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WD, _MON = "|".join(_WEEKDAYS), "|".join(_MONTHS)
_TIME = r"(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
_HTTP_DATES = tuple(
    re.compile(form, re.ASCII)
    for form in (
        # IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        rf"(?P<wd>{_WD}), (?P<d>\d\d) (?P<m>{_MON}) (?P<y>\d{{4}}) {_TIME} GMT",
        # RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        rf"(?P<wd>Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, (?P<d>\d\d)-(?P<m>{_MON})-(?P<y>\d\d) {_TIME} GMT",
        # asctime: Sun Nov  6 08:49:37 1994
        rf"(?P<wd>{_WD}) (?P<m>{_MON}) (?P<d> \d|\d\d) {_TIME} (?P<y>\d{{4}})",
    )
)


def _bad(obj: object, field: str, problem: str) -> ValueError:
    """The error for an impossible setting, naming the class, the field and its value."""
    return ValueError(f"{type(obj).__name__}.{field} = {getattr(obj, field)!r}: {problem}")


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


NO_LABELS: Mapping[str, str] = MappingProxyType({})
"""The labels of a session that declared none."""

STOPPED_SNIPPET = "<error>\nThe session was stopped earlier; end the run.\n</error>"
"""The snippet of every outcome after an abort, as the sidecar writes it."""


def limit_snippet(reason: pb.Reason) -> str:
    """The snippet of a success that reached a step or cost limit, as the sidecar writes it."""
    limit = "cost" if reason == pb.REASON_COST_LIMIT else "step"
    return f"<error>\nThe session reached its {limit} limit; end the run.\n</error>"


@dataclass(frozen=True)
class DeclaredLimits:
    """The limits a session declared (`client.session(step_limit=..., cost_limit=...,
    error_limit=...)`); 0 asks for the default, as on the sidecar: no step or cost limit, and
    the policy's `max_session_errors`. Impossible values raise ValueError."""

    step_limit: int = 0
    """Outcomes in the session that abort it (this one included)."""
    cost_limit: float = 0.0
    """Cost reported in the session that aborts it."""
    error_limit: int = 0
    """Errors in the session that escalate."""

    def __post_init__(self) -> None:
        for field in ("step_limit", "error_limit"):
            if not _int(getattr(self, field)) or getattr(self, field) < 0:
                raise _bad(self, field, "must be an int, zero or more")
        if not _finite(self.cost_limit) or self.cost_limit < 0:
            raise _bad(self, "cost_limit", "must be a finite number, zero or more")

    @classmethod
    def of(cls, req: Optional[pb.StartSessionRequest]) -> DeclaredLimits:
        """The limits a StartSession request declares; none without one."""
        return cls() if req is None else cls(req.step_limit, req.cost_limit, req.error_limit)


@dataclass(frozen=True)
class SessionCounters:
    """What the session breakers read besides the tool's failures in a row: the session's
    counts after the outcome being judged, and its state before it (as the sidecar's
    `breaker::Counters` and session state). `rebound.local.LocalState.observe` keeps them."""

    steps: int = 0
    """Outcomes reported, this one included."""
    cost: float = 0.0
    """Cost reported, this one included."""
    session_errors: int = 0
    """Failures reported, this one included."""
    identical_errors: int = 0
    """Failures in a row with the same tool and normalised message (`rebound.fingerprint`),
    this one included."""
    state: pb.SessionState = pb.SESSION_STATE_ACTIVE
    """The session's state before this outcome: once stopped, every outcome is answered abort."""


@dataclass(frozen=True)
class FallbackPolicy:
    """The seed defaults: backoff 1 s ×2 capped at 10 s, 3 retries, ±20 % jitter, 3 consecutive
    failures of one tool escalate, 10 errors in a session escalate, 5 identical errors in a row
    abort. Times are in seconds. Impossible values raise ValueError."""

    base_delay: float = 1.0
    """The first retry's backoff delay."""
    multiplier: float = 2.0
    """How much the backoff delay grows with each further retry."""
    max_delay: float = 10.0
    """The cap on a backoff delay, jitter included."""
    max_retries: int = 3
    """Retries one call gets before the failure goes to the LLM; an internal error gets at most
    one, as on the sidecar."""
    jitter: float = 0.2
    """Backoff delays spread by ±jitter; provider delays stretch by up to +jitter of the provider's
    delay or of `base_delay`, whichever is longer, and never shrink."""
    max_consecutive_failures: int = 3
    """Failures of one tool in a row in a session that escalate; 0 turns this breaker off."""
    max_provider_delay: float = 300.0
    """The longest Retry-After honoured; a longer one escalates instead of sleeping, as the
    sidecar's default policy does."""
    max_session_errors: int = 10
    """Errors in a session that escalate, unless the session declared its `error_limit`; 0
    turns this breaker off."""
    max_identical_errors: int = 5
    """Identical errors in a row (same tool, same message once numbers, ids, paths and quoted
    values are folded) that abort the session; 0 turns this breaker off."""

    def __post_init__(self) -> None:
        if not _finite(self.base_delay) or self.base_delay <= 0:
            raise _bad(self, "base_delay", "must be a positive number of seconds")
        if not _finite(self.multiplier) or self.multiplier < 1:
            raise _bad(self, "multiplier", "must be a finite number of at least 1")
        if not _finite(self.max_delay) or self.max_delay < self.base_delay:
            raise _bad(self, "max_delay", f"must be at least base_delay ({self.base_delay})")
        if not _finite(self.jitter) or not 0 <= self.jitter < 1:
            raise _bad(self, "jitter", "must be in [0, 1)")
        for field in ("max_retries", "max_consecutive_failures", "max_session_errors", "max_identical_errors"):
            if not _int(getattr(self, field)) or getattr(self, field) < 0:
                raise _bad(self, field, "must be an int, zero or more")
        if not _finite(self.max_provider_delay) or self.max_provider_delay <= 0:
            raise _bad(self, "max_provider_delay", "must be a positive number of seconds")

    def decide(
        self,
        outcome: pb.Outcome,
        consecutive: int,
        *,
        now: float,
        random: float,
        session: SessionCounters = SessionCounters(),
        limits: DeclaredLimits = DeclaredLimits(),
        labels: Mapping[str, str] = NO_LABELS,
    ) -> pb.Verdict:
        """The whole policy: one outcome in, one verdict out. `consecutive` counts the failures of
        the outcome's tool in a row in the session, this one included; `session` holds the
        session's other counts and `limits` what it declared (without them, only the
        consecutive-failures breaker can trip); `labels` are the session's declared labels, which
        an escalation report carries as the sidecar's does; `now` (epoch seconds) resolves a
        Retry-After date; `random` in [0, 1) drives the jitter."""
        v = pb.Verdict(call_id=outcome.call_id, session_id=outcome.session_id, enforced=True)
        b = v.breaker
        b.session_state = session.state
        b.consecutive_failures = max(consecutive, 0)
        b.session_errors, b.identical_errors = session.session_errors, session.identical_errors
        b.steps, b.cost = session.steps, session.cost

        category, rule = (Category.UNSPECIFIED, "fallback.success") if outcome.ok else classify_coarse(outcome)
        v.classification.rule = rule
        if not outcome.ok:
            v.classification.category = category.proto
            v.classification.retryable = category in _RETRYABLE
            v.classification.suggestion = _suggestion(category, rule)

        if session.state == pb.SESSION_STATE_STOPPED:
            # Still counted (by the caller), but the run was told to end: say so again.
            self._stop(v, Action.ABORT, pb.REASON_SESSION_STOPPED)
            v.snippet = STOPPED_SNIPPET
            return v
        if outcome.ok:
            reason = self._limit_reached(session, limits)
            if reason is None:
                v.action = Action.CONTINUE.proto
            else:
                self._stop(v, Action.ABORT, reason)
                v.snippet = limit_snippet(reason)
            return v

        # The breakers over the category's plan: aborts first, then a plan that itself aborts
        # (a cancel still ends the run), then escalations, as the sidecar settles them.
        trip = self._on_failure(consecutive, session, limits)
        if trip is not None and trip[0] is Action.ABORT:
            self._stop(v, Action.ABORT, trip[1])
        elif category is Category.CANCELLED:
            self._stop(v, Action.ABORT, pb.REASON_CATEGORY_POLICY)
        elif trip is not None:
            self._stop(v, Action.ESCALATE, trip[1])
            if trip[1] == pb.REASON_SESSION_ERRORS:
                why = f"{session.session_errors} errors in this session, the last from tool {outcome.tool!r}"
            else:
                why = f"tool {outcome.tool!r} failed {consecutive} times in a row"
            _escalation(v, outcome, why, labels)
        elif category in (Category.AUTH, Category.PERMISSION_DENIED, Category.QUOTA_EXCEEDED):
            self._stop(v, Action.ESCALATE, pb.REASON_CATEGORY_POLICY)
            _escalation(v, outcome, f"{category.label} for tool {outcome.tool!r} needs a human", labels)
        elif category in _RETRYABLE:
            self._retry(v, outcome, category, consecutive, session, limits, labels, now, random)
        elif category is Category.UNKNOWN_TOOL:
            v.action = Action.RECLASSIFY.proto
        elif category in (Category.CONTEXT_LENGTH, Category.CONTENT_FILTER):
            v.action = Action.REPLAN.proto
        else:
            v.action = Action.RECOVER.proto
        v.snippet = _snippet(outcome, category, v.classification.suggestion, Action.of(v.action))
        return v

    def _retries_for(self, category: Category) -> int:
        """The retries a failure of `category` gets: `max_retries`, but at most one for an
        internal error, as the sidecar's default categories (src/defaults/categories.toml)."""
        if category is Category.INTERNAL:
            return min(self.max_retries, _INTERNAL_MAX_RETRIES)
        return self.max_retries

    def _error_limit(self, limits: DeclaredLimits) -> int:
        """The errors in a session that escalate: the declared limit over the policy's (0: none)."""
        return limits.error_limit or self.max_session_errors

    @staticmethod
    def _limit_reached(c: SessionCounters, limits: DeclaredLimits) -> Optional[pb.Reason]:
        """Whether a declared step or cost limit is reached (for successes and failures alike)."""
        if limits.step_limit and c.steps >= limits.step_limit:
            return pb.REASON_STEP_LIMIT
        if limits.cost_limit and c.cost >= limits.cost_limit:
            return pb.REASON_COST_LIMIT
        return None

    def _on_failure(
        self, consecutive: int, c: SessionCounters, limits: DeclaredLimits
    ) -> Optional[tuple[Action, pb.Reason]]:
        """The session breaker a failure trips, if any, in the sidecar's order: identical errors,
        then a step or cost limit (abort); failures of the tool in a row, then errors in the
        session (escalate). A limit of 0 is off."""
        if self.max_identical_errors and c.identical_errors >= self.max_identical_errors:
            return Action.ABORT, pb.REASON_IDENTICAL_ERRORS
        reason = self._limit_reached(c, limits)
        if reason is not None:
            return Action.ABORT, reason
        if self.max_consecutive_failures and consecutive >= self.max_consecutive_failures:
            return Action.ESCALATE, pb.REASON_CONSECUTIVE_FAILURES
        error_limit = self._error_limit(limits)
        if error_limit and c.session_errors >= error_limit:
            return Action.ESCALATE, pb.REASON_SESSION_ERRORS
        return None

    def _failures_before_a_trip(self, consecutive: int, c: SessionCounters, limits: DeclaredLimits) -> Optional[int]:
        """How many more failures in a row the session breakers let pass before one trips (each
        counted as the same error again, as a retry of the same call most often gives); None
        when every breaker is off."""
        left = [
            max(limit - count - 1, 0)
            for limit, count in (
                (self.max_identical_errors, c.identical_errors),
                (self.max_consecutive_failures, max(consecutive, 1)),
                (self._error_limit(limits), c.session_errors),
            )
            if limit
        ]
        return min(left, default=None)

    @staticmethod
    def _stop(v: pb.Verdict, action: Action, reason: pb.Reason) -> None:
        v.action = action.proto
        v.breaker.reason = reason
        v.breaker.session_state = pb.SESSION_STATE_STOPPED if action is Action.ABORT else pb.SESSION_STATE_ESCALATED

    def _retry(
        self,
        v: pb.Verdict,
        o: pb.Outcome,
        category: Category,
        consecutive: int,
        session: SessionCounters,
        limits: DeclaredLimits,
        labels: Mapping[str, str],
        now: float,
        random: float,
    ) -> None:
        """Plans the next attempt: the provider's delay when it gave one, else exponential
        backoff; recover when the category's retries are used up or the provider says not to
        retry, escalate when the provider asks for too long a wait."""
        max_retries = self._retries_for(category)
        # Which retry this would be: the caller's attempt number when it counts, else the run of failures.
        n = max(o.attempt or consecutive, 1)
        if n > max_retries:
            v.action = Action.RECOVER.proto
            v.breaker.reason = pb.REASON_RETRIES_EXHAUSTED
            return
        if refuses_retry(o.headers):
            v.action = Action.RECOVER.proto
            v.breaker.reason = pb.REASON_SERVER_PUSHBACK
            return
        provided = provider_delay(o.headers, now)
        if provided is not None:
            if provided > self.max_provider_delay:
                self._stop(v, Action.ESCALATE, pb.REASON_DELAY_TOO_LONG)
                why = f"tool {o.tool!r} asks for a wait of {provided:g} s, longer than {self.max_provider_delay:g} s"
                _escalation(v, o, why, labels)
                return
            # Never earlier than the provider asked; spread upwards only, over at least the
            # base delay's jitter, so that "retry now" does not bring a fleet back at once.
            delay = provided + max(provided, self.base_delay) * self.jitter * random
        else:
            delay = min(self.base_delay * self.multiplier ** (n - 1), self.max_delay)
            delay = min(delay * (1 + self.jitter * (2 * random - 1)), self.max_delay)
        v.action = Action.RETRY.proto
        v.retry.delay_ms = round(delay * 1000)
        v.retry.attempt = n
        v.retry.attempts_left = max_retries - n
        # A retry whose failure trips a session breaker is not retried: promise no more than those left.
        left = self._failures_before_a_trip(consecutive, session, limits)
        if left is not None:
            v.retry.attempts_left = min(v.retry.attempts_left, left)
        v.retry.provider_delay = provided is not None


def classify_coarse(o: pb.Outcome) -> tuple[Category, str]:
    """Maps the structured signals a fallback can trust to a category and a rule id, ranked as
    the sidecar scores them (src/classify.rs: kind 100, error code 80, exception type 60, gRPC
    code 50, HTTP status 40, exit code 40, HTTP range 38, the weak signals 9): the outcome's kind,
    then its error code, its exception type, its gRPC code, a single HTTP status of the sidecar's
    status rules, its exit code, an HTTP range (4xx, 5xx), and last gRPC's UNKNOWN, JSON-RPC's
    -32603, a body's invalid_request_error or server_error (`_WEAK_SIGNALS`) and the types that say only which layer
    failed (`_WEAK_EXCEPTION_TYPES`), the first the fallback knows deciding. So, as on the
    sidecar, a 503 or a 500 with ECONNRESET is a network failure (retried three times, an internal
    error once), a 401 with httpx.ReadTimeout a timeout, a 429 with gRPC RESOURCE_EXHAUSTED and a
    quota word a used-up quota, a 404 with exit code 127 not found by the status, and a 418 with
    exit code 127 not found by the exit code."""
    # The agent's own word on what failed first: on the sidecar a kind outranks every other
    # signal, so a timeout that carries a 401 or a provider code is still a timeout there.
    kind = Kind.of(o.kind)
    if kind is Kind.TIMEOUT:
        return Category.TIMEOUT, "fallback.kind_timeout"
    if kind is Kind.CANCELLED:
        return Category.CANCELLED, "fallback.kind_cancelled"
    if kind is Kind.UNKNOWN_TOOL:
        return Category.UNKNOWN_TOOL, "fallback.kind_unknown_tool"
    if kind is Kind.NO_TOOL_CALL:
        return Category.FORMAT, "fallback.kind_no_tool_call"
    if kind is Kind.INVALID_TOOL_CALL:
        return Category.FORMAT, "fallback.kind_invalid_tool_call"
    exception_type = _exception_type(o)
    parse_error = not _TOOL_ERROR_PARSE_TYPES.isdisjoint(_type_names(exception_type))
    if kind is Kind.TOOL_ERROR and parse_error:
        return Category.INTERNAL, "fallback.kind_tool_error_parse"
    # A body that did not parse at a server's failing status (`_ERROR_PAGES`): a status and a type
    # outrank a code on the sidecar.
    at_error_page = _ERROR_PAGES.get(_HTTP_STATUSES.get(o.http_status, (Category.UNKNOWN, ""))[1])
    if at_error_page is not None and parse_error:
        return at_error_page
    by_code = _CODES.get(_code_key(o.code))
    if by_code is not None:
        return by_code
    by_type = _by_exception_type(exception_type)
    if by_type is not None:
        return by_type
    if o.HasField("grpc_code"):
        # With a quota word, RESOURCE_EXHAUSTED scores 60 on the sidecar, as much as an exception
        # type; the exception rules are listed first and win the tie, so it is read after the type.
        if o.grpc_code == _GRPC_RESOURCE_EXHAUSTED:
            if _says_any(o, _QUOTA_WORDS):
                return Category.QUOTA_EXCEEDED, "fallback.grpc_resource_exhausted_quota"
            return Category.RATE_LIMITED, "fallback.grpc_resource_exhausted"
        if o.grpc_code in _GRPC_CATEGORIES:
            return _GRPC_CATEGORIES[o.grpc_code]
    s = o.http_status
    by_status = _HTTP_STATUSES.get(s)
    if by_status is not None:
        return by_status
    if o.HasField("exit_code") and o.exit_code in _EXIT_CODES:
        return _EXIT_CODES[o.exit_code]
    by_range = next((verdict for lo, hi, verdict in _HTTP_RANGES if lo <= s <= hi), None)
    if by_range is not None:
        return by_range
    if o.HasField("grpc_code") and o.grpc_code == _GRPC_UNKNOWN:
        return _WEAK_SIGNALS["grpc.unknown"]
    if _code_key(o.code) == _MCP_INTERNAL:
        return _WEAK_SIGNALS["code.mcp.internal"]
    if _code_key(o.code) in _INVALID_REQUEST:
        return _WEAK_SIGNALS["code.invalid_request"]
    if _code_key(o.code) in _SERVER_ERROR:
        return _WEAK_SIGNALS["code.server_error"]
    by_weak_type = _by_weak_exception_type(exception_type)
    if by_weak_type is not None:
        return by_weak_type
    return Category.UNKNOWN, "fallback.default"


def _says_any(o: pb.Outcome, words: tuple[str, ...]) -> bool:
    """Whether the text the sidecar matches message patterns against (the message, then the
    detail, each as far as it reads them) holds one of `words` (lower-case ASCII) in any case."""
    half = _TEXT_LIMIT // 2
    message, detail = o.message.encode("utf-8", "replace"), o.detail.encode("utf-8", "replace")
    # Cut by bytes, as the sidecar, which cuts on a character boundary: the bytes of a cut
    # character are no ASCII letters, so no word can match across them.
    if not detail:
        if len(message) <= _TEXT_LIMIT or b"\n" not in message:
            text = message[:_TEXT_LIMIT]
        else:
            text = message[:half] + b"\n" + message[-half:]
    else:
        text = message[:_TEXT_LIMIT] + b"\n"
        text += detail if len(detail) <= _TEXT_LIMIT else detail[:half] + b"\n" + detail[-half:]
    text = text.lower()  # bytes.lower: ASCII letters only, as the sidecar's ASCII-only patterns
    return any(word.encode() in text for word in words)


def refuses_retry(headers: Mapping[str, str]) -> bool:
    """True when the provider says not to retry: `x-should-retry: false`, as OpenAI's and
    Anthropic's SDKs read it (the sidecar heeds it too)."""
    return any(k.strip().lower() == "x-should-retry" and v.strip().lower() == "false" for k, v in headers.items())


def provider_delay(headers: Mapping[str, str], now: float) -> Optional[float]:
    """The delay in seconds the Retry-After family asks for, as far as the fallback honours it:
    `retry-after-ms` (milliseconds), then `Retry-After` (seconds or an HTTP date). Keys are
    matched case-insensitively."""
    lowered = {k.strip().lower(): v.strip() for k, v in headers.items()}
    ms = _number(lowered.get("retry-after-ms"))
    if ms is not None:
        return min(ms / 1000, _MAX_HEADER_SECONDS)
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return min(seconds, _MAX_HEADER_SECONDS)
    at = _http_date(value)
    if at is None:
        return None
    return min(max(at - now, 0.0), _MAX_HEADER_SECONDS)


def _number(text: Optional[str]) -> Optional[float]:
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    n = float(text)
    return n if math.isfinite(n) and n >= 0 else None


def _http_date(text: str) -> Optional[float]:
    """An HTTP date as epoch seconds; None for anything the sidecar would not read as one."""
    match = next((m for m in (form.fullmatch(text) for form in _HTTP_DATES) if m), None)
    if match is None:
        return None
    year = int(match["y"])
    if len(match["y"]) == 2:  # RFC 850's two-digit year, as httpdate reads it
        year += 2000 if year < 70 else 1900
    try:
        at = datetime(
            year, _MONTHS.index(match["m"]) + 1, int(match["d"]),
            int(match["H"]), int(match["M"]), int(match["S"]), tzinfo=timezone.utc,
        )
    except ValueError:  # no such day or time (30 Feb, 24:00, a leap second)
        return None
    # The sidecar also refuses a date before 1970 and a weekday that is not the date's.
    if year < 1970 or _WEEKDAYS[at.weekday()] != match["wd"][:3]:
        return None
    return at.timestamp()


def _suggestion(category: Category, rule: str) -> str:
    """The suggestion of a failure: its rule's own where the sidecar's rule gives one, else its
    category's."""
    return _RULE_SUGGESTIONS.get(rule) or _SUGGESTIONS.get(category, "")


def _snippet(o: pb.Outcome, category: Category, suggestion: str, action: Action) -> str:
    """The fallback's <error> block for the LLM's next turn, then the instruction."""
    line = message_line(error_type(o), shown_message(o))
    block = error_block(o.tool, category, line, suggestion)
    return f"{block}\n{_INSTRUCTIONS.get(action, '')}"


def error_block(tool: str, category: Category, message: str, suggestion: str = "", count: int = 1) -> str:
    """An <error> block in the sidecar's shape: the tool and the category as attributes of the
    tag (no type for an unknown category), the message on its own line with `(×N)` for a
    repeat, then the suggestion."""
    # As the sidecar writes it: whitespace runs fold, and a quote would end the attribute early.
    tool = " ".join(tool.split()).replace('"', "&quot;")
    typ = "" if category in (Category.UNKNOWN, Category.UNSPECIFIED) else f' type="{category.label}"'
    lines = [f'<error tool="{tool}"{typ}>']
    if message:
        message = defuse_tags(message)
        lines.append(f"{message} (×{count})" if count > 1 else message)
    if suggestion:
        lines.append(f"suggestion: {suggestion}")
    lines.append("</error>")
    return "\n".join(lines)


_TAG = re.compile(r"<(/?error)", re.IGNORECASE | re.ASCII)


def defuse_tags(text: str) -> str:
    """`text` with the `<` of every `<error` and `</error` (any case) written `&lt;`, as the
    sidecar writes a message: a `</error>` in a tool's output would end the block early, and
    what followed would read to the model as Rebound's own words."""
    return _TAG.sub(r"&lt;\1", text)


def message_line(typ: str, message: str) -> str:
    """The block's message line: `{error type}: {message}`, or whichever of the two is set."""
    return ": ".join(part for part in (typ, message) if part)


def _escalation(v: pb.Verdict, o: pb.Outcome, why: str, labels: Mapping[str, str]) -> None:
    """The fallback's escalation report: its summary, then (as the sidecar's text, right after
    the first line) the session's labels, then the last error's message."""
    summary = f"{why} (decided by the client's local fallback policy: the Rebound sidecar did not answer)"
    text = summary
    if labels:
        text += f"\n{labels_line(labels)}"
    message = shown_message(o)
    if message:
        text += f"\nlast error: {message}"
    v.escalation.summary = summary
    v.escalation.text = text
    v.escalation.labels.update(labels)


def labels_line(labels: Mapping[str, str]) -> str:
    """The line an escalation report's text gives the session's labels, as the sidecar writes
    it: `Labels: k1=v1, k2=v2`, sorted by key (by code point, which is the sidecar's UTF-8 byte
    order), a value's control characters as spaces, redacted."""
    pairs = (f"{k}={_CONTROL.sub(' ', labels[k])}" for k in sorted(labels))
    return redact("Labels: " + ", ".join(pairs))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Rust's `char::is_control` (Unicode's Cc)."""


def shown_message(o: pb.Outcome) -> str:
    """The outcome's message as the fallback shows it: redacted, then cut to
    MAX_SNIPPET_MESSAGE, in that order, so a cut cannot leave half a secret that no pattern
    knows any more. Only what `build_outcome` would keep of it is read: Python's regex engine
    backtracks, and one pattern (jwt) takes time quadratic in the length of some texts, where
    the sidecar's automaton takes linear time."""
    return cut(redact(o.message[:MAX_MESSAGE_CHARS]), MAX_SNIPPET_MESSAGE)


def error_type(o: pb.Outcome) -> str:
    """Names the failure for a snippet from the most telling field set; free text redacted."""
    if o.exception_type:
        return redact(o.exception_type[:MAX_MESSAGE_CHARS])
    if o.http_status:
        return f"HTTP {o.http_status}"
    if o.code:
        return redact(o.code[:MAX_MESSAGE_CHARS])
    if o.HasField("exit_code"):
        return f"exit {o.exit_code}"
    return ""


def cut(text: str, limit: int) -> str:
    """Shortens `text` to at most `limit` characters, marking the cut."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"
