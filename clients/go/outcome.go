package rebound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"math"
	"net"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// HTTPStatusError is implemented by errors that carry the HTTP status of a
// failed response; Report reads it to fill the outcome's http_status.
type HTTPStatusError interface {
	error
	HTTPStatus() int
}

// HTTPHeaderError is implemented by errors that carry the failed response's
// headers; Report reads them for Retry-After and friends.
type HTTPHeaderError interface {
	error
	HTTPHeader() http.Header
}

// HTTPError is a failed HTTP response as an error; it implements
// HTTPStatusError and HTTPHeaderError. Use it to return an HTTP failure from a
// tool, or wrap it with fmt.Errorf("...: %w", err).
type HTTPError struct {
	// StatusCode is the response's status, 100 to 599.
	StatusCode int
	// Header is the response's header.
	Header http.Header
	// Body is (the start of) the response body, for the message.
	Body string
	// Code is the provider's error code, reported as the outcome's code: NewHTTPError
	// reads it from a JSON error body (OpenAI's insufficient_quota, Anthropic's rate_limit_error).
	Code string
}

// NewHTTPError turns a failed response and (the start of) its body into an
// *HTTPError, with the error code of a JSON body that has one.
func NewHTTPError(resp *http.Response, body []byte) *HTTPError {
	return &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Body: strings.TrimSpace(string(body)),
		Code: bodyCode(body)}
}

// bodyCode is the error code of a provider's JSON error body, as the Python
// client reads it: error.code, else error.type, when a non-empty string
// (OpenAI: {"error":{"code":"insufficient_quota",...}}; Anthropic:
// {"type":"error","error":{"type":"rate_limit_error",...}}). The code says
// more than the status: a 429 for a used-up quota is no rate limit.
func bodyCode(body []byte) string {
	var b struct {
		Error map[string]any `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	for _, key := range []string{"code", "type"} {
		if s, ok := b.Error[key].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// Error reads like "HTTP 429 Too Many Requests: <body>".
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// HTTPStatus is the response's status.
func (e *HTTPError) HTTPStatus() int { return e.StatusCode }

// HTTPHeader is the response's header.
func (e *HTTPError) HTTPHeader() http.Header { return e.Header }

// ReportOption sets a field of an outcome, after what was read from the error.
type ReportOption func(*reboundpb.Outcome) error

// WithKind sets what kind of failure this was (KindUnknownTool, KindProviderError...).
func WithKind(k Kind) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if _, ok := reboundpb.OutcomeKind_name[int32(k)]; !ok {
			return fmt.Errorf("%w: outcome kind %d is unknown", ErrInvalidInput, k)
		}
		o.Kind = k
		return nil
	}
}

// WithHTTPStatus sets the HTTP status of the failed response.
func WithHTTPStatus(code int) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if code != 0 && (code < 100 || code > 599) {
			return fmt.Errorf("%w: HTTP status %d: must be 100 to 599 (0 for none)", ErrInvalidInput, code)
		}
		o.HttpStatus = int32(code)
		return nil
	}
}

// WithHeaders adds response headers: only the Retry-After family the sidecar reads (see retryHeaders).
func WithHeaders(h http.Header) ReportOption {
	return func(o *reboundpb.Outcome) error {
		addHeaders(o, h)
		return nil
	}
}

// WithResponse takes the status and headers (the Retry-After family) of a failed response.
func WithResponse(resp *http.Response) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if resp == nil {
			return fmt.Errorf("%w: nil *http.Response", ErrInvalidInput)
		}
		if err := WithHTTPStatus(resp.StatusCode)(o); err != nil {
			return err
		}
		addHeaders(o, resp.Header)
		return nil
	}
}

// WithCode sets the error code: an errno name (ECONNRESET) or a provider's code (insufficient_quota).
func WithCode(code string) ReportOption {
	return func(o *reboundpb.Outcome) error {
		o.Code = code
		return nil
	}
}

// WithGRPCCode sets the gRPC status code of the failed call.
func WithGRPCCode(c codes.Code) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if c > codes.Unauthenticated {
			return fmt.Errorf("%w: gRPC code %d: must be 0 to 16", ErrInvalidInput, c)
		}
		code := int32(c)
		o.GrpcCode = &code
		return nil
	}
}

// WithExitCode sets the exit code of a command.
func WithExitCode(code int) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if code < math.MinInt32 || code > math.MaxInt32 {
			return fmt.Errorf("%w: exit code %d is out of range", ErrInvalidInput, code)
		}
		c := int32(code)
		o.ExitCode = &c
		return nil
	}
}

// WithMessage replaces the error message.
func WithMessage(msg string) ReportOption {
	return func(o *reboundpb.Outcome) error {
		o.Message = msg
		return nil
	}
}

// WithExceptionType replaces the error type name read from the error (empty clears it).
func WithExceptionType(name string) ReportOption {
	return func(o *reboundpb.Outcome) error {
		o.ExceptionType = name
		return nil
	}
}

// WithDetail sets the full output or stack trace.
func WithDetail(detail string) ReportOption {
	return func(o *reboundpb.Outcome) error {
		o.Detail = detail
		return nil
	}
}

// WithCost sets what the call cost, in the agent's own unit.
func WithCost(cost float64) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if err := checkCost("cost", cost); err != nil {
			return err
		}
		o.Cost = cost
		return nil
	}
}

// WithDuration sets how long the call took.
func WithDuration(d time.Duration) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if d < 0 {
			return fmt.Errorf("%w: duration %s: must not be negative", ErrInvalidInput, d)
		}
		o.DurationMs = uint64(d / time.Millisecond)
		return nil
	}
}

// WithAttempt sets which attempt this was: 1 for the first call, 2 for the first retry
// (not for Session.Do, which numbers its attempts itself).
func WithAttempt(n int) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if n < 0 || uint64(n) > math.MaxUint32 {
			return fmt.Errorf("%w: attempt %d: must be 0 to %d", ErrInvalidInput, n, uint32(math.MaxUint32))
		}
		o.Attempt = uint32(n)
		return nil
	}
}

// WithCallID sets the idempotency key: reporting the same call id again returns the first verdict
// (not for Session.Do, which gives each attempt a call id of its own).
func WithCallID(id string) ReportOption {
	return func(o *reboundpb.Outcome) error {
		if err := checkID("call id", id); err != nil {
			return err
		}
		o.CallId = id
		return nil
	}
}

// OutcomeFromError builds the outcome of one call of tool from its error
// (success when err is nil), then applies opts. From err it reads, through
// any wrapping:
//   - context.DeadlineExceeded, or a net.Error (*url.Error too) that timed out: kind timeout
//   - context.Canceled: kind cancelled
//   - an error of openai-go, anthropic-sdk-go or go-openai: kind provider_error
//   - any other error: kind tool_error (WithKind says otherwise, KindProviderError for an LLM call)
//   - a syscall.Errno: its name as the code (ECONNREFUSED); a *net.DNSError: ENOTFOUND or EAI_AGAIN
//   - an HTTPStatusError / HTTPHeaderError (such as *HTTPError): the status and headers; else
//     an error with HTTPStatusCode() int (smithy-go's ResponseError): the status
//   - an *HTTPError's Code: the code; else an error with an ErrorCode() string method
//     (smithy-go's APIError, which every AWS SDK v2 error is): that code (ThrottlingException)
//   - a gRPC status error: its code
//   - an *exec.ExitError: the exit code, and its captured stderr as the detail
//   - what is still missing, from the exported fields of the Go SDKs' API errors
//     (openai-go, anthropic-sdk-go, go-openai, googleapi; see readSDKFields):
//     the status, the headers, the provider's code and its message
//
// The message is err.Error() and the type the innermost exported Go type in
// the chain (none for a plain errors.New or a bare context error).
func OutcomeFromError(tool string, err error, opts ...ReportOption) (*reboundpb.Outcome, error) {
	if err := checkID("tool", tool); err != nil {
		return nil, err
	}
	o := &reboundpb.Outcome{Tool: tool, Ok: err == nil}
	if err != nil {
		fillFromError(o, err)
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil ReportOption", ErrInvalidInput)
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func fillFromError(o *reboundpb.Outcome, err error) {
	o.Message = err.Error()
	o.ExceptionType = typeName(err)

	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		o.Kind = KindCancelled
	case errors.Is(err, context.DeadlineExceeded):
		o.Kind = KindTimeout
	case errors.As(err, &netErr) && netErr.Timeout():
		o.Kind = KindTimeout
	case fromProviderSDK(err):
		o.Kind = KindProviderError
	default:
		// The tool ran and failed, as the Python client says of an exception the tool
		// raised: the sidecar then takes a parse error for the tool's own (an error page
		// where JSON was expected), not for the LLM's malformed call (kind.tool_error.parse).
		o.Kind = KindToolError
	}

	var errno syscall.Errno
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &errno):
		o.Code = errnoName(errno)
	case errors.As(err, &dnsErr):
		// Node's names, which the sidecar's rules already know.
		if dnsErr.IsNotFound {
			o.Code = "ENOTFOUND"
		} else {
			o.Code = "EAI_AGAIN"
		}
	}

	var httpErr *HTTPError
	if o.Code == "" && errors.As(err, &httpErr) {
		o.Code = httpErr.Code
	}
	// A service's own code, as smithy-go's APIError gives it (every AWS SDK v2 error:
	// ThrottlingException, ExpiredToken, NoSuchKey).
	var coded interface{ ErrorCode() string }
	if o.Code == "" && errors.As(err, &coded) {
		o.Code = strings.TrimSpace(coded.ErrorCode())
	}

	var statusErr HTTPStatusError
	var smithyStatus interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &statusErr):
		if s := statusErr.HTTPStatus(); s >= 100 && s <= 599 {
			o.HttpStatus = int32(s)
		}
	case errors.As(err, &smithyStatus):
		// smithy-go's transport ResponseError, inside every AWS SDK v2 error that got a response.
		if s := smithyStatus.HTTPStatusCode(); s >= 100 && s <= 599 {
			o.HttpStatus = int32(s)
		}
	}
	var headerErr HTTPHeaderError
	if errors.As(err, &headerErr) {
		addHeaders(o, headerErr.HTTPHeader())
	}

	var grpcErr interface{ GRPCStatus() *status.Status }
	if errors.As(err, &grpcErr) {
		if c := grpcErr.GRPCStatus().Code(); c != codes.OK && c <= codes.Unauthenticated {
			code := int32(c)
			o.GrpcCode = &code
		}
	}

	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		// -1 means killed by a signal: no exit code to report.
		if c := exitErr.ExitCode(); c >= 0 {
			code := int32(c)
			o.ExitCode = &code
		}
		if len(exitErr.Stderr) > 0 {
			o.Detail = string(exitErr.Stderr)
		}
	}
	readSDKFields(o, err)
}

// typeName names the error's type for the sidecar and the LLM: the innermost
// error of the chain whose type is exported ("syscall.Errno", "url.Error",
// "json.SyntaxError"), without the pointer star. An unexported type
// (context.deadlineExceededError, http's timeoutError, *errors.errorString,
// fmt's and errors' wrappers) names no failure anyone can look up and is noise
// in a snippet: it is skipped, and with only those no type is sent.
func typeName(err error) string {
	name := ""
	for err != nil {
		if n := exportedTypeName(err); n != "" {
			name = n
		}
		err = unwrapFirst(err)
	}
	return name
}

// exportedTypeName is the name of err's type by its package's name
// ("url.Error", not its import path), or "" when the type is not exported.
func exportedTypeName(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !token.IsExported(t.Name()) {
		return ""
	}
	return t.String()
}

// retryHeaders are the response headers the sidecar reads, the same list as
// PROVIDER_HEADERS in src/backoff.rs (a test keeps the two equal). The sidecar
// drops any other; the client does not send them in the first place, so that
// cookies and tokens (Set-Cookie, Authorization) never leave the process.
var retryHeaders = []string{
	"retry-after",
	"retry-after-ms",
	"grpc-retry-pushback-ms",
	"x-ratelimit-reset",
	"x-ratelimit-reset-requests",
	"x-ratelimit-reset-tokens",
	"x-ratelimit-remaining",
	"x-ratelimit-remaining-requests",
	"x-ratelimit-remaining-tokens",
	"x-should-retry",
}

// isRetryHeader says whether a header is one of retryHeaders, matched as the
// sidecar matches it: spaces around the name trimmed, ASCII case ignored.
func isRetryHeader(name string) bool {
	for _, h := range retryHeaders {
		if foldsTo(name, h) {
			return true
		}
	}
	return false
}

// foldsTo says whether s, trimmed, is want (lowercase ASCII) in any ASCII
// case, as the sidecar compares header names and values. Equal lengths keep
// strings.EqualFold to ASCII: a rune it folds onto an ASCII letter (the Kelvin
// sign K) is longer than one byte, and the sidecar would not take it for one.
func foldsTo(s, want string) bool {
	s = strings.TrimSpace(s)
	return len(s) == len(want) && strings.EqualFold(s, want)
}

// addHeaders flattens the Retry-After family of an http.Header into the
// outcome, joining repeated values as HTTP does.
func addHeaders(o *reboundpb.Outcome, h http.Header) {
	for k, vs := range h {
		if !isRetryHeader(k) {
			continue
		}
		if o.Headers == nil {
			o.Headers = make(map[string]string, 2)
		}
		o.Headers[k] = strings.Join(vs, ", ")
	}
}

// maxTextBytes bounds message and detail: the sidecar cuts them far shorter,
// and a runaway tool output must not hit gRPC's message size limit.
const maxTextBytes = 256 << 10

// checkOutcome applies the sidecar's rules to an outcome and makes its text
// safe to send: protobuf strings must be valid UTF-8, and tool output often is not.
func checkOutcome(o *reboundpb.Outcome) error {
	if err := checkID("tool", o.Tool); err != nil {
		return err
	}
	if o.CallId != "" {
		if err := checkID("call id", o.CallId); err != nil {
			return err
		}
	}
	if err := checkCost("cost", o.Cost); err != nil {
		return err
	}
	if o.HttpStatus != 0 && (o.HttpStatus < 100 || o.HttpStatus > 599) {
		return fmt.Errorf("%w: HTTP status %d: must be 100 to 599 (0 for none)", ErrInvalidInput, o.HttpStatus)
	}
	if o.GrpcCode != nil && (*o.GrpcCode < 0 || *o.GrpcCode > 16) {
		return fmt.Errorf("%w: gRPC code %d: must be 0 to 16", ErrInvalidInput, *o.GrpcCode)
	}
	if _, ok := reboundpb.OutcomeKind_name[int32(o.Kind)]; !ok {
		return fmt.Errorf("%w: outcome kind %d is unknown", ErrInvalidInput, o.Kind)
	}
	o.Message = cleanText(o.Message)
	o.Detail = cleanText(o.Detail)
	o.ExceptionType = cleanText(o.ExceptionType)
	o.Code = cleanText(o.Code)
	for k, v := range o.Headers {
		if !isRetryHeader(k) {
			// An outcome built by hand may carry any header; only the Retry-After family is sent.
			delete(o.Headers, k)
			continue
		}
		ck, cv := cleanText(k), cleanText(v)
		if ck != k || cv != v {
			delete(o.Headers, k)
			o.Headers[ck] = cv
		}
	}
	return nil
}

// cleanText makes s valid UTF-8 and cuts it to maxTextBytes (see cutMiddle).
func cleanText(s string) string {
	return cutMiddle(strings.ToValidUTF8(s, "\uFFFD"), maxTextBytes)
}

// cutMiddle cuts s to at most n bytes by leaving out its middle: a trace
// names its exception and innermost frames at the end, and a failing command
// prints its failure last. As the Python client cuts a detail, a quarter is
// kept from the head and the rest from the tail, and a line in between says
// how many characters were left out. Both cuts fall between characters.
func cutMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Room for the marker with the longest count an int can hold.
	budget := n - len(elisionMarker(math.MaxInt))
	head := headBytes(s, budget/4)
	tail := tailBytes(s, budget-len(head))
	return head + elisionMarker(utf8.RuneCountInString(s[len(head):len(s)-len(tail)])) + tail
}

// elisionMarker is the line that stands for what cutMiddle left out, in the Python client's words.
func elisionMarker(chars int) string {
	return fmt.Sprintf("\n… %d characters elided …\n", chars)
}

func checkCost(what string, cost float64) error {
	if math.IsNaN(cost) || math.IsInf(cost, 0) || cost < 0 {
		return fmt.Errorf("%w: %s %v: must be zero or a positive number", ErrInvalidInput, what, cost)
	}
	return nil
}

func isControl(r rune) bool { return unicode.IsControl(r) }

func utf8Valid(s string) bool { return utf8.ValidString(s) }
