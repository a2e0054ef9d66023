// Command agentloop is a small agent loop against real tools that fail in
// scripted ways. It follows Rebound's verdicts and prints what it did:
//
//   - search: a local HTTP API that answers 429 with Retry-After: 1, then 503, then 200;
//   - shell: a command that outlives its timeout (exec.CommandContext kills it);
//   - the LLM naming a tool that does not exist.
//
// Run it against a sidecar:
//
//	go run ./examples/agentloop -addr 127.0.0.1:50051
//
// (-addr defaults to $REBOUND_ADDR, else 127.0.0.1:50051.)
//
// Without a sidecar it still runs: the client's local fallback policy decides.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	rebound "github.com/rebound-dev/rebound/clients/go"
	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// shellTimeout is how long the scripted command may run; it sleeps far longer.
const shellTimeout = 300 * time.Millisecond

func main() {
	addr := flag.String("addr", "", "the Rebound sidecar: host:port or unix:/path/to.sock (default $REBOUND_ADDR, else 127.0.0.1:50051)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "agentloop: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	api := flakyAPI()
	defer api.Close()

	client, err := rebound.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer client.Close()
	session, err := client.Session(fmt.Sprintf("agentloop-%d-%d", os.Getpid(), time.Now().Unix()),
		rebound.WithTools("search", "shell"))
	if err != nil {
		return err
	}
	fmt.Printf("session %s on sidecar %s\n", session.ID(), client.Address())

	fmt.Println("\n== search: a local API that answers 429 (Retry-After: 1), then 503, then 200")
	result, err := search(ctx, session, api.URL+"/search?q=rebound")
	if err != nil {
		return err
	}
	fmt.Printf("  result: %s\n", result)

	fmt.Printf("\n== shell: `sleep 5` with a %s timeout, run through Session.Do\n", shellTimeout)
	if err := shell(ctx, session); err != nil {
		return err
	}

	fmt.Println("\n== the LLM calls a tool that does not exist: serch")
	v, err := session.ReportOutcome(ctx, &reboundpb.Outcome{
		Tool: "serch", Kind: rebound.KindUnknownTool, Message: "Tool serch not found",
	})
	if err != nil {
		return err
	}
	fmt.Printf("  verdict: %s%s\n", name(v.Action), source(v))
	fmt.Println(indent(v.Snippet))

	cx, err := session.Context(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\n== context for the LLM's next turn (%d error(s) shown)\n", cx.GetErrorsShown())
	fmt.Println(indent(cx.GetText()))

	sum, err := session.End(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\n== session summary: %d calls, %d errors %v, %d retries, %d escalations; %d local fallback decisions\n",
		sum.GetCalls(), sum.GetErrors(), sum.GetErrorsByCategory(), sum.GetRetries(), sum.GetEscalations(), client.Fallbacks())
	return nil
}

// search calls the API and acts on each verdict by hand, to show the loop Session.Do runs.
func search(ctx context.Context, s *rebound.Session, url string) (string, error) {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		body, callErr := get(ctx, url)
		v, err := s.Report(ctx, "search", callErr, rebound.WithAttempt(attempt), rebound.WithDuration(time.Since(start)))
		if err != nil {
			return "", err
		}
		outcome := "ok"
		if callErr != nil {
			outcome = callErr.Error()
		}
		fmt.Printf("  attempt %d: %s -> %s (%s)%s\n", attempt, outcome, name(v.Action), categoryOf(v), source(v))
		switch v.Action {
		case rebound.ActionContinue:
			return body, nil
		case rebound.ActionRetry:
			why := "backoff"
			if v.GetRetry().GetProviderDelay() {
				why = "the provider's Retry-After"
			}
			fmt.Printf("    waiting %s (%s)\n", v.Delay(), why)
			select {
			case <-time.After(v.Delay()):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		default:
			return "", fmt.Errorf("search did not recover: the verdict says %s:\n%s", name(v.Action), v.Snippet)
		}
	}
}

// shell runs a command that always times out, letting Session.Do follow the verdicts.
func shell(ctx context.Context, s *rebound.Session) error {
	attempt := 0
	err := s.Do(ctx, "shell", func(ctx context.Context) error {
		attempt++
		fmt.Printf("  attempt %d: running `sleep 5`\n", attempt)
		callCtx, cancel := context.WithTimeout(ctx, shellTimeout)
		defer cancel()
		err := exec.CommandContext(callCtx, "sleep", "5").Run()
		if callCtx.Err() != nil {
			// The kill shows as "signal: killed"; the deadline is what makes it a timeout.
			return fmt.Errorf("sleep 5: %w (%v)", callCtx.Err(), err)
		}
		return err
	})
	var (
		esc   *rebound.EscalationError
		abort *rebound.AbortError
		rec   *rebound.RecoverError
	)
	switch {
	case err == nil:
		fmt.Println("  the command finished")
	case errors.As(err, &esc):
		fmt.Printf("  escalated after %d attempts%s: a human is needed. Report:\n%s\n", attempt, source(esc.Verdict), indent(esc.Report()))
	case errors.As(err, &rec):
		fmt.Printf("  %s after %d attempts%s; for the LLM:\n%s\n", name(rec.Action), attempt, source(rec.Verdict), indent(rec.Snippet))
	case errors.As(err, &abort):
		fmt.Printf("  the run must end after %d attempts%s: %v\n", attempt, source(abort.Verdict), abort)
	default:
		return fmt.Errorf("shell: %w", err)
	}
	return nil
}

// get fetches url; a non-2xx answer becomes an *rebound.HTTPError carrying status and headers.
func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", rebound.NewHTTPError(resp, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// flakyAPI answers 429 with Retry-After: 1, then 503, then 200 from then on.
func flakyAPI() *httptest.Server {
	var calls atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate limit exceeded, slow down", http.StatusTooManyRequests)
		case 2:
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "3 results for %q\n", r.URL.Query().Get("q"))
		}
	}))
}

func name(a rebound.Action) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ACTION_"))
}

func categoryOf(v *rebound.Verdict) string {
	if v.Category() == 0 {
		return "success"
	}
	return strings.ToLower(strings.TrimPrefix(v.Category().String(), "CATEGORY_"))
}

func source(v *rebound.Verdict) string {
	if v != nil && v.Fallback {
		return " [local fallback: sidecar unreachable]"
	}
	return ""
}

func indent(text string) string {
	if text == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n    ")
}
