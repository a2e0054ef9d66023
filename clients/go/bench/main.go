// Command bench prints the Go client's report round-trip latency, p50 and
// p99, over loopback TCP and over a Unix socket, for unary Report and for the
// streaming Reporter. It starts its own sidecars ($REBOUND_BIN, or the
// repository's target/debug/rebound) unless given running ones.
//
//	go run ./bench -n 5000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	rebound "github.com/rebound-dev/rebound/clients/go"
	"github.com/rebound-dev/rebound/clients/go/internal/sidecar"
)

// maxCount bounds a run: the benchmark must stop by itself in reasonable time.
const maxCount = 100_000

func main() {
	n := flag.Int("n", 2000, fmt.Sprintf("reports measured per transport and mode (1 to %d)", maxCount))
	warmup := flag.Int("warmup", 200, "reports sent first and not measured")
	tcpAddr := flag.String("tcp", "", "a running sidecar's host:port (default: start one on 127.0.0.1:0)")
	unixAddr := flag.String("unix", "", "a running sidecar's unix:/path (default: start one on a temporary socket)")
	flag.Parse()
	if *n < 1 || *n > maxCount || *warmup < 0 || *warmup > maxCount {
		fmt.Fprintf(os.Stderr, "bench: -n must be 1 to %d and -warmup 0 to %d\n", maxCount, maxCount)
		os.Exit(2)
	}
	if err := run(*n, *warmup, *tcpAddr, *unixAddr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, warmup int, tcpAddr, unixAddr string) error {
	dir, err := os.MkdirTemp("", "rb-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	targets := []struct{ transport, addr, listen string }{
		{"tcp", tcpAddr, "127.0.0.1:0"},
		{"unix", unixAddr, "unix:" + filepath.Join(dir, "rebound.sock")},
	}
	fmt.Printf("%-6s %-8s %7s %10s %10s %10s\n", "via", "mode", "n", "p50", "p99", "mean")
	for _, tg := range targets {
		addr := tg.addr
		if addr == "" {
			stop, started, err := start(tg.listen)
			if err != nil {
				return err
			}
			defer stop()
			addr = started
		}
		for _, mode := range []string{"unary", "stream"} {
			lat, err := measure(addr, mode, n, warmup)
			if err != nil {
				return fmt.Errorf("%s %s: %w", tg.transport, mode, err)
			}
			fmt.Printf("%-6s %-8s %7d %10s %10s %10s\n", tg.transport, mode, n,
				pct(lat, 0.50), pct(lat, 0.99), mean(lat))
		}
	}
	return nil
}

func start(listen string) (func(), string, error) {
	bin, err := sidecar.Bin()
	if err != nil {
		return nil, "", err
	}
	p, err := sidecar.Start(bin, listen)
	if err != nil {
		return nil, "", err
	}
	return func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}, p.GRPC, nil
}

// measure times n successful reports, each a full round trip (sent, answered).
func measure(addr, mode string, n, warmup int) ([]time.Duration, error) {
	ctx := context.Background()
	// A generous call timeout: a slow answer must be measured, not replaced by the fallback.
	c, err := rebound.Dial(ctx, addr, rebound.WithCallTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s, err := c.Session(fmt.Sprintf("bench-%s-%d", mode, time.Now().UnixNano()))
	if err != nil {
		return nil, err
	}
	report := func() (*rebound.Verdict, error) { return s.Report(ctx, "bench", nil) }
	if mode == "stream" {
		r, err := s.Reporter(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		report = func() (*rebound.Verdict, error) { return r.Report(ctx, "bench", nil) }
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < warmup+n; i++ {
		start := time.Now()
		v, err := report()
		elapsed := time.Since(start)
		if err != nil {
			return nil, err
		}
		if v.Fallback {
			return nil, errors.New("the local fallback answered: the sidecar is not reachable")
		}
		if i >= warmup {
			lat = append(lat, elapsed)
		}
	}
	if _, err := s.End(ctx); err != nil {
		return nil, err
	}
	return lat, nil
}

func pct(lat []time.Duration, p float64) time.Duration {
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)].Round(time.Microsecond)
}

func mean(lat []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return (sum / time.Duration(len(lat))).Round(time.Microsecond)
}
