package rebound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rebound-dev/rebound/clients/go/internal/sidecar"
	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// vectorCase is one case of tests/vectors/*.json (see its README).
type vectorCase struct {
	Name    string                     `json:"name"`
	Source  string                     `json:"source"`
	Outcome map[string]json.RawMessage `json:"outcome"`
	Expect  vectorExpect               `json:"expect"`
	// Fallback, when present, is what the local fallback answers instead of Expect.
	Fallback *struct {
		vectorExpect
		Why string `json:"why"`
	} `json:"fallback"`
}

// vectorExpect is a case's expected verdict.
type vectorExpect struct {
	Action     string  `json:"action"`
	Category   string  `json:"category"`
	Retryable  bool    `json:"retryable"`
	DelayMsMin *uint64 `json:"delay_ms_min"`
	DelayMsMax *uint64 `json:"delay_ms_max"`
}

func loadVectors(t *testing.T) []vectorCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "tests", "vectors", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files under tests/vectors (%v)", err)
	}
	var all []vectorCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []vectorCase
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, cases...)
	}
	return all
}

// outcome turns the case's outcome into the proto message: enums are written
// lowercase without their prefix in the vectors.
func (c vectorCase) outcome(t *testing.T) *reboundpb.Outcome {
	t.Helper()
	fields := map[string]json.RawMessage{}
	for k, v := range c.Outcome {
		fields[k] = v
	}
	if raw, ok := fields["kind"]; ok {
		var kind string
		if err := json.Unmarshal(raw, &kind); err != nil {
			t.Fatal(err)
		}
		fields["kind"], _ = json.Marshal("OUTCOME_KIND_" + strings.ToUpper(kind))
	}
	data, _ := json.Marshal(fields)
	o := &reboundpb.Outcome{}
	if err := protojson.Unmarshal(data, o); err != nil {
		t.Fatalf("outcome %s: %v", data, err)
	}
	return o
}

// options expresses the same outcome through the Go API: an error plus report options.
func optionsFor(o *reboundpb.Outcome) (error, []ReportOption) {
	if o.GetOk() {
		return nil, nil
	}
	opts := []ReportOption{
		WithKind(o.GetKind()),
		WithHTTPStatus(int(o.GetHttpStatus())),
		WithCode(o.GetCode()),
		// The vectors name their own exception types (or none); the Go type of errors.New must not add one.
		WithExceptionType(o.GetExceptionType()),
	}
	if o.ExitCode != nil {
		opts = append(opts, WithExitCode(int(o.GetExitCode())))
	}
	if len(o.GetHeaders()) > 0 {
		h := map[string][]string{}
		for k, v := range o.GetHeaders() {
			h[k] = []string{v}
		}
		opts = append(opts, WithHeaders(h))
	}
	return errors.New(o.GetMessage()), opts
}

func TestSharedVectors(t *testing.T) {
	// A sidecar of its own: tool breakers and retry budgets are shared by all
	// sessions, and the vectors expect a sidecar that no other test has used.
	// Each mode is a pass of its own, with its own tool names, as the vectors'
	// README asks: fetch's three retried failures in each mode would otherwise
	// add up, and the fifth in a row opens its breaker.
	p, err := sidecar.Start(sidecarBin, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the sidecar: %v", err)
		}
	}()
	c, err := Dial(context.Background(), p.GRPC, WithCallTimeout(liveTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, vc := range loadVectors(t) {
		t.Run(vc.Name, func(t *testing.T) {
			for _, mode := range []string{"outcome", "options"} {
				t.Run(mode, func(t *testing.T) {
					s, err := c.Session(sessionID(t, mode))
					if err != nil {
						t.Fatal(err)
					}
					o := vc.outcome(t)
					o.Tool += "-" + mode
					var v *Verdict
					if mode == "outcome" {
						v, err = s.ReportOutcome(ctx, o)
					} else {
						callErr, opts := optionsFor(o)
						v, err = s.Report(ctx, o.GetTool(), callErr, opts...)
					}
					if err != nil {
						t.Fatal(err)
					}
					checkVector(t, vc, v)
				})
			}
		})
	}
}

// Each case through the local fallback alone: its fallback expectation where it
// has one (the fallback reads fewer signals than the sidecar), else the
// sidecar's; a failure as its tool's first in a row, at both ends of the jitter.
func TestSharedVectorsThroughTheFallback(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	for _, vc := range loadVectors(t) {
		t.Run(vc.Name, func(t *testing.T) {
			o := vc.outcome(t)
			expect, why := vc.Expect, ""
			if vc.Fallback != nil {
				expect, why = vc.Fallback.vectorExpect, vc.Fallback.Why
			}
			consecutive := 1
			if o.GetOk() {
				consecutive = 0
			}
			for _, random := range []float64{0, 0.999999} {
				v := &Verdict{Verdict: DefaultFallbackPolicy().decide(o, fallbackInput{consecutive: consecutive, now: at, random: random}),
					Fallback: true}
				got := fmt.Sprintf("%s, %s, retryable %v", actionName(v.Action), categoryName(v.Category()), v.Retryable())
				want := fmt.Sprintf("%s, %s, retryable %v", expect.Action, expect.Category, expect.Retryable)
				if got != want {
					t.Errorf("random %v: %s, want %s (rule %s; source: %s; why: %q)",
						random, got, want, v.GetClassification().GetRule(), vc.Source, why)
				}
				lo, hi := uint64(0), uint64(0)
				if expect.DelayMsMin != nil {
					lo = *expect.DelayMsMin
				}
				if expect.DelayMsMax != nil {
					hi = *expect.DelayMsMax
				}
				if d := v.GetRetry().GetDelayMs(); d < lo || d > hi {
					t.Errorf("random %v: delay_ms = %d, want it in [%d, %d] (rule %s)", random, d, lo, hi,
						v.GetClassification().GetRule())
				}
			}
		})
	}
}

func checkVector(t *testing.T, vc vectorCase, v *Verdict) {
	t.Helper()
	if v.Fallback {
		t.Fatalf("the local fallback answered, not the sidecar (source: %s)", vc.Source)
	}
	if got := actionName(v.Action); got != vc.Expect.Action {
		t.Errorf("action = %s, want %s (rule %s)", got, vc.Expect.Action, v.GetClassification().GetRule())
	}
	if got := categoryName(v.Category()); got != vc.Expect.Category {
		t.Errorf("category = %s, want %s (rule %s)", got, vc.Expect.Category, v.GetClassification().GetRule())
	}
	if v.Retryable() != vc.Expect.Retryable {
		t.Errorf("retryable = %v, want %v", v.Retryable(), vc.Expect.Retryable)
	}
	delay := v.GetRetry().GetDelayMs()
	if vc.Expect.DelayMsMin != nil && delay < *vc.Expect.DelayMsMin {
		t.Errorf("delay_ms = %d, want at least %d", delay, *vc.Expect.DelayMsMin)
	}
	if vc.Expect.DelayMsMax != nil && delay > *vc.Expect.DelayMsMax {
		t.Errorf("delay_ms = %d, want at most %d", delay, *vc.Expect.DelayMsMax)
	}
}
