// Command chaosload is the Go client under chaos: it reports tool outcomes
// through one client for a fixed time, whatever happens to the sidecar, and
// prints what it saw as JSON lines for tests/chaos/run to judge (the same
// fields as the Python and TypeScript drivers).
//
//	go run ./chaosload -addr 127.0.0.1:50051 -seconds 12
//
// Every second: {"t":..,"calls":..,"fallbacks":..,"sidecar":..,"errors":..}
// (sidecar: verdicts that came from the sidecar in that second). At the end:
// {"event":"done",...} with the totals and the client's own fallback counter.
// The client's warnings go to stderr, apart from this JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	rebound "github.com/rebound-dev/rebound/clients/go"
)

// callTimeout is short: a dead sidecar must not slow the agent much.
const callTimeout = 100 * time.Millisecond

// callsPerSession starts a new session every so many calls, as agent runs come and go.
const callsPerSession = 50

// tick counts what happened in one second, or in the whole run.
type tick struct {
	T         int    `json:"t"`
	Calls     uint64 `json:"calls"`
	Fallbacks uint64 `json:"fallbacks"`
	Sidecar   uint64 `json:"sidecar"`
	Errors    uint64 `json:"errors"`
}

func (t *tick) add(o tick) {
	t.Calls += o.Calls
	t.Fallbacks += o.Fallbacks
	t.Sidecar += o.Sidecar
	t.Errors += o.Errors
}

// done is the last line: the totals and the client's own fallback counter.
type done struct {
	tick
	Event                 string `json:"event"`
	ClientFallbackCounter uint64 `json:"client_fallback_counter"`
}

func main() {
	addr := flag.String("addr", "", "the sidecar: host:port or unix:/path")
	seconds := flag.Int("seconds", 12, "how long to run (1 to 600)")
	flag.Parse()
	if *addr == "" || *seconds < 1 || *seconds > 600 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "chaosload: -addr is required and -seconds must be 1 to 600")
		os.Exit(2)
	}
	if err := run(*addr, time.Duration(*seconds)*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "chaosload:", err)
		os.Exit(1)
	}
}

func run(addr string, length time.Duration) error {
	ctx := context.Background()
	client, err := rebound.Dial(ctx, addr, rebound.WithCallTimeout(callTimeout))
	if err != nil {
		return err
	}
	defer client.Close()
	out := json.NewEncoder(os.Stdout)
	// Every fourth call fails as an HTTP 503 would.
	failing := &rebound.HTTPError{StatusCode: 503, Body: "Service Unavailable"}

	var total, second tick
	start := time.Now()
	next := start.Add(time.Second)
	var session *rebound.Session
	for i := 0; time.Since(start) < length; i++ {
		if i%callsPerSession == 0 {
			if session, err = client.Session(fmt.Sprintf("chaos-go-%d-%d", os.Getpid(), i/callsPerSession)); err != nil {
				return err
			}
		}
		var toolErr error
		if i%4 == 3 {
			toolErr = failing
		}
		second.Calls++
		// Report returns an error only for bad input: count it, the point of the driver.
		switch v, err := session.Report(ctx, "search", toolErr); {
		case err != nil:
			second.Errors++
			fmt.Fprintln(os.Stderr, "chaosload: report failed:", err)
		case v.Fallback:
			second.Fallbacks++
		default:
			second.Sidecar++
		}
		if now := time.Now(); !now.Before(next) {
			second.T = int(now.Sub(start) / time.Second)
			if err := out.Encode(second); err != nil {
				return err
			}
			total.add(second)
			second = tick{}
			next = next.Add(time.Second)
		}
		time.Sleep(2 * time.Millisecond)
	}
	total.add(second)
	total.T = int(time.Since(start) / time.Second)
	return out.Encode(done{tick: total, Event: "done", ClientFallbackCounter: client.Fallbacks()})
}
