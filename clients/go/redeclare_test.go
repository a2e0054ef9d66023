package rebound

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// forget ends a session behind the client's back, on a connection of its own,
// as a sidecar does that restarts or evicts the session (idle, capacity).
func forget(t *testing.T, sessionID string) {
	t.Helper()
	conn, err := grpc.NewClient(sidecarAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
