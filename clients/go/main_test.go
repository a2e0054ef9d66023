package rebound

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebound-dev/rebound/clients/go/internal/sidecar"
)

// The sidecar every integration test talks to, started once by TestMain.
var (
	sidecarBin  string
	sidecarAddr string
)

func TestMain(m *testing.M) {
	bin, err := sidecar.Bin()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p, err := sidecar.Start(bin, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin, sidecarAddr = bin, p.GRPC
	code := m.Run()
	if err := p.Stop(); err != nil {
		// The sidecar's own tests own its exit status; here it only must not hide the client's result.
		fmt.Fprintf(os.Stderr, "warning: stopping the sidecar: %v\n", err)
	}
	os.Exit(code)
}

// liveTimeout is the call deadline for tests that expect the sidecar's own answer:
// generous, because CI machines are shared and a debug sidecar under load can take
// longer than the 250 ms production default (the fail-open tests set their own).
const liveTimeout = 3 * time.Second

// dial connects to the shared sidecar and closes the client when the test ends.
func dial(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(context.Background(), sidecarAddr, append([]Option{WithCallTimeout(liveTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionID is unique per test and call, so that no two tests share sidecar state.
func sessionID(t *testing.T, suffix string) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("go-%s-%s-%d", name, suffix, time.Now().UnixNano())
}

// logBuffer collects a client's log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), substr)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
