package rebound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-dev/rebound/clients/go/internal/sidecar"
	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// fastPolicy is the seed policy with short delays, so that fallback retries do not slow the tests.
func fastPolicy() FallbackPolicy {
	p := DefaultFallbackPolicy()
	p.BaseDelay, p.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	return p
}

// socketAddr is a Unix socket address in a fresh short directory (a socket
// path must fit in about 100 bytes), removed after the test.
func socketAddr(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return "unix:" + filepath.Join(dir, "rebound.sock")
}

// The sidecar stops mid-run: the client answers locally (and says so once in
// its log), then uses the sidecar again once it is back on the same socket.
func TestFailOpenWhenTheSidecarStopsAndReturns(t *testing.T) {
	addr := socketAddr(t)

	first, err := sidecar.Start(sidecarBin, addr)
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	c, err := Dial(context.Background(), addr, WithLogger(logs.logger()), WithFallbackPolicy(fastPolicy()), WithCallTimeout(liveTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(sessionID(t, "s"), WithTools("search"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	unavailable := &HTTPError{StatusCode: 503}

	v, err := s.Report(ctx, "search", unavailable)
	if err != nil || v.Fallback {
		t.Fatalf("with the sidecar up: %v, %v; want its verdict", v, err)
	}
	if _, err := s.Report(ctx, "search", nil); err != nil {
		t.Fatal(err)
	}

	if err := first.Stop(); err != nil {
		t.Errorf("stopping the sidecar: %v", err)
	}

	// Report: the local policy retries a 503 with the fast backoff.
	start := time.Now()
	v, err = s.Report(ctx, "search", unavailable)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Fallback || v.Action != ActionRetry || v.Delay() < 8*time.Millisecond || v.Delay() > 12*time.Millisecond {
		t.Fatalf("sidecar down: fallback=%v action=%s delay=%s; want a local retry after 10 ms ±20 %%",
			v.Fallback, v.Action, v.Delay())
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("the fallback verdict took %s: the agent was held up", elapsed)
	}
	if c.Fallbacks() != 1 {
		t.Errorf("fallbacks = %d, want 1", c.Fallbacks())
	}

	// Do: the failure above counts, so this call fails once more and then succeeds.
	var calls int
	err = s.Do(ctx, "search", func(context.Context) error {
		calls++
		if calls == 1 {
			return unavailable
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Do while the sidecar is down = %v after %d calls, want success after 2", err, calls)
	}
	// Three failures of one tool in a row escalate locally.
	_, _ = s.Report(ctx, "fetch", unavailable)
	_, _ = s.Report(ctx, "fetch", unavailable)
	err = s.Do(ctx, "fetch", func(context.Context) error { return unavailable })
	var esc *EscalationError
	if !errors.As(err, &esc) || !esc.Verdict.Fallback || !strings.Contains(esc.Report(), "3 times in a row") {
		t.Fatalf("third fetch failure while down = %v, want a local escalation", err)
	}

	// The other calls answer locally too.
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.Report(ctx, "search", nil); err != nil || !v.Fallback || v.Action != ActionContinue {
		t.Errorf("Reporter while down = %v, %v; want a local continue", v, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if cx, err := s.Context(ctx); err != nil || !strings.Contains(cx.GetText(), `<error tool="fetch" type="unavailable">`) {
		t.Errorf("Context while down = %v, %v; want the local error context", cx, err)
	}
	if adm, err := s.Admit(ctx, "search"); err != nil || !adm.GetAllowed() {
		t.Errorf("Admit while down = %v, %v; want allowed", adm, err)
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Errorf("%d warnings logged, want exactly 1:\n%s", n, logs.String())
	}
	before := c.Fallbacks()
	if before < 8 {
		t.Errorf("fallbacks = %d, want one per local decision (at least 8)", before)
	}

	// Back on the same socket: the client reconnects by itself and uses it again.
	second, err := sidecar.Start(sidecarBin, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := second.Stop(); err != nil {
			t.Errorf("stopping the sidecar: %v", err)
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err = s.Report(ctx, "search", unavailable)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Fallback || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v.Fallback {
		t.Fatal("the client did not use the restarted sidecar within 15 s")
	}
	if strings.HasPrefix(v.GetClassification().GetRule(), "fallback.") {
		t.Errorf("a sidecar verdict with a fallback rule: %s", v.GetClassification().GetRule())
	}
	if !strings.Contains(logs.String(), "sidecar reachable again") {
		t.Errorf("no log line for the sidecar coming back:\n%s", logs.String())
	}
	// The declaration was sent again: the restarted sidecar knows the session's tools.
	v, err = s.Report(ctx, "serch", errors.New("Tool serch not found"), WithKind(KindUnknownTool))
	if err != nil || v.Fallback || v.Action != ActionReclassify || !strings.Contains(v.GetSnippet(), "search") {
		t.Errorf("unknown tool after the restart = %v, %v; want reclassify suggesting search", v, err)
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Errorf("%d warnings logged, want still 1", n)
	}
}

// The sidecar stops while an agent loops on the same failure: the fallback
// counts on from the identical errors the sidecar answered and aborts the
// fifth, and the session stays stopped, as the sidecar would have done.
func TestFailOpenAbortsTheFifthIdenticalError(t *testing.T) {
	addr := socketAddr(t)
	p, err := sidecar.Start(sidecarBin, addr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := quietClient(t, addr, WithFallbackPolicy(fastPolicy()), WithCallTimeout(liveTimeout)).Session(sessionID(t, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Real: psycopg's error for a server that stopped accepting connections, with the wait that varies.
	report := func(n int) *Verdict {
		t.Helper()
		v, err := s.Report(ctx, "db", fmt.Errorf("connection timeout expired after %d.%ds", 30, n))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for n := 1; n <= 2; n++ {
		if v := report(n); v.Fallback || v.GetBreaker().GetIdenticalErrors() != uint32(n) {
			t.Fatalf("failure %d with the sidecar up: fallback %v, identical_errors %d; want the sidecar's, %d",
				n, v.Fallback, v.GetBreaker().GetIdenticalErrors(), n)
		}
	}
	if err := p.Stop(); err != nil {
		t.Errorf("stopping the sidecar: %v", err)
	}
	var v *Verdict
	for n := 3; n <= 5; n++ {
		v = report(n)
	}
	if !v.Fallback || v.Action != ActionAbort || v.GetBreaker().GetReason() != reboundpb.Reason_REASON_IDENTICAL_ERRORS ||
		v.GetBreaker().GetIdenticalErrors() != 5 {
		t.Fatalf("fifth identical failure, the sidecar down: fallback %v, %s, %v; want a local abort, identical_errors 5",
			v.Fallback, v.Action, v.GetBreaker())
	}
	err = s.Do(ctx, "db", func(context.Context) error { return nil })
	var abort *AbortError
	if !errors.As(err, &abort) || abort.Verdict.GetBreaker().GetReason() != reboundpb.Reason_REASON_SESSION_STOPPED {
		t.Errorf("a call after the abort = %v, want an abort, session_stopped", err)
	}
	sum, err := s.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetCalls() != 6 || sum.GetErrors() != 5 || sum.GetState() != reboundpb.SessionState_SESSION_STATE_STOPPED {
		t.Errorf("local summary = %v, want 6 calls, 5 errors, stopped", sum)
	}
}

// A sidecar that accepts connections but never answers: every call gives up
// at the call timeout and the fallback decides.
func TestFailOpenWhenTheSidecarHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			// Hold the connection open and silent until the test ends.
			defer conn.Close()
		}
	}()

	var logs logBuffer
	c, err := Dial(context.Background(), l.Addr().String(), WithLogger(logs.logger()), WithCallTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(sessionID(t, "s"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		start := time.Now()
		v, err := s.Report(context.Background(), "search", &HTTPError{StatusCode: 401})
		elapsed := time.Since(start)
		if err != nil || !v.Fallback || v.Action != ActionEscalate {
			t.Fatalf("report %d = %v, %v; want a local escalation", i, v, err)
		}
		if elapsed > time.Second {
			t.Errorf("report %d took %s with a 100 ms call timeout", i, elapsed)
		}
	}
	if accepted.Load() == 0 {
		t.Error("the client never connected to the silent listener")
	}
	if c.Fallbacks() != 3 || logs.count("level=WARN") != 1 {
		t.Errorf("fallbacks = %d, warnings = %d; want 3 and 1:\n%s", c.Fallbacks(), logs.count("level=WARN"), logs.String())
	}
}

// Nothing listens at all: Dial still succeeds and every answer is local.
func TestFailOpenWhenNothingListens(t *testing.T) {
	var logs logBuffer
	c, err := Dial(context.Background(), refusedAddr(t), WithLogger(logs.logger()))
	if err != nil {
		t.Fatalf("Dial = %v: a missing sidecar must not stop the agent", err)
	}
	defer c.Close()
	s, err := c.Session(sessionID(t, "s"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Report(context.Background(), "llm", rateLimitedFor("2"))
	if err != nil || !v.Fallback || v.Action != ActionRetry || v.Delay() < 2*time.Second || v.Delay() > 2400*time.Millisecond {
		t.Fatalf("Report = %v, %v; want a local retry after the provider's 2 s", v, err)
	}
	sum, err := s.End(context.Background())
	if err != nil || sum.GetCalls() != 1 || sum.GetRetries() != 1 {
		t.Errorf("End = %v, %v; want the local summary", sum, err)
	}
}

// A call id reported again counts once, with the sidecar down as with it up:
// the fallback answers it with the first verdict, and neither the failures in
// a row nor the summary count it twice.
func TestRepeatedCallIDCountsOnce(t *testing.T) {
	ctx := context.Background()
	down, err := Dial(ctx, refusedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	tool := newTools().search
	// Exported fields, so that fmt prints the action's name.
	type step struct {
		Action      Action
		Consecutive uint32
		Replayed    bool
	}
	run := func(c *Client) ([]step, *reboundpb.SessionSummary) {
		s, err := c.Session(sessionID(t, "s"))
		if err != nil {
			t.Fatal(err)
		}
		var steps []step
		for _, id := range []string{"call-1", "call-1", "call-1", "call-2"} {
			v, err := s.Report(ctx, tool, &HTTPError{StatusCode: 503, Body: "Service Unavailable"}, WithCallID(id))
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, step{v.Action, v.GetBreaker().GetConsecutiveFailures(), v.GetReplayed()})
		}
		sum, err := s.End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return steps, sum
	}
	local, localSum := run(down)
	if down.Fallbacks() == 0 {
		t.Fatal("the fallback did not answer")
	}
	want := []step{{ActionRetry, 1, false}, {ActionRetry, 1, true}, {ActionRetry, 1, true}, {ActionRetry, 2, false}}
	if fmt.Sprint(local) != fmt.Sprint(want) {
		t.Errorf("fallback (action, failures in a row, replayed) = %v, want %v", local, want)
	}
	if localSum.GetCalls() != 2 || localSum.GetErrors() != 2 || localSum.GetRetries() != 2 {
		t.Errorf("fallback summary = %v, want 2 calls, 2 errors, 2 retries", localSum)
	}
	live, liveSum := run(dial(t))
	if fmt.Sprint(live) != fmt.Sprint(local) {
		t.Errorf("the sidecar says %v; the fallback %v", live, local)
	}
	if liveSum.GetCalls() != localSum.GetCalls() || liveSum.GetErrors() != localSum.GetErrors() {
		t.Errorf("the sidecar's summary %v; the fallback's %v", liveSum, localSum)
	}
}

// The sidecar gives a session's StartSession labels back in its escalation
// reports (a field, and a "Labels:" line right after the text's first line,
// sorted by key in byte order) and in its EndSession summary; with the sidecar
// down, the fallback does the same with the labels the session declared. The
// last two keys sort differently in UTF-16 code units.
func TestFallbackGivesTheDeclaredLabelsBack(t *testing.T) {
	ctx := context.Background()
	down, err := Dial(ctx, refusedAddr(t), WithFallbackPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	// A value's line break and a secret stay out of the text, as on the sidecar.
	labels := map[string]string{"user": "alice", "run": "nightly-42", "Z": "1", "é": "2", "\U0001F600": "3", "\uFF5A": "4",
		"note": "a\nb", "token": "abcdef0123456789"}
	const line = "Labels: Z=1, note=a b, run=nightly-42, token=[REDACTED:token], user=alice, é=2, \uFF5A=4, \U0001F600=3"
	run := func(c *Client, opts ...SessionOption) (*Verdict, *reboundpb.SessionSummary) {
		t.Helper()
		s, err := c.Session(sessionID(t, "s"), opts...)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Report(ctx, newTools().llm, &HTTPError{StatusCode: 401, Body: "Unauthorized"})
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != ActionEscalate || v.GetEscalation() == nil {
			t.Fatalf("Report(401) = %v; want an escalation", v)
		}
		sum, err := s.End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v, sum
	}
	for _, c := range []*Client{dial(t), down} {
		v, sum := run(c, WithLabels(labels))
		if v.Fallback != (c == down) {
			t.Fatalf("answered by the fallback: %v, want %v", v.Fallback, c == down)
		}
		report := v.GetEscalation()
		if fmt.Sprint(report.GetLabels()) != fmt.Sprint(labels) {
			t.Errorf("fallback %v: report labels = %v, want %v", v.Fallback, report.GetLabels(), labels)
		}
		lines := strings.Split(report.GetText(), "\n")
		if len(lines) < 3 || lines[1] != line {
			t.Errorf("fallback %v: report text = %q, want %q as its second line", v.Fallback, report.GetText(), line)
		}
		if v.Fallback && (lines[0] != report.GetSummary() || !strings.HasPrefix(lines[len(lines)-1], "last error: ")) {
			t.Errorf("the fallback's report text = %q, want its summary, the labels, then the last error", report.GetText())
		}
		if fmt.Sprint(sum.GetLabels()) != fmt.Sprint(labels) || sum.GetEscalations() != 1 {
			t.Errorf("fallback %v: summary = %v, want the labels %v and 1 escalation", v.Fallback, sum, labels)
		}
	}
	if down.Fallbacks() == 0 {
		t.Fatal("the fallback did not answer")
	}
	// A session that declared none: no field, no line, as on the sidecar.
	v, sum := run(down)
	if !v.Fallback || len(v.GetEscalation().GetLabels()) != 0 || strings.Contains(v.GetEscalation().GetText(), "Labels:") {
		t.Errorf("a session without labels: report = %v", v.GetEscalation())
	}
	if len(sum.GetLabels()) != 0 {
		t.Errorf("a session without labels: summary labels = %v", sum.GetLabels())
	}
}

// With the sidecar down, Admit answers from the session's local state: an
// escalated session is still allowed, an aborted one is refused, as the sidecar says.
func TestFallbackAdmitSaysWhatTheLocalVerdictsDid(t *testing.T) {
	ctx := context.Background()
	c, err := Dial(ctx, refusedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(sessionID(t, "admit"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Report(ctx, "search", &HTTPError{StatusCode: 401}); err != nil || v.Action != ActionEscalate {
		t.Fatalf("Report(401) = %v, %v; want a local escalation", v, err)
	}
	adm, err := s.Admit(ctx, "search")
	if err != nil || !adm.GetAllowed() || adm.GetSessionState() != reboundpb.SessionState_SESSION_STATE_ESCALATED {
		t.Errorf("Admit after an escalation = %v, %v; want allowed in an escalated session", adm, err)
	}
	if v, err := s.Report(ctx, "search", context.Canceled); err != nil || v.Action != ActionAbort {
		t.Fatalf("Report(canceled) = %v, %v; want a local abort", v, err)
	}
	adm, err = s.Admit(ctx, "search")
	if err != nil || adm.GetAllowed() || adm.GetReason() != reboundpb.Reason_REASON_SESSION_STOPPED {
		t.Errorf("Admit after an abort = %v, %v; want refused, session stopped", adm, err)
	}
}

func rateLimitedFor(seconds string) error {
	return &HTTPError{StatusCode: 429, Header: map[string][]string{"Retry-After": {seconds}}}
}

// The sidecar freezes (SIGSTOP) with connections and a stream open: unary
// reports and streamed ones give up at the call timeout and the fallback
// decides; once it thaws, both are answered by the sidecar again.
func TestFailOpenWhenTheSidecarFreezes(t *testing.T) {
	p, err := sidecar.Start(sidecarBin, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.Resume()
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the sidecar: %v", err)
		}
	}()
	var logs logBuffer
	c, err := Dial(context.Background(), p.GRPC, WithLogger(logs.logger()), WithCallTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(sessionID(t, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, err := r.Report(ctx, "search", nil); err != nil || v.Fallback {
		t.Fatalf("streamed report before the freeze = %v, %v; want the sidecar's verdict", v, err)
	}

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	unavailable := &HTTPError{StatusCode: 503}
	timed := func(what string, report func() (*Verdict, error)) {
		t.Helper()
		start := time.Now()
		v, err := report()
		if err != nil || !v.Fallback || v.Action != ActionRetry {
			t.Fatalf("%s while frozen = %v, %v; want a local retry", what, v, err)
		}
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("%s while frozen took %s with a 100 ms call timeout", what, elapsed)
		}
	}
	timed("Report", func() (*Verdict, error) { return s.Report(ctx, "search", unavailable) })
	timed("Reporter.Report", func() (*Verdict, error) { return r.Report(ctx, "fetch", unavailable) })
	// Several in flight on one stream: all answered locally, in about one timeout.
	var pending []*Pending
	for i := 0; i < 3; i++ {
		// One tool each: three failures of one tool in a row would escalate.
		pd, err := r.Send("db"+strconv.Itoa(i), &HTTPError{StatusCode: 502})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, pd)
	}
	for i, pd := range pending {
		timed("pending "+strconv.Itoa(i), func() (*Verdict, error) { return pd.Wait(ctx) })
	}

	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	back := func(what string, report func() (*Verdict, error)) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, err := report()
			if err != nil {
				t.Fatal(err)
			}
			if !v.Fallback {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still answered locally 10 s after the sidecar thawed", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	back("Report", func() (*Verdict, error) { return s.Report(ctx, "search", nil) })
	back("Reporter.Report", func() (*Verdict, error) { return r.Report(ctx, "search", nil) })
	if n := logs.count("level=WARN"); n != 1 {
		t.Errorf("%d warnings logged, want 1:\n%s", n, logs.String())
	}
}
