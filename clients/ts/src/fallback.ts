// The local policy that decides when the sidecar cannot be reached within the
// call deadline: the sidecar's seed defaults, on the structured signals a
// client can trust (the kind, an error code, an exception type, a gRPC code, an
// HTTP status, an exit code: every rule of src/defaults/rules.toml that reads
// one of them alone, ranked as the sidecar scores them), under the sidecar's
// session breakers (src/breaker.ts). It reads no words of the message but a
// RESOURCE_EXHAUSTED's. The same policy as the Python client's fallback.py and
// the Go client's fallback.go.

import {
  failuresBeforeATrip,
  limitReached,
  limitSnippet,
  NO_LIMITS,
  onFailure,
  STOPPED_SNIPPET,
  type DeclaredLimits,
  type SessionCounts,
} from "./breaker.js";
import { cut } from "./checks.js";
import { InvalidInputError } from "./errors.js";
import * as pb from "./gen/rebound/v1/rebound.js";
import { categoryName } from "./names.js";
import { redact, redactHead } from "./redact.js";

/**
 * The fallback policy's knobs. {@link DEFAULT_FALLBACK_POLICY} holds the
 * sidecar's seed defaults. It classifies by the structured signals alone, the
 * strongest first as the sidecar ranks them (see {@link classifyCoarse}): the
 * outcome's kind; an error code of the sidecar's rules that read a code alone
 * (a provider's quota, rate-limit, auth, validation or overloaded code, an
 * errno name such as ENOENT or ENOSPC, Node's and undici's codes, an MCP
 * JSON-RPC code); an exception type of its rules that read a type alone
 * (JavaScript's TypeError and RangeError are validation, SyntaxError format,
 * or internal when a tool hit it, or its status's at a server's failing
 * status, an error page, AbortError cancelled); a gRPC code (a
 * RESOURCE_EXHAUSTED that speaks of billing, credits or disk is a quota); one
 * HTTP status of its rules http.400 to http.502; an exit code (124 timeout,
 * 126 permission denied, 127 not found, 130 and 143 cancelled, 137 a quota);
 * then any other 4xx (validation) or 5xx (internal). Each category is handled
 * as the sidecar's categories.toml says: timeouts, connection errors, rate
 * limits and an unavailable server are retried, an internal error once;
 * auth, permission and quota escalate; context length and content filter
 * replan; cancellation aborts; an unknown tool is reclassified; anything else
 * (not found, validation, conflict, format, unknown) goes back to the LLM
 * (recover). Over that plan, the sidecar's session breakers:
 * identical errors in a row and a declared step or cost limit abort, failures
 * of one tool in a row and errors in the session escalate, and a stopped
 * session stays stopped.
 */
export interface FallbackPolicy {
  /** The first retry's backoff delay, in milliseconds. */
  baseDelayMs: number;
  /** Grows the backoff delay with each further retry. */
  multiplier: number;
  /** Caps a backoff delay, jitter included, in milliseconds. */
  maxDelayMs: number;
  /** How many retries in a row one tool gets before the failure goes to the LLM; an internal error gets at most one, as on the sidecar. */
  maxRetries: number;
  /** Spreads backoff delays by ±jitter (0.2 is ±20 %) and stretches provider delays by up to +jitter of the provider's delay or of `baseDelayMs`, whichever is longer. */
  jitter: number;
  /** Failures of one tool in a row in a session that escalate; 0 turns this breaker off. */
  maxConsecutiveFailures: number;
  /** The longest Retry-After honoured, in milliseconds; a longer one escalates instead of sleeping, as the sidecar's default policy does. */
  maxProviderDelayMs: number;
  /** Errors in a session that escalate, unless the session declared its `errorLimit`; 0 turns this breaker off. */
  maxSessionErrors: number;
  /**
   * Identical errors in a row (one tool, one message once numbers, ids, paths
   * and quoted values are folded) that abort the session; 0 turns this breaker off.
   */
  maxIdenticalErrors: number;
}

/**
 * The seed defaults: backoff 1 s ×2 capped at 10 s, 3 retries, ±20 % jitter, 3
 * failures of a tool in a row escalate, a provider delay over 5 minutes
 * escalates, 10 errors in a session escalate, 5 identical errors in a row abort.
 */
export const DEFAULT_FALLBACK_POLICY: Readonly<FallbackPolicy> = Object.freeze({
  baseDelayMs: 1000,
  multiplier: 2,
  maxDelayMs: 10_000,
  maxRetries: 3,
  jitter: 0.2,
  maxConsecutiveFailures: 3,
  maxProviderDelayMs: 300_000,
  maxSessionErrors: 10,
  maxIdenticalErrors: 5,
});

/** Fills a partial policy from the defaults and checks it; throws InvalidInputError naming the first bad field. */
export function fallbackPolicy(overrides: Partial<FallbackPolicy> = {}): Readonly<FallbackPolicy> {
  const p: FallbackPolicy = { ...DEFAULT_FALLBACK_POLICY };
  for (const [key, value] of Object.entries(overrides)) {
    if (!(key in DEFAULT_FALLBACK_POLICY)) {
      throw new InvalidInputError(`fallbackPolicy.${key}: no such setting`);
    }
    if (value !== undefined) (p as unknown as Record<string, unknown>)[key] = value;
  }
  const bad = (field: keyof FallbackPolicy, problem: string): never => {
    throw new InvalidInputError(`fallbackPolicy.${field} = ${String(p[field])}: ${problem}`);
  };
  const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
  if (!finite(p.baseDelayMs) || p.baseDelayMs <= 0) bad("baseDelayMs", "must be a positive number");
  if (!finite(p.multiplier) || p.multiplier < 1) bad("multiplier", "must be a finite number of at least 1");
  if (!finite(p.maxDelayMs) || p.maxDelayMs < p.baseDelayMs) bad("maxDelayMs", `must be at least baseDelayMs (${p.baseDelayMs})`);
  if (!Number.isInteger(p.maxRetries) || p.maxRetries < 0) bad("maxRetries", "must be an integer, zero or more");
  if (!finite(p.jitter) || p.jitter < 0 || p.jitter >= 1) bad("jitter", "must be in [0, 1)");
  for (const field of ["maxConsecutiveFailures", "maxSessionErrors", "maxIdenticalErrors"] as const) {
    if (!Number.isInteger(p[field]) || p[field] < 0) bad(field, "must be an integer, zero or more");
  }
  if (!finite(p.maxProviderDelayMs) || p.maxProviderDelayMs <= 0) bad("maxProviderDelayMs", "must be a positive number");
  return Object.freeze(p);
}

/**
 * What the policy needs beyond the outcome: the session's counts (as
 * `LocalState.observe` keeps them; left out, 0 and an active session),
 * declared limits (left out, none), so that only the consecutive-failures
 * breaker can trip without them, and declared labels (left out, none). Time
 * and randomness come from outside so that tests are exact.
 */
export interface FallbackInput extends Partial<Omit<SessionCounts, "consecutive">> {
  /** Failures of the outcome's tool in a row in the session, this one included. */
  consecutive: number;
  /** The limits the session declared. */
  limits?: Readonly<DeclaredLimits>;
  /** The labels the session declared, which an escalation report carries, as the sidecar's does. */
  labels?: Readonly<Record<string, string>>;
  /** Now, in milliseconds since the epoch: resolves a Retry-After given as an HTTP date. */
  nowMs: number;
  /** Uniform in [0, 1): drives the jitter. */
  random: number;
}

const C = pb.Category;
const A = pb.Action;

/** The categories the seed policy retries. */
const RETRYABLE = new Set<pb.Category>([
  C.CATEGORY_TIMEOUT,
  C.CATEGORY_NETWORK,
  C.CATEGORY_UNAVAILABLE,
  C.CATEGORY_RATE_LIMITED,
  C.CATEGORY_INTERNAL,
]);

/**
 * The most retries an internal error gets, as the sidecar's categories.toml
 * (max_retries = 1): a failure inside the tool may be a fluke once, but seldom
 * goes away when asked again.
 */
const INTERNAL_MAX_RETRIES = 1;

/**
 * The HTTP statuses the sidecar's rules http.400 to http.502 read alone, each
 * with its category and rule (src/defaults/rules.toml; a test fails when the
 * two drift apart), the rule named by its first status: one table per rule,
 * in their order. The 500 group keeps the id fallback.http_5xx the fallback
 * gave it before it read the other statuses. The rules that also read words
 * (http.4xx.quota_words, http.402.card_declined, ...) are not here: the
 * fallback reads no words, so a 402 whose message says the card was declined
 * is a quota here (escalated) where the sidecar finds validation in its words.
 * Any other status of 400 to 499 or 500 to 599 is read by range, after an
 * exit code (see {@link classifyCoarse}).
 * @internal Exported for that test only.
 */
export const HTTP_STATUSES: ReadonlyMap<number, readonly [pb.Category, string]> = new Map<number, readonly [pb.Category, string]>([
  // Rule http.400.
  ...[400, 422].map((s) => [s, [C.CATEGORY_VALIDATION, "fallback.http_400"]] as const),
  // Rule http.401: 407 is the proxy's 401.
  ...[401, 407].map((s) => [s, [C.CATEGORY_AUTH, "fallback.http_401"]] as const),
  // Rule http.402.
  [402, [C.CATEGORY_QUOTA_EXCEEDED, "fallback.http_402"]],
  // Rule http.403.
  [403, [C.CATEGORY_PERMISSION_DENIED, "fallback.http_403"]],
  // Rule http.404.
  ...[404, 410].map((s) => [s, [C.CATEGORY_NOT_FOUND, "fallback.http_404"]] as const),
  // Rule http.405.
  ...[405, 406, 411, 414, 415, 416, 431].map((s) => [s, [C.CATEGORY_VALIDATION, "fallback.http_405"]] as const),
  // Rule http.408.
  [408, [C.CATEGORY_TIMEOUT, "fallback.http_408"]],
  // Rule http.409.
  ...[409, 412, 428].map((s) => [s, [C.CATEGORY_CONFLICT, "fallback.http_409"]] as const),
  // Rule http.413.
  [413, [C.CATEGORY_CONTEXT_LENGTH, "fallback.http_413"]],
  // Rule http.429.
  [429, [C.CATEGORY_RATE_LIMITED, "fallback.http_429"]],
  // Rule http.451.
  [451, [C.CATEGORY_CONTENT_FILTER, "fallback.http_451"]],
  // Rule http.499: nginx's client closed request.
  [499, [C.CATEGORY_CANCELLED, "fallback.http_499"]],
  // Rule http.500 (the fallback's id as before: fallback.http_5xx).
  ...[500, 501, 505, 507, 508].map((s) => [s, [C.CATEGORY_INTERNAL, "fallback.http_5xx"]] as const),
  // Rule http.502: a server that is down, overloaded or behind a failing gateway.
  ...[502, 503, 504, 520, 521, 522, 523, 524, 529].map((s) => [s, [C.CATEGORY_UNAVAILABLE, "fallback.http_502"]] as const),
]);

/**
 * A body that did not parse at a server's failing status (a gateway's HTML page where JSON was
 * expected: go-openai's json.SyntaxError at a 502), as the sidecar's rules http.500.error_page and
 * http.502.error_page read it: the types of kind.tool_error.parse ({@link TOOL_PARSE_TYPES}) at the
 * statuses of http.500 and http.502 (keyed by those rules' ids here), each the status's category.
 * @internal Exported for the drift test.
 */
export const ERROR_PAGES: ReadonlyMap<string, readonly [pb.Category, string]> = new Map<string, readonly [pb.Category, string]>([
  ["fallback.http_5xx", [C.CATEGORY_INTERNAL, "fallback.http_500_error_page"]],
  ["fallback.http_502", [C.CATEGORY_UNAVAILABLE, "fallback.http_502_error_page"]],
]);

/**
 * The HTTP status ranges the sidecar's rules http.4xx and http.5xx read
 * (src/defaults/rules.toml; a test fails when the two drift apart), inclusive,
 * with their category and rule: weaker than one status on the sidecar (38
 * against 40), so weaker than an exit code too.
 * @internal Exported for that test only.
 */
export const HTTP_RANGES: readonly (readonly [number, number, pb.Category, string])[] = Object.freeze([
  [400, 499, C.CATEGORY_VALIDATION, "fallback.http_4xx"], // Rule http.4xx.
  [500, 599, C.CATEGORY_INTERNAL, "fallback.http_5xx"], // Rule http.5xx.
] as const);

/**
 * The process exit codes the sidecar's rules exit.* read (src/defaults/rules.toml;
 * a test fails when the two drift apart), each with its category and rule:
 * timeout(1)'s 124, the shell's 126 (not executable) and 127 (not found), 130
 * and 143 (SIGINT, SIGTERM: stopped by someone) and 137 (SIGKILL: the OOM
 * killer, with its rule's own suggestion). As strong as one HTTP status on the
 * sidecar (40), which wins the tie as listed first, and stronger than a range.
 * @internal Exported for that test only.
 */
export const EXIT_CODES: ReadonlyMap<number, readonly [pb.Category, string]> = new Map<number, readonly [pb.Category, string]>([
  [124, [C.CATEGORY_TIMEOUT, "fallback.exit_124"]], // Rule exit.124.
  [126, [C.CATEGORY_PERMISSION_DENIED, "fallback.exit_126"]], // Rule exit.126.
  [127, [C.CATEGORY_NOT_FOUND, "fallback.exit_127"]], // Rule exit.127.
  ...[130, 143].map((c) => [c, [C.CATEGORY_CANCELLED, "fallback.exit_130"]] as const), // Rule exit.130.
  [137, [C.CATEGORY_QUOTA_EXCEEDED, "fallback.exit_137"]], // Rule exit.137.
]);

/**
 * The suggestions the sidecar's rules carry of their own, over their
 * category's (src/defaults/rules.toml; a test fails when the two drift apart),
 * by the fallback's rule: each format kind says what to fix; a full disk and a
 * killed process are quotas, but not the caller's budget; a tool's parse error
 * is internal, but nothing to do with its arguments.
 * @internal Exported for that test only.
 */
export const RULE_SUGGESTIONS: ReadonlyMap<string, string> = new Map([
  ["fallback.kind_no_tool_call", "Respond with a tool call in the required format."], // Rule kind.no_tool_call.
  ["fallback.kind_invalid_tool_call", "Make the tool call's arguments valid JSON that matches the tool's schema."], // Rule kind.invalid_tool_call.
  ["fallback.code_quota_disk", "Free disk space or ask a human to raise the quota."], // Rule code.quota_disk.
  ["fallback.exit_137", "The process was killed (out of memory?): use a smaller input or ask for more memory."], // Rule exit.137.
  [
    "fallback.kind_tool_error_parse", // Rule kind.tool_error.parse.
    "The tool could not parse what it received (an error page or a changed format?): the call itself was fine; if it fails again, try another source.",
  ],
]);

/**
 * gRPC's status codes (numbers fixed by the gRPC spec), each with its category
 * and rule, as the sidecar's rules grpc.* read them alone
 * (src/defaults/rules.toml; a test fails when the two drift apart):
 * INTERNAL and DATA_LOSS are internal (rule grpc.internal), NOT_FOUND
 * and UNIMPLEMENTED not found, INVALID_ARGUMENT and OUT_OF_RANGE validation,
 * ALREADY_EXISTS, FAILED_PRECONDITION and ABORTED a conflict. RESOURCE_EXHAUSTED
 * (8), which also reads words, is not here (see {@link GRPC_QUOTA_WORDS}), nor
 * UNKNOWN (2), a weak signal (see {@link WEAK_SIGNALS}).
 * @internal Exported for that test only.
 */
export const GRPC_CODES: ReadonlyMap<number, readonly [pb.Category, string]> = new Map<number, readonly [pb.Category, string]>([
  [1, [C.CATEGORY_CANCELLED, "fallback.grpc_cancelled"]],
  [3, [C.CATEGORY_VALIDATION, "fallback.grpc_invalid_argument"]],
  [4, [C.CATEGORY_TIMEOUT, "fallback.grpc_deadline_exceeded"]],
  [5, [C.CATEGORY_NOT_FOUND, "fallback.grpc_not_found"]],
  [6, [C.CATEGORY_CONFLICT, "fallback.grpc_conflict"]], // ALREADY_EXISTS
  [7, [C.CATEGORY_PERMISSION_DENIED, "fallback.grpc_permission_denied"]],
  [9, [C.CATEGORY_CONFLICT, "fallback.grpc_conflict"]], // FAILED_PRECONDITION
  [10, [C.CATEGORY_CONFLICT, "fallback.grpc_conflict"]], // ABORTED
  [11, [C.CATEGORY_VALIDATION, "fallback.grpc_invalid_argument"]], // OUT_OF_RANGE
  [12, [C.CATEGORY_NOT_FOUND, "fallback.grpc_not_found"]], // UNIMPLEMENTED
  [13, [C.CATEGORY_INTERNAL, "fallback.grpc_internal"]],
  [14, [C.CATEGORY_UNAVAILABLE, "fallback.grpc_unavailable"]],
  [15, [C.CATEGORY_INTERNAL, "fallback.grpc_internal"]], // DATA_LOSS
  [16, [C.CATEGORY_AUTH, "fallback.grpc_unauthenticated"]],
]);

/**
 * The error codes the fallback knows, each with its category and rule, as the
 * sidecar's rules that read a code alone list them (src/defaults/rules.toml:
 * the source of truth; a test fails when the two drift apart), spelled as
 * there, one table per rule. Providers' codes that change what to do: a quota
 * is not retried but escalated, an input too long or filtered is replanned, an
 * overloaded server is retried with backoff and an error inside it once (rules
 * code.insufficient_quota, code.context_length, code.content_filter,
 * code.overloaded and code.internal); the errno names, Node's DNS codes,
 * undici's and TLS codes of a timeout or a failed connection (rules
 * code.timeout and code.network); then the rules code.rate_limit, code.auth,
 * code.permission, code.not_found, code.validation, code.conflict,
 * code.quota_disk, code.cancelled and the MCP JSON-RPC codes (code.mcp.*).
 * The rules that also read the message's words (code.validation.quota,
 * code.validation.context_length) are not here: the fallback reads no words,
 * so Anthropic's 400 invalid_request_error about a credit balance is
 * validation here where the sidecar finds a quota. Matched as the sidecar
 * matches a code: trimmed, ASCII case aside (see {@link errorCode}). As on the
 * sidecar, a code wins over an exception type, a gRPC code, the HTTP status
 * and an exit code: OpenAI sends insufficient_quota with a 429, Anthropic
 * overloaded_error with a 529 (its SDKs read the body, so a 500 with that type
 * is overloaded too), and a 503 whose connection was reset (ECONNRESET) is a
 * network failure. OpenAI's and Anthropic's `server_error` and `api_error` are
 * not here but weak signals (rule code.server_error: {@link WEAK_SIGNALS}),
 * which the status decides.
 * @internal Exported for that test only.
 */
export const ERROR_CODES: ReadonlyMap<string, readonly [pb.Category, string]> = new Map<string, readonly [pb.Category, string]>([
  ...[
    "insufficient_quota",
    "billing_error",
    "billing_hard_limit_reached",
    "billing_not_active",
    "quota_exceeded",
    "QuotaExceeded",
    "credit_balance_too_low",
    "ServiceQuotaExceededException",
    "LimitExceededException",
    "budget_exceeded",
  ].map((code) => [code, [C.CATEGORY_QUOTA_EXCEEDED, "fallback.code_quota"]] as const),
  ...["context_length_exceeded", "string_above_max_length", "max_tokens_exceeded", "request_too_large"].map(
    (code) => [code, [C.CATEGORY_CONTEXT_LENGTH, "fallback.code_context_length"]] as const,
  ),
  ...["content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation", "SAFETY", "safety", "PROHIBITED_CONTENT"].map(
    (code) => [code, [C.CATEGORY_CONTENT_FILTER, "fallback.code_content_filter"]] as const,
  ),
  ...[
    "overloaded_error",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "server_overloaded",
    "engine_overloaded",
    "UNAVAILABLE",
    "InternalFailure",
    "ModelStreamErrorException",
    "ServerBusy",
  ].map((code) => [code, [C.CATEGORY_UNAVAILABLE, "fallback.code_overloaded"]] as const),
  ...["internal_error", "InternalServerError", "InternalServerException", "INTERNAL"].map(
    (code) => [code, [C.CATEGORY_INTERNAL, "fallback.code_internal"]] as const,
  ),
  ...[
    "ETIMEDOUT",
    "ESOCKETTIMEDOUT",
    "UND_ERR_CONNECT_TIMEOUT",
    "UND_ERR_HEADERS_TIMEOUT",
    "UND_ERR_BODY_TIMEOUT",
    "RequestTimeout",
    "RequestTimeoutException",
    "timeout",
    "timeout_error",
    "DEADLINE_EXCEEDED",
    "ModelTimeoutException",
  ].map((code) => [code, [C.CATEGORY_TIMEOUT, "fallback.code_etimedout"]] as const),
  ...[
    "ECONNREFUSED",
    "ECONNRESET",
    "ECONNABORTED",
    "EPIPE",
    "ENOTCONN",
    "ENOTFOUND",
    "EAI_AGAIN",
    "EHOSTUNREACH",
    "ENETUNREACH",
    "ENETDOWN",
    "EHOSTDOWN",
    "ERR_TLS_CERT_ALTNAME_INVALID",
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "CERT_HAS_EXPIRED",
    "DEPTH_ZERO_SELF_SIGNED_CERT",
    "SELF_SIGNED_CERT_IN_CHAIN",
    "UND_ERR_SOCKET",
    "UND_ERR_CLOSED",
    "ERR_SOCKET_CONNECTION_TIMEOUT",
    "EPROTO",
  ].map((code) => [code, [C.CATEGORY_NETWORK, "fallback.code_network"]] as const),
  // Rule code.rate_limit: the providers' and clouds' throttling codes (and a bare "429").
  ...[
    "rate_limit_exceeded",
    "rate_limit_error",
    "RateLimitExceeded",
    "ThrottlingException",
    "Throttling",
    "ProvisionedThroughputExceededException",
    "TooManyRequests",
    "TooManyRequestsException",
    "SlowDown",
    "RequestLimitExceeded",
    "ratelimited",
    "rate_limited",
    "429",
  ].map((code) => [code, [C.CATEGORY_RATE_LIMITED, "fallback.code_rate_limit"]] as const),
  // Rule code.auth: bad, missing or expired credentials.
  ...[
    "invalid_api_key",
    "authentication_error",
    "invalid_auth",
    "not_authed",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "token_expired",
    "unauthorized",
    "UNAUTHENTICATED",
    "bad_credentials",
    "InvalidAuthenticationToken",
    "ExpiredAuthenticationToken",
    "InvalidAuthenticationTokenTenant",
    "AuthenticationFailed",
    "InvalidAuthenticationInfo",
    "NoAuthenticationInformation",
    "invalid_grant",
    "invalid_client",
    "unauthorized_client",
  ].map((code) => [code, [C.CATEGORY_AUTH, "fallback.code_auth"]] as const),
  // Rule code.permission: the caller is known but not allowed (EACCES and EPERM among them).
  ...[
    "permission_error",
    "AccessDenied",
    "AccessDeniedException",
    "Forbidden",
    "insufficient_permissions",
    "missing_scope",
    "not_allowed_token_type",
    "PERMISSION_DENIED",
    "EACCES",
    "EPERM",
    "AuthorizationFailed",
    "AuthorizationPermissionMismatch",
    "AuthorizationFailure",
    "LinkedAuthorizationFailed",
  ].map((code) => [code, [C.CATEGORY_PERMISSION_DENIED, "fallback.code_permission"]] as const),
  // Rule code.not_found: a model, key, bucket, file or module that is not there.
  ...[
    "model_not_found",
    "not_found_error",
    "NoSuchKey",
    "NoSuchBucket",
    "ResourceNotFoundException",
    "NotFound",
    "channel_not_found",
    "resource_missing",
    "ENOENT",
    "ENOTDIR",
    "EISDIR",
    "NOT_FOUND",
    "MODULE_NOT_FOUND",
    "ERR_MODULE_NOT_FOUND",
    "ResourceGroupNotFound",
    "ResourceNotFound",
    "SubscriptionNotFound",
    "BlobNotFound",
    "ContainerNotFound",
    "QueueNotFound",
    "ShareNotFound",
  ].map((code) => [code, [C.CATEGORY_NOT_FOUND, "fallback.code_not_found"]] as const),
  // Rule code.validation: arguments the API refused. Its refinements by words (code.validation.quota,
  // code.validation.context_length) read the message, which the fallback does not: not here.
  ...[
    "ValidationException",
    "ValidationError",
    "invalid_arguments",
    "invalid_parameter",
    "parameter_invalid",
    "InvalidParameterValue",
    "invalid_type",
    "EINVAL",
    "ERR_INVALID_ARG_TYPE",
    "ERR_INVALID_ARG_VALUE",
    "ERR_INVALID_URL",
    "INVALID_ARGUMENT",
    "MissingParameter",
    "card_declined",
    "expired_card",
    "incorrect_cvc",
    "incorrect_number",
  ].map((code) => [code, [C.CATEGORY_VALIDATION, "fallback.code_validation"]] as const),
  // Rule code.conflict: what already exists or changed under the caller.
  ...[
    "ConditionalCheckFailedException",
    "ResourceInUseException",
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "already_exists",
    "ConflictException",
    "EEXIST",
    "ENOTEMPTY",
    "ALREADY_EXISTS",
    "name_taken",
    "ContainerAlreadyExists",
    "BlobAlreadyExists",
    "ResourceGroupBeingDeleted",
    "EADDRINUSE",
    "idempotency_error",
  ].map((code) => [code, [C.CATEGORY_CONFLICT, "fallback.code_conflict"]] as const),
  // Rule code.quota_disk: a full disk or disk quota (its own suggestion: see RULE_SUGGESTIONS).
  ...["ENOSPC", "EDQUOT"].map((code) => [code, [C.CATEGORY_QUOTA_EXCEEDED, "fallback.code_quota_disk"]] as const),
  // Rule code.cancelled: Node's AbortController and axios's codes, and the spellings of a cancellation.
  ...["ABORT_ERR", "ERR_CANCELED", "CANCELLED", "canceled", "cancelled"].map(
    (code) => [code, [C.CATEGORY_CANCELLED, "fallback.code_cancelled"]] as const,
  ),
  // Rules code.mcp.*: the JSON-RPC error codes of an MCP server, as text (-32603 is a weak signal: WEAK_SIGNALS).
  ["-32001", [C.CATEGORY_TIMEOUT, "fallback.code_mcp_timeout"]], // code.mcp.timeout
  ["-32700", [C.CATEGORY_FORMAT, "fallback.code_mcp_parse"]], // code.mcp.parse
  ...["-32600", "-32602"].map((code) => [code, [C.CATEGORY_VALIDATION, "fallback.code_mcp_invalid"]] as const), // code.mcp.invalid
  ["-32601", [C.CATEGORY_NOT_FOUND, "fallback.code_mcp_method"]], // code.mcp.method
]);

/**
 * The weak signals, which say only that a handler failed or a request was refused:
 * gRPC's UNKNOWN (what a server answers for an exception it did not map: grpcio's
 * "Exception calling application: ..."), JSON-RPC's internal error, -32603 (what an
 * MCP server answers for whatever a handler threw), the class of error OpenAI,
 * Anthropic and Stripe name in a refused request's body (`invalid_request_error`,
 * OAuth's `invalid_request`: OpenAI's 401 for a missing API key has no other code)
 * and in the body of their own failure (`server_error`, `api_error`: OpenAI's 500
 * and its overloaded 503 alike), and the exception types that say only which layer
 * failed ({@link WEAK_EXCEPTION_TYPES}). The sidecar's rules grpc.unknown,
 * code.mcp.internal, code.invalid_request, code.server_error and those types'
 * score them 9 (their priority), below every other signal and below any words,
 * which say what failed; the fallback reads no words, so it reads them after every
 * other signal, in that order (listed so).
 * @internal Exported for the drift test only.
 */
export const WEAK_SIGNALS = {
  "grpc.unknown": [C.CATEGORY_INTERNAL, "fallback.grpc_unknown"],
  "code.mcp.internal": [C.CATEGORY_INTERNAL, "fallback.code_mcp_internal"],
  "code.invalid_request": [C.CATEGORY_VALIDATION, "fallback.code_invalid_request"],
  "code.server_error": [C.CATEGORY_INTERNAL, "fallback.code_server_error"],
} as const satisfies Record<string, readonly [pb.Category, string]>;

/**
 * The sidecar's exception rules of priority 9, in its order: types raised for
 * failures of several categories, which a status or words decide (.NET's
 * HttpRequestException for a refused connection and a refused status alike,
 * Spring's ResourceAccessException for any I/O error, LangChain4j's
 * InvalidRequestException and InternalServerException, named by status class;
 * go-openai's APIError for whatever the API answered, and the base class of the
 * OpenAI and Google Python SDKs).
 * @internal Exported for the drift test only.
 */
export const WEAK_EXCEPTION_TYPES: readonly (readonly [string, readonly string[], readonly [pb.Category, string]])[] = [
  ["exception.http_request", ["HttpRequestException", "ResourceAccessException"], [C.CATEGORY_NETWORK, "fallback.type_http_request"]],
  ["exception.invalid_request", ["InvalidRequestException"], [C.CATEGORY_VALIDATION, "fallback.type_invalid_request"]],
  ["exception.internal_server", ["InternalServerException"], [C.CATEGORY_INTERNAL, "fallback.type_internal_server"]],
  ["exception.api_error", ["APIError"], [C.CATEGORY_INTERNAL, "fallback.type_api_error"]],
];

/** The weak exception rule that names a type, whole or by its last part, as {@link exceptionType} matches one. */
function weakExceptionType(type: string): readonly [pb.Category, string] | undefined {
  const names = typeNames(type);
  return WEAK_EXCEPTION_TYPES.find(([, types]) => names.some((n) => types.includes(n)))?.[2];
}

/**
 * Rule code.invalid_request's codes, in ASCII lower case.
 * @internal Exported for the drift test only.
 */
export const INVALID_REQUEST_CODES: ReadonlySet<string> = new Set(["invalid_request_error", "invalid_request"]);

/**
 * Rule code.server_error's codes, in ASCII lower case.
 * @internal Exported for the drift test only.
 */
export const SERVER_ERROR_CODES: ReadonlySet<string> = new Set(["server_error", "api_error"]);

/** {@link ERROR_CODES} by the code in ASCII lower case, as the sidecar indexes its rules' codes. */
const ERROR_CODES_FOLDED: ReadonlyMap<string, readonly [pb.Category, string]> = new Map(
  [...ERROR_CODES].map(([code, verdict]) => [asciiLower(code), verdict]),
);

/**
 * The category and rule an error code names, if any: the code trimmed of
 * Unicode White_Space (Rust's `str::trim`, which keeps U+FEFF and drops U+0085,
 * unlike `String.prototype.trim`) and compared ASCII case aside (Rust's
 * `eq_ignore_ascii_case`: `toLowerCase` would also fold non-ASCII letters such
 * as the Kelvin sign into "k"). A Map, so that a code such as `constructor` or
 * `__proto__` finds nothing.
 * @internal Exported for tests.
 */
export function errorCode(code: string): readonly [pb.Category, string] | undefined {
  return ERROR_CODES_FOLDED.get(asciiLower(code.replace(RUST_TRIM, "")));
}

/**
 * The exception types the sidecar's rules read alone (exception.cancelled to
 * exception.internal), each with its category and rule, in the order of
 * src/defaults/rules.toml (the source of truth; a test fails when the two
 * drift apart), spelled as there. Matched as the sidecar matches a type (see
 * {@link exceptionType}). As on the sidecar, a type wins over a gRPC code, the
 * HTTP status and an exit code, and gives way to the kind and an error code.
 * The rules that also read words of the message (exception.typeerror.fetch,
 * exception.rangeerror.stack, exception.valueerror.parse, ...) are not here:
 * the fallback reads no words, so Node's fetch failure (a TypeError "fetch
 * failed") is validation here where the sidecar finds network in its words,
 * unless a code of its cause (ECONNREFUSED) says more. A parse error inside a
 * tool (kind tool_error) is the sidecar's rule kind.tool_error.parse, not
 * exception.format (see {@link TOOL_PARSE_TYPES}).
 * @internal Exported for that test only.
 */
export const EXCEPTION_TYPES: ReadonlyMap<string, readonly [pb.Category, string]> = new Map<string, readonly [pb.Category, string]>([
  // Rule exception.cancelled: asyncio's, Node's AbortError, the SDKs' user aborts, .NET's and Java's.
  ...[
    "CancelledError",
    "asyncio.CancelledError",
    "concurrent.futures.CancelledError",
    "KeyboardInterrupt",
    "AbortError",
    "APIUserAbortError",
    "ClientClosedRequestError",
    "OperationCanceledException",
    "TaskCanceledException",
    "InterruptedException",
    "CancellationException",
  ].map((type) => [type, [C.CATEGORY_CANCELLED, "fallback.type_cancelled"]] as const),
  // Rule exception.timeout.
  ...[
    "TimeoutError",
    "Timeout",
    "ReadTimeout",
    "ConnectTimeout",
    "WriteTimeout",
    "PoolTimeout",
    "TimeoutException",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ServerTimeoutError",
    "APITimeoutError",
    "RequestTimeoutError",
    "SocketTimeoutException",
    "HttpTimeoutException",
    "TimeoutExpired",
    "DeadlineExceeded",
    "ReadTimeoutException",
    "asyncio.TimeoutError",
    "socket.timeout",
    "ServiceRequestTimeoutError",
    "ServiceResponseTimeoutError",
    "QdrantClientTimeoutError",
  ].map((type) => [type, [C.CATEGORY_TIMEOUT, "fallback.type_timeout"]] as const),
  // Rule exception.network.
  ...[
    "ConnectionError",
    "ConnectError",
    "ChunkedEncodingError",
    "IncompleteRead",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "NewConnectionError",
    "ProtocolError",
    "RemoteProtocolError",
    "ReadError",
    "WriteError",
    "NetworkError",
    "ClientConnectorError",
    "ClientConnectionError",
    "ServerDisconnectedError",
    "ClientOSError",
    "APIConnectionError",
    "SSLError",
    "SSLCertVerificationError",
    "ConnectException",
    "UnknownHostException",
    "NoRouteToHostException",
    "SocketException",
    "gaierror",
    "socket.gaierror",
    "MaxRetryError",
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ServiceRequestError",
    "ServiceResponseError",
    "NoBrokersAvailable",
    "OpenAIIoException",
    "AnthropicIoException",
    "AnthropicIOException",
    "AMQPConnectionError",
    "KafkaConnectionError",
  ].map((type) => [type, [C.CATEGORY_NETWORK, "fallback.type_connection"]] as const),
  // Rule exception.rate_limited.
  ...[
    "RateLimitError",
    "openai.RateLimitError",
    "anthropic.RateLimitError",
    "TooManyRequests",
    "ThrottlingException",
    "ResourceExhausted",
    "RetryAfter",
    "TelegramRetryAfter",
    "FloodWaitError",
  ].map((type) => [type, [C.CATEGORY_RATE_LIMITED, "fallback.type_rate_limited"]] as const),
  // Rule exception.unavailable.
  ...[
    "ServiceUnavailableError",
    "ServiceUnavailable",
    "OverloadedError",
    "BadGateway",
    "GatewayTimeout",
    "GatewayTimeoutError",
  ].map((type) => [type, [C.CATEGORY_UNAVAILABLE, "fallback.type_unavailable"]] as const),
  // Rule exception.auth.
  ...[
    "AuthenticationError",
    "openai.AuthenticationError",
    "anthropic.AuthenticationError",
    "Unauthenticated",
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "ExpiredTokenException",
    "InvalidAuthenticationError",
    "CredentialsError",
    "IdentityTokenFileError",
    "ClientAuthenticationError",
    "CredentialUnavailableError",
    "AuthenticationRequiredError",
    "RefreshError",
    "SMTPAuthenticationError",
    "AI_LoadAPIKeyError",
  ].map((type) => [type, [C.CATEGORY_AUTH, "fallback.type_auth"]] as const),
  // Rule exception.permission.
  ...[
    "PermissionDeniedError",
    "PermissionError",
    "PermissionDenied",
    "AccessDeniedException",
    "Forbidden",
    "SecurityException",
    "UnauthorizedAccessException",
    "AccessDeniedError",
  ].map((type) => [type, [C.CATEGORY_PERMISSION_DENIED, "fallback.type_permission"]] as const),
  // Rule exception.not_found.
  ...[
    "NotFoundError",
    "FileNotFoundError",
    "NotFound",
    "NoSuchKey",
    "ModuleNotFoundError",
    "FileNotFoundException",
    "NoSuchFileException",
    "NoSuchElementException",
    "ResourceNotFoundException",
    "IsADirectoryError",
    "NotADirectoryError",
    "ProcessLookupError",
    "LookupError",
    "ResourceNotFoundError",
    "AI_NoSuchModelError",
    "AI_NoSuchProviderError",
  ].map((type) => [type, [C.CATEGORY_NOT_FOUND, "fallback.type_not_found"]] as const),
  // Rule exception.unknown_tool: the Vercel AI SDK's, for a tool the model named that the agent does not have.
  ["AI_NoSuchToolError", [C.CATEGORY_UNKNOWN_TOOL, "fallback.type_unknown_tool"]] as const,
  // Rule exception.validation: JavaScript's TypeError and RangeError among them.
  ...[
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "AttributeError",
    "AssertionError",
    "ValidationError",
    "pydantic.ValidationError",
    "pydantic_core.ValidationError",
    "UnprocessableEntityError",
    "RequestHeaderFieldsTooLargeError",
    "ZodError",
    "InvalidArgument",
    "IllegalArgumentException",
    "IllegalStateException",
    "NumberFormatException",
    "ArgumentException",
    "ArgumentNullException",
    "ArgumentOutOfRangeException",
    "FormatException",
    "ParamValidationError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UndefinedError",
    "TemplateSyntaxError",
    "ZeroDivisionError",
    "OverflowError",
    "RangeError",
    "jsonschema.exceptions.ValidationError",
    "AI_InvalidArgumentError",
    "AI_InvalidPromptError",
    "AI_UnsupportedFunctionalityError",
    "AI_InvalidMessageRoleError",
    "AI_MessageConversionError",
    "AI_InvalidDataContentError",
    "AI_TooManyEmbeddingValuesForCallError",
    "AI_MissingToolResultsError",
    "UnidentifiedImageError",
    "PrismaClientValidationError",
    "InvalidURI",
    "ParseConfigError",
    "ToolInvocationError",
    "AgentToolCallError",
  ].map((type) => [type, [C.CATEGORY_VALIDATION, "fallback.type_validation"]] as const),
  // Rule exception.format: JavaScript's SyntaxError (JSON.parse's) among them.
  ...[
    "JSONDecodeError",
    "json.JSONDecodeError",
    "json.decoder.JSONDecodeError",
    "OutputParserException",
    "langchain_core.exceptions.OutputParserException",
    "SyntaxError",
    "JsonParseException",
    "JsonSyntaxException",
    "MismatchedInputException",
    "InvalidFormatException",
    "JsonMappingException",
    "JsonEOFException",
    "YAMLError",
    "ScannerError",
    "ParserError",
    "AI_InvalidToolInputError",
    "AI_InvalidToolArgumentsError",
    "AI_JSONParseError",
    "AI_TypeValidationError",
    "AI_NoObjectGeneratedError",
    "AI_InvalidResponseDataError",
    "EmptyDataError",
    "JsonException",
    "JsonReaderException",
    "JsonSerializationException",
    "AgentParsingError",
  ].map((type) => [type, [C.CATEGORY_FORMAT, "fallback.type_format"]] as const),
  // Rule exception.conflict.
  ...[
    "UniqueViolation",
    "IntegrityError",
    "FileExistsError",
    "FileAlreadyExistsException",
    "ConflictError",
    "PreconditionFailedError",
    "ConcurrentModificationException",
    "DuplicateKeyException",
    "OptimisticLockException",
    "StaleElementReferenceException",
    "ResourceExistsError",
    "ResourceModifiedError",
    "IdempotencyError",
    "StripeIdempotencyError",
  ].map((type) => [type, [C.CATEGORY_CONFLICT, "fallback.type_conflict"]] as const),
  // Rule exception.context_length.
  ...[
    "ContextWindowExceededError",
    "ContextLengthExceededError",
    "ContentTooLargeError",
  ].map((type) => [type, [C.CATEGORY_CONTEXT_LENGTH, "fallback.type_context_length"]] as const),
  // Rule exception.content_filter.
  ...[
    "ContentPolicyViolationError",
    "ContentFilterFinishReasonError",
    "BlockedPromptException",
    "StopCandidateException",
  ].map((type) => [type, [C.CATEGORY_CONTENT_FILTER, "fallback.type_content_filter"]] as const),
  // Rule exception.quota: quotas, and memory or disk run out.
  ...[
    "QuotaExceededError",
    "InsufficientQuotaError",
    "PaymentRequiredError",
    "MemoryError",
    "OutOfMemoryError",
    "DiskFullError",
    "_ArrayMemoryError",
    "OutOfMemoryException",
    "BudgetExceededError",
  ].map((type) => [type, [C.CATEGORY_QUOTA_EXCEEDED, "fallback.type_quota"]] as const),
  // Rule exception.internal.
  ...[
    "RuntimeError",
    "NotImplementedError",
    "RecursionError",
    "SystemError",
    "NullPointerException",
    "panic",
    "InternalError",
    "HTTPNotImplementedError",
    "ArrayIndexOutOfBoundsException",
    "IndexOutOfBoundsException",
    "ClassCastException",
  ].map((type) => [type, [C.CATEGORY_INTERNAL, "fallback.type_internal"]] as const),
]);

/**
 * The exception types of a parse error, as the sidecar's rule
 * kind.tool_error.parse lists them (src/defaults/rules.toml; a test fails when
 * the two drift apart): with kind tool_error (which `report` gives whatever a
 * tool threw), what failed to parse came from elsewhere, an error page for
 * JSON, and the call itself was fine: internal (kind 100 + type 60 outrank
 * exception.format), with the rule's own suggestion. The sidecar's rules
 * http.500.error_page and http.502.error_page read the same types at a
 * server's failing status (see {@link classifyCoarse}).
 * @internal Exported for that test only.
 */
export const TOOL_PARSE_TYPES: ReadonlySet<string> = new Set([
  "JSONDecodeError",
  "json.JSONDecodeError",
  "json.decoder.JSONDecodeError",
  "SyntaxError",
  "JsonParseException",
  "JsonSyntaxException",
  "JsonEOFException",
  "MismatchedInputException",
  "JsonException",
  "JsonReaderException",
]);

/** An exception type trimmed as Rust's `str::trim` trims, and its last part after a `.` or `:`. */
function typeNames(type: string): [string, string] {
  const name = type.replace(RUST_TRIM, "");
  return [name, name.slice(Math.max(name.lastIndexOf("."), name.lastIndexOf(":")) + 1)];
}

/**
 * The category and rule an exception type names, if any, matched as the
 * sidecar matches a rule's types: trimmed as Rust's `str::trim` trims, then
 * whole or by its last part after a `.` or `:` (`httpx.ReadTimeout`, Ruby's
 * `Net::ReadTimeout`), in its case. Where the two named different rules,
 * the sidecar would take the one listed first; no name in rules.toml does (a
 * test fails when one does), so the whole name is looked up first. A name
 * that no rule lists is no signal there, whatever its words (undici's
 * HeadersTimeoutError), nor here. A Map, so that a type such as `constructor`
 * finds nothing.
 * @internal Exported for tests.
 */
export function exceptionType(type: string): readonly [pb.Category, string] | undefined {
  const [name, last] = typeNames(type);
  return EXCEPTION_TYPES.get(name) ?? EXCEPTION_TYPES.get(last);
}

/**
 * True when a rule of the fallback's tables knows an exception type: {@link EXCEPTION_TYPES},
 * {@link WEAK_EXCEPTION_TYPES} or {@link TOOL_PARSE_TYPES}.
 */
function knownType(type: string): boolean {
  return (
    exceptionType(type) !== undefined ||
    weakExceptionType(type) !== undefined ||
    typeNames(type).some((n) => TOOL_PARSE_TYPES.has(n))
  );
}

/**
 * The type a one-line message names before its text, as JavaScript's
 * `String(error)` and Python's `traceback.format_exception_only` write an
 * error (`TimeoutError: The operation was aborted due to timeout`), if it
 * looks like one: as the sidecar's type_in_message (src/classify.rs), the
 * line trimmed as Rust's `str::trim` trims, without a JVM's `Exception in
 * thread "main" `, read up to its first `:`, all of it ASCII letters, digits,
 * `_` and `.`, and ending as a type does. A message of more lines is none.
 * @internal Exported for tests.
 */
export function typeInMessage(message: string): string | undefined {
  if (message.includes("\n")) return undefined;
  let line = message.replace(RUST_TRIM, "");
  const thread = 'Exception in thread "';
  if (line.startsWith(thread)) {
    const rest = line.slice(thread.length);
    const end = rest.indexOf('" ');
    line = end < 0 ? rest : rest.slice(end + 2);
  }
  const colon = line.indexOf(":");
  const name = colon < 0 ? line : line.slice(0, colon);
  const looksLikeType = ["Error", "Exception", "Interrupt", "Exit", "Timeout"].some((s) => name.endsWith(s));
  return looksLikeType && /^[A-Za-z0-9_.]*$/.test(name) ? name : undefined;
}

/**
 * The exception type the fallback reads, as the sidecar derives it: the
 * outcome's when a rule knows it, else the type a one-line message begins with
 * when a rule knows that one (see {@link typeInMessage}), else the outcome's.
 */
function effectiveType(o: pb.Outcome): string {
  if (knownType(o.exceptionType)) return o.exceptionType;
  const named = typeInMessage(o.message);
  return named !== undefined && knownType(named) ? named : o.exceptionType;
}

/** Leading and trailing Unicode White_Space, as Rust's `str::trim` removes it. */
const RUST_TRIM = /^[\t-\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+|[\t-\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+$/g;

/** `text` with A to Z, and only those, in lower case. */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

/**
 * The words that make a gRPC RESOURCE_EXHAUSTED a quota (escalated) rather
 * than a rate limit (retried): the sidecar's rule grpc.resource_exhausted.quota
 * (src/defaults/rules.toml; a test fails when the two drift apart). Its
 * patterns are plain words, so a substring test, ASCII case aside, matches
 * what its case-insensitive, non-Unicode regular expressions do.
 * @internal Exported for that test only.
 */
export const GRPC_QUOTA_WORDS: readonly string[] = Object.freeze(["billing", "insufficient", "credits", "disk", "storage quota"]);

/**
 * How much text the sidecar's message rules read, in UTF-8 bytes: its default
 * `[classify] text_limit` (src/config.rs).
 */
const TEXT_LIMIT = 1024;

/**
 * The text the sidecar's message rules look at (src/classify.rs, match_text):
 * the message's first {@link TEXT_LIMIT} bytes, then the detail's, or its first
 * and last half of that when it is longer (a traceback ends with its
 * exception); a long message of many lines with no detail is read as a detail.
 * A cut inside a character leaves a U+FFFD, which no word here matches.
 */
function matchText(o: pb.Outcome): string {
  const utf8 = new TextEncoder();
  const decoder = new TextDecoder();
  const half = TEXT_LIMIT / 2;
  const headAndTail = (text: string): string => {
    const bytes = utf8.encode(text);
    if (bytes.length <= TEXT_LIMIT) return text;
    return `${decoder.decode(bytes.subarray(0, half))}\n${decoder.decode(bytes.subarray(bytes.length - half))}`;
  };
  const prefix = (text: string): string => {
    const bytes = utf8.encode(text);
    return bytes.length <= TEXT_LIMIT ? text : decoder.decode(bytes.subarray(0, TEXT_LIMIT));
  };
  if (o.detail === "") return o.message.includes("\n") ? headAndTail(o.message) : prefix(o.message);
  return `${prefix(o.message)}\n${headAndTail(o.detail)}`;
}

/** The whole fallback policy: one outcome in, one verdict out. */
export function decide(policy: Readonly<FallbackPolicy>, o: pb.Outcome, input: FallbackInput): pb.Verdict {
  const counts: SessionCounts = {
    consecutive: Math.max(input.consecutive, 0),
    identicalErrors: input.identicalErrors ?? 0,
    sessionErrors: input.sessionErrors ?? 0,
    steps: input.steps ?? 0,
    cost: input.cost ?? 0,
    state: input.state || pb.SessionState.SESSION_STATE_ACTIVE,
  };
  const limits = input.limits ?? NO_LIMITS;
  const v = pb.Verdict.create({
    callId: o.callId,
    sessionId: o.sessionId,
    enforced: true,
    breaker: {
      sessionState: counts.state,
      consecutiveFailures: counts.consecutive,
      sessionErrors: counts.sessionErrors,
      identicalErrors: counts.identicalErrors,
      steps: counts.steps,
      cost: counts.cost,
    },
  });
  v.classification = o.ok ? pb.Classification.create({ rule: "fallback.success" }) : classification(o);
  if (counts.state === pb.SessionState.SESSION_STATE_STOPPED) {
    // Still counted (by the caller), but the run was told to end: say so again.
    stop(v, A.ACTION_ABORT, pb.Reason.REASON_SESSION_STOPPED);
    v.snippet = STOPPED_SNIPPET;
    return v;
  }
  if (o.ok) {
    v.action = A.ACTION_CONTINUE;
    const reason = limitReached(counts, limits);
    if (reason !== undefined) {
      stop(v, A.ACTION_ABORT, reason);
      // The run ends on a success: say why, as a failure's abort does.
      v.snippet = limitSnippet(reason);
    }
    return v;
  }
  plan(policy, v, o, input);
  // What the session breakers say over the category's plan, in the sidecar's order: their abort
  // always wins; a plan that ends the run (a user's cancel) stands over their escalation, which
  // wins over anything else the plan said.
  const trip = onFailure(policy, counts, limits);
  if (trip !== undefined && (trip[0] === A.ACTION_ABORT || v.action !== A.ACTION_ABORT)) {
    v.retry = undefined;
    v.escalation = undefined;
    const [action, reason] = trip;
    stop(v, action, reason);
    if (action === A.ACTION_ESCALATE) {
      const why =
        reason === pb.Reason.REASON_SESSION_ERRORS
          ? `${counts.sessionErrors} errors in this session, the last from tool ${JSON.stringify(o.tool)}`
          : `tool ${JSON.stringify(o.tool)} failed ${counts.consecutive} times in a row`;
      v.escalation = escalation(o, why, input.labels);
    }
  } else if (v.retry !== undefined) {
    // A retry whose failure trips a session breaker is not retried: promise no more than those left.
    v.retry.attemptsLeft = Math.min(v.retry.attemptsLeft, failuresBeforeATrip(policy, counts, limits));
  }
  v.snippet = snippet(o, v.classification, v.action);
  return v;
}

/** A failure's category, from the coarse signals, with its rule and suggestion. */
function classification(o: pb.Outcome): pb.Classification {
  const [category, rule] = classifyCoarse(o);
  const suggestion = RULE_SUGGESTIONS.get(rule) ?? SUGGESTIONS.get(category) ?? "";
  return pb.Classification.create({ category, retryable: RETRYABLE.has(category), rule, suggestion });
}

/** What a failure's category alone says to do. */
function plan(
  policy: Readonly<FallbackPolicy>,
  v: pb.Verdict,
  o: pb.Outcome,
  input: FallbackInput,
): void {
  const category = v.classification?.category ?? C.CATEGORY_UNSPECIFIED;
  if (category === C.CATEGORY_CANCELLED) {
    stop(v, A.ACTION_ABORT, pb.Reason.REASON_CATEGORY_POLICY);
  } else if (category === C.CATEGORY_AUTH || category === C.CATEGORY_PERMISSION_DENIED || category === C.CATEGORY_QUOTA_EXCEEDED) {
    stop(v, A.ACTION_ESCALATE, pb.Reason.REASON_CATEGORY_POLICY);
    v.escalation = escalation(o, `${categoryName(category)} for tool ${JSON.stringify(o.tool)} needs a human`, input.labels);
  } else if (RETRYABLE.has(category)) {
    planRetry(policy, v, o, input);
  } else if (category === C.CATEGORY_UNKNOWN_TOOL) {
    v.action = A.ACTION_RECLASSIFY;
  } else if (category === C.CATEGORY_CONTEXT_LENGTH || category === C.CATEGORY_CONTENT_FILTER) {
    v.action = A.ACTION_REPLAN;
  } else {
    v.action = A.ACTION_RECOVER;
  }
}

/** Sets an action that takes the session out of the active state. */
function stop(v: pb.Verdict, action: pb.Action, reason: pb.Reason): void {
  const breaker = v.breaker as pb.BreakerStatus;
  v.action = action;
  breaker.reason = reason;
  breaker.sessionState = action === A.ACTION_ABORT ? pb.SessionState.SESSION_STATE_STOPPED : pb.SessionState.SESSION_STATE_ESCALATED;
}

/**
 * How many retries a failure of the category gets: `maxRetries`, but at most
 * one for an internal error, as the sidecar's default categories
 * (src/defaults/categories.toml).
 */
function retriesFor(p: Readonly<FallbackPolicy>, category: pb.Category): number {
  return category === C.CATEGORY_INTERNAL ? Math.min(p.maxRetries, INTERNAL_MAX_RETRIES) : p.maxRetries;
}

/**
 * Plans the next attempt: the provider's delay when it gave one, else
 * exponential backoff; recover when the category's retries are used up or the
 * provider says not to retry, escalate when the provider asks for too long a wait.
 */
function planRetry(p: Readonly<FallbackPolicy>, v: pb.Verdict, o: pb.Outcome, input: FallbackInput): void {
  const breaker = v.breaker as pb.BreakerStatus;
  const maxRetries = retriesFor(p, v.classification?.category ?? C.CATEGORY_UNSPECIFIED);
  // Which retry this would be: the caller's attempt number when it counts, else the run of failures.
  const n = Math.max(o.attempt || input.consecutive, 1);
  if (n > maxRetries) {
    v.action = A.ACTION_RECOVER;
    breaker.reason = pb.Reason.REASON_RETRIES_EXHAUSTED;
    return;
  }
  if (header(o.headers, "x-should-retry")?.trim().toLowerCase() === "false") {
    // The provider says not to retry, as OpenAI's and Anthropic's SDKs read it (the sidecar heeds it too).
    v.action = A.ACTION_RECOVER;
    breaker.reason = pb.Reason.REASON_SERVER_PUSHBACK;
    return;
  }
  const provided = providerDelayMs(o.headers, input.nowMs);
  let delay: number;
  if (provided !== undefined) {
    if (provided > p.maxProviderDelayMs) {
      stop(v, A.ACTION_ESCALATE, pb.Reason.REASON_DELAY_TOO_LONG);
      const seconds = (ms: number): string => `${Math.round(ms / 1000)} s`;
      const why = `tool ${JSON.stringify(o.tool)} asks for a wait of ${seconds(provided)}, longer than ${seconds(p.maxProviderDelayMs)}`;
      v.escalation = escalation(o, why, input.labels);
      return;
    }
    // Never earlier than the provider asked; spread upwards only, over at least the
    // base delay's jitter, so that "retry now" does not bring a fleet back at once.
    delay = provided + Math.max(provided, p.baseDelayMs) * p.jitter * input.random;
  } else {
    const nominal = Math.min(p.baseDelayMs * p.multiplier ** (n - 1), p.maxDelayMs);
    delay = Math.min(nominal * (1 + p.jitter * (2 * input.random - 1)), p.maxDelayMs);
  }
  v.action = A.ACTION_RETRY;
  v.retry = pb.RetryPlan.create({
    delayMs: Math.round(delay),
    attempt: n,
    attemptsLeft: maxRetries - n,
    providerDelay: provided !== undefined,
  });
}

/**
 * Maps the structured signals a fallback can trust to a category and a rule id,
 * ranked as the sidecar scores its rules (src/classify.rs: kind 100, error code
 * 80, exception type 60, gRPC code 50, one HTTP status 40, exit code 40, HTTP
 * range 38), so that the strongest signal wins: the outcome's kind (timeout,
 * cancelled, unknown_tool, no_tool_call, invalid_tool_call; tool_error with a
 * parse error's type), then a parse error's type at a server's failing status
 * (a gateway's error page: the status's, as the rules http.500.error_page and
 * http.502.error_page, status 40 + type 60), then an error code of the
 * sidecar's rules that read a code alone, then an exception type of its rules
 * that read a type alone, then a gRPC code, then one HTTP status its rules
 * http.400 to http.502 name, then an exit code (as strong as a status, which
 * wins the tie as listed first in rules.toml), then the 4xx and 5xx ranges,
 * and last the weak signals (gRPC's UNKNOWN, JSON-RPC's -32603, a body's
 * invalid_request_error or server_error: {@link WEAK_SIGNALS}; the types that
 * say only which layer failed: {@link WEAK_EXCEPTION_TYPES}). So a timeout
 * with a 401 or with insufficient_quota is a timeout, server_error with a 503
 * unavailable by the status (and with a 500 internal by the status, alone
 * internal by the code), a SyntaxError with a 502 unavailable, ECONNRESET with
 * a 503 network, httpx.ReadTimeout with a 401 a timeout, a RESOURCE_EXHAUSTED
 * that speaks of billing, with a 429, a quota, a 404 with exit code 127 not
 * found by the status, and exit code 137 with a 418 a quota by the exit code.
 * An internal error that only a gRPC code or a status says
 * (gRPC INTERNAL, UNKNOWN or DATA_LOSS, a 5xx other than an unavailable
 * server's) is read at that signal's rank: a 500 with ECONNRESET is network,
 * a gRPC INTERNAL with a 503 internal. As in the Python and Go fallbacks, a
 * type the sidecar's rules do not list is no signal, whatever its name says
 * (psycopg's ConnectionTimeout): the sidecar may find timeout or connection
 * words in the message, which the fallback reads only for RESOURCE_EXHAUSTED.
 */
export function classifyCoarse(o: pb.Outcome): [pb.Category, string] {
  // The kind first: the agent said so, and on the sidecar a kind rule (100) outranks everything else,
  // so a timeout with a 401 is a timeout, a cancellation with overloaded_error cancelled.
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_TIMEOUT) return [C.CATEGORY_TIMEOUT, "fallback.kind_timeout"];
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_CANCELLED) return [C.CATEGORY_CANCELLED, "fallback.kind_cancelled"];
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_UNKNOWN_TOOL) return [C.CATEGORY_UNKNOWN_TOOL, "fallback.kind_unknown_tool"];
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_NO_TOOL_CALL) return [C.CATEGORY_FORMAT, "fallback.kind_no_tool_call"];
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_INVALID_TOOL_CALL) return [C.CATEGORY_FORMAT, "fallback.kind_invalid_tool_call"];
  // A parse error a tool hit (kind and type, 160 on the sidecar: rule kind.tool_error.parse), not the model's.
  // The exception type, or the one a one-line message begins with when the field names none a rule knows.
  const typeName = effectiveType(o);
  const parseError = typeNames(typeName).some((n) => TOOL_PARSE_TYPES.has(n));
  if (o.kind === pb.OutcomeKind.OUTCOME_KIND_TOOL_ERROR && parseError) {
    return [C.CATEGORY_INTERNAL, "fallback.kind_tool_error_parse"];
  }
  // A body that did not parse at a server's failing status ({@link ERROR_PAGES}: a status and a type,
  // 100, outrank a code there).
  const atErrorPage = ERROR_PAGES.get(HTTP_STATUSES.get(o.httpStatus)?.[1] ?? "");
  if (atErrorPage !== undefined && parseError) return [...atErrorPage];
  const code = errorCode(o.code);
  if (code !== undefined) return [...code];
  // A type (60) ties a RESOURCE_EXHAUSTED with quota words (50 + 10) on the sidecar, and wins as the rule listed first.
  const type = exceptionType(typeName);
  if (type !== undefined) return [...type];
  if (o.grpcCode === 8) {
    // gRPC's RESOURCE_EXHAUSTED: a rate limit, unless its words say a quota, as the sidecar's rules
    // grpc.resource_exhausted.quota (its words outrank the bare code) and grpc.resource_exhausted.
    const text = asciiLower(matchText(o));
    return GRPC_QUOTA_WORDS.some((w) => text.includes(w))
      ? [C.CATEGORY_QUOTA_EXCEEDED, "fallback.grpc_resource_exhausted_quota"]
      : [C.CATEGORY_RATE_LIMITED, "fallback.grpc_resource_exhausted"];
  }
  const grpc = o.grpcCode === undefined ? undefined : GRPC_CODES.get(o.grpcCode);
  if (grpc !== undefined) return [...grpc];
  // One status and an exit code tie (40): the HTTP rules are listed first. Both beat a range (38).
  const status = HTTP_STATUSES.get(o.httpStatus);
  if (status !== undefined) return [...status];
  const exit = o.exitCode === undefined ? undefined : EXIT_CODES.get(o.exitCode);
  if (exit !== undefined) return [...exit];
  const range = HTTP_RANGES.find(([lo, hi]) => o.httpStatus >= lo && o.httpStatus <= hi);
  if (range !== undefined) return [range[2], range[3]];
  if (o.grpcCode === 2) return [...WEAK_SIGNALS["grpc.unknown"]];
  if (o.code.replace(RUST_TRIM, "") === "-32603") return [...WEAK_SIGNALS["code.mcp.internal"]];
  const folded = asciiLower(o.code.replace(RUST_TRIM, ""));
  if (INVALID_REQUEST_CODES.has(folded)) return [...WEAK_SIGNALS["code.invalid_request"]];
  if (SERVER_ERROR_CODES.has(folded)) return [...WEAK_SIGNALS["code.server_error"]];
  const weakType = weakExceptionType(typeName);
  if (weakType !== undefined) return [...weakType];
  return [C.CATEGORY_UNKNOWN, "fallback.default"];
}

/** A number as the sidecar reads one (Rust's f64 grammar: a sign allowed, no hex); negatives are refused after. */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Reads the Retry-After family the fallback honours: retry-after-ms
 * (milliseconds) and Retry-After (seconds or an HTTP date), in the sidecar's
 * grammar (src/backoff.rs). Undefined when neither is there or readable.
 */
export function providerDelayMs(headers: Readonly<Record<string, string>>, nowMs: number): number | undefined {
  const ms = decimal(header(headers, "retry-after-ms"));
  if (ms !== undefined) return ms;
  const ra = header(headers, "retry-after")?.trim();
  if (ra === undefined) return undefined;
  const s = decimal(ra);
  // Anything above a day is nonsense.
  if (s !== undefined) return Math.min(s, 86_400) * 1000;
  const at = parseHttpDate(ra);
  return at === undefined ? undefined : Math.max(at - nowMs, 0);
}

/** A finite number, zero or more, or undefined. */
function decimal(text: string | undefined): number | undefined {
  const t = text?.trim();
  if (t === undefined || !DECIMAL.test(t)) return undefined;
  const n = Number(t);
  // `+ 0` turns the -0 of "-0" into 0.
  return Number.isFinite(n) && n >= 0 ? n + 0 : undefined;
}

// The three forms of an HTTP date (RFC 9110, 5.6.7) exactly as the sidecar's httpdate crate reads
// them, always in GMT: a date with no zone or another zone is refused (Date.parse would read the
// first as local time and accept the second), as is a day's name that is not the date's.
const IMF_FIXDATE =
  /^(?<wday>Mon|Tue|Wed|Thu|Fri|Sat|Sun), (?<day>\d\d) (?<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?<year>\d{4}) (?<h>\d\d):(?<m>\d\d):(?<s>\d\d) GMT$/;
const RFC_850 =
  /^(?<wday>Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (?<day>\d\d)-(?<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)-(?<year>\d\d) (?<h>\d\d):(?<m>\d\d):(?<s>\d\d) GMT$/;
const ASCTIME =
  /^(?<wday>Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?<day> \d|\d\d) (?<h>\d\d):(?<m>\d\d):(?<s>\d\d) (?<year>\d{4})$/;
const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** An HTTP date in milliseconds since the epoch; undefined for what the sidecar would not read as one. */
export function parseHttpDate(text: string): number | undefined {
  const g = (IMF_FIXDATE.exec(text) ?? RFC_850.exec(text) ?? ASCTIME.exec(text))?.groups;
  if (g === undefined) return undefined;
  const [day, h, m, s] = [g.day, g.h, g.m, g.s].map(Number) as [number, number, number, number];
  const month = MONTHS.indexOf(g.mon ?? "");
  let year = Number(g.year);
  // RFC 850's two-digit year, as httpdate reads it.
  if (g.year?.length === 2) year += year < 70 ? 2000 : 1900;
  if (year < 1970 || h > 23 || m > 59 || s > 59) return undefined;
  const at = Date.UTC(year, month, day, h, m, s);
  const d = new Date(at);
  // Date.UTC rolls 31 February over into March; the sidecar refuses it.
  if (d.getUTCMonth() !== month || d.getUTCDate() !== day || DAYS[d.getUTCDay()] !== g.wday?.slice(0, 3)) return undefined;
  return at;
}

/** Looks a header up case-insensitively, as HTTP does. */
function header(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  for (const [k, v] of Object.entries(headers)) {
    if (k.trim().toLowerCase() === name) return v;
  }
  return undefined;
}

/**
 * The advice per category, as the sidecar's default config gives it
 * (src/defaults/categories.toml; a test fails when the two drift apart).
 * `unknown` has none: the message is all there is to go on.
 * @internal Exported for that test only.
 */
export const SUGGESTIONS: ReadonlyMap<pb.Category, string> = new Map<pb.Category, string>([
  [C.CATEGORY_TIMEOUT, "Try a simpler query or a smaller input."],
  [C.CATEGORY_RATE_LIMITED, "Wait, or use another tool."],
  [C.CATEGORY_NETWORK, "Check the host, or use another tool."],
  [C.CATEGORY_UNAVAILABLE, "Retry later, or use another tool."],
  [C.CATEGORY_INTERNAL, "Try other arguments."],
  [C.CATEGORY_AUTH, "Ask a human for credentials."],
  [C.CATEGORY_PERMISSION_DENIED, "Ask a human for the missing permission."],
  [C.CATEGORY_QUOTA_EXCEEDED, "Ask a human to raise the quota or budget."],
  [C.CATEGORY_NOT_FOUND, "Check that it exists; list what is there."],
  [C.CATEGORY_VALIDATION, "Fix the arguments to fit the schema."],
  [C.CATEGORY_CONFLICT, "Read its current state first."],
  [C.CATEGORY_FORMAT, "Reply with a valid tool call in the required format."],
  [C.CATEGORY_UNKNOWN_TOOL, "Use one of the available tools."],
  [C.CATEGORY_CONTEXT_LENGTH, "Shorten the input: summarise or split it."],
  [C.CATEGORY_CONTENT_FILTER, "Rephrase the request or change the plan."],
  [C.CATEGORY_CANCELLED, "The run was cancelled."],
]);

/** What the LLM should make of the error; closes the snippet. */
const INSTRUCTIONS = new Map<pb.Action, string>([
  [A.ACTION_RETRY, "This is a transient failure; the same call will be retried."],
  [A.ACTION_RECOVER, "Do not repeat the same call unchanged: check the arguments or choose another approach."],
  [A.ACTION_RECLASSIFY, "Choose another tool: this one does not exist."],
  [A.ACTION_REPLAN, "Change the plan: this request cannot succeed as it is."],
  [A.ACTION_ESCALATE, "This needs a human: stop and report the error."],
  [A.ACTION_ABORT, "The run is over: stop."],
]);

/** How much of the message the snippet keeps, as the sidecar's default. */
export const MAX_SNIPPET_MESSAGE = 200;

/**
 * A tool's message as the fallback writes it: redacted as the sidecar redacts
 * it, then cut to {@link MAX_SNIPPET_MESSAGE}, so that the cut cannot leave part of a secret.
 */
export function shownMessage(message: string): string {
  return cut(redactHead(message), MAX_SNIPPET_MESSAGE);
}

/** The fallback's `<error>` block for the LLM's next turn, then what to make of it. */
function snippet(o: pb.Outcome, c: pb.Classification, action: pb.Action): string {
  const block = errorBlock({
    tool: o.tool,
    category: c.category,
    type: errorType(o),
    message: shownMessage(o.message),
    count: 1,
    suggestion: c.suggestion,
  });
  return `${block}\n${INSTRUCTIONS.get(action) ?? ""}`;
}

/** One error as the local fallback and the local context show it. */
export interface ErrorBlock {
  /** The tool that failed. */
  tool: string;
  /** The verdict's category; unspecified until one is known. */
  category: pb.Category;
  /** The failure's name, from {@link errorType}. */
  type: string;
  /** Already redacted and cut, by {@link shownMessage}. */
  message: string;
  /** How many times in a row the tool failed with this message. */
  count: number;
  /** The verdict's advice, or empty. */
  suggestion: string;
}

/**
 * Renders an `<error>` block in the sidecar's shape: the tool and the category
 * in the opening tag (an uninformative category left out), then one line with
 * the error type and the message, then the suggestion.
 */
export function errorBlock(e: Readonly<ErrorBlock>): string {
  const name = categoryName(e.category);
  const type = name === "unknown" || name === "unspecified" ? "" : ` type="${name}"`;
  const lines = [`<error tool="${e.tool.replaceAll('"', "&quot;")}"${type}>`];
  const text = defuseTags([e.type, e.message].filter((s) => s !== "").join(": "));
  if (text !== "") lines.push(e.count > 1 ? `${text} (×${e.count})` : text);
  if (e.suggestion !== "") lines.push(`suggestion: ${e.suggestion}`);
  lines.push("</error>");
  return lines.join("\n");
}

/**
 * `text` with the `<` of every `<error` and `</error` (any case) written `&lt;`, as
 * the sidecar writes a message: a `</error>` in a tool's output would end the block
 * early, and what followed would read to the model as Rebound's own words.
 */
export function defuseTags(text: string): string {
  return text.replace(/<(\/?error)/gi, "&lt;$1");
}

/** Names the failure for a snippet from the most telling field set. */
export function errorType(o: pb.Outcome): string {
  // The exception type and the code are free text, set by the caller: redacted like the message.
  if (o.exceptionType !== "") return redactHead(o.exceptionType);
  if (o.httpStatus !== 0) return `HTTP ${o.httpStatus}`;
  if (o.code !== "") return redactHead(o.code);
  if (o.exitCode !== undefined) return `exit ${o.exitCode}`;
  return "";
}

/**
 * The fallback's report for a human: its summary, then (as in the sidecar's
 * text, right after the first line) the session's labels, then the last
 * error's message. The report carries a copy of the labels.
 */
function escalation(o: pb.Outcome, why: string, labels: Readonly<Record<string, string>> = {}): pb.EscalationReport {
  const summary = `${why} (decided by the client's local fallback policy: the Rebound sidecar did not answer)`;
  const lines = [summary];
  if (Object.keys(labels).length > 0) lines.push(labelsLine(labels));
  const message = shownMessage(o.message);
  if (message !== "") lines.push(`last error: ${message}`);
  return pb.EscalationReport.create({ summary, text: lines.join("\n"), labels: { ...labels } });
}

/**
 * The line an escalation report's text gives the session's labels, as the
 * sidecar writes it: `Labels: k1=v1, k2=v2`, sorted by key in the sidecar's
 * order, by code point (UTF-8 byte order), not by UTF-16 code unit as
 * `Array.prototype.sort` compares; a value's control characters as spaces
 * (Rust's `char::is_control`, Unicode's Cc), redacted.
 */
function labelsLine(labels: Readonly<Record<string, string>>): string {
  const keys = Object.keys(labels).sort(byCodePoint);
  const pairs = keys.map((k) => `${k}=${(labels[k] ?? "").replace(/\p{Cc}/gu, " ")}`);
  return redact(`Labels: ${pairs.join(", ")}`);
}

/** Orders two strings by their code points. */
function byCodePoint(a: string, b: string): number {
  const x = a[Symbol.iterator]();
  const y = b[Symbol.iterator]();
  for (;;) {
    const p = x.next();
    const q = y.next();
    if (p.done === true || q.done === true) return (p.done === true ? 0 : 1) - (q.done === true ? 0 : 1);
    const d = (p.value.codePointAt(0) ?? 0) - (q.value.codePointAt(0) ?? 0);
    if (d !== 0) return d;
  }
}
