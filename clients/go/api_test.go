package rebound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// toolSeq and toolNonce make tool names unique per test run: the sidecar's
// tool breaker and retry budget are shared by all sessions, so tests that
// reuse a name would see each other's failures.
var (
	toolSeq   atomic.Int64
	toolNonce = strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
)

// testTools are one test's tool names.
type testTools struct{ search, fetch, llm, serch string }

func newTools() testTools {
	n := strconv.FormatInt(toolSeq.Add(1), 10) + toolNonce
	return testTools{search: "search" + n, fetch: "fetch" + n, llm: "llm" + n, serch: "serch" + n}
}

// rateLimited is a 429 whose provider asks for a short wait, so that retry tests stay fast.
func rateLimited() error {
	return &HTTPError{StatusCode: 429, Header: http.Header{"Retry-After-Ms": {"50"}}, Body: "Too Many Requests"}
}

func openSession(t *testing.T, c *Client, opts ...SessionOption) *Session {
	t.Helper()
	s, err := c.Session(sessionID(t, "s"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDoRetriesAsToldThenSucceeds(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	ctx := context.Background()
	var calls int
	err := s.Do(ctx, tl.search, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return rateLimited()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v, want nil after one retry", err)
	}
	if calls != 2 {
		t.Fatalf("fn ran %d times, want 2", calls)
	}
	sum, err := s.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetCalls() != 2 || sum.GetErrors() != 1 || sum.GetRetries() != 1 {
		t.Errorf("summary = %v, want 2 calls, 1 error, 1 retry", sum)
	}
	if c.Fallbacks() != 0 {
		t.Errorf("fallbacks = %d with the sidecar up", c.Fallbacks())
	}
}

func TestDoTypedErrors(t *testing.T) {
	tl := newTools()
	c := dial(t)
	ctx := context.Background()
	authErr := &HTTPError{StatusCode: 401, Body: "Incorrect API key provided"}
	notFound := &HTTPError{StatusCode: 404, Body: "no such item"}

	t.Run("escalate", func(t *testing.T) {
		err := openSession(t, c).Do(ctx, tl.llm, func(context.Context) error { return authErr })
		var esc *EscalationError
		if !errors.As(err, &esc) {
			t.Fatalf("Do = %T %v, want *EscalationError", err, err)
		}
		if !errors.Is(err, authErr) {
			t.Error("errors.Is does not reach the tool's error")
		}
		if esc.Verdict.GetEscalation() == nil || esc.Report() == "" {
			t.Errorf("escalation without a report: %v", esc.Verdict)
		}
		if esc.Verdict.Category() != reboundpb.Category_CATEGORY_AUTH {
			t.Errorf("category = %s", esc.Verdict.Category())
		}
	})
	t.Run("abort", func(t *testing.T) {
		err := openSession(t, c).Do(ctx, tl.search, func(context.Context) error { return context.Canceled })
		var abort *AbortError
		if !errors.As(err, &abort) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %T %v, want *AbortError wrapping context.Canceled", err, err)
		}
	})
	t.Run("recover", func(t *testing.T) {
		err := openSession(t, c).Do(ctx, tl.fetch, func(context.Context) error { return notFound })
		var rec *RecoverError
		if !errors.As(err, &rec) || rec.Action != ActionRecover {
			t.Fatalf("Do = %T %v, want *RecoverError with recover", err, err)
		}
		if !strings.HasPrefix(rec.Snippet, `<error tool="`+tl.fetch+`" type="not_found">`) {
			t.Errorf("snippet does not open with the tool and the type: %q", rec.Snippet)
		}
	})
	t.Run("reclassify", func(t *testing.T) {
		s := openSession(t, c, WithTools(tl.search, tl.fetch))
		err := s.Do(ctx, tl.serch, func(context.Context) error { return errors.New("Tool serch not found") },
			WithKind(KindUnknownTool))
		var rec *RecoverError
		if !errors.As(err, &rec) || rec.Action != ActionReclassify {
			t.Fatalf("Do = %T %v, want *RecoverError with reclassify", err, err)
		}
		if !strings.Contains(rec.Snippet, tl.search) {
			t.Errorf("the snippet does not suggest the declared tool search: %q", rec.Snippet)
		}
	})
	t.Run("replan", func(t *testing.T) {
		err := openSession(t, c).Do(ctx, tl.llm, func(context.Context) error {
			return &HTTPError{StatusCode: 400, Body: "This model's maximum context length is 8192 tokens."}
		}, WithKind(KindProviderError), WithCode("context_length_exceeded"))
		var rec *RecoverError
		if !errors.As(err, &rec) || rec.Action != ActionReplan {
			t.Fatalf("Do = %T %v, want *RecoverError with replan", err, err)
		}
	})
}

func TestDoHonoursCancellationWhileWaiting(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	unavailable := &HTTPError{StatusCode: 503}
	var calls atomic.Int32
	start := time.Now()
	time.AfterFunc(100*time.Millisecond, cancel)
	// A 503's first retry waits about a second; the cancel comes well before.
	err := s.Do(ctx, tl.search, func(context.Context) error { calls.Add(1); return unavailable })
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, unavailable) {
		t.Fatalf("Do = %v, want context.Canceled and the last tool error", err)
	}
	if calls.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", calls.Load())
	}
	if elapsed > 700*time.Millisecond {
		t.Errorf("Do returned after %s: the retry wait ignored the cancelled context", elapsed)
	}
}

func TestDoGivesUpAfterMaxAttempts(t *testing.T) {
	tl := newTools()
	c := dial(t, WithMaxAttempts(2))
	s := openSession(t, c)
	var calls int
	err := s.Do(context.Background(), tl.llm, func(context.Context) error { calls++; return rateLimited() })
	var rec *RecoverError
	if !errors.As(err, &rec) || calls != 2 {
		t.Fatalf("Do = %v after %d calls, want *RecoverError after 2", err, calls)
	}
}

// Each attempt of Do is a call of its own: one call id for all of them had the
// sidecar replay the first retry verdict until WithMaxAttempts, and a fixed
// attempt number froze the retry count. Do refuses both, before calling fn.
func TestDoRefusesItsOwnOptions(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	for _, tt := range []struct {
		option string
		opt    ReportOption
	}{
		{"WithCallID", WithCallID("call-1")},
		{"WithAttempt", WithAttempt(1)},
		{"WithAttempt", WithAttempt(0)},
		{"WithCallID", func(o *reboundpb.Outcome) error { o.CallId = ""; return nil }},
	} {
		var calls int
		err := s.Do(context.Background(), tl.search, func(context.Context) error { calls++; return rateLimited() },
			WithDuration(time.Millisecond), tt.opt)
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tt.option) {
			t.Errorf("Do with %s = %v after %d calls, want ErrInvalidInput naming %s", tt.option, err, calls, tt.option)
		}
		if calls != 0 {
			t.Errorf("Do with %s ran fn %d times, want none", tt.option, calls)
		}
	}
	// The same 503 without them is retried, then escalated at the third failure in a row.
	var calls int
	err := s.Do(context.Background(), tl.fetch, func(context.Context) error {
		calls++
		return &HTTPError{StatusCode: 503, Header: http.Header{"Retry-After-Ms": {"20"}}}
	}, WithDuration(time.Millisecond))
	var esc *EscalationError
	if !errors.As(err, &esc) || calls != 3 {
		t.Errorf("Do = %v after %d calls, want *EscalationError after 3", err, calls)
	}
}

func TestSessionDeclarationContextAndEnd(t *testing.T) {
	tl := newTools()
	c := dial(t)
	ctx := context.Background()
	s := openSession(t, c, WithTools(tl.search, tl.fetch), WithStepLimit(50), WithCostLimit(2.5),
		WithErrorLimit(8), WithLabels(map[string]string{"team": "agents"}))
	resp, err := s.Start(ctx)
	if err != nil || resp == nil {
		t.Fatalf("Start = %v, %v", resp, err)
	}
	if resp.GetStepLimit() != 50 || resp.GetCostLimit() != 2.5 || resp.GetErrorLimit() != 8 {
		t.Errorf("limits in force = %v", resp)
	}

	v, err := s.Report(ctx, tl.fetch, &HTTPError{StatusCode: 404, Body: "Not Found for url: https://api.example.com/v1/items/42"},
		WithCost(0.5))
	if err != nil || v.Action != ActionRecover {
		t.Fatalf("Report = %v, %v; want recover", v, err)
	}
	cx, err := s.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cx.GetErrorsShown() != 1 || !strings.HasPrefix(cx.GetText(), `<error tool="`+tl.fetch+`" type="not_found">`) {
		t.Errorf("context = %v, want the fetch error", cx)
	}
	// A later success of the same tool resolves the error.
	if _, err := s.Report(ctx, tl.fetch, nil); err != nil {
		t.Fatal(err)
	}
	if cx, err := s.Context(ctx); err != nil || cx.GetText() != "" {
		t.Errorf("context after the success = %v, %v; want empty", cx, err)
	}
	adm, err := s.Admit(ctx, tl.search)
	if err != nil || !adm.GetAllowed() {
		t.Errorf("Admit = %v, %v; want allowed", adm, err)
	}
	sum, err := s.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetCalls() != 2 || sum.GetErrors() != 1 || sum.GetCost() != 0.5 || sum.GetErrorsByCategory()["not_found"] != 1 {
		t.Errorf("summary = %v", sum)
	}
}

func TestStepLimitAborts(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c, WithStepLimit(2))
	ctx := context.Background()
	var first *Verdict
	var at int
	for i := 1; i <= 3 && first == nil; i++ {
		v, err := s.Report(ctx, tl.search, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != ActionContinue {
			first, at = v, i
		}
	}
	if first == nil || first.Action != ActionAbort || first.GetBreaker().GetReason() != reboundpb.Reason_REASON_STEP_LIMIT {
		t.Fatalf("three reports over a step limit of 2: first non-continue verdict %v, want abort for the step limit", first)
	}
	t.Logf("the step limit of 2 aborted report %d", at)
	err := s.Do(ctx, tl.search, func(context.Context) error { return nil })
	var abort *AbortError
	if !errors.As(err, &abort) || abort.Err != nil {
		t.Errorf("Do on a stopped session = %v, want *AbortError without a tool error", err)
	}
}

func TestSidecarRejectionIsNotPaperedOver(t *testing.T) {
	tl := newTools()
	c := dial(t)
	// The sidecar's config defines no profiles, so it rejects this one as an invalid argument.
	s := openSession(t, c, WithProfile("no-such-profile"))
	_, err := s.Report(context.Background(), tl.search, nil)
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "profile") {
		t.Fatalf("Report = %v, want ErrInvalidInput naming the profile", err)
	}
	if c.Fallbacks() != 0 {
		t.Errorf("a rejected argument counted as a fallback")
	}
}

func TestDialDefaultsToReboundAddrAsTheDeployManifestsSetIt(t *testing.T) {
	ctx := context.Background()
	t.Setenv("REBOUND_ADDR", " "+sidecarAddr+" ")
	c, err := Dial(ctx, "", WithCallTimeout(liveTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Address() != sidecarAddr {
		t.Errorf("Address() = %q, want $REBOUND_ADDR %q", c.Address(), sidecarAddr)
	}
	v, err := openSession(t, c).Report(ctx, newTools().search, nil)
	if err != nil || v.Fallback {
		t.Fatalf("Report through $REBOUND_ADDR = %+v, %v; want the sidecar's answer", v, err)
	}
	t.Setenv("REBOUND_ADDR", "")
	d, err := Dial(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Address() != DefaultAddress {
		t.Errorf("Address() = %q with $REBOUND_ADDR empty, want %q", d.Address(), DefaultAddress)
	}
}

func TestReportIdempotentCallID(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	ctx := context.Background()
	first, err := s.Report(ctx, tl.search, &HTTPError{StatusCode: 503}, WithCallID("call-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Report(ctx, tl.search, &HTTPError{StatusCode: 503}, WithCallID("call-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetReplayed() || again.GetRetry().GetDelayMs() != first.GetRetry().GetDelayMs() {
		t.Errorf("repeated call id: replayed=%v delay %d vs %d", again.GetReplayed(),
			again.GetRetry().GetDelayMs(), first.GetRetry().GetDelayMs())
	}
}

func TestReporterStreamsInOrder(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	ctx := context.Background()
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// Pipelined from one goroutine: send them all, then collect.
	const n = 200
	pending := make([]*Pending, n)
	for i := range pending {
		var callErr error
		// Few enough errors to stay under the session's error limit (10 escalate).
		if i%40 == 39 {
			callErr = &HTTPError{StatusCode: 404}
		}
		p, err := r.Send("tool-"+string(rune('a'+i%5)), callErr)
		if err != nil {
			t.Fatal(err)
		}
		pending[i] = p
	}
	for i, p := range pending {
		v, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v.Fallback || v.GetCallId() != p.outcome.GetCallId() {
			t.Fatalf("outcome %d: fallback=%v call id %q, want the sidecar's verdict for %q",
				i, v.Fallback, v.GetCallId(), p.outcome.GetCallId())
		}
		wantAction := ActionContinue
		if i%40 == 39 {
			wantAction = ActionRecover
		}
		if v.Action != wantAction {
			t.Errorf("outcome %d: action %s, want %s", i, v.Action, wantAction)
		}
	}

	// Concurrent reporters share the stream.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				v, err := r.Report(ctx, tl.search, nil)
				if err == nil && (v.Fallback || v.Action != ActionContinue) {
					err = errors.New("unexpected verdict " + v.Action.String())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(tl.search, nil); err == nil {
		t.Error("Send after Close succeeded")
	}
	sum, err := s.End(ctx)
	if err != nil || sum.GetCalls() != n+200 {
		t.Errorf("summary = %v, %v; want %d calls", sum, err, n+200)
	}
	if c.Fallbacks() != 0 {
		t.Errorf("fallbacks = %d with the sidecar up", c.Fallbacks())
	}
}

func TestContextTokenBudget(t *testing.T) {
	tl := newTools()
	c := dial(t)
	s := openSession(t, c)
	ctx := context.Background()
	for _, tool := range []string{tl.search, tl.fetch, tl.llm} {
		if _, err := s.Report(ctx, tool, &HTTPError{StatusCode: 404, Body: strings.Repeat("the item was not found in the catalogue ", 4)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Context(ctx, WithMaxTokens(-1)); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a negative budget: %v, want ErrInvalidInput", err)
	}
	full, err := s.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.Context(ctx, WithMaxTokens(60))
	if err != nil {
		t.Fatal(err)
	}
	if small.GetTokens() == 0 && small.GetErrorsShown() == full.GetErrorsShown() {
		// The field is in the proto; a sidecar that ignores it answers as without a budget.
		t.Skip("this sidecar does not apply ContextRequest.max_tokens yet")
	}
	if full.GetErrorsShown() != 3 || small.GetErrorsShown() >= full.GetErrorsShown() || small.GetTokens() > 60 {
		t.Errorf("full: %d shown; with 60 tokens: %d shown in %d tokens; want fewer, within the budget",
			full.GetErrorsShown(), small.GetErrorsShown(), small.GetTokens())
	}
}

// A tool that decodes the error page an upstream proxy sent instead of JSON
// fails to parse; its call was fine, so the sidecar must not blame the LLM's
// tool call (format) but the tool's source (kind.tool_error.parse).
func TestToolsOwnParseErrorIsTheTools(t *testing.T) {
	// nginx's default 502 page.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n")
	}))
	defer upstream.Close()
	search := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL+"/search?q=rebound", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var hits []string
		if err := json.NewDecoder(resp.Body).Decode(&hits); err != nil {
			return fmt.Errorf("search: decoding the results: %w", err)
		}
		return nil
	}
	tl := newTools()
	s := openSession(t, dial(t))
	v, err := s.Report(context.Background(), tl.search, search(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	c := v.GetClassification()
	if c.GetRule() != "kind.tool_error.parse" || c.GetCategory() != reboundpb.Category_CATEGORY_INTERNAL {
		t.Errorf("classified %s by %s, want internal by kind.tool_error.parse", c.GetCategory(), c.GetRule())
	}
}

// OpenAI answers a used-up quota with a 429: NewHTTPError takes the body's
// code, and the sidecar escalates the quota instead of retrying a rate limit.
func TestQuotaCodeFromTheBodyEscalates(t *testing.T) {
	// The body and headers of OpenAI's 429 for a used-up quota.
	const quota = `{
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"
    }
}`
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Request-Id", "req_8d3b6f0c2a7e4d1f9b5c3e2a1d0f4b6c")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, quota)
	}))
	defer provider.Close()
	complete := func(ctx context.Context) error {
		resp, err := http.Post(provider.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o"}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return NewHTTPError(resp, body)
		}
		return nil
	}
	tl := newTools()
	s := openSession(t, dial(t))
	err := s.Do(context.Background(), tl.llm, complete, WithKind(KindProviderError))
	var esc *EscalationError
	if !errors.As(err, &esc) || esc.Verdict.Category() != reboundpb.Category_CATEGORY_QUOTA_EXCEEDED {
		t.Fatalf("Do = %T %v, want an escalation for quota_exceeded", err, err)
	}
	var httpErr *HTTPError
	if !errors.As(err, &httpErr) || httpErr.Code != "insufficient_quota" {
		t.Errorf("the tool's error carries code %q, want insufficient_quota", httpErr.Code)
	}
}

// A step limit that stops the run after a call succeeded: the error keeps the
// tool's result and says which limit it was.
func TestStopAfterASuccessKeepsTheResultAndSaysWhy(t *testing.T) {
	tl := newTools()
	s := openSession(t, dial(t), WithStepLimit(2))
	ctx := context.Background()
	search := func(context.Context) ([]string, error) { return []string{"rebound.dev", "docs.rebound.dev"}, nil }
	var (
		hits []string
		err  error
	)
	for i := 0; i < 3 && err == nil; i++ {
		hits, err = DoResult(ctx, s, tl.search, search)
	}
	var abort *AbortError
	if !errors.As(err, &abort) || abort.Err != nil {
		t.Fatalf("DoResult over a step limit of 2 = %T %v, want *AbortError without a tool error", err, err)
	}
	if got, _ := abort.Result.([]string); len(got) != 2 || len(hits) != 2 {
		t.Errorf("the aborted call's result: Result %v, returned %v; want the two hits in both", abort.Result, hits)
	}
	want(t, "text", err.Error(), `rebound: abort after "`+tl.search+`" (reason step_limit)`)

	// Do's own function has no result to keep; the error still says why.
	err = s.Do(ctx, tl.search, func(context.Context) error { return nil })
	if !errors.As(err, &abort) || abort.Result != nil || !strings.HasSuffix(err.Error(), "(reason session_stopped)") {
		t.Errorf("Do on the stopped session = %v, want an abort for session_stopped without a result", err)
	}
}

// Agents log the error Do returns: its text must not carry the API key that
// a 401's body echoes, though the tool's own error, unwrapped, still does.
func TestVerdictErrorTextRedactsTheToolsError(t *testing.T) {
	const key = "sk-proj-Xk3vT9qLmN2pR7sW4yZ8aB1cD5eF6gH0jKuV"
	// OpenAI's 401 body, with the key in full as an OpenAI-compatible proxy echoes it.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+
			`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
	}))
	defer provider.Close()
	complete := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return NewHTTPError(resp, body)
	}
	tl := newTools()
	err := openSession(t, dial(t)).Do(context.Background(), tl.llm, complete)
	var esc *EscalationError
	if !errors.As(err, &esc) {
		t.Fatalf("Do = %T %v, want *EscalationError", err, err)
	}
	if text := err.Error(); strings.Contains(text, key[:12]) || !strings.Contains(text, "Incorrect API key provided: [REDACTED:openai_key]") {
		t.Errorf("error text = %q, want the key redacted", text)
	}
	if !strings.Contains(errors.Unwrap(err).Error(), key) {
		t.Error("the wrapped tool error lost its text")
	}
}

// One outcome built by hand and reported again and again is a new call each
// time: the client leaves it as it is instead of filling its call id in.
func TestHandBuiltOutcomeCanBeReusedAsItIs(t *testing.T) {
	tl := newTools()
	c := dial(t)
	ctx := context.Background()
	s := openSession(t, c, WithTools(tl.search))
	o := &reboundpb.Outcome{Tool: tl.serch, Kind: KindUnknownTool, Message: "Tool " + tl.serch + " not found"}
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	report := map[string]func() (*Verdict, error){
		"ReportOutcome": func() (*Verdict, error) { return s.ReportOutcome(ctx, o) },
		"SendOutcome": func() (*Verdict, error) {
			p, err := r.SendOutcome(o)
			if err != nil {
				return nil, err
			}
			return p.Wait(ctx)
		},
	}
	steps := uint32(0)
	for _, how := range []string{"ReportOutcome", "ReportOutcome", "SendOutcome", "SendOutcome"} {
		v, err := report[how]()
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if v.GetReplayed() || v.GetBreaker().GetSteps() != steps || v.GetCallId() == "" {
			t.Errorf("%s, step %d: replayed %v, steps %d, call id %q; want a new call", how, steps, v.GetReplayed(), v.GetBreaker().GetSteps(), v.GetCallId())
		}
		if o.GetCallId() != "" || o.GetSessionId() != "" {
			t.Fatalf("%s filled the caller's outcome: call id %q, session %q", how, o.GetCallId(), o.GetSessionId())
		}
	}
}

// A declaration the sidecar refuses stops Do before the tool runs: a tool
// with side effects must not act for a call that then fails as bad input.
func TestDoRefusesABadDeclarationBeforeTheToolRuns(t *testing.T) {
	tl := newTools()
	c := dial(t)
	// The sidecar's config defines no profiles.
	s := openSession(t, c, WithProfile("no-such-profile"))
	ran := false
	err := s.Do(context.Background(), tl.search, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "profile") {
		t.Fatalf("Do = %v, want ErrInvalidInput naming the profile", err)
	}
	if ran {
		t.Error("the tool ran for a session the sidecar refused")
	}
	_, err = DoResult(context.Background(), s, tl.search, func(context.Context) (int, error) { ran = true; return 1, nil })
	if !errors.Is(err, ErrInvalidInput) || ran {
		t.Errorf("DoResult = %v, tool ran %v; want ErrInvalidInput before the tool", err, ran)
	}
}
