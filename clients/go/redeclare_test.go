package rebound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rebound-dev/rebound/clients/go/internal/sidecar"
	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// forget ends a session behind the client's back, on a connection of its own,
// as a sidecar does that restarts or evicts the session (idle, capacity).
func forget(t *testing.T, sessionID string) {
	t.Helper()
	forgetOn(t, sidecarAddr, sessionID)
}

// forgetOn is forget on the sidecar at addr.
func forgetOn(t *testing.T, addr, sessionID string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	resp, err := reboundpb.NewReboundClient(conn).EndSession(ctx, &reboundpb.EndSessionRequest{SessionId: sessionID})
	if err != nil || !resp.GetFound() {
		t.Fatalf("EndSession(%q) = %v, %v; want the session found", sessionID, resp, err)
	}
}

// suggests reports whether an unknown tool's verdict points the LLM at tool.
func suggests(v *Verdict, tool string) bool {
	return strings.Contains(v.GetSnippet(), "Did you mean `"+tool+"`?")
}

// reportFunc is Session.Report or Reporter.Report.
type reportFunc func(ctx context.Context, tool string, err error, opts ...ReportOption) (*Verdict, error)

// checkRedeclared drives one session through a sidecar that forgets it between
// two calls, none of which falls back, and checks that the unknown-tool hint
// still names the declared tools afterwards.
func checkRedeclared(t *testing.T, s *Session, tl testTools, report reportFunc) {
	t.Helper()
	ctx := context.Background()
	v, err := report(ctx, tl.search, nil)
	if err != nil || v.Fallback {
		t.Fatalf("first report = %v, %v; want the sidecar's verdict", v, err)
	}

	forget(t, s.ID())
	v, err = report(ctx, tl.search, nil)
	if err != nil || v.Fallback {
		t.Fatalf("report after the sidecar forgot = %v, %v; want the sidecar's verdict", v, err)
	}
	if steps := v.GetBreaker().GetSteps(); steps != 1 {
		t.Fatalf("steps = %d after the sidecar forgot the session, want 1 (a session started anew)", steps)
	}

	v, err = report(ctx, tl.serch, errors.New("Tool serch not found"), WithKind(KindUnknownTool))
	if err != nil || v.Fallback || v.Action != ActionReclassify {
		t.Fatalf("unknown tool = %v, %v; want the sidecar's reclassify", v, err)
	}
	if !suggests(v, tl.search) {
		t.Errorf("the unknown tool's snippet does not suggest the declared %s (the session was not declared again): %q",
			tl.search, v.GetSnippet())
	}
}

func TestSessionDeclaredAgainWhenTheSidecarForgotIt(t *testing.T) {
	tl := newTools()
	s := openSession(t, dial(t), WithTools(tl.search, tl.fetch))
	checkRedeclared(t, s, tl, s.Report)
}

func TestReporterDeclaresAgainWhenTheSidecarForgotTheSession(t *testing.T) {
	tl := newTools()
	s := openSession(t, dial(t), WithTools(tl.search, tl.fetch))
	r, err := s.Reporter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkRedeclared(t, s, tl, r.Report)
}

// Goroutines report on one session, by Report and by a Reporter, while the
// sidecar forgets it; once they are done the session is declared again.
func TestSessionDeclaredAgainUnderConcurrentReports(t *testing.T) {
	tl := newTools()
	s := openSession(t, dial(t), WithTools(tl.search, tl.fetch))
	ctx := context.Background()
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Fatalf("first report = %v, %v; want the sidecar's verdict", v, err)
	}

	const workers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		report := reportFunc(s.Report)
		if w%2 == 1 {
			report = r.Report
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if v, err := report(ctx, tl.fetch, nil); err != nil || v.Fallback {
					errs <- fmt.Errorf("report = %v, %v; want the sidecar's verdict", v, err)
				}
			}
		}()
	}
	forget(t, s.ID())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Should the goroutines have finished before the sidecar forgot, this report finds out.
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Fatalf("report = %v, %v; want the sidecar's verdict", v, err)
	}

	v, err := s.Report(ctx, tl.serch, errors.New("Tool serch not found"), WithKind(KindUnknownTool))
	if err != nil || v.Fallback || !suggests(v, tl.search) {
		t.Errorf("unknown tool after concurrent reports = %v, %v; want the sidecar's suggestion of %s", v, err, tl.search)
	}
}

// startSidecar starts a sidecar of the test's own at addr with extra flags and stops it when the test ends.
func startSidecar(t *testing.T, addr string, extra ...string) *sidecar.Process {
	t.Helper()
	p, err := sidecar.Start(sidecarBin, addr, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the sidecar: %v", err)
		}
	})
	return p
}

// waitForMetric polls the sidecar's metrics until a line reads exactly line.
func waitForMetric(t *testing.T, p *sidecar.Process, line string) {
	t.Helper()
	// Two reload ticks of 2 s, and room for a loaded machine.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + p.Metrics + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, l := range strings.Split(string(body), "\n") {
				if strings.TrimSpace(l) == line {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metric line %q within 20 s; sidecar log:\n%s", line, p.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A config reload removes the profile a running session named; the sidecar
// then loses the session and refuses its declaration when it comes again.
// The run goes on: the refusal is logged once and every later call gets the
// sidecar's verdict, while a new session naming the profile is still refused.
func TestRefusedRedeclarationDoesNotStopTheRun(t *testing.T) {
	config := filepath.Join(t.TempDir(), "rebound.toml")
	if err := os.WriteFile(config, []byte("[profiles.batch.retry]\nbase_ms = 2000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startSidecar(t, "127.0.0.1:0", "--config", config)
	var logs logBuffer
	c, err := Dial(context.Background(), p.GRPC, WithCallTimeout(liveTimeout), WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tl := newTools()
	s := openSession(t, c, WithProfile("batch"))
	ctx := context.Background()
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Fatalf("first report = %v, %v; want the sidecar's verdict", v, err)
	}

	if err := os.WriteFile(config, []byte("# the batch profile is gone\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitForMetric(t, p, `rebound_config_reloads_total{result="ok"} 1`)
	forgetOn(t, p.GRPC, s.ID())
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback || v.GetBreaker().GetSteps() != 1 {
		t.Fatalf("report after the sidecar forgot = %v, %v; want the sidecar's verdict for step 1", v, err)
	}

	v, err := s.Report(ctx, tl.search, nil)
	if err != nil || v.Fallback {
		t.Fatalf("report after the re-declaration was refused = %v, %v; want the sidecar's verdict", v, err)
	}
	if err := s.Do(ctx, tl.fetch, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Do after the re-declaration was refused = %v, want nil", err)
	}
	r, err := s.Reporter(ctx)
	if err != nil {
		t.Fatalf("Reporter after the re-declaration was refused: %v", err)
	}
	defer r.Close()
	if v, err := r.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Errorf("streamed report after the re-declaration was refused = %v, %v; want the sidecar's verdict", v, err)
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Errorf("%d warnings logged, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), s.ID()) || !strings.Contains(logs.String(), "no such profile") {
		t.Errorf("the warning names neither the session nor the sidecar's reason:\n%s", logs.String())
	}
	if c.Fallbacks() != 0 {
		t.Errorf("fallbacks = %d, want 0", c.Fallbacks())
	}

	// A first declaration naming the removed profile is still the caller's error.
	fresh := openSession(t, c, WithProfile("batch"))
	if _, err := fresh.Report(ctx, tl.search, nil); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no such profile") {
		t.Errorf("a new session with the removed profile: Report = %v, want ErrInvalidInput naming the profile", err)
	}
}

// countStarts is a client option that counts the StartSession calls the sidecar accepted.
func countStarts(n *atomic.Int64) Option {
	return WithGRPCDialOptions(grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil && method == reboundpb.Rebound_StartSession_FullMethodName {
				n.Add(1)
			}
			return err
		}))
}

// The sidecar restarts while the client falls back. The declaration sent once
// it answers again makes the session's first step: that verdict is the one
// expected, not another loss, so the session is declared once, not twice.
func TestOneDeclarationAfterTheSidecarRestarts(t *testing.T) {
	addr := socketAddr(t)
	first, err := sidecar.Start(sidecarBin, addr)
	if err != nil {
		t.Fatal(err)
	}
	var starts atomic.Int64
	c, err := Dial(context.Background(), addr, WithCallTimeout(liveTimeout), WithFallbackPolicy(fastPolicy()),
		WithLogger(new(logBuffer).logger()), countStarts(&starts))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tl := newTools()
	s := openSession(t, c, WithTools(tl.search))
	ctx := context.Background()
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Fatalf("first report = %v, %v; want the sidecar's verdict", v, err)
	}

	if err := first.Stop(); err != nil {
		t.Errorf("stopping the sidecar: %v", err)
	}
	if v, err := s.Report(ctx, tl.search, nil); err != nil || !v.Fallback {
		t.Fatalf("report with the sidecar down = %v, %v; want the fallback's verdict", v, err)
	}
	startSidecar(t, addr)
	before := starts.Load()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := s.Report(ctx, tl.search, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Fallback {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client did not use the restarted sidecar within 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
		t.Fatalf("second report on the restarted sidecar = %v, %v; want its verdict", v, err)
	}
	if n := starts.Load() - before; n != 1 {
		t.Errorf("the restarted sidecar accepted %d declarations, want 1", n)
	}
}

// The sidecar forgets the session twice before the client declares it again:
// one declaration covers both, and the step it makes is no further loss.
func TestOneDeclarationAfterTheSidecarForgotTwice(t *testing.T) {
	var starts atomic.Int64
	tl := newTools()
	s := openSession(t, dial(t, countStarts(&starts)), WithTools(tl.search))
	ctx := context.Background()
	report := func(what string) {
		t.Helper()
		if v, err := s.Report(ctx, tl.search, nil); err != nil || v.Fallback {
			t.Fatalf("%s = %v, %v; want the sidecar's verdict", what, v, err)
		}
	}
	report("first report")
	forget(t, s.ID())
	report("report after the sidecar forgot")
	forget(t, s.ID())
	before := starts.Load()
	report("report after the sidecar forgot again")
	report("next report")
	if n := starts.Load() - before; n != 1 {
		t.Errorf("%d declarations after the sidecar forgot the session twice, want 1", n)
	}
}
