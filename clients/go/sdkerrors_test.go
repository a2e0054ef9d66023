package rebound

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	reboundpb "github.com/rebound-dev/rebound/clients/go/reboundpb"
	goopenai "github.com/sashabaranov/go-openai"
)

// stainlessError has the exported fields of openai-go v3.98.0's *openai.Error
// (internal/apierror.Error; anthropic-sdk-go v2.15.0's has the same StatusCode,
// Request and Response), whose Error() says only the status.
type stainlessError struct {
	Code, Message, Param, Type string
	StatusCode                 int
	Request                    *http.Request
	Response                   *http.Response
}

func (e *stainlessError) Error() string {
	return fmt.Sprintf("OpenAI API error: %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// goOpenAIError has the exported fields of go-openai v1.43.0's *openai.APIError
// (Code is a string or a number, as the API sent it).
type goOpenAIError struct {
	Code           any
	Message        string
	Param          *string
	Type           string
	HTTPStatus     string
	HTTPStatusCode int
}

func (e *goOpenAIError) Error() string {
	return fmt.Sprintf("error, status code: %d, status: %s, message: %s", e.HTTPStatusCode, e.HTTPStatus, e.Message)
}

// googleAPIError has the fields of google.golang.org/api's *googleapi.Error
// that matter here: Code is the HTTP status, an int, and is no service code.
type googleAPIError struct {
	Code    int
	Message string
	Header  http.Header
}

func (e *googleAPIError) Error() string {
	return fmt.Sprintf("googleapi: Error %d: %s", e.Code, e.Message)
}

// azureResponseError has the exported fields of azcore v1.24.0's
// *azcore.ResponseError (internal/exported.ResponseError).
type azureResponseError struct {
	ErrorCode   string
	StatusCode  int
	RawResponse *http.Response
}

func (e *azureResponseError) Error() string {
	return fmt.Sprintf("GET https://acct.blob.core.windows.net/c/b\nRESPONSE %d\nERROR CODE: %s", e.StatusCode, e.ErrorCode)
}

// wireError has the fields of the MCP Go SDK v1.8.0's *jsonrpc.Error
// (internal/jsonrpc2.WireError), whose Error() is its Message.
type wireError struct {
	Code    int64
	Message string
}

func (e *wireError) Error() string { return e.Message }

// embedsNil promotes a field through a nil pointer, which reflection must not follow.
type embedsNil struct {
	*stainlessError
}

func (e embedsNil) Error() string { return "wrapped" }

// The Go SDKs' API errors keep the status, headers, code and message in fields
// (openai-go's text is only "OpenAI API error: 429 Too Many Requests"): a quota
// used up is then the sidecar's and the fallback's quota_exceeded, not a rate
// limit retried; a rate limit's Retry-After is kept. Checked against the real
// SDKs (openai-go v3.98.0, anthropic-sdk-go v2.15.0, go-openai v1.43.0) answered
// by a loopback server; these types have their fields.
func TestSDKErrorFields(t *testing.T) {
	quota := &stainlessError{Code: "insufficient_quota", Type: "insufficient_quota", StatusCode: 429,
		Message:  "You exceeded your current quota, please check your plan and billing details.",
		Response: &http.Response{StatusCode: 429, Header: http.Header{"X-Request-Id": {"req_1"}}}}
	o, err := OutcomeFromError("llm", fmt.Errorf("calling the model: %w", quota))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "status", o.GetHttpStatus(), int32(429))
	want(t, "code", o.GetCode(), "insufficient_quota")
	want(t, "message", o.GetMessage(), "calling the model: OpenAI API error: 429 Too Many Requests: "+quota.Message)
	if category, _ := classifyCoarse(o); category != reboundpb.Category_CATEGORY_QUOTA_EXCEEDED {
		t.Errorf("the fallback's category of an insufficient_quota 429: %s, want quota_exceeded", category)
	}
	rate := &stainlessError{Code: "rate_limit_exceeded", Type: "requests", StatusCode: 429, Message: "Rate limit reached for gpt-4o-mini.",
		Response: &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"20"}, "Set-Cookie": {"s=1"}}}}
	o, _ = OutcomeFromError("llm", rate)
	want(t, "code", o.GetCode(), "rate_limit_exceeded")
	want(t, "headers", fmt.Sprint(o.GetHeaders()), "map[Retry-After:20]")
	// Without a code, the body's error type.
	typed, _ := OutcomeFromError("llm", &stainlessError{Type: "server_error", StatusCode: 500})
	want(t, "code", typed.GetCode(), "server_error")

	// go-openai: the status as HTTPStatusCode; a numeric Code is not taken, its Type is.
	o, _ = OutcomeFromError("llm", &goOpenAIError{Code: "insufficient_quota", Message: quota.Message, HTTPStatus: "429 Too Many Requests", HTTPStatusCode: 429})
	want(t, "status", o.GetHttpStatus(), int32(429))
	want(t, "code", o.GetCode(), "insufficient_quota")
	want(t, "message", o.GetMessage(), "error, status code: 429, status: 429 Too Many Requests, message: "+quota.Message)
	numeric, _ := OutcomeFromError("llm", &goOpenAIError{Code: 500, Type: "server_error", HTTPStatusCode: 500})
	want(t, "code", numeric.GetCode(), "server_error")

	// googleapi: its headers; its int Code is neither a code nor read as the status.
	o, _ = OutcomeFromError("gcs", &googleAPIError{Code: 429, Message: "rateLimitExceeded", Header: http.Header{"Retry-After": {"7"}}})
	want(t, "headers", fmt.Sprint(o.GetHeaders()), "map[Retry-After:7]")
	want(t, "code", o.GetCode(), "")
	want(t, "status", o.GetHttpStatus(), int32(0))

	// azcore: its ErrorCode, status and headers (RawResponse).
	throttled := &azureResponseError{ErrorCode: "ServerBusy", StatusCode: 503,
		RawResponse: &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"5"}}}}
	o, _ = OutcomeFromError("blob", fmt.Errorf("upload: %w", throttled))
	want(t, "code", o.GetCode(), "ServerBusy")
	want(t, "status", o.GetHttpStatus(), int32(503))
	want(t, "headers", fmt.Sprint(o.GetHeaders()), "map[Retry-After:5]")

	// The MCP Go SDK: a JSON-RPC code is sent as its text, as the other clients send it; an
	// integer Code outside JSON-RPC's range is not.
	o, _ = OutcomeFromError("mcp", fmt.Errorf("calling \"search\": %w", &wireError{Code: -32602, Message: "unknown tool \"serch\""}))
	want(t, "code", o.GetCode(), "-32602")
	if category, _ := classifyCoarse(o); category != reboundpb.Category_CATEGORY_VALIDATION {
		t.Errorf("the fallback's category of -32602: %s, want validation", category)
	}
	app, _ := OutcomeFromError("mcp", &wireError{Code: 42, Message: "tool failed"})
	want(t, "code", app.GetCode(), "")

	// What the interfaces gave first stays; a status out of range, a nil pointer and
	// a field promoted through a nil pointer give nothing.
	first, _ := OutcomeFromError("t", errors.Join(&HTTPError{StatusCode: 503, Code: "overloaded"}, quota))
	want(t, "status", first.GetHttpStatus(), int32(503))
	want(t, "code", first.GetCode(), "overloaded")
	odd, _ := OutcomeFromError("t", &stainlessError{StatusCode: 42})
	want(t, "status", odd.GetHttpStatus(), int32(0))
	var none *stainlessError
	nilled, _ := OutcomeFromError("t", fmt.Errorf("x: %w", error(none)))
	want(t, "status", nilled.GetHttpStatus(), int32(0))
	promoted, _ := OutcomeFromError("t", embedsNil{})
	want(t, "status", promoted.GetHttpStatus(), int32(0))
}

// An error of an LLM provider's Go SDK is kind provider_error (the real SDKs'
// types are in these packages: openai-go v3.98.0's *openai.Error is
// internal/apierror's); the test's own look-alikes are the tool's.
func TestProviderSDKPackages(t *testing.T) {
	for path, want := range map[string]bool{
		"github.com/openai/openai-go/v3/internal/apierror":            true,
		"github.com/anthropics/anthropic-sdk-go/v2/internal/apierror": true,
		"github.com/sashabaranov/go-openai":                           true,
		"github.com/openai/openai-go-extras":                          false,
		"github.com/rebound-dev/rebound/clients/go":                   false,
		"": false,
	} {
		if got := isProviderPackage(path); got != want {
			t.Errorf("isProviderPackage(%q) = %v, want %v", path, got, want)
		}
	}
	o, _ := OutcomeFromError("llm", &stainlessError{StatusCode: 429})
	want(t, "kind", o.GetKind(), KindToolError)
}

// The real go-openai client (v1.43.0, the one of these SDKs that builds with
// Go 1.23) answered by a loopback server as the OpenAI API answers a used-up
// quota and a rate limit.
func TestGoOpenAIErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/quota/chat/completions" {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
	}))
	defer srv.Close()
	call := func(route string) error {
		config := goopenai.DefaultConfig("sk-test")
		config.BaseURL = srv.URL + "/" + route
		_, err := goopenai.NewClientWithConfig(config).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "gpt-4o-mini", Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "hi"}}})
		return err
	}
	o, err := OutcomeFromError("llm", call("quota"))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "type", o.GetExceptionType(), "openai.APIError")
	want(t, "kind", o.GetKind(), KindProviderError)
	want(t, "status", o.GetHttpStatus(), int32(429))
	want(t, "code", o.GetCode(), "insufficient_quota")
	if category, _ := classifyCoarse(o); category != reboundpb.Category_CATEGORY_QUOTA_EXCEEDED {
		t.Errorf("the fallback's category of go-openai's insufficient_quota: %s, want quota_exceeded", category)
	}
	// A null code: the body's type.
	o, _ = OutcomeFromError("llm", call("down"))
	want(t, "status", o.GetHttpStatus(), int32(500))
	want(t, "code", o.GetCode(), "server_error")
}
