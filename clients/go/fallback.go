package rebound

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// FallbackPolicy is the local policy that decides when the sidecar cannot be
// reached within the call deadline. DefaultFallbackPolicy holds the sidecar's
// seed defaults. It classifies by the structured signals of the sidecar's
// rules that read one signal alone (src/defaults/rules.toml), with their
// values: the outcome's kind, every error code of its code.* rules (provider
// codes, errno names such as ENOENT, EACCES and ENOSPC, MCP's JSON-RPC codes),
// every exception type of its exception.* rules, every gRPC code, every HTTP
// status of its http.* rules and their ranges (any other 4xx validation, any
// other 5xx internal), and the exit codes of its exit.* rules; plus a parse
// error inside a tool that ran (kind.tool_error.parse) and a gRPC
// RESOURCE_EXHAUSTED whose words say billing, credits or the like (a used-up
// quota). Each category then gets the plan of the sidecar's categories.toml:
// timeouts, connection errors, rate limits and an unavailable server are
// retried, an internal error retried once, auth, permission and quota errors
// escalated, an input too long or filtered replanned, a cancellation aborted,
// an unknown tool reclassified, and anything else (not found, validation,
// conflict, format, unknown) handed back to the LLM (recover). It ranks the
// signals as the sidecar scores them: the outcome's kind (timeout, cancelled,
// unknown_tool, no_tool_call, invalid_tool_call), then an error code, then an
// exception type, then a gRPC code, then a single HTTP status, then an exit
// code, then an HTTP status by its range; so a timeout with a 401 is retried,
// not escalated, a 503 with ECONNRESET is a network failure and exit code 127
// with a 418 not found (classifyCoarse). It reads no words but those of
// RESOURCE_EXHAUSTED: where the sidecar's rules read a signal with the
// message's words (a 400 that says the prompt is too long), it answers by the
// signal alone; but a one-line message that begins with a type (TimeoutError:
// ...) gives that type when the exception type is empty or unknown, as on the
// sidecar (exceptionTypeOf). Its session breakers are the sidecar's
// (src/breaker.rs): identical errors in a row and a session's step and cost
// limits abort, failures of one tool in a row and the session's errors
// escalate.
type FallbackPolicy struct {
	// BaseDelay is the first retry's backoff delay.
	BaseDelay time.Duration
	// Multiplier grows the backoff delay with each further retry.
	Multiplier float64
	// MaxDelay caps a backoff delay, jitter included.
	MaxDelay time.Duration
	// MaxRetries is how many retries in a row one tool gets before the failure goes to the LLM;
	// an internal error gets at most one, as on the sidecar.
	MaxRetries int
	// Jitter spreads backoff delays by ±Jitter (0.2 is ±20 %) and stretches provider delays by up to +Jitter
	// of the provider's delay or of BaseDelay, whichever is longer.
	Jitter float64
	// MaxConsecutiveFailures of one tool in a session escalate; 0 turns the breaker off.
	MaxConsecutiveFailures int
	// MaxSessionErrors in a session escalate, unless the session declared its own
	// limit (WithErrorLimit); 0 turns the breaker off (a declared limit still counts).
	MaxSessionErrors int
	// MaxIdenticalErrors in a row abort the session: failures of one tool whose
	// messages read the same once numbers, ids, paths, URLs and quoted values are
	// folded, as the sidecar judges them; 0 turns the breaker off.
	MaxIdenticalErrors int
	// MaxProviderDelay is the longest Retry-After honoured; a longer one escalates instead of sleeping,
	// as the sidecar's default policy does.
	MaxProviderDelay time.Duration
}

// DefaultFallbackPolicy returns the seed defaults: backoff 1 s ×2 capped at 10 s,
// 3 retries, ±20 % jitter, 3 consecutive failures of a tool escalate, so do 10
// errors in a session, 5 identical errors in a row abort, a provider delay of
// more than 5 minutes escalates.
func DefaultFallbackPolicy() FallbackPolicy {
	return FallbackPolicy{
		BaseDelay:              time.Second,
		Multiplier:             2,
		MaxDelay:               10 * time.Second,
		MaxRetries:             3,
		Jitter:                 0.2,
		MaxConsecutiveFailures: 3,
		MaxSessionErrors:       10,
		MaxIdenticalErrors:     5,
		MaxProviderDelay:       5 * time.Minute,
	}
}

// Validate reports the first impossible value, naming the field.
func (p FallbackPolicy) Validate() error {
	switch {
	case p.BaseDelay <= 0:
		return fmt.Errorf("%w: FallbackPolicy.BaseDelay = %s: must be positive", ErrInvalidInput, p.BaseDelay)
	case math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || p.Multiplier < 1:
		return fmt.Errorf("%w: FallbackPolicy.Multiplier = %v: must be a finite number of at least 1", ErrInvalidInput, p.Multiplier)
	case p.MaxDelay < p.BaseDelay:
		return fmt.Errorf("%w: FallbackPolicy.MaxDelay = %s: must be at least BaseDelay (%s)", ErrInvalidInput, p.MaxDelay, p.BaseDelay)
	case p.MaxRetries < 0:
		return fmt.Errorf("%w: FallbackPolicy.MaxRetries = %d: must not be negative", ErrInvalidInput, p.MaxRetries)
	case math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter >= 1:
		return fmt.Errorf("%w: FallbackPolicy.Jitter = %v: must be in [0, 1)", ErrInvalidInput, p.Jitter)
	case p.MaxConsecutiveFailures < 0:
		return fmt.Errorf("%w: FallbackPolicy.MaxConsecutiveFailures = %d: must not be negative", ErrInvalidInput, p.MaxConsecutiveFailures)
	case p.MaxSessionErrors < 0:
		return fmt.Errorf("%w: FallbackPolicy.MaxSessionErrors = %d: must not be negative", ErrInvalidInput, p.MaxSessionErrors)
	case p.MaxIdenticalErrors < 0:
		return fmt.Errorf("%w: FallbackPolicy.MaxIdenticalErrors = %d: must not be negative", ErrInvalidInput, p.MaxIdenticalErrors)
	case p.MaxProviderDelay <= 0:
		return fmt.Errorf("%w: FallbackPolicy.MaxProviderDelay = %s: must be positive", ErrInvalidInput, p.MaxProviderDelay)
	}
	return nil
}

// fallbackInput is what the policy needs beyond the outcome: the session's
// counters after it (localState.observe), and time and randomness, which come
// in from outside so that tests are exact.
type fallbackInput struct {
	// consecutive counts the failures of the outcome's tool in a row in the session, this one included.
	consecutive int
	// identical counts the session's identical errors in a row, this one included.
	identical int
	// errors counts the session's failures, and steps its outcomes, this one included.
	errors, steps uint32
	// cost sums the session's costs, this outcome's included.
	cost float64
	// state is the session's state before this outcome; zero is active.
	state reboundpb.SessionState
	// limits are what the session declared.
	limits sessionLimits
	// labels are the labels the session declared, which an escalation report
	// carries, as the sidecar's does; nil for none. Read only.
	labels map[string]string
	// now resolves a Retry-After given as an HTTP date.
	now time.Time
	// random is uniform in [0, 1) and drives the jitter.
	random float64
}

// retryableCategories are the ones the seed policy retries.
var retryableCategories = map[Category]bool{
	reboundpb.Category_CATEGORY_TIMEOUT:      true,
	reboundpb.Category_CATEGORY_NETWORK:      true,
	reboundpb.Category_CATEGORY_UNAVAILABLE:  true,
	reboundpb.Category_CATEGORY_RATE_LIMITED: true,
	reboundpb.Category_CATEGORY_INTERNAL:     true,
}

// internalMaxRetries is the most retries an internal error gets, as the
// sidecar's categories.toml (max_retries = 1): a failure inside the tool may be
// a fluke once, but seldom goes away when asked again.
const internalMaxRetries = 1

// codeClass is what an error code, an exception type, a gRPC code, an HTTP
// status or an exit code means to the fallback: a category, the rule that
// says so, and that rule's own suggestion where the sidecar's has one (empty:
// the category's, from categories.toml).
type codeClass struct {
	category   Category
	rule       string
	suggestion string
}

// codeRules are the error codes of every rule of the sidecar that reads a code
// and nothing else, in src/defaults/rules.toml's order, each entry under the
// rule it mirrors (TestErrorCodesMatchSidecarRules checks for drift): provider
// codes, errno names (which the Go client reports as the code: ENOENT,
// EACCES, ENOSPC...), Node's and undici's codes, and MCP's JSON-RPC error
// codes. A used-up quota (a full disk too) is not retried but escalated, as
// are auth and permission errors; an input too long or filtered is replanned;
// an overloaded server is retried with backoff (unavailable) and an error
// inside the provider's server retried once (internal); a timeout or a failed
// connection is retried; a cancellation aborts; the others go back to the
// LLM. Left out: the rules code.validation.quota and
// code.validation.context_length, which also read the message's words (so
// invalid_request_error is validation here even when its words speak of
// billing). As on the sidecar, a code wins over an exception type, a gRPC
// code, the HTTP status and the exit code (but not over the outcome's kind):
// OpenAI sends insufficient_quota with a 429, and a 503 whose connection was
// reset (ECONNRESET) is a network failure.
var codeRules = []struct {
	class codeClass
	codes []string
}{
	// code.insufficient_quota
	{codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.code_quota"},
		[]string{"insufficient_quota", "billing_error", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded",
			"QuotaExceeded", "credit_balance_too_low", "ServiceQuotaExceededException", "LimitExceededException",
			"budget_exceeded"}},
	// code.rate_limit
	{codeClass{category: reboundpb.Category_CATEGORY_RATE_LIMITED, rule: "fallback.code_rate_limit"},
		[]string{"rate_limit_exceeded", "rate_limit_error", "RateLimitExceeded", "ThrottlingException", "Throttling",
			"ProvisionedThroughputExceededException", "TooManyRequests", "TooManyRequestsException", "SlowDown",
			"RequestLimitExceeded", "ratelimited", "rate_limited", "429"}},
	// code.context_length
	{codeClass{category: reboundpb.Category_CATEGORY_CONTEXT_LENGTH, rule: "fallback.code_context_length"},
		[]string{"context_length_exceeded", "string_above_max_length", "max_tokens_exceeded", "request_too_large"}},
	// code.content_filter
	{codeClass{category: reboundpb.Category_CATEGORY_CONTENT_FILTER, rule: "fallback.code_content_filter"},
		[]string{"content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation", "SAFETY", "safety",
			"PROHIBITED_CONTENT"}},
	// code.auth
	{codeClass{category: reboundpb.Category_CATEGORY_AUTH, rule: "fallback.code_auth"},
		[]string{"invalid_api_key", "authentication_error", "invalid_auth", "not_authed", "ExpiredToken",
			"ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException", "InvalidAccessKeyId",
			"SignatureDoesNotMatch", "token_expired", "unauthorized", "UNAUTHENTICATED", "bad_credentials",
			"InvalidAuthenticationToken", "ExpiredAuthenticationToken", "InvalidAuthenticationTokenTenant",
			"AuthenticationFailed", "InvalidAuthenticationInfo", "NoAuthenticationInformation",
			"invalid_grant", "invalid_client", "unauthorized_client"}},
	// code.permission
	{codeClass{category: reboundpb.Category_CATEGORY_PERMISSION_DENIED, rule: "fallback.code_permission"},
		[]string{"permission_error", "AccessDenied", "AccessDeniedException", "Forbidden", "insufficient_permissions",
			"missing_scope", "not_allowed_token_type", "PERMISSION_DENIED", "EACCES", "EPERM",
			"AuthorizationFailed", "AuthorizationPermissionMismatch", "AuthorizationFailure", "LinkedAuthorizationFailed"}},
	// code.not_found
	{codeClass{category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.code_not_found"},
		[]string{"model_not_found", "not_found_error", "NoSuchKey", "NoSuchBucket", "ResourceNotFoundException", "NotFound",
			"channel_not_found", "resource_missing", "ENOENT", "ENOTDIR", "EISDIR", "NOT_FOUND", "MODULE_NOT_FOUND",
			"ERR_MODULE_NOT_FOUND",
			"ResourceGroupNotFound", "ResourceNotFound", "SubscriptionNotFound", "BlobNotFound", "ContainerNotFound",
			"QueueNotFound", "ShareNotFound"}},
	// code.validation
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.code_validation"},
		[]string{"ValidationException", "ValidationError", "invalid_arguments",
			"invalid_parameter", "parameter_invalid", "InvalidParameterValue", "invalid_type", "EINVAL", "ERR_INVALID_ARG_TYPE",
			"ERR_INVALID_ARG_VALUE", "ERR_INVALID_URL", "INVALID_ARGUMENT", "MissingParameter", "card_declined", "expired_card",
			"incorrect_cvc", "incorrect_number"}},
	// code.conflict
	{codeClass{category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.code_conflict"},
		[]string{"ConditionalCheckFailedException", "ResourceInUseException", "BucketAlreadyExists",
			"BucketAlreadyOwnedByYou", "already_exists", "ConflictException", "EEXIST", "ENOTEMPTY", "ALREADY_EXISTS",
			"name_taken",
			"ContainerAlreadyExists", "BlobAlreadyExists", "ResourceGroupBeingDeleted", "EADDRINUSE",
			"idempotency_error"}},
	// code.overloaded
	{codeClass{category: reboundpb.Category_CATEGORY_UNAVAILABLE, rule: "fallback.code_overloaded"},
		[]string{"overloaded_error", "ServiceUnavailable", "ServiceUnavailableException", "ModelNotReadyException",
			"server_overloaded", "engine_overloaded", "UNAVAILABLE", "InternalFailure", "ModelStreamErrorException",
			"ServerBusy"}},
	// code.internal
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.code_internal"},
		[]string{"internal_error", "InternalServerError", "InternalServerException", "INTERNAL"}},
	// code.timeout
	{codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.code_etimedout"},
		[]string{"ETIMEDOUT", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT",
			"UND_ERR_BODY_TIMEOUT", "RequestTimeout", "RequestTimeoutException", "timeout", "timeout_error",
			"DEADLINE_EXCEEDED", "ModelTimeoutException"}},
	// code.network
	{codeClass{category: reboundpb.Category_CATEGORY_NETWORK, rule: "fallback.code_network"},
		[]string{"ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ENOTCONN", "ENOTFOUND", "EAI_AGAIN",
			"EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "EHOSTDOWN", "ERR_TLS_CERT_ALTNAME_INVALID", "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
			"CERT_HAS_EXPIRED", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UND_ERR_SOCKET", "UND_ERR_CLOSED",
			"ERR_SOCKET_CONNECTION_TIMEOUT", "EPROTO"}},
	// code.quota_disk, with the rule's own suggestion
	{codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.code_quota_disk",
		suggestion: "Free disk space or ask a human to raise the quota."},
		[]string{"ENOSPC", "EDQUOT"}},
	// code.cancelled
	{codeClass{category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.code_cancelled"},
		[]string{"ABORT_ERR", "ERR_CANCELED", "CANCELLED", "canceled", "cancelled"}},
	// code.mcp.timeout: MCP's request timeout
	{codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.code_mcp_timeout"},
		[]string{"-32001"}},
	// code.mcp.parse: JSON-RPC's parse error
	{codeClass{category: reboundpb.Category_CATEGORY_FORMAT, rule: "fallback.code_mcp_parse"},
		[]string{"-32700"}},
	// code.mcp.invalid: JSON-RPC's invalid request and invalid params
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.code_mcp_invalid"},
		[]string{"-32600", "-32602"}},
	// code.mcp.method: JSON-RPC's method not found
	{codeClass{category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.code_mcp_method"},
		[]string{"-32601"}},
}

// codeClasses are codeRules by code, ASCII-lowercased: the sidecar matches a
// code trimmed and in any ASCII case (src/classify.rs), so Overloaded_Error is
// overloaded_error and econnreset ECONNRESET; codeClassOf looks a code up.
var codeClasses = func() map[string]codeClass {
	table := map[string]codeClass{}
	for _, rule := range codeRules {
		for _, code := range rule.codes {
			// The first rule that names a code has it, as on the sidecar (equal scores go to the rule listed first).
			if _, ok := table[asciiLower(code)]; !ok {
				table[asciiLower(code)] = rule.class
			}
		}
	}
	return table
}()

// codeClassOf is what an error code means, read as the sidecar reads it:
// trimmed, in any ASCII case.
func codeClassOf(code string) (codeClass, bool) {
	code = strings.TrimSpace(code)
	if code == "" {
		return codeClass{}, false
	}
	c, ok := codeClasses[asciiLower(code)]
	return c, ok
}

// exceptionRules are the exception types of every rule of the sidecar that
// reads an exception type and nothing else, in src/defaults/rules.toml's
// order, each entry under the rule it mirrors (TestExceptionTypesMatchSidecarRules
// checks for drift). The order matters: a type two rules name (by its whole
// name or its last part) is the first one's, as on the sidecar, where equal
// scores go to the rule listed first. Left out: the rules that also read the
// message's words (exception.typeerror.fetch_url, exception.typeerror.fetch,
// exception.rangeerror.stack, exception.valueerror.parse,
// exception.runtimeerror.memory, exception.valueerror.context_length,
// exception.missing_credentials, exception.keyerror.credentials,
// exception.ratelimiterror.request_too_large, exception.timeout.sandbox_gone), so a TypeError is validation
// here even when its words say fetch failed; and the
// types the sidecar reads from a stack trace in the message or detail when the
// outcome names none, or none a rule knows (Go's exec.ExitError around a
// Python traceback), which the fallback does not parse (it reads only the type
// a one-line message begins with: exceptionTypeOf).
var exceptionRules = []struct {
	class codeClass
	types []string
}{
	// exception.cancelled
	{codeClass{category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.type_cancelled"},
		[]string{"CancelledError", "asyncio.CancelledError", "concurrent.futures.CancelledError", "KeyboardInterrupt",
			"AbortError", "APIUserAbortError", "ClientClosedRequestError", "OperationCanceledException",
			"TaskCanceledException", "InterruptedException", "CancellationException"}},
	// exception.timeout
	{codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.type_timeout"},
		[]string{"TimeoutError", "Timeout", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout",
			"TimeoutException", "ReadTimeoutError", "ConnectTimeoutError", "ServerTimeoutError", "APITimeoutError",
			"RequestTimeoutError", "SocketTimeoutException", "HttpTimeoutException", "TimeoutExpired", "DeadlineExceeded",
			"ReadTimeoutException", "asyncio.TimeoutError", "socket.timeout",
			"ServiceRequestTimeoutError", "ServiceResponseTimeoutError", "QdrantClientTimeoutError"}},
	// exception.network
	{codeClass{category: reboundpb.Category_CATEGORY_NETWORK, rule: "fallback.type_connection"},
		[]string{"ConnectionError", "ConnectError", "ChunkedEncodingError", "IncompleteRead", "ConnectionRefusedError",
			"ConnectionResetError", "ConnectionAbortedError", "BrokenPipeError", "NewConnectionError", "ProtocolError",
			"RemoteProtocolError", "ReadError", "WriteError", "NetworkError", "ClientConnectorError", "ClientConnectionError",
			"ServerDisconnectedError", "ClientOSError", "APIConnectionError", "SSLError", "SSLCertVerificationError",
			"ConnectException", "UnknownHostException", "NoRouteToHostException", "SocketException", "gaierror",
			"socket.gaierror", "MaxRetryError", "EndpointConnectionError", "ConnectionClosedError",
			"ServiceRequestError", "ServiceResponseError", "NoBrokersAvailable", "OpenAIIoException", "AnthropicIoException",
			"AnthropicIOException", "AMQPConnectionError", "KafkaConnectionError"}},
	// exception.rate_limited
	{codeClass{category: reboundpb.Category_CATEGORY_RATE_LIMITED, rule: "fallback.type_rate_limited"},
		[]string{"RateLimitError", "openai.RateLimitError", "anthropic.RateLimitError", "TooManyRequests",
			"ThrottlingException", "ResourceExhausted", "RetryAfter", "TelegramRetryAfter", "FloodWaitError"}},
	// exception.unavailable
	{codeClass{category: reboundpb.Category_CATEGORY_UNAVAILABLE, rule: "fallback.type_unavailable"},
		[]string{"ServiceUnavailableError", "ServiceUnavailable", "OverloadedError", "BadGateway", "GatewayTimeout",
			"GatewayTimeoutError"}},
	// exception.auth
	{codeClass{category: reboundpb.Category_CATEGORY_AUTH, rule: "fallback.type_auth"},
		[]string{"AuthenticationError", "openai.AuthenticationError", "anthropic.AuthenticationError", "Unauthenticated",
			"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "ExpiredTokenException",
			"InvalidAuthenticationError", "CredentialsError", "IdentityTokenFileError",
			"ClientAuthenticationError", "CredentialUnavailableError", "AuthenticationRequiredError", "RefreshError",
			"SMTPAuthenticationError",
			"AI_LoadAPIKeyError"}},
	// exception.permission
	{codeClass{category: reboundpb.Category_CATEGORY_PERMISSION_DENIED, rule: "fallback.type_permission"},
		[]string{"PermissionDeniedError", "PermissionError", "PermissionDenied", "AccessDeniedException", "Forbidden",
			"SecurityException", "UnauthorizedAccessException", "AccessDeniedError"}},
	// exception.not_found
	{codeClass{category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.type_not_found"},
		[]string{"NotFoundError", "FileNotFoundError", "NotFound", "NoSuchKey", "ModuleNotFoundError",
			"FileNotFoundException", "NoSuchFileException", "NoSuchElementException", "ResourceNotFoundException",
			"IsADirectoryError", "NotADirectoryError", "ProcessLookupError", "LookupError",
			"ResourceNotFoundError",
			"AI_NoSuchModelError", "AI_NoSuchProviderError"}},
	// exception.unknown_tool: the Vercel AI SDK's, for a tool the model named that the agent does not have.
	{codeClass{category: reboundpb.Category_CATEGORY_UNKNOWN_TOOL, rule: "fallback.type_unknown_tool"},
		[]string{"AI_NoSuchToolError"}},
	// exception.validation
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.type_validation"},
		[]string{"ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "AssertionError", "ValidationError",
			"pydantic.ValidationError", "pydantic_core.ValidationError", "UnprocessableEntityError",
			"RequestHeaderFieldsTooLargeError", "ZodError", "InvalidArgument", "IllegalArgumentException",
			"IllegalStateException", "NumberFormatException", "ArgumentException", "ArgumentNullException",
			"ArgumentOutOfRangeException", "FormatException", "ParamValidationError", "UnicodeDecodeError",
			"UnicodeEncodeError", "UndefinedError", "TemplateSyntaxError", "ZeroDivisionError", "OverflowError", "RangeError",
			"jsonschema.exceptions.ValidationError",
			"AI_InvalidArgumentError", "AI_InvalidPromptError", "AI_UnsupportedFunctionalityError",
			"AI_InvalidMessageRoleError", "AI_MessageConversionError", "AI_InvalidDataContentError",
			"AI_TooManyEmbeddingValuesForCallError", "AI_MissingToolResultsError",
			"UnidentifiedImageError", "PrismaClientValidationError", "InvalidURI", "ParseConfigError",
			"ToolInvocationError", "AgentToolCallError"}},
	// exception.format
	{codeClass{category: reboundpb.Category_CATEGORY_FORMAT, rule: "fallback.type_format"},
		[]string{"JSONDecodeError", "json.JSONDecodeError", "json.decoder.JSONDecodeError", "OutputParserException",
			"langchain_core.exceptions.OutputParserException", "SyntaxError", "JsonParseException", "JsonSyntaxException",
			"MismatchedInputException", "InvalidFormatException", "JsonMappingException", "JsonEOFException", "YAMLError",
			"ScannerError", "ParserError",
			"AI_InvalidToolInputError", "AI_InvalidToolArgumentsError", "AI_JSONParseError", "AI_TypeValidationError",
			"AI_NoObjectGeneratedError", "AI_InvalidResponseDataError",
			"EmptyDataError", "JsonException", "JsonReaderException", "JsonSerializationException", "AgentParsingError"}},
	// exception.conflict
	{codeClass{category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.type_conflict"},
		[]string{"UniqueViolation", "IntegrityError", "FileExistsError", "FileAlreadyExistsException", "ConflictError", "PreconditionFailedError",
			"ConcurrentModificationException", "DuplicateKeyException", "OptimisticLockException",
			"StaleElementReferenceException",
			"ResourceExistsError", "ResourceModifiedError",
			"IdempotencyError", "StripeIdempotencyError"}},
	// exception.context_length
	{codeClass{category: reboundpb.Category_CATEGORY_CONTEXT_LENGTH, rule: "fallback.type_context_length"},
		[]string{"ContextWindowExceededError", "ContextLengthExceededError", "ContentTooLargeError"}},
	// exception.content_filter
	{codeClass{category: reboundpb.Category_CATEGORY_CONTENT_FILTER, rule: "fallback.type_content_filter"},
		[]string{"ContentPolicyViolationError", "ContentFilterFinishReasonError", "BlockedPromptException",
			"StopCandidateException"}},
	// exception.quota
	{codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.type_quota"},
		[]string{"QuotaExceededError", "InsufficientQuotaError", "PaymentRequiredError", "MemoryError", "OutOfMemoryError",
			"DiskFullError", "_ArrayMemoryError", "OutOfMemoryException", "BudgetExceededError"}},
	// exception.internal
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.type_internal"},
		[]string{"RuntimeError", "NotImplementedError", "RecursionError", "SystemError", "NullPointerException", "panic",
			"InternalError", "HTTPNotImplementedError", "ArrayIndexOutOfBoundsException",
			"IndexOutOfBoundsException", "ClassCastException"}},
}

// rankedClass is a codeClass with its rule's place in its table: of two rules
// that match, the one listed first wins.
type rankedClass struct {
	codeClass
	rank int
}

// exceptionClasses are exceptionRules by type, each type the first rule's that
// names it; exceptionClassOf looks a type up.
var exceptionClasses = func() map[string]rankedClass {
	table := map[string]rankedClass{}
	for rank, rule := range exceptionRules {
		for _, typ := range rule.types {
			if _, ok := table[typ]; !ok {
				table[typ] = rankedClass{rule.class, rank}
			}
		}
	}
	return table
}()

// exceptionClassOf is what an exception type means, read as the sidecar reads
// it (src/classify.rs): trimmed, then by its exact name (case included), whole
// or its last part after a dot or a colon, so requests.exceptions.ReadTimeout
// is a ReadTimeout, but LockTimeoutError or readtimeout no timeout. When the
// whole name and its last part are in two rules, the one listed first wins.
func exceptionClassOf(typ string) (codeClass, bool) {
	typ = strings.TrimSpace(typ)
	whole, wholeOK := exceptionClasses[typ]
	last, lastOK := exceptionClasses[lastPart(typ)]
	switch {
	case wholeOK && (!lastOK || whole.rank <= last.rank):
		return whole.codeClass, true
	case lastOK:
		return last.codeClass, true
	}
	return codeClass{}, false
}

// lastPart is an exception type's last part after a dot or a colon (the whole
// type when it has neither), as the sidecar splits it.
func lastPart(typ string) string {
	return typ[strings.LastIndexAny(typ, ".:")+1:]
}

// toolErrorParseTypes are the exception types of the sidecar's rule
// kind.tool_error.parse (TestToolErrorParseMatchesSidecarRule checks for
// drift): a parse error raised inside a tool that ran (kind tool_error, which
// the Go client reports for any error but a timeout or a cancellation, a
// json.SyntaxError among them) is internal, retried once: what failed to
// parse came from elsewhere (an error page, a changed format), not from the
// model. The rule reads the kind (100) and the type (60), so it wins over
// every other signal; without that kind, the same types are format errors
// (exception.format).
var toolErrorParseTypes = map[string]bool{
	"JSONDecodeError": true, "json.JSONDecodeError": true, "json.decoder.JSONDecodeError": true, "SyntaxError": true,
	"JsonParseException": true, "JsonSyntaxException": true, "JsonEOFException": true, "MismatchedInputException": true,
	"JsonException": true, "JsonReaderException": true,
}

// noToolCall and invalidToolCall are what kind.no_tool_call and
// kind.invalid_tool_call say, each with the rule's own suggestion.
var (
	noToolCall = codeClass{category: reboundpb.Category_CATEGORY_FORMAT, rule: "fallback.kind_no_tool_call",
		suggestion: "Respond with a tool call in the required format."}
	invalidToolCall = codeClass{category: reboundpb.Category_CATEGORY_FORMAT, rule: "fallback.kind_invalid_tool_call",
		suggestion: "Make the tool call's arguments valid JSON that matches the tool's schema."}
)

// toolErrorParse is what kind.tool_error.parse says, with the rule's own suggestion.
var toolErrorParse = codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.kind_tool_error_parse",
	suggestion: "The tool could not parse what it received (an error page or a changed format?): " +
		"the call itself was fine; if it fails again, try another source."}

// isToolErrorParse says whether an outcome is a parse error inside a tool that
// ran, as the sidecar's rule kind.tool_error.parse reads it.
func isToolErrorParse(o *reboundpb.Outcome) bool {
	return o.GetKind() == KindToolError && isParseError(o)
}

// isParseError says whether an outcome's exception type is one of toolErrorParseTypes.
func isParseError(o *reboundpb.Outcome) bool {
	typ := strings.TrimSpace(exceptionTypeOf(o))
	return typ != "" && (toolErrorParseTypes[typ] || toolErrorParseTypes[lastPart(typ)])
}

// exceptionTypeOf is the exception type the fallback reads an outcome by, as
// the sidecar picks it (src/classify.rs): the outcome's own when the fallback
// knows it; else, when the fallback knows that one, the type a one-line
// message begins with (typeInMessage); else the outcome's own.
func exceptionTypeOf(o *reboundpb.Outcome) string {
	typ := o.GetExceptionType()
	if knownType(typ) {
		return typ
	}
	if named, ok := typeInMessage(o.GetMessage()); ok && knownType(named) {
		return named
	}
	return typ
}

// knownType says whether exceptionRules, weakExceptionRules or toolErrorParseTypes name a type,
// whole or its last part, as the sidecar asks whether a rule knows one.
func knownType(typ string) bool {
	typ = strings.TrimSpace(typ)
	_, ok := exceptionClassOf(typ)
	_, weak := weakExceptionClassOf(typ)
	return ok || weak || toolErrorParseTypes[typ] || toolErrorParseTypes[lastPart(typ)]
}

// typeEndings are how a name must end to be read as a type in a message.
var typeEndings = []string{"Error", "Exception", "Interrupt", "Exit", "Timeout"}

// typeInMessage is the type a one-line message names before its text, as
// JavaScript's String(error) and Python's traceback.format_exception_only
// write an error ("TimeoutError: The operation was aborted due to timeout"),
// read as the sidecar's type_in_message reads it (src/classify.rs): the
// message trimmed (strings.TrimSpace trims Unicode White_Space, as Rust's
// str::trim), past a Java thread's `Exception in thread "main" `, up to its
// first colon; a type when it ends as one (typeEndings) and is all ASCII
// letters, digits, underscores and dots. A message of more lines has none.
func typeInMessage(message string) (string, bool) {
	if strings.Contains(message, "\n") {
		return "", false
	}
	line := strings.TrimSpace(message)
	if rest, ok := strings.CutPrefix(line, `Exception in thread "`); ok {
		line = rest
		if _, after, found := strings.Cut(rest, `" `); found {
			line = after
		}
	}
	name, _, _ := strings.Cut(line, ":")
	if !slices.ContainsFunc(typeEndings, func(end string) bool { return strings.HasSuffix(name, end) }) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.') {
			return "", false
		}
	}
	return name, true
}

// grpcClasses are the gRPC status codes (their numbers, fixed by the gRPC
// spec) as the sidecar's rules grpc.* name them (src/defaults/rules.toml;
// TestGRPCCodesMatchSidecarRules checks for drift). RESOURCE_EXHAUSTED, which
// also reads words, is read apart (grpcResourceExhausted), and UNKNOWN last
// (grpcUnknownClass: a weak signal).
var grpcClasses = map[int32]codeClass{
	1:  {category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.grpc_cancelled"},                 // CANCELLED
	3:  {category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.grpc_invalid_argument"},         // INVALID_ARGUMENT
	4:  {category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.grpc_deadline_exceeded"},           // DEADLINE_EXCEEDED
	5:  {category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.grpc_not_found"},                 // NOT_FOUND
	6:  {category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.grpc_conflict"},                   // ALREADY_EXISTS
	7:  {category: reboundpb.Category_CATEGORY_PERMISSION_DENIED, rule: "fallback.grpc_permission_denied"}, // PERMISSION_DENIED
	9:  {category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.grpc_conflict"},                   // FAILED_PRECONDITION
	10: {category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.grpc_conflict"},                   // ABORTED
	11: {category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.grpc_invalid_argument"},         // OUT_OF_RANGE
	12: {category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.grpc_not_found"},                 // UNIMPLEMENTED
	13: {category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.grpc_internal"},                   // INTERNAL
	14: {category: reboundpb.Category_CATEGORY_UNAVAILABLE, rule: "fallback.grpc_unavailable"},             // UNAVAILABLE
	15: {category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.grpc_internal"},                   // DATA_LOSS
	16: {category: reboundpb.Category_CATEGORY_AUTH, rule: "fallback.grpc_unauthenticated"},                // UNAUTHENTICATED
}

// httpStatusRules are the HTTP statuses of every rule of the sidecar that
// reads single statuses and nothing else, in src/defaults/rules.toml's order,
// each entry under the rule it mirrors, its fallback rule named after the
// rule's first status (TestHTTPStatusesMatchSidecarRules checks for drift): a
// 401 or a 407 is auth (escalated), a 402 a used-up quota and a 403 a refused
// permission (escalated), a 408 a timeout and a 429 a rate limit (retried),
// a 413 an input too long and a 451 a filtered one (replanned), a 499 a
// cancellation (aborted), a 500 an error inside the server (retried once), a
// 502 and the other statuses of a server that is down, overloaded or behind
// a failing gateway unavailable (retried); a 404 (not found), a 400 or a 422
// (validation) and a 409 (conflict) go back to the LLM. The rule http.500
// keeps the name the fallback gave every internal 5xx before, fallback.http_5xx.
// Left out: the rules that also read the message's words
// (http.400.context_length, http.4xx.quota_words...), so a 429 whose words
// say the quota is used up is a rate limit here.
var httpStatusRules = []numberRule{
	// http.400
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.http_400"}, []int32{400, 422}},
	// http.401
	{codeClass{category: reboundpb.Category_CATEGORY_AUTH, rule: "fallback.http_401"}, []int32{401, 407}},
	// http.402
	{codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.http_402"}, []int32{402}},
	// http.403
	{codeClass{category: reboundpb.Category_CATEGORY_PERMISSION_DENIED, rule: "fallback.http_403"}, []int32{403}},
	// http.404
	{codeClass{category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.http_404"}, []int32{404, 410}},
	// http.405
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.http_405"},
		[]int32{405, 406, 411, 414, 415, 416, 431}},
	// http.408
	{codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.http_408"}, []int32{408}},
	// http.409
	{codeClass{category: reboundpb.Category_CATEGORY_CONFLICT, rule: "fallback.http_409"}, []int32{409, 412, 428}},
	// http.413
	{codeClass{category: reboundpb.Category_CATEGORY_CONTEXT_LENGTH, rule: "fallback.http_413"}, []int32{413}},
	// http.429
	{codeClass{category: reboundpb.Category_CATEGORY_RATE_LIMITED, rule: "fallback.http_429"}, []int32{429}},
	// http.451
	{codeClass{category: reboundpb.Category_CATEGORY_CONTENT_FILTER, rule: "fallback.http_451"}, []int32{451}},
	// http.499
	{codeClass{category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.http_499"}, []int32{499}},
	// http.500
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.http_5xx"}, []int32{500, 501, 505, 507, 508}},
	// http.502
	{codeClass{category: reboundpb.Category_CATEGORY_UNAVAILABLE, rule: "fallback.http_502"},
		[]int32{502, 503, 504, 520, 521, 522, 523, 524, 529}},
}

// numberRule is one rule of the sidecar that reads numbers (HTTP statuses or
// exit codes) and nothing else.
type numberRule struct {
	class  codeClass
	values []int32
}

// byFirstRule is rules by value, each value the first rule's that names it,
// as on the sidecar (equal scores go to the rule listed first).
func byFirstRule(rules []numberRule) map[int32]codeClass {
	table := map[int32]codeClass{}
	for _, rule := range rules {
		for _, v := range rule.values {
			if _, ok := table[v]; !ok {
				table[v] = rule.class
			}
		}
	}
	return table
}

// httpStatusClasses are httpStatusRules by status.
var httpStatusClasses = byFirstRule(httpStatusRules)

// httpRangeRules are the sidecar's rules http.4xx and http.5xx, which read a
// range of statuses and nothing else (TestHTTPStatusesMatchSidecarRules checks
// for drift): any other 4xx is a validation error (back to the LLM), any other
// 5xx an error inside the server (retried once). A range scores less than one
// status (38 to 40) on the sidecar, and so less than an exit code: exit code
// 127 with a 418 is not found.
var httpRangeRules = []struct {
	class  codeClass
	lo, hi int32
}{
	// http.4xx
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.http_4xx"}, 400, 499},
	// http.5xx
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.http_5xx"}, 500, 599},
}

// exitRules are the process exit codes of every rule of the sidecar that reads
// an exit code and nothing else, in src/defaults/rules.toml's order, each
// entry under the rule it mirrors (TestExitCodesMatchSidecarRules checks for
// drift): 124, timeout(1)'s, a timeout (retried); 126, a command found but
// not executable, a refused permission (escalated); 127, a command not found
// (back to the LLM); 130 and 143, killed by SIGINT or SIGTERM, a cancellation
// (aborted); 137, killed by SIGKILL, most often for running out of memory, a
// used-up quota (escalated, with the rule's own suggestion). The Go client
// reports an *exec.ExitError's exit code (none for a command killed by a
// signal, which Go reports as -1), or WithExitCode's.
var exitRules = []numberRule{
	// exit.124
	{codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.exit_124"}, []int32{124}},
	// exit.126
	{codeClass{category: reboundpb.Category_CATEGORY_PERMISSION_DENIED, rule: "fallback.exit_126"}, []int32{126}},
	// exit.127
	{codeClass{category: reboundpb.Category_CATEGORY_NOT_FOUND, rule: "fallback.exit_127"}, []int32{127}},
	// exit.130
	{codeClass{category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.exit_130"}, []int32{130, 143}},
	// exit.137, with the rule's own suggestion
	{codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.exit_137",
		suggestion: "The process was killed (out of memory?): use a smaller input or ask for more memory."}, []int32{137}},
}

// exitClasses are exitRules by exit code.
var exitClasses = byFirstRule(exitRules)

// grpcResourceExhausted is gRPC's RESOURCE_EXHAUSTED: a rate limit (retried
// with backoff), as the sidecar's rule grpc.resource_exhausted says, unless
// its words name a used-up quota (quotaWords).
const grpcResourceExhausted = 8

// quotaWords are the words that make a gRPC RESOURCE_EXHAUSTED a used-up
// quota (escalated) rather than a rate limit (retried), as the sidecar's rule
// grpc.resource_exhausted.quota lists them (TestGRPCResourceExhaustedMatchesSidecarRules
// checks for drift). They are plain words, so an ASCII-case-insensitive
// substring test is what the sidecar's regular expressions (case-insensitive,
// ASCII only) do.
var quotaWords = []string{"billing", "insufficient", "credits", "disk", "storage quota"}

// sidecarTextLimit is how much text the sidecar's message rules read by
// default (classify.text_limit).
const sidecarTextLimit = 1024

// hasQuotaWord reports whether the text the sidecar's message rules read holds
// one of quotaWords: the message's head (or, when it is long and has lines,
// its head and tail) and the detail's head and tail (src/classify.rs match_text).
func hasQuotaWord(o *reboundpb.Outcome) bool {
	message, detail := o.GetMessage(), o.GetDetail()
	var texts []string
	switch {
	case detail != "":
		texts = append(texts, headBytes(message, sidecarTextLimit))
		if len(detail) <= sidecarTextLimit {
			texts = append(texts, detail)
		} else {
			texts = append(texts, headBytes(detail, sidecarTextLimit/2), tailBytes(detail, sidecarTextLimit/2))
		}
	case len(message) <= sidecarTextLimit || !strings.Contains(message, "\n"):
		texts = append(texts, headBytes(message, sidecarTextLimit))
	default:
		texts = append(texts, headBytes(message, sidecarTextLimit/2), tailBytes(message, sidecarTextLimit/2))
	}
	for _, text := range texts {
		lowered := asciiLower(text)
		for _, word := range quotaWords {
			if strings.Contains(lowered, word) {
				return true
			}
		}
	}
	return false
}

// decide is the whole fallback policy: one outcome in, one verdict out. As on
// the sidecar (src/verdict.rs), a stopped session answers abort to everything, a
// success can reach a step or cost limit, and a failure gets its category's
// plan unless a session breaker says otherwise.
func (p FallbackPolicy) decide(o *reboundpb.Outcome, in fallbackInput) *reboundpb.Verdict {
	state := in.state
	if state == reboundpb.SessionState_SESSION_STATE_UNSPECIFIED {
		state = reboundpb.SessionState_SESSION_STATE_ACTIVE
	}
	v := &reboundpb.Verdict{
		CallId:    o.GetCallId(),
		SessionId: o.GetSessionId(),
		Enforced:  true,
		Breaker: &reboundpb.BreakerStatus{
			SessionState:        state,
			ConsecutiveFailures: uint32(max(in.consecutive, 0)),
			SessionErrors:       in.errors,
			IdenticalErrors:     uint32(max(in.identical, 0)),
			Steps:               in.steps,
			Cost:                in.cost,
		},
	}
	if !o.GetOk() {
		v.Classification = classification(o)
	}
	if state == reboundpb.SessionState_SESSION_STATE_STOPPED {
		// The run was told to end: whatever it reports is counted and answered abort again.
		v.Action = ActionAbort
		v.Breaker.Reason = reboundpb.Reason_REASON_SESSION_STOPPED
		v.Snippet = stoppedSnippet
		return v
	}
	if o.GetOk() {
		v.Action = ActionContinue
		v.Classification = &reboundpb.Classification{Rule: "fallback.success"}
		if reason, ok := limitReached(in); ok {
			p.stop(v, ActionAbort, reason)
			// The run ends on a success: say why, as a failure's abort does.
			v.Snippet = limitSnippet(reason)
		}
		return v
	}
	category := v.Classification.Category
	p.plan(v, o, in)
	// What the session breakers say over the category's plan, in the sidecar's order:
	// their abort always wins; a plan that ends the run (a user's cancel) stands over
	// their escalation, which wins over a retry or a recover.
	if action, reason, ok := p.onFailure(in); ok && (action == ActionAbort || v.Action != ActionAbort) {
		v.Retry, v.Escalation = nil, nil
		p.stop(v, action, reason)
		if action == ActionEscalate {
			v.Escalation = escalation(o, escalationWhy(o, reason, in), in.labels)
		}
	} else if v.Retry != nil {
		// A retry whose failure trips a session breaker is not retried: promise no more than those left.
		v.Retry.AttemptsLeft = min(v.Retry.AttemptsLeft, p.failuresBeforeATrip(in))
	}
	v.Snippet = snippet(o, category, v.Classification.Suggestion, v.Action)
	return v
}

// classification is a failure's category, from the coarse signals, with its
// rule and suggestion: the rule's own where the sidecar's has one, else the category's.
func classification(o *reboundpb.Outcome) *reboundpb.Classification {
	c := coarseClass(o)
	suggestion := c.suggestion
	if suggestion == "" {
		suggestion = suggestions[c.category]
	}
	return &reboundpb.Classification{
		Category:   c.category,
		Retryable:  retryableCategories[c.category],
		Rule:       c.rule,
		Suggestion: suggestion,
	}
}

// plan is what a failure's category alone says to do.
func (p FallbackPolicy) plan(v *reboundpb.Verdict, o *reboundpb.Outcome, in fallbackInput) {
	switch category := v.Classification.Category; {
	case category == reboundpb.Category_CATEGORY_CANCELLED:
		p.stop(v, ActionAbort, reboundpb.Reason_REASON_CATEGORY_POLICY)
	case category == reboundpb.Category_CATEGORY_AUTH || category == reboundpb.Category_CATEGORY_PERMISSION_DENIED ||
		category == reboundpb.Category_CATEGORY_QUOTA_EXCEEDED:
		p.stop(v, ActionEscalate, reboundpb.Reason_REASON_CATEGORY_POLICY)
		v.Escalation = escalation(o, fmt.Sprintf("%s for tool %q needs a human", categoryName(category), o.GetTool()), in.labels)
	case v.Classification.Retryable:
		p.retry(v, o, in)
	case category == reboundpb.Category_CATEGORY_UNKNOWN_TOOL:
		v.Action = ActionReclassify
	case category == reboundpb.Category_CATEGORY_CONTEXT_LENGTH || category == reboundpb.Category_CATEGORY_CONTENT_FILTER:
		v.Action = ActionReplan
	default:
		v.Action = ActionRecover
	}
}

// stop sets an action that takes the session out of the active state.
func (p FallbackPolicy) stop(v *reboundpb.Verdict, a Action, reason reboundpb.Reason) {
	v.Action = a
	v.Breaker.Reason = reason
	if a == ActionAbort {
		v.Breaker.SessionState = reboundpb.SessionState_SESSION_STATE_STOPPED
	} else {
		v.Breaker.SessionState = reboundpb.SessionState_SESSION_STATE_ESCALATED
	}
}

// retriesFor is how many retries a failure of the category gets: MaxRetries,
// but at most one for an internal error, as the sidecar's default categories
// (src/defaults/categories.toml).
func (p FallbackPolicy) retriesFor(category Category) int {
	if category == reboundpb.Category_CATEGORY_INTERNAL {
		return min(p.MaxRetries, internalMaxRetries)
	}
	return p.MaxRetries
}

// retry plans the next attempt: the provider's delay when it gave one, else
// exponential backoff; recover when the category's retries are used up or the
// provider says not to retry, escalate when the provider asks for too long a wait.
func (p FallbackPolicy) retry(v *reboundpb.Verdict, o *reboundpb.Outcome, in fallbackInput) {
	maxRetries := p.retriesFor(v.Classification.Category)
	// Which retry this would be: the caller's attempt number when it counts, else the run of failures.
	n := int(o.GetAttempt())
	if n == 0 {
		n = in.consecutive
	}
	n = max(n, 1)
	if n > maxRetries {
		v.Action = ActionRecover
		v.Breaker.Reason = reboundpb.Reason_REASON_RETRIES_EXHAUSTED
		return
	}
	if said, ok := header(o.GetHeaders(), "x-should-retry"); ok && foldsTo(said, "false") {
		// The provider says not to retry, as OpenAI's and Anthropic's SDKs read it (the sidecar heeds it too).
		v.Action = ActionRecover
		v.Breaker.Reason = reboundpb.Reason_REASON_SERVER_PUSHBACK
		return
	}
	var delay time.Duration
	provided, ok := providerDelay(o.GetHeaders(), in.now)
	if ok {
		if provided > p.MaxProviderDelay {
			p.stop(v, ActionEscalate, reboundpb.Reason_REASON_DELAY_TOO_LONG)
			v.Escalation = escalation(o, fmt.Sprintf("tool %q asks for a wait of %s, longer than %s",
				o.GetTool(), provided.Round(time.Second), p.MaxProviderDelay), in.labels)
			return
		}
		// Never earlier than the provider asked; spread upwards only, over at least the
		// base delay's jitter, so that "retry now" does not bring a fleet back at once.
		delay = provided + time.Duration(float64(max(provided, p.BaseDelay))*p.Jitter*in.random)
	} else {
		d := math.Min(float64(p.BaseDelay)*math.Pow(p.Multiplier, float64(n-1)), float64(p.MaxDelay))
		d *= 1 + p.Jitter*(2*in.random-1)
		delay = time.Duration(math.Min(d, float64(p.MaxDelay)))
	}
	v.Action = ActionRetry
	v.Retry = &reboundpb.RetryPlan{
		DelayMs:       uint64(delay.Round(time.Millisecond) / time.Millisecond),
		Attempt:       uint32(n),
		AttemptsLeft:  uint32(maxRetries - n),
		ProviderDelay: ok,
	}
}

// classifyCoarse is coarseClass's category and rule.
func classifyCoarse(o *reboundpb.Outcome) (Category, string) {
	c := coarseClass(o)
	return c.category, c.rule
}

// coarseClass maps the structured signals a fallback can trust to a category
// and a rule, ranked as the sidecar scores them (src/classify.rs): the
// outcome's kind first (a kind rule scores 100 there; a parse error inside a
// tool that ran, kind.tool_error.parse, 160), then an error code (80: a
// provider's, an errno name, an MCP error code), then an exception type (60:
// the outcome's, or the one a one-line message begins with, exceptionTypeOf),
// then a gRPC code (50), then a single HTTP status (40), then an exit code
// (40 too, but the HTTP rules are listed first), then an HTTP status by its
// range (38), and last the weak signals, gRPC's UNKNOWN and JSON-RPC's -32603
// (9: grpcUnknownClass, mcpInternalClass, invalidRequestClass, serverErrorClass,
// weakExceptionRules). A body that did not parse at a server's failing status
// is the status's (errorPageClass: 100, above a code). So a 503 whose connection was reset
// is a network failure, a 401 raised as httpx.ReadTimeout a timeout, a 429 with
// gRPC RESOURCE_EXHAUSTED about billing a used-up quota, ENOENT with a 500 not
// found, exit code 127 with a 404 not found by the status (the HTTP rule is
// listed first) but with a 418 by the exit code, UNKNOWN with a 503
// unavailable. It reads every value of the rules that read one of these
// signals and nothing else (codeRules, exceptionRules, grpcClasses,
// httpStatusRules, exitRules, httpRangeRules), but no words: where the
// sidecar's rules also read the message (a 400 that says the prompt is too
// long, a ValueError that says invalid json), it answers by the signal alone.
func coarseClass(o *reboundpb.Outcome) codeClass {
	switch o.GetKind() {
	case KindTimeout:
		return codeClass{category: reboundpb.Category_CATEGORY_TIMEOUT, rule: "fallback.kind_timeout"}
	case KindCancelled:
		return codeClass{category: reboundpb.Category_CATEGORY_CANCELLED, rule: "fallback.kind_cancelled"}
	case KindUnknownTool:
		return codeClass{category: reboundpb.Category_CATEGORY_UNKNOWN_TOOL, rule: "fallback.kind_unknown_tool"}
	case KindNoToolCall:
		return noToolCall
	case KindInvalidToolCall:
		return invalidToolCall
	}
	if isToolErrorParse(o) {
		return toolErrorParse
	}
	if c, ok := errorPageClass(o); ok {
		return c
	}
	if c, ok := codeClassOf(o.GetCode()); ok {
		return c
	}
	if c, ok := exceptionClassOf(exceptionTypeOf(o)); ok {
		return c
	}
	if o.GrpcCode != nil {
		// Above the HTTP status, as every gRPC code: INTERNAL with a 503 is internal, NOT_FOUND with a 503 not found.
		if o.GetGrpcCode() == grpcResourceExhausted {
			// A used-up quota when its words say so, else a rate limit, as the sidecar's
			// rules grpc.resource_exhausted.quota and grpc.resource_exhausted.
			if hasQuotaWord(o) {
				return codeClass{category: reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, rule: "fallback.grpc_resource_exhausted_quota"}
			}
			return codeClass{category: reboundpb.Category_CATEGORY_RATE_LIMITED, rule: "fallback.grpc_resource_exhausted"}
		}
		if c, ok := grpcClasses[o.GetGrpcCode()]; ok {
			return c
		}
	}
	if c, ok := httpStatusClasses[o.GetHttpStatus()]; ok {
		return c
	}
	if o.ExitCode != nil {
		if c, ok := exitClasses[o.GetExitCode()]; ok {
			return c
		}
	}
	for _, r := range httpRangeRules {
		if s := o.GetHttpStatus(); s >= r.lo && s <= r.hi {
			return r.class
		}
	}
	if o.GrpcCode != nil && o.GetGrpcCode() == grpcUnknown {
		return grpcUnknownClass
	}
	if strings.TrimSpace(o.GetCode()) == mcpInternalCode {
		return mcpInternalClass
	}
	if slices.Contains(invalidRequestCodes, asciiLower(strings.TrimSpace(o.GetCode()))) {
		return invalidRequestClass
	}
	if slices.Contains(serverErrorCodes, asciiLower(strings.TrimSpace(o.GetCode()))) {
		return serverErrorClass
	}
	if c, ok := weakExceptionClassOf(exceptionTypeOf(o)); ok {
		return c
	}
	return codeClass{category: reboundpb.Category_CATEGORY_UNKNOWN, rule: "fallback.default"}
}

// The weak signals, which say only that a handler failed or a request was
// refused: gRPC's UNKNOWN (what a server answers for an exception it did not
// map: grpcio's "Exception calling application: ..."), JSON-RPC's internal
// error, -32603 (what an MCP server answers for whatever a handler threw), and
// the class of error OpenAI, Anthropic and Stripe name in a refused request's
// body (invalid_request_error, OAuth's invalid_request: OpenAI's 401 for a
// missing API key has no other code) and in the body of their own failure
// (server_error, api_error: OpenAI's 500 and its overloaded 503 alike), and the
// exception types that say only which layer failed (weakExceptionRules). The
// sidecar's rules grpc.unknown, code.mcp.internal, code.invalid_request,
// code.server_error and those types' score them 9 (their priority),
// below every other signal and below any words, which say what failed; the
// fallback reads no words, so it reads them after every other signal, in that
// order (TestWeakSignalsMatchSidecarRules).
const (
	grpcUnknown     = 2
	mcpInternalCode = "-32603"
)

// invalidRequestCodes are rule code.invalid_request's codes, in ASCII lower case.
var invalidRequestCodes = []string{"invalid_request_error", "invalid_request"}

// serverErrorCodes are rule code.server_error's codes, in ASCII lower case.
var serverErrorCodes = []string{"server_error", "api_error"}

// weakExceptionRules are the sidecar's exception rules of priority 9, in its
// order: types raised for failures of several categories, which a status or
// words decide (.NET's HttpRequestException for a refused connection and for
// a refused status alike, Spring's ResourceAccessException for any I/O error,
// LangChain4j's InvalidRequestException and InternalServerException, named by
// status class; go-openai's APIError for whatever the API answered, and the
// base class of the OpenAI and Google Python SDKs).
var weakExceptionRules = []struct {
	class codeClass
	types []string
}{
	// exception.http_request
	{codeClass{category: reboundpb.Category_CATEGORY_NETWORK, rule: "fallback.type_http_request"},
		[]string{"HttpRequestException", "ResourceAccessException"}},
	// exception.invalid_request
	{codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.type_invalid_request"},
		[]string{"InvalidRequestException"}},
	// exception.internal_server
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.type_internal_server"},
		[]string{"InternalServerException"}},
	// exception.api_error
	{codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.type_api_error"},
		[]string{"APIError"}},
}

// weakExceptionClassOf is the weak rule that names typ, whole or its last part.
func weakExceptionClassOf(typ string) (codeClass, bool) {
	typ = strings.TrimSpace(typ)
	for _, r := range weakExceptionRules {
		if slices.Contains(r.types, typ) || slices.Contains(r.types, lastPart(typ)) {
			return r.class, true
		}
	}
	return codeClass{}, false
}

var (
	grpcUnknownClass    = codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.grpc_unknown"}
	mcpInternalClass    = codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.code_mcp_internal"}
	invalidRequestClass = codeClass{category: reboundpb.Category_CATEGORY_VALIDATION, rule: "fallback.code_invalid_request"}
	serverErrorClass    = codeClass{category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.code_server_error"}
)

// errorPageRules are the sidecar's rules http.500.error_page and
// http.502.error_page: a body that did not parse at a server's failing status
// (a gateway's HTML page where JSON was expected: go-openai's json.SyntaxError
// at a 502) is the status's category, by the parse types of
// kind.tool_error.parse at the statuses of http.500 and http.502 (keyed by
// those rules' names here).
var errorPageRules = map[string]codeClass{
	"fallback.http_5xx": {category: reboundpb.Category_CATEGORY_INTERNAL, rule: "fallback.http_500_error_page"},
	"fallback.http_502": {category: reboundpb.Category_CATEGORY_UNAVAILABLE, rule: "fallback.http_502_error_page"},
}

// errorPageClass is the error page rule that reads an outcome, if one does.
func errorPageClass(o *reboundpb.Outcome) (codeClass, bool) {
	status, ok := httpStatusClasses[o.GetHttpStatus()]
	page, isPage := errorPageRules[status.rule]
	if !ok || !isPage || !isParseError(o) {
		return codeClass{}, false
	}
	return page, true
}

// maxProviderWait bounds a provider's delay: anything above a day is nonsense
// (and escalates under any sane MaxProviderDelay), and clamping keeps the
// Duration, jitter included, from overflowing.
const maxProviderWait = 24 * time.Hour

// providerDelay reads the Retry-After family the fallback honours:
// retry-after-ms (milliseconds) and Retry-After (seconds or an HTTP date),
// in the sidecar's grammar (src/backoff.rs), so that both read a header alike.
func providerDelay(headers map[string]string, now time.Time) (time.Duration, bool) {
	if v, ok := header(headers, "retry-after-ms"); ok {
		if ms, ok := parseNumber(v); ok {
			return time.Duration(math.Min(ms, float64(maxProviderWait/time.Millisecond)) * float64(time.Millisecond)), true
		}
	}
	if v, ok := header(headers, "retry-after"); ok {
		if s, ok := parseNumber(v); ok {
			return time.Duration(math.Min(s, maxProviderWait.Seconds()) * float64(time.Second)), true
		}
		if at, ok := parseHTTPDate(strings.TrimSpace(v)); ok {
			return min(max(at.Sub(now), 0), maxProviderWait), true
		}
	}
	return 0, false
}

// parseNumber reads a header's number of seconds or milliseconds as the
// sidecar does (Rust's f64 grammar): finite and not negative. strconv.ParseFloat
// also takes Go's literal forms, hex floats (0x1p4) and digit underscores (1_0),
// which the sidecar refuses.
func parseNumber(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if strings.ContainsAny(v, "xX_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	return f, true
}

// httpDates are the three forms of an HTTP date (RFC 9110 section 5.6.7), GMT
// only, with asctime's day padded either way, as the sidecar's parser (the
// httpdate crate) reads them.
var httpDates = []string{http.TimeFormat, "Monday, 02-Jan-06 15:04:05 GMT", time.ANSIC, "Mon Jan 02 15:04:05 2006"}

// parseHTTPDate reads an HTTP date as strictly as the sidecar. time.Parse
// takes more (any zone in the RFC 850 form, +0000 or UTC; a wrong weekday;
// names in any case; a one-digit hour; fractional seconds), so a date counts
// only when it reads back the same. As in httpdate, a two-digit year below 70
// is 20yy, and no date before 1970 counts.
func parseHTTPDate(v string) (time.Time, bool) {
	for _, layout := range httpDates {
		at, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		if at.Year() < 1970 {
			// Go reads the two-digit year 69 as 1969; a four-digit one no longer reads back.
			at = at.AddDate(100, 0, 0)
		}
		if at.Year() >= 1970 && at.Format(layout) == v {
			return at, true
		}
	}
	return time.Time{}, false
}

// header looks a header up as the sidecar does: the name trimmed, in any ASCII case.
func header(headers map[string]string, name string) (string, bool) {
	for k, v := range headers {
		if foldsTo(k, name) {
			return v, true
		}
	}
	return "", false
}

// suggestions are the advice per category, the same table as the sidecar's
// src/defaults/categories.toml (a test keeps the two equal); unknown has none.
var suggestions = map[Category]string{
	reboundpb.Category_CATEGORY_TIMEOUT:           "Try a simpler query or a smaller input.",
	reboundpb.Category_CATEGORY_RATE_LIMITED:      "Wait, or use another tool.",
	reboundpb.Category_CATEGORY_NETWORK:           "Check the host, or use another tool.",
	reboundpb.Category_CATEGORY_UNAVAILABLE:       "Retry later, or use another tool.",
	reboundpb.Category_CATEGORY_INTERNAL:          "Try other arguments.",
	reboundpb.Category_CATEGORY_AUTH:              "Ask a human for credentials.",
	reboundpb.Category_CATEGORY_PERMISSION_DENIED: "Ask a human for the missing permission.",
	reboundpb.Category_CATEGORY_QUOTA_EXCEEDED:    "Ask a human to raise the quota or budget.",
	reboundpb.Category_CATEGORY_NOT_FOUND:         "Check that it exists; list what is there.",
	reboundpb.Category_CATEGORY_VALIDATION:        "Fix the arguments to fit the schema.",
	reboundpb.Category_CATEGORY_CONFLICT:          "Read its current state first.",
	reboundpb.Category_CATEGORY_FORMAT:            "Reply with a valid tool call in the required format.",
	reboundpb.Category_CATEGORY_UNKNOWN_TOOL:      "Use one of the available tools.",
	reboundpb.Category_CATEGORY_CONTEXT_LENGTH:    "Shorten the input: summarise or split it.",
	reboundpb.Category_CATEGORY_CONTENT_FILTER:    "Rephrase the request or change the plan.",
	reboundpb.Category_CATEGORY_CANCELLED:         "The run was cancelled.",
}

// instructions close the snippet: what the LLM should make of the error.
var instructions = map[Action]string{
	ActionRetry:      "This is a transient failure; the same call will be retried.",
	ActionRecover:    "Do not repeat the same call unchanged: check the arguments or choose another approach.",
	ActionReclassify: "Choose another tool: this one does not exist.",
	ActionReplan:     "Change the plan: this request cannot succeed as it is.",
	ActionEscalate:   "This needs a human: stop and report the error.",
	ActionAbort:      "The run is over: stop.",
}

// maxSnippetMessage is how much of the message the snippet keeps, as the sidecar's default.
const maxSnippetMessage = 200

// redactedBytes is how much of a message the fallback redacts and reads: far
// more than it shows (maxSnippetMessage), so that a secret starting in what is
// shown lies whole within it, but not the 256 KiB an outcome may carry, which
// every failure would otherwise cost, the sidecar up or not (local.go).
const redactedBytes = 8 << 10

// shownMessage is the tool's message as the fallback writes it anywhere:
// secrets redacted as the sidecar redacts them (redact.go), then cut. Redacted
// first, so that a cut cannot keep the head of a secret too short to match.
func shownMessage(o *reboundpb.Outcome) string {
	return cut(redact(headBytes(o.GetMessage(), redactedBytes)), maxSnippetMessage)
}

// headBytes is the longest head of s of at most n bytes that ends between characters.
func headBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailBytes is the longest tail of s of at most n bytes that starts at a character.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// snippet is the fallback's <error> block for the LLM's next turn, then the instruction.
func snippet(o *reboundpb.Outcome, category Category, suggestion string, a Action) string {
	var b strings.Builder
	line := errorLine(errorType(o), shownMessage(o))
	writeErrorBlock(&b, o.GetTool(), category, line, 1, suggestion)
	b.WriteString(instructions[a])
	return b.String()
}

// errorTag finds the opening of every <error and </error tag, in any case.
var errorTag = regexp.MustCompile(`(?i)<(/?error)`)

// defuseTags writes the < of every <error and </error tag in text as &lt;, as
// the sidecar writes a message: a </error> in a tool's output would end the
// block early, and what followed would read to the model as Rebound's own words.
func defuseTags(text string) string {
	return errorTag.ReplaceAllString(text, "&lt;$1")
}

// writeErrorBlock writes one <error> block, newline included, in the sidecar's
// shape (src/compact.rs error_block): the tool and the category as attributes,
// the message on a line of its own with its repeat count, then the suggestion.
func writeErrorBlock(b *strings.Builder, tool string, category Category, line string, count uint32, suggestion string) {
	fmt.Fprintf(b, "<error tool=\"%s\"", strings.ReplaceAll(tool, `"`, "&quot;"))
	// An unknown type says nothing: it is left out, as on the sidecar.
	if category != reboundpb.Category_CATEGORY_UNSPECIFIED && category != reboundpb.Category_CATEGORY_UNKNOWN {
		fmt.Fprintf(b, " type=\"%s\"", categoryName(category))
	}
	b.WriteString(">\n")
	if line != "" {
		b.WriteString(defuseTags(line))
		if count > 1 {
			fmt.Fprintf(b, " (×%d)", count)
		}
		b.WriteByte('\n')
	}
	if suggestion != "" {
		fmt.Fprintf(b, "suggestion: %s\n", suggestion)
	}
	b.WriteString("</error>\n")
}

// errorLine is the block's message line: "{error type}: {message}", or the one
// of the two that is set.
func errorLine(kind, message string) string {
	switch {
	case kind == "":
		return message
	case message == "":
		return kind
	}
	return kind + ": " + message
}

// errorType names the failure for the snippet from the most telling field set;
// the free-form ones are redacted like the message.
func errorType(o *reboundpb.Outcome) string {
	switch {
	case o.GetExceptionType() != "":
		return redact(headBytes(o.GetExceptionType(), redactedBytes))
	case o.GetHttpStatus() != 0:
		return "HTTP " + strconv.Itoa(int(o.GetHttpStatus()))
	case o.GetCode() != "":
		return redact(headBytes(o.GetCode(), redactedBytes))
	case o.ExitCode != nil:
		return "exit " + strconv.Itoa(int(o.GetExitCode()))
	}
	return ""
}

// cut shortens s to at most n runes, marking the cut.
func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// escalation is the fallback's report for a human: its summary, then (as in
// the sidecar's text, right after the first line) the session's labels, then
// the last error's message. The report carries a copy of the labels.
func escalation(o *reboundpb.Outcome, why string, labels map[string]string) *reboundpb.EscalationReport {
	summary := why + " (decided by the client's local fallback policy: the Rebound sidecar did not answer)"
	text := summary
	if len(labels) > 0 {
		text += "\n" + labelsLine(labels)
	}
	if m := shownMessage(o); m != "" {
		text += "\nlast error: " + m
	}
	return &reboundpb.EscalationReport{Summary: summary, Text: text, Labels: copyLabels(labels)}
}

// labelsLine is the line an escalation report's text gives the session's
// labels, as the sidecar writes it: "Labels: k1=v1, k2=v2", sorted by key
// (byte order, the sidecar's), a value's control characters as spaces, redacted.
func labelsLine(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, labels[k])
	}
	return redact("Labels: " + strings.Join(pairs, ", "))
}

// copyLabels is a copy of labels; nil for none.
func copyLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	c := make(map[string]string, len(labels))
	for k, v := range labels {
		c[k] = v
	}
	return c
}
