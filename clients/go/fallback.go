package rebound

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
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
// seed defaults. It classifies only coarse signals: timeouts, connection
// errors, HTTP 429, gRPC RESOURCE_EXHAUSTED and the 5xx of an unavailable
// server (502, 503, 504, 520 to 524, 529: retried), other 5xx and gRPC
// INTERNAL, UNKNOWN and DATA_LOSS (internal: retried once), 401 and 403
// (escalated), the provider codes of a used-up quota (escalated, as is a
// RESOURCE_EXHAUSTED whose message speaks of billing, credits or the like), of
// an input too long or filtered (replan), of an overloaded server (retried)
// and of an error inside the provider (retried once), cancellation (aborted),
// an unknown tool (reclassify: choose another tool);
// anything else is handed back to the LLM (recover), gRPC NOT_FOUND,
// INVALID_ARGUMENT, ALREADY_EXISTS and the other codes the sidecar reads as
// not found, validation or conflict among them. It ranks the signals as
// the sidecar scores them: the outcome's kind (timeout, cancelled,
// unknown_tool, no_tool_call, invalid_tool_call), then an error code, then an
// exception type, then a gRPC code, then the HTTP status; so a timeout with a
// 401 is retried, not escalated, and a 503 with ECONNRESET is a network
// failure (classifyCoarse). Its session breakers are the sidecar's
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

// unavailableStatuses are the HTTP statuses of a server that is down,
// overloaded or behind a failing gateway: unavailable, as the sidecar's rule
// http.502 says (src/defaults/rules.toml; TestHTTP5xxSplitMatchesSidecarRules
// checks for drift). Every other 5xx is an error inside the server: internal,
// as its rules http.500 and http.5xx say.
var unavailableStatuses = map[int32]bool{
	502: true, 503: true, 504: true, 520: true, 521: true, 522: true, 523: true, 524: true, 529: true,
}

// codeClass is what an error code, an exception type or a gRPC code means to
// the fallback: a category and the rule that says so.
type codeClass struct {
	category Category
	rule     string
}

// codeRules are the error codes that change what to do, as the sidecar lists
// them: a quota is not retried but escalated, an input too long or filtered is
// replanned, an overloaded server is retried with backoff (unavailable) and an
// error inside the provider's server retried once (internal); the codes of a
// call that timed out or of a connection that failed (errno names, Node's and
// undici's codes, providers' such as timeout_error) are retried (timeout,
// network). The sidecar's lists are the source of truth
// (src/defaults/rules.toml, rules code.insufficient_quota, code.context_length,
// code.content_filter, code.overloaded, code.internal, code.timeout and
// code.network; TestErrorCodesMatchSidecarRules checks for drift). As on
// the sidecar, a code wins over an exception type, a gRPC code and the HTTP
// status (but not over the outcome's kind): OpenAI sends insufficient_quota
// with a 429, server_error with a 503 is internal, and a 503 whose connection
// was reset (ECONNRESET) is a network failure.
var codeRules = []struct {
	class codeClass
	codes []string
}{
	{codeClass{reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, "fallback.code_quota"},
		[]string{"insufficient_quota", "billing_error", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded",
			"QuotaExceeded", "credit_balance_too_low", "ServiceQuotaExceededException", "LimitExceededException"}},
	{codeClass{reboundpb.Category_CATEGORY_CONTEXT_LENGTH, "fallback.code_context_length"},
		[]string{"context_length_exceeded", "string_above_max_length", "max_tokens_exceeded", "request_too_large"}},
	{codeClass{reboundpb.Category_CATEGORY_CONTENT_FILTER, "fallback.code_content_filter"},
		[]string{"content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation", "SAFETY", "safety",
			"PROHIBITED_CONTENT"}},
	{codeClass{reboundpb.Category_CATEGORY_UNAVAILABLE, "fallback.code_overloaded"},
		[]string{"overloaded_error", "ServiceUnavailable", "ServiceUnavailableException", "ModelNotReadyException",
			"server_overloaded", "engine_overloaded", "UNAVAILABLE", "InternalFailure", "ModelStreamErrorException"}},
	{codeClass{reboundpb.Category_CATEGORY_INTERNAL, "fallback.code_internal"},
		[]string{"api_error", "server_error", "internal_error", "InternalServerError", "InternalServerException", "INTERNAL"}},
	{codeClass{reboundpb.Category_CATEGORY_TIMEOUT, "fallback.code_etimedout"},
		[]string{"ETIMEDOUT", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT",
			"RequestTimeout", "RequestTimeoutException", "timeout", "timeout_error", "DEADLINE_EXCEEDED", "ModelTimeoutException"}},
	{codeClass{reboundpb.Category_CATEGORY_NETWORK, "fallback.code_network"},
		[]string{"ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH",
			"ENETDOWN", "EHOSTDOWN", "ERR_TLS_CERT_ALTNAME_INVALID", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "CERT_HAS_EXPIRED",
			"DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UND_ERR_SOCKET", "UND_ERR_CLOSED",
			"ERR_SOCKET_CONNECTION_TIMEOUT", "EPROTO"}},
}

// codeClasses are codeRules by code, ASCII-lowercased: the sidecar matches a
// code trimmed and in any ASCII case (src/classify.rs), so Overloaded_Error is
// overloaded_error and econnreset ECONNRESET; codeClassOf looks a code up.
var codeClasses = func() map[string]codeClass {
	table := map[string]codeClass{}
	for _, rule := range codeRules {
		for _, code := range rule.codes {
			table[asciiLower(code)] = rule.class
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

// exceptionRules are the exception types the fallback reads, those of a call
// that timed out or of a connection that failed, as the sidecar lists them
// (src/defaults/rules.toml, rules exception.timeout and exception.network;
// TestExceptionTypesMatchSidecarRules checks for drift). The sidecar knows
// more (ValueError, RateLimitError...), which the fallback does not read.
var exceptionRules = []struct {
	class codeClass
	types []string
}{
	{codeClass{reboundpb.Category_CATEGORY_TIMEOUT, "fallback.type_timeout"},
		[]string{"TimeoutError", "Timeout", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
			"ReadTimeoutError", "ConnectTimeoutError", "ServerTimeoutError", "APITimeoutError", "RequestTimeoutError",
			"SocketTimeoutException", "HttpTimeoutException", "TimeoutExpired", "DeadlineExceeded", "ReadTimeoutException",
			"asyncio.TimeoutError", "socket.timeout"}},
	{codeClass{reboundpb.Category_CATEGORY_NETWORK, "fallback.type_connection"},
		[]string{"ConnectionError", "ConnectError", "ChunkedEncodingError", "IncompleteRead", "ConnectionRefusedError",
			"ConnectionResetError", "ConnectionAbortedError", "BrokenPipeError", "NewConnectionError", "ProtocolError",
			"RemoteProtocolError", "ReadError", "WriteError", "NetworkError", "ClientConnectorError", "ClientConnectionError",
			"ServerDisconnectedError", "ClientOSError", "APIConnectionError", "SSLError", "SSLCertVerificationError",
			"ConnectException", "UnknownHostException", "NoRouteToHostException", "SocketException", "gaierror",
			"socket.gaierror", "MaxRetryError", "EndpointConnectionError", "ConnectionClosedError", "HttpRequestException"}},
}

// exceptionClasses are exceptionRules by type; exceptionClassOf looks a type up.
var exceptionClasses = func() map[string]codeClass {
	table := map[string]codeClass{}
	for _, rule := range exceptionRules {
		for _, typ := range rule.types {
			table[typ] = rule.class
		}
	}
	return table
}()

// exceptionClassOf is what an exception type means, read as the sidecar reads
// it (src/classify.rs): trimmed, then by its exact name (case included), whole
// or its last part after a dot or a colon, so requests.exceptions.ReadTimeout
// is a ReadTimeout, but LockTimeoutError or readtimeout no timeout.
func exceptionClassOf(typ string) (codeClass, bool) {
	typ = strings.TrimSpace(typ)
	if c, ok := exceptionClasses[typ]; ok {
		return c, true
	}
	c, ok := exceptionClasses[typ[strings.LastIndexAny(typ, ".:")+1:]]
	return c, ok
}

// grpcClasses are the gRPC status codes (their numbers, fixed by the gRPC
// spec) as the sidecar's rules grpc.* name them (src/defaults/rules.toml;
// TestGRPCCodesMatchSidecarRules checks for drift). RESOURCE_EXHAUSTED, which
// also reads words, is read apart (grpcResourceExhausted).
var grpcClasses = map[int32]codeClass{
	1:  {reboundpb.Category_CATEGORY_CANCELLED, "fallback.grpc_cancelled"},                 // CANCELLED
	2:  {reboundpb.Category_CATEGORY_INTERNAL, "fallback.grpc_internal"},                   // UNKNOWN
	3:  {reboundpb.Category_CATEGORY_VALIDATION, "fallback.grpc_invalid_argument"},         // INVALID_ARGUMENT
	4:  {reboundpb.Category_CATEGORY_TIMEOUT, "fallback.grpc_deadline_exceeded"},           // DEADLINE_EXCEEDED
	5:  {reboundpb.Category_CATEGORY_NOT_FOUND, "fallback.grpc_not_found"},                 // NOT_FOUND
	6:  {reboundpb.Category_CATEGORY_CONFLICT, "fallback.grpc_conflict"},                   // ALREADY_EXISTS
	7:  {reboundpb.Category_CATEGORY_PERMISSION_DENIED, "fallback.grpc_permission_denied"}, // PERMISSION_DENIED
	9:  {reboundpb.Category_CATEGORY_CONFLICT, "fallback.grpc_conflict"},                   // FAILED_PRECONDITION
	10: {reboundpb.Category_CATEGORY_CONFLICT, "fallback.grpc_conflict"},                   // ABORTED
	11: {reboundpb.Category_CATEGORY_VALIDATION, "fallback.grpc_invalid_argument"},         // OUT_OF_RANGE
	12: {reboundpb.Category_CATEGORY_NOT_FOUND, "fallback.grpc_not_found"},                 // UNIMPLEMENTED
	13: {reboundpb.Category_CATEGORY_INTERNAL, "fallback.grpc_internal"},                   // INTERNAL
	14: {reboundpb.Category_CATEGORY_UNAVAILABLE, "fallback.grpc_unavailable"},             // UNAVAILABLE
	15: {reboundpb.Category_CATEGORY_INTERNAL, "fallback.grpc_internal"},                   // DATA_LOSS
	16: {reboundpb.Category_CATEGORY_AUTH, "fallback.grpc_unauthenticated"},                // UNAUTHENTICATED
}

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
// the sidecar (src/engine.rs), a stopped session answers abort to everything, a
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
	v.Snippet = snippet(o, category, v.Action)
	return v
}

// classification is a failure's category, from the coarse signals, with its rule and suggestion.
func classification(o *reboundpb.Outcome) *reboundpb.Classification {
	category, rule := classifyCoarse(o)
	return &reboundpb.Classification{
		Category:   category,
		Retryable:  retryableCategories[category],
		Rule:       rule,
		Suggestion: suggestions[category],
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

// classifyCoarse maps the structured signals a fallback can trust to a
// category and a rule id, ranked as the sidecar scores them (src/classify.rs):
// the outcome's kind first (a kind rule scores 100 there), then an error code
// (80: a provider's, or the errno name of a connection that failed), then an
// exception type (60), then a gRPC code (50), then the HTTP status (40). So a
// 503 whose connection was reset is a network failure, a 401 raised as
// httpx.ReadTimeout a timeout, and a 429 with gRPC RESOURCE_EXHAUSTED about
// billing a used-up quota. The fallback reads every gRPC code the sidecar's
// rules name (grpcClasses), so a gRPC NOT_FOUND behind a 503 is not found,
// but fewer values of the other signals (codeRules, exceptionRules, the HTTP
// statuses below): one it does not read (ValueError, a 404) leaves the
// decision to the next signal, where the sidecar decides by it.
func classifyCoarse(o *reboundpb.Outcome) (Category, string) {
	switch o.GetKind() {
	case KindTimeout:
		return reboundpb.Category_CATEGORY_TIMEOUT, "fallback.kind_timeout"
	case KindCancelled:
		return reboundpb.Category_CATEGORY_CANCELLED, "fallback.kind_cancelled"
	case KindUnknownTool:
		return reboundpb.Category_CATEGORY_UNKNOWN_TOOL, "fallback.kind_unknown_tool"
	case KindNoToolCall, KindInvalidToolCall:
		return reboundpb.Category_CATEGORY_FORMAT, "fallback.kind_format"
	}
	if c, ok := codeClassOf(o.GetCode()); ok {
		return c.category, c.rule
	}
	if c, ok := exceptionClassOf(o.GetExceptionType()); ok {
		return c.category, c.rule
	}
	if o.GrpcCode != nil {
		// Above the HTTP status, as every gRPC code: INTERNAL with a 503 is internal, NOT_FOUND with a 503 not found.
		if o.GetGrpcCode() == grpcResourceExhausted {
			// A used-up quota when its words say so, else a rate limit, as the sidecar's
			// rules grpc.resource_exhausted.quota and grpc.resource_exhausted.
			if hasQuotaWord(o) {
				return reboundpb.Category_CATEGORY_QUOTA_EXCEEDED, "fallback.grpc_resource_exhausted_quota"
			}
			return reboundpb.Category_CATEGORY_RATE_LIMITED, "fallback.grpc_resource_exhausted"
		}
		if c, ok := grpcClasses[o.GetGrpcCode()]; ok {
			return c.category, c.rule
		}
	}
	switch s := o.GetHttpStatus(); {
	case s == http.StatusUnauthorized:
		return reboundpb.Category_CATEGORY_AUTH, "fallback.http_401"
	case s == http.StatusForbidden:
		return reboundpb.Category_CATEGORY_PERMISSION_DENIED, "fallback.http_403"
	case s == http.StatusTooManyRequests:
		return reboundpb.Category_CATEGORY_RATE_LIMITED, "fallback.http_429"
	case s == http.StatusRequestTimeout:
		return reboundpb.Category_CATEGORY_TIMEOUT, "fallback.http_408"
	case unavailableStatuses[s]:
		return reboundpb.Category_CATEGORY_UNAVAILABLE, "fallback.http_502"
	case s >= 500 && s <= 599:
		return reboundpb.Category_CATEGORY_INTERNAL, "fallback.http_5xx"
	}
	return reboundpb.Category_CATEGORY_UNKNOWN, "fallback.default"
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
func snippet(o *reboundpb.Outcome, category Category, a Action) string {
	var b strings.Builder
	line := errorLine(errorType(o), shownMessage(o))
	writeErrorBlock(&b, o.GetTool(), category, line, 1, suggestions[category])
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
