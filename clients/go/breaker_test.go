package rebound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// localRun is a session whose every outcome the fallback answers, as while the
// sidecar is down: the local state counts the outcome, the policy decides, and
// the state records the verdict, as Session.fallback does.
type localRun struct {
	l *localState
	p FallbackPolicy
}

func newLocalRun(p FallbackPolicy, limits sessionLimits) *localRun {
	return &localRun{l: newLocalState(now, limits, nil), p: p}
}

func (r *localRun) report(o *reboundpb.Outcome) *reboundpb.Verdict {
	in := r.l.observe(o)
	in.now, in.random = now, 0.5
	v := r.p.decide(o, in)
	r.l.record(o, v)
	return v
}

func fail(tool, message string) *reboundpb.Outcome {
	return &reboundpb.Outcome{Tool: tool, Message: message}
}

func succeed(tool string) *reboundpb.Outcome { return &reboundpb.Outcome{Tool: tool, Ok: true} }

// none is the reason of a verdict no policy, breaker or limit decided.
const none = "unspecified"

// The reasons of a run of verdicts.
func reasons(vs ...*reboundpb.Verdict) []string {
	var out []string
	for _, v := range vs {
		out = append(out, reasonName(v.GetBreaker().GetReason()))
	}
	return out
}

// Five identical errors in a row (numbers and quoted values aside) abort, and the
// session stays stopped: every later outcome, a success too, is answered abort
// and still counted, as on the sidecar.
func TestFallbackFiveIdenticalErrorsAbortAndStopTheSession(t *testing.T) {
	r := newLocalRun(DefaultFallbackPolicy(), sessionLimits{})
	var vs []*reboundpb.Verdict
	for n := range 5 {
		// Real: Python's int() on a bad literal, the value quoted.
		vs = append(vs, r.report(fail("calc", fmt.Sprintf("invalid literal for int() with base 10: '%dx'", n))))
	}
	// The third and fourth fail the tool three and four times in a row: escalations, which do not stop the run.
	want := []string{none, none, "consecutive_failures", "consecutive_failures", "identical_errors"}
	if got := reasons(vs...); !slices.Equal(got, want) {
		t.Fatalf("reasons = %q, want %q", got, want)
	}
	last := vs[4]
	if last.GetAction() != ActionAbort || last.GetBreaker().GetSessionState() != reboundpb.SessionState_SESSION_STATE_STOPPED {
		t.Errorf("fifth: %s, state %s; want abort, stopped", last.GetAction(), last.GetBreaker().GetSessionState())
	}
	if b := last.GetBreaker(); b.GetIdenticalErrors() != 5 || b.GetSessionErrors() != 5 || b.GetSteps() != 5 || b.GetConsecutiveFailures() != 5 {
		t.Errorf("fifth's counters = %v, want 5 identical, 5 errors, 5 steps, 5 in a row", b)
	}
	if last.GetEscalation() != nil || last.GetRetry() != nil {
		t.Errorf("an abort with an escalation report %v or a retry plan %v", last.GetEscalation(), last.GetRetry())
	}
	if !strings.HasSuffix(last.GetSnippet(), instructions[ActionAbort]) {
		t.Errorf("snippet = %q, want the error block and the abort instruction", last.GetSnippet())
	}

	for _, o := range []*reboundpb.Outcome{succeed("calc"), fail("calc", "invalid literal for int() with base 10: '9x'")} {
		v := r.report(o)
		if v.GetAction() != ActionAbort || v.GetBreaker().GetReason() != reboundpb.Reason_REASON_SESSION_STOPPED ||
			v.GetSnippet() != "<error>\nThe session was stopped earlier; end the run.\n</error>" {
			t.Errorf("after the abort, ok=%v: %s, reason %s, snippet %q; want abort, session_stopped and the sidecar's snippet",
				o.GetOk(), v.GetAction(), v.GetBreaker().GetReason(), v.GetSnippet())
		}
		if !o.GetOk() {
			// The run of failures is not counted on, as on the sidecar; the error is.
			if b := v.GetBreaker(); b.GetConsecutiveFailures() != 5 || b.GetSessionErrors() != 6 || b.GetSteps() != 7 {
				t.Errorf("counters after the abort = %v, want 5 in a row, 6 errors, 7 steps", b)
			}
			if v.GetClassification().GetCategory() != reboundpb.Category_CATEGORY_UNKNOWN {
				t.Errorf("a failure after the abort is not classified: %v", v.GetClassification())
			}
		}
	}
	s := r.l.snapshot(now)
	if s.GetCalls() != 7 || s.GetErrors() != 6 || s.GetErrorsByCategory()["unknown"] != 6 || s.GetEscalations() != 2 ||
		s.GetState() != reboundpb.SessionState_SESSION_STATE_STOPPED {
		t.Errorf("local summary = %v, want 7 calls, 6 errors (unknown), 2 escalations, stopped", s)
	}
}

// "Identical" is the sidecar's: the same tool and the same normalised message,
// or detail when there is no message, in a row.
func TestFallbackIdenticalErrorsAreJudgedOnTheNormalisedMessage(t *testing.T) {
	p := DefaultFallbackPolicy()
	p.MaxConsecutiveFailures = 0
	r := newLocalRun(p, sessionLimits{})
	steps := []struct {
		outcome   *reboundpb.Outcome
		identical uint32
	}{
		{fail("fetch", "timed out after 30.1s"), 1},
		{fail("fetch", "timed out after 30.4s"), 2},
		{fail("fetch", "Timed  out after 29s"), 3},
		// Another tool's success is no success of the failing tool.
		{succeed("search"), 3},
		{fail("fetch", "connection refused"), 1},
		{&reboundpb.Outcome{Tool: "fetch", Detail: "Connection refused"}, 2},
		// The same text from another tool restarts the count.
		{fail("search", "connection refused"), 1},
		{fail("fetch", "connection refused"), 1},
	}
	for i, st := range steps {
		if got := r.report(st.outcome).GetBreaker().GetIdenticalErrors(); got != st.identical {
			t.Errorf("step %d (%s %q): identical_errors = %d, want %d", i+1, st.outcome.GetTool(),
				st.outcome.GetMessage()+st.outcome.GetDetail(), got, st.identical)
		}
	}
}

// A Python traceback with no message is judged by its last line, the exception: its first lines
// are its outermost frames. Real Python 3.11 tracebacks (tests/data/traces/make/failures.py,
// `tool_arguments`): one tool's arguments malformed two ways, through the same frames to two
// exceptions, as the sidecar's test.
func TestFallbackJudgesAPythonTracebackByItsException(t *testing.T) {
	read := func(name string) string {
		text, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", "traces", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	truncated, quoted := read("py-tool-arguments-truncated.txt"), read("py-tool-arguments-single-quoted.txt")
	p := DefaultFallbackPolicy()
	p.MaxConsecutiveFailures = 0
	r := newLocalRun(p, sessionLimits{})
	var got []uint32
	for _, detail := range []string{truncated, quoted, quoted, strings.Replace(truncated, "column 37 (char 36)", "column 52 (char 51)", 1)} {
		got = append(got, r.report(&reboundpb.Outcome{Tool: "search_web", Detail: detail}).GetBreaker().GetIdenticalErrors())
	}
	if want := []uint32{1, 1, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("identical_errors = %v, want %v", got, want)
	}
}

// A success of the failing tool clears the count: five more identical errors are needed to abort.
func TestFallbackASuccessOfTheToolResetsTheIdenticalCount(t *testing.T) {
	p := DefaultFallbackPolicy()
	p.MaxConsecutiveFailures = 0
	r := newLocalRun(p, sessionLimits{})
	for range 4 {
		r.report(fail("fetch", "timed out after 30s"))
	}
	if v := r.report(succeed("fetch")); v.GetBreaker().GetIdenticalErrors() != 0 || v.GetAction() != ActionContinue {
		t.Fatalf("the success: %s, identical_errors %d; want continue, 0", v.GetAction(), v.GetBreaker().GetIdenticalErrors())
	}
	var actions []Action
	for range 5 {
		actions = append(actions, r.report(fail("fetch", "timed out after 30s")).GetAction())
	}
	if want := []Action{ActionRecover, ActionRecover, ActionRecover, ActionRecover, ActionAbort}; !slices.Equal(actions, want) {
		t.Errorf("after the success: %v, want %v", actions, want)
	}
}

// Ten errors in a session escalate, whatever the tools; a declared error limit
// replaces the policy's, and the policy's 0 turns the breaker off.
func TestFallbackSessionErrorsEscalate(t *testing.T) {
	run := func(p FallbackPolicy, limits sessionLimits, n int) []string {
		r := newLocalRun(p, limits)
		var vs []*reboundpb.Verdict
		for i := range n {
			vs = append(vs, r.report(fail(fmt.Sprintf("tool%c", 'a'+i), "Not Found")))
		}
		if last := vs[len(vs)-1]; last.GetBreaker().GetReason() == reboundpb.Reason_REASON_SESSION_ERRORS {
			if want := fmt.Sprintf("%d errors in the session, the last from tool %q", n, fmt.Sprintf("tool%c", 'a'+n-1)); !strings.HasPrefix(last.GetEscalation().GetSummary(), want) {
				t.Errorf("escalation summary = %q, want it to start %q", last.GetEscalation().GetSummary(), want)
			}
		}
		return reasons(vs...)
	}
	only := func(n int, last string) []string {
		want := slices.Repeat([]string{none}, n)
		want[n-1] = last
		return want
	}
	if got, want := run(DefaultFallbackPolicy(), sessionLimits{}, 10), only(10, "session_errors"); !slices.Equal(got, want) {
		t.Errorf("ten errors across tools: %q, want %q", got, want)
	}
	if got, want := run(DefaultFallbackPolicy(), sessionLimits{errors: 4}, 4), only(4, "session_errors"); !slices.Equal(got, want) {
		t.Errorf("a declared limit of 4: %q, want %q", got, want)
	}
	off := DefaultFallbackPolicy()
	off.MaxSessionErrors = 0
	if got, want := run(off, sessionLimits{}, 12), only(12, none); !slices.Equal(got, want) {
		t.Errorf("MaxSessionErrors 0: %q, want no escalation", got)
	}
	if got, want := run(off, sessionLimits{errors: 3}, 3), only(3, "session_errors"); !slices.Equal(got, want) {
		t.Errorf("MaxSessionErrors 0 with a declared limit of 3: %q, want %q", got, want)
	}
}

// A declared step or cost limit aborts on the outcome that reaches it, a
// success too, with the sidecar's snippet; the session is stopped from then on.
func TestFallbackStepAndCostLimitsAbort(t *testing.T) {
	r := newLocalRun(DefaultFallbackPolicy(), sessionLimits{steps: 2})
	if v := r.report(succeed("search")); v.GetAction() != ActionContinue {
		t.Fatalf("first step: %s, want continue", v.GetAction())
	}
	v := r.report(succeed("search"))
	if v.GetAction() != ActionAbort || v.GetBreaker().GetReason() != reboundpb.Reason_REASON_STEP_LIMIT || v.GetBreaker().GetSteps() != 2 ||
		v.GetBreaker().GetSessionState() != reboundpb.SessionState_SESSION_STATE_STOPPED {
		t.Fatalf("second step: %s, %v; want abort, step_limit at 2 steps, stopped", v.GetAction(), v.GetBreaker())
	}
	if want := "<error>\nThe session reached its step limit; end the run.\n</error>"; v.GetSnippet() != want {
		t.Errorf("snippet = %q, want %q", v.GetSnippet(), want)
	}
	if v := r.report(succeed("search")); v.GetBreaker().GetReason() != reboundpb.Reason_REASON_SESSION_STOPPED {
		t.Errorf("third step: reason %s, want session_stopped", v.GetBreaker().GetReason())
	}

	r = newLocalRun(DefaultFallbackPolicy(), sessionLimits{cost: 1})
	cost := func(ok bool) *reboundpb.Outcome { return &reboundpb.Outcome{Tool: "llm", Ok: ok, Cost: 0.6} }
	if v := r.report(cost(true)); v.GetAction() != ActionContinue || v.GetBreaker().GetCost() != 0.6 {
		t.Fatalf("0.6 of 1: %s, cost %v; want continue, 0.6", v.GetAction(), v.GetBreaker().GetCost())
	}
	v = r.report(cost(true))
	if v.GetAction() != ActionAbort || v.GetBreaker().GetReason() != reboundpb.Reason_REASON_COST_LIMIT || v.GetBreaker().GetCost() != 1.2 {
		t.Fatalf("1.2 of 1: %s, %v; want abort, cost_limit at 1.2", v.GetAction(), v.GetBreaker())
	}
	if want := "<error>\nThe session reached its cost limit; end the run.\n</error>"; v.GetSnippet() != want {
		t.Errorf("snippet = %q, want %q", v.GetSnippet(), want)
	}

	// A failure that reaches a limit aborts too, over the escalation its run of failures asks for.
	r = newLocalRun(DefaultFallbackPolicy(), sessionLimits{steps: 3})
	got := reasons(r.report(fail("db", "disk I/O error")), r.report(fail("db", "locked")), r.report(fail("db", "gone")))
	if want := []string{none, none, "step_limit"}; !slices.Equal(got, want) {
		t.Errorf("three failures under a step limit of 3: %q, want %q", got, want)
	}
}

// The sidecar's order (src/verdict.rs): a breaker's abort always wins; a plan
// that aborts stands over a breaker's escalation; a breaker's escalation wins
// over any other plan, an escalating one included.
func TestFallbackSessionBreakersOverThePlan(t *testing.T) {
	tooLong := map[string]string{"Retry-After": "3600"}
	tests := []struct {
		name    string
		outcome *reboundpb.Outcome
		in      fallbackInput
		action  Action
		reason  reboundpb.Reason
	}{
		{"identical errors abort a cancellation", &reboundpb.Outcome{Tool: "t", Kind: KindCancelled},
			fallbackInput{consecutive: 5, identical: 5, errors: 5, steps: 5}, ActionAbort, reboundpb.Reason_REASON_IDENTICAL_ERRORS},
		{"a cancellation stands over three failures in a row", &reboundpb.Outcome{Tool: "t", Kind: KindCancelled},
			fallbackInput{consecutive: 3, identical: 1, errors: 3, steps: 3}, ActionAbort, reboundpb.Reason_REASON_CATEGORY_POLICY},
		{"three failures in a row win over an auth escalation", &reboundpb.Outcome{Tool: "t", HttpStatus: 401},
			fallbackInput{consecutive: 3, identical: 1, errors: 3, steps: 3}, ActionEscalate, reboundpb.Reason_REASON_CONSECUTIVE_FAILURES},
		{"the session's errors win over a retry", &reboundpb.Outcome{Tool: "t", HttpStatus: 503},
			fallbackInput{consecutive: 1, identical: 1, errors: 10, steps: 10}, ActionEscalate, reboundpb.Reason_REASON_SESSION_ERRORS},
		{"identical errors abort a wait too long", &reboundpb.Outcome{Tool: "t", HttpStatus: 429, Headers: tooLong},
			fallbackInput{consecutive: 5, identical: 5, errors: 5, steps: 5}, ActionAbort, reboundpb.Reason_REASON_IDENTICAL_ERRORS},
		{"a step limit aborts over three failures in a row", &reboundpb.Outcome{Tool: "t", HttpStatus: 503},
			fallbackInput{consecutive: 3, identical: 1, errors: 3, steps: 4, limits: sessionLimits{steps: 4}}, ActionAbort, reboundpb.Reason_REASON_STEP_LIMIT},
		{"identical errors come before a step limit", &reboundpb.Outcome{Tool: "t", HttpStatus: 503},
			fallbackInput{consecutive: 5, identical: 5, errors: 5, steps: 5, limits: sessionLimits{steps: 5}}, ActionAbort, reboundpb.Reason_REASON_IDENTICAL_ERRORS},
		{"no breaker: the plan", &reboundpb.Outcome{Tool: "t", HttpStatus: 503},
			fallbackInput{consecutive: 1, identical: 1, errors: 9, steps: 9}, ActionRetry, reboundpb.Reason_REASON_UNSPECIFIED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.now = now
			v := DefaultFallbackPolicy().decide(tt.outcome, tt.in)
			if v.GetAction() != tt.action || v.GetBreaker().GetReason() != tt.reason {
				t.Fatalf("%s, reason %s; want %s, reason %s", v.GetAction(), v.GetBreaker().GetReason(), tt.action, tt.reason)
			}
			if (tt.action == ActionEscalate) != (v.GetEscalation() != nil) || (tt.action == ActionRetry) != (v.GetRetry() != nil) {
				t.Errorf("escalation report %v, retry plan %v for a %s", v.GetEscalation(), v.GetRetry(), tt.action)
			}
		})
	}
}

// A retry promises no more attempts than the session breakers let pass, as on the sidecar.
func TestFallbackAttemptsLeftCountsTheSessionBreakers(t *testing.T) {
	p := DefaultFallbackPolicy()
	p.MaxConsecutiveFailures = 10
	left := func(in fallbackInput) uint32 {
		in.now, in.random = now, 0.5
		v := p.decide(&reboundpb.Outcome{Tool: "t", HttpStatus: 503, Attempt: 1}, in)
		if v.GetAction() != ActionRetry {
			t.Fatalf("%+v: %s, want retry", in, v.GetAction())
		}
		return v.GetRetry().GetAttemptsLeft()
	}
	tests := []struct {
		in   fallbackInput
		want uint32
	}{
		{fallbackInput{consecutive: 1, identical: 1, errors: 1}, 2},
		{fallbackInput{consecutive: 1, identical: 3, errors: 3}, 1}, // the fifth identical error aborts
		{fallbackInput{consecutive: 1, identical: 4, errors: 4}, 0},
		{fallbackInput{consecutive: 1, identical: 1, errors: 8}, 1}, // the tenth error escalates
		{fallbackInput{consecutive: 1, identical: 1, errors: 9}, 0},
		{fallbackInput{consecutive: 1, identical: 1, errors: 1, limits: sessionLimits{errors: 3}}, 1},
	}
	for _, tt := range tests {
		if got := left(tt.in); got != tt.want {
			t.Errorf("%+v: attempts_left = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// The session breakers count as the sidecar's do: each session of outcomes goes
// through `rebound replay` and through the local state and fallback policy, and
// both must give the same action, reason, counters and retries left, and for a
// 5xx the same category. The outcomes are ones the fallback answers as the
// sidecar does (a 404 is not found on both, and recovered).
func TestFallbackSessionBreakersAgreeWithTheSidecar(t *testing.T) {
	timeout := func(tool string, s float64) *reboundpb.Outcome {
		return &reboundpb.Outcome{Tool: tool, HttpStatus: 503, Message: fmt.Sprintf("upstream timed out after %.1fs", s)}
	}
	notFound := func(tool string) *reboundpb.Outcome {
		return &reboundpb.Outcome{Tool: tool, HttpStatus: 404, Message: "Not Found for url: https://api.example.com/v1/" + tool}
	}
	sessions := map[string][]*reboundpb.Outcome{
		"identical": {timeout("a", 30.1), timeout("a", 30.4), succeed("b"), timeout("a", 29.9), timeout("a", 31),
			timeout("a", 30), succeed("a"), timeout("a", 1)},
		"reset": {timeout("c", 1), timeout("c", 2), succeed("c"), timeout("c", 3), notFound("d"), timeout("c", 4),
			{Tool: "c", Ok: true, Cost: 0.5}},
	}
	var errorsTen []*reboundpb.Outcome
	for i := range 11 {
		errorsTen = append(errorsTen, notFound(fmt.Sprintf("t%d", i)))
	}
	sessions["errors"] = errorsTen
	// An internal 5xx is retried once, an unavailable one three times (the
	// third failure in a row escalates first), with or without attempt numbers.
	// Few failures of one tool: the sidecar's tool breaker would open first.
	status := func(tool string, s int32, attempt uint32) *reboundpb.Outcome {
		return &reboundpb.Outcome{Tool: tool, HttpStatus: s, Attempt: attempt, Message: http.StatusText(int(s))}
	}
	sessions["internal"] = []*reboundpb.Outcome{status("a", 500, 0), status("a", 500, 0), status("a", 500, 0),
		status("a", 500, 0), status("b", 501, 1), status("b", 501, 2)}
	sessions["unavailable"] = []*reboundpb.Outcome{status("a", 503, 0), status("a", 503, 0), status("a", 503, 0),
		status("b", 502, 1), status("b", 502, 2), status("b", 502, 3)}
	sessions["mixed"] = []*reboundpb.Outcome{status("a", 500, 0), status("a", 503, 0), succeed("a"),
		status("a", 503, 0), status("a", 500, 0), succeed("a"), status("a", 599, 0), succeed("a"), status("a", 529, 0)}
	sessions["attempts"] = []*reboundpb.Outcome{status("a", 503, 1), succeed("a"), status("a", 503, 2), succeed("a"),
		status("a", 503, 3), succeed("a"), status("a", 503, 4), status("b", 500, 1), succeed("b"), status("b", 500, 2)}

	var order []*reboundpb.Outcome
	var outcomes []map[string]any
	for _, id := range slices.Sorted(maps.Keys(sessions)) {
		for _, o := range sessions[id] {
			// Tool names per session: the sidecar's tool breakers span sessions.
			o.SessionId, o.Tool = id, id+"-"+o.Tool
			outcomes = append(outcomes, map[string]any{"session_id": o.SessionId, "tool": o.Tool, "ok": o.Ok,
				"http_status": o.HttpStatus, "message": o.Message, "cost": o.Cost, "attempt": o.Attempt})
			order = append(order, o)
		}
	}
	lines := replayJSON(t, outcomes)
	runs := map[string]*localRun{}
	for i, o := range order {
		var sidecar struct {
			Action       string  `json:"action"`
			Category     *string `json:"category"`
			AttemptsLeft *uint32 `json:"attempts_left"`
			Breaker      struct {
				SessionState        string  `json:"session_state"`
				Reason              *string `json:"reason"`
				ConsecutiveFailures uint32  `json:"consecutive_failures"`
				SessionErrors       uint32  `json:"session_errors"`
				IdenticalErrors     uint32  `json:"identical_errors"`
				Steps               uint32  `json:"steps"`
				Cost                float64 `json:"cost"`
			} `json:"breaker"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &sidecar); err != nil {
			t.Fatalf("verdict %d: %v: %s", i, err, lines[i])
		}
		r := runs[o.SessionId]
		if r == nil {
			r = newLocalRun(DefaultFallbackPolicy(), sessionLimits{})
			runs[o.SessionId] = r
		}
		v := r.report(o)
		b := v.GetBreaker()
		got := fmt.Sprintf("%s, reason %q, %s, %d in a row, %d errors, %d identical, %d steps, cost %v, %d left",
			actionName(v.GetAction()), reasonName(b.GetReason()),
			shortName(b.GetSessionState().String(), "SESSION_STATE_"),
			b.GetConsecutiveFailures(), b.GetSessionErrors(), b.GetIdenticalErrors(), b.GetSteps(), b.GetCost(),
			v.GetRetry().GetAttemptsLeft())
		sb := sidecar.Breaker
		want := fmt.Sprintf("%s, reason %q, %s, %d in a row, %d errors, %d identical, %d steps, cost %v, %d left",
			sidecar.Action, deref(sb.Reason, none), sb.SessionState, sb.ConsecutiveFailures, sb.SessionErrors,
			sb.IdenticalErrors, sb.Steps, sb.Cost, deref(sidecar.AttemptsLeft, 0))
		if o.GetHttpStatus() >= 500 {
			got += ", " + categoryName(v.GetClassification().GetCategory())
			want += ", " + deref(sidecar.Category, none)
		}
		if got != want {
			t.Errorf("%s #%d (%s ok=%v %q):\n the fallback says %s\n the sidecar     %s", o.SessionId, i, o.Tool, o.Ok, o.Message, got, want)
		}
	}
}

// The declared limits reach the fallback: a session whose sidecar is down keeps
// to WithStepLimit and WithErrorLimit.
func TestFallbackEnforcesTheDeclaredLimits(t *testing.T) {
	c := quietClient(t, refusedAddr(t))
	ctx := context.Background()

	s, err := c.Session(sessionID(t, "steps"), WithStepLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Do(ctx, "search", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("first step: %v", err)
	}
	err = s.Do(ctx, "search", func(context.Context) error { return nil })
	var abort *AbortError
	if !errors.As(err, &abort) || !abort.Verdict.Fallback || abort.Err != nil ||
		abort.Verdict.GetBreaker().GetReason() != reboundpb.Reason_REASON_STEP_LIMIT {
		t.Fatalf("second step of 2 = %v, want a local abort, step_limit, wrapping no tool error", err)
	}

	s, err = c.Session(sessionID(t, "errors"), WithErrorLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Report(ctx, "a", errors.New("no such column: nme")); err != nil || v.Action != ActionRecover {
		t.Fatalf("first error = %v, %v; want recover", v, err)
	}
	v, err := s.Report(ctx, "b", errors.New("no such table: usr"))
	if err != nil || !v.Fallback || v.Action != ActionEscalate || v.GetBreaker().GetReason() != reboundpb.Reason_REASON_SESSION_ERRORS {
		t.Fatalf("second error of 2 = %v, %v; want a local escalation, session_errors", v, err)
	}
}
