// Real failures of the Go SDKs of LLM providers that agents call, for holdout-real.jsonl: openai-go,
// anthropic-sdk-go and sashabaranov/go-openai, each pointed at a loopback server of its own that answers
// as the provider's API does (its error bodies, its statuses and its Retry-After family of headers), at a
// closed port, and at a port that accepts and never answers (under a context deadline and under the
// SDK's own request timeout). The SDKs' own retries are off, so one request gives one error. Each
// outcome is read from the error by the Go client itself (clients/go's OutcomeFromError, with the HTTP
// response where the SDK's error hands one back, as an agent would pass it), one JSON line per case,
// labelled beforehand.
//
// Run: go run . > go-sdks.jsonl (in this folder; its go.mod names the modules). Random ports are written
// as 8787 (a server of its own), 8799 (a closed port) and 8798 (the port that never answers).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	rebound "github.com/rebound-dev/rebound/clients/go"
	goopenai "github.com/sashabaranov/go-openai"
	"rebound.dev/classification/gocase"
)

// answer is what the provider's server says to the next request.
type answer struct {
	status  int
	headers map[string]string
	body    string
}

// apiCase is a labelled case of what the provider's server answers.
type apiCase struct {
	id, category string
	status       int
	body         string
	headers      []string
}

// provider is a loopback server answering every request with the answer set last.
type provider struct {
	mu   sync.Mutex
	next answer
}

func (p *provider) set(status int, body string, headers ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := map[string]string{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	p.next = answer{status, h, body}
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	a := p.next
	p.mu.Unlock()
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

// openaiBody is an error body as OpenAI's API writes it (code null when code is "").
func openaiBody(message, typ, param, code string) string {
	e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// anthropicBody is an error body as Anthropic's API writes it.
func anthropicBody(typ, message string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message},
		"request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
	return string(b)
}

// The bodies OpenAI's API answers with (its error-codes guide and the answers it gives).
var (
	openaiKey     = openaiBody("Incorrect API key provided: sk-proj-********************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "", "invalid_api_key")
	openaiRegion  = openaiBody("Country, region, or territory not supported", "request_forbidden", "", "unsupported_country_region_territory")
	openaiProject = openaiBody("Project `proj_AbCdEf123` does not have access to model `gpt-4o`", "invalid_request_error", "", "model_not_found")
	openaiModel   = openaiBody("The model `gpt-9-turbo` does not exist or you do not have access to it.", "invalid_request_error", "", "model_not_found")
	openaiContext = openaiBody("This model's maximum context length is 128000 tokens. However, your messages resulted in 210345 tokens. Please reduce the length of the messages.", "invalid_request_error", "messages", "context_length_exceeded")
	openaiPrompt  = openaiBody("Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting", "invalid_request_error", "", "invalid_prompt")
	openaiRate    = openaiBody("Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits to learn more.", "tokens", "", "rate_limit_exceeded")
	openaiQuota   = openaiBody("You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.", "insufficient_quota", "", "insufficient_quota")
	openai500     = openaiBody("The server had an error while processing your request. Sorry about that!", "server_error", "", "")
	openai503     = openaiBody("The engine is currently overloaded, please try again later.", "server_error", "", "")
	openaiBadTemp = openaiBody("Invalid value for 'temperature': expected a number between 0 and 2, got 3.5.", "invalid_request_error", "temperature", "invalid_value")
	rateHeaders   = []string{"retry-after", "2", "x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "0",
		"x-ratelimit-reset-tokens", "1.4s", "x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499",
		"x-ratelimit-reset-requests", "120ms", "x-request-id", "req_7f3c2a9b1d4e5f60"}
	requestID = []string{"x-request-id", "req_7f3c2a9b1d4e5f60"}
)

// openaiAnswers are the OpenAI API's answers both OpenAI SDKs meet (each case's id after the SDK's prefix).
var openaiAnswers = []apiCase{
	{"401", "auth", 401, openaiKey, requestID},
	{"403-region", "permission_denied", 403, openaiRegion, requestID},
	{"404-model", "not_found", 404, openaiModel, requestID},
	{"context-length", "context_length", 400, openaiContext, requestID},
	{"invalid-prompt", "content_filter", 400, openaiPrompt, requestID},
	{"429-rate", "rate_limited", 429, openaiRate, rateHeaders},
	{"429-quota", "quota_exceeded", 429, openaiQuota, requestID},
	{"500", "internal", 500, openai500, requestID},
	{"503-overloaded", "unavailable", 503, openai503, requestID},
}

func main() {
	// A closed port; a port that accepts and never answers; the providers' server.
	closed := gocase.ClosedPort()
	silent, stopSilent := gocase.SilentPort()
	defer stopSilent()
	api := &provider{}
	server := httptest.NewServer(api)
	defer server.Close()
	serverPort := server.URL[strings.LastIndex(server.URL, ":")+1:]
	emit := gocase.Printer{Ports: strings.NewReplacer(closed, "8799", silent, "8798", serverPort, "8787")}.Emit
	version := gocase.Version
	ctx := context.Background()
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 300*time.Millisecond)
	}

	// ---------------------------------------------------------------- openai-go
	OPENAI := version("github.com/openai/openai-go/v3")
	chat := func(base string, opts ...ooption.RequestOption) error {
		return chatCtx(ctx, base, opts...)
	}
	// with passes the response the SDK's *openai.Error holds, as an agent would.
	with := func(err error) []rebound.ReportOption {
		var apierr *openai.Error
		if errors.As(err, &apierr) && apierr.Response != nil {
			return []rebound.ReportOption{rebound.WithResponse(apierr.Response)}
		}
		return nil
	}
	base := server.URL + "/v1"
	// Its own cases first, then those it shares with go-openai.
	for _, k := range append([]apiCase{
		{"403-project-model", "permission_denied", 403, openaiProject, requestID},
		{"bad-temperature", "validation", 400, openaiBadTemp, requestID},
	}, openaiAnswers...) {
		api.set(k.status, k.body, k.headers...)
		err := chat(base)
		emit("r-go-openai-"+k.id, k.category, OPENAI, err, with(err)...)
	}
	emit("r-go-openai-refused", "network", OPENAI, chat("http://127.0.0.1:"+closed+"/v1"))
	c, cancel := deadline()
	emit("r-go-openai-deadline", "timeout", OPENAI, chatCtx(c, "http://127.0.0.1:"+silent+"/v1"))
	cancel()
	emit("r-go-openai-request-timeout", "timeout", OPENAI, chat("http://127.0.0.1:"+silent+"/v1", ooption.WithRequestTimeout(300*time.Millisecond)))

	// ---------------------------------------------------------------- anthropic-sdk-go
	ANTHROPIC := version("github.com/anthropics/anthropic-sdk-go/v2")
	withA := func(err error) []rebound.ReportOption {
		var apierr *anthropic.Error
		if errors.As(err, &apierr) && apierr.Response != nil {
			return []rebound.ReportOption{rebound.WithResponse(apierr.Response)}
		}
		return nil
	}
	reqID := []string{"request-id", "req_011CSHoEeqs5C35K2UUqR7Fy"}
	h := func(kv ...string) []string { return append(append([]string{}, reqID...), kv...) }
	for _, k := range []apiCase{
		{"r-go-anthropic-401", "auth", 401, anthropicBody("authentication_error", "invalid x-api-key"), h()},
		{"r-go-anthropic-403", "permission_denied", 403, anthropicBody("permission_error", "Your API key does not have permission to use the specified resource."), h()},
		{"r-go-anthropic-404-model", "not_found", 404, anthropicBody("not_found_error", "model: claude-sonnet-9"), h()},
		{"r-go-anthropic-prompt-too-long", "context_length", 400, anthropicBody("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), h()},
		{"r-go-anthropic-413", "context_length", 413, anthropicBody("request_too_large", "Request exceeds the maximum allowed number of bytes."), h()},
		{"r-go-anthropic-output-blocked", "content_filter", 400, anthropicBody("invalid_request_error", "Output blocked by content filtering policy"), h()},
		{"r-go-anthropic-credit", "quota_exceeded", 400, anthropicBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."), h()},
		{"r-go-anthropic-429", "rate_limited", 429, anthropicBody("rate_limit_error", "This request would exceed the rate limit for your organization (8c1f2b3a-5d6e-4f70-9a8b-1c2d3e4f5a6b) of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."),
			h("retry-after", "17", "anthropic-ratelimit-input-tokens-limit", "50000", "anthropic-ratelimit-input-tokens-remaining", "0", "anthropic-ratelimit-input-tokens-reset", time.Now().UTC().Add(17*time.Second).Format(time.RFC3339))},
		{"r-go-anthropic-500", "internal", 500, anthropicBody("api_error", "Internal server error"), h()},
		{"r-go-anthropic-529", "unavailable", 529, anthropicBody("overloaded_error", "Overloaded"), h()},
	} {
		api.set(k.status, k.body, k.headers...)
		err := message(ctx, server.URL)
		emit(k.id, k.category, ANTHROPIC, err, withA(err)...)
	}
	emit("r-go-anthropic-refused", "network", ANTHROPIC, message(ctx, "http://127.0.0.1:"+closed))
	c, cancel = deadline()
	emit("r-go-anthropic-deadline", "timeout", ANTHROPIC, message(c, "http://127.0.0.1:"+silent))
	cancel()
	emit("r-go-anthropic-request-timeout", "timeout", ANTHROPIC, message(ctx, "http://127.0.0.1:"+silent, aoption.WithRequestTimeout(300*time.Millisecond)))

	// ---------------------------------------------------------------- sashabaranov/go-openai
	GOOPENAI := version("github.com/sashabaranov/go-openai")
	// withG passes the status go-openai's *APIError or *RequestError holds (it keeps no headers).
	withG := func(err error) []rebound.ReportOption {
		var apiErr *goopenai.APIError
		var reqErr *goopenai.RequestError
		switch {
		case errors.As(err, &apiErr):
			return []rebound.ReportOption{rebound.WithHTTPStatus(apiErr.HTTPStatusCode)}
		case errors.As(err, &reqErr):
			return []rebound.ReportOption{rebound.WithHTTPStatus(reqErr.HTTPStatusCode)}
		}
		return nil
	}
	for _, k := range append(openaiAnswers,
		// A proxy in front of the API answering with its own HTML page, which go-openai cannot parse.
		apiCase{"502-html", "unavailable", 502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n",
			[]string{"Content-Type", "text/html"}},
	) {
		api.set(k.status, k.body, k.headers...)
		err := goChat(ctx, server.URL+"/v1", nil)
		emit("r-go-goopenai-"+k.id, k.category, GOOPENAI, err, withG(err)...)
	}
	emit("r-go-goopenai-refused", "network", GOOPENAI, goChat(ctx, "http://127.0.0.1:"+closed+"/v1", nil))
	c, cancel = deadline()
	emit("r-go-goopenai-deadline", "timeout", GOOPENAI, goChat(c, "http://127.0.0.1:"+silent+"/v1", nil))
	cancel()
	// go-openai has no timeout of its own: the agent gives it an http.Client with one.
	emit("r-go-goopenai-client-timeout", "timeout", GOOPENAI, goChat(ctx, "http://127.0.0.1:"+silent+"/v1", &http.Client{Timeout: 300 * time.Millisecond}))

}

// chatCtx asks openai-go for a chat completion at base, with no retries.
func chatCtx(ctx context.Context, base string, opts ...ooption.RequestOption) error {
	client := openai.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(base), ooption.WithAPIKey("sk-proj-test"), ooption.WithMaxRetries(0)}, opts...)...)
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4o,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Summarise the attached report.")},
	})
	return err
}

// message asks anthropic-sdk-go for a message at base, with no retries.
func message(ctx context.Context, base string, opts ...aoption.RequestOption) error {
	client := anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(base), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0)}, opts...)...)
	_, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarise the attached report."))},
	})
	return err
}

// goChat asks go-openai for a chat completion at base (it does not retry).
func goChat(ctx context.Context, base string, httpClient *http.Client) error {
	config := goopenai.DefaultConfig("sk-proj-test")
	config.BaseURL = base
	if httpClient != nil {
		config.HTTPClient = httpClient
	}
	_, err := goopenai.NewClientWithConfig(config).CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{
		Model:    goopenai.GPT4o,
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Summarise the attached report."}},
	})
	return err
}
