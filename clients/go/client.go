package rebound

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// DefaultAddress is where the sidecar listens unless told otherwise: Dial uses
// it for "" when $REBOUND_ADDR is unset or empty.
const DefaultAddress = "127.0.0.1:50051"

// DefaultCallTimeout is the deadline of each call to the sidecar: past it, the
// local fallback policy decides so that the agent is never held up.
const DefaultCallTimeout = 250 * time.Millisecond

// DefaultMaxAttempts bounds the calls Session.Do makes for one tool call, a
// guard against a policy that would retry for ever.
const DefaultMaxAttempts = 10

// reconnectBackoff is tighter than gRPC's default (up to 120 s between tries)
// because the sidecar is local: when it comes back, the agent should use it
// within a couple of seconds.
var reconnectBackoff = backoff.Config{
	BaseDelay:  100 * time.Millisecond,
	Multiplier: 1.6,
	Jitter:     0.2,
	MaxDelay:   2 * time.Second,
}

// Client is a connection to one Rebound sidecar. It is safe for concurrent use.
type Client struct {
	addr string
	conn *grpc.ClientConn
	rpc  reboundpb.ReboundClient
	cfg  config

	fallbacks atomic.Uint64
	degraded  atomic.Bool
	warned    atomic.Bool

	stop context.CancelFunc
	done chan struct{}
}

type config struct {
	callTimeout time.Duration
	maxAttempts int
	logger      *slog.Logger
	policy      FallbackPolicy
	dialOptions []grpc.DialOption
	random      func() float64
	now         func() time.Time
}

// Option configures a Client.
type Option func(*config) error

// WithCallTimeout sets the deadline of each call to the sidecar (default 250 ms).
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: call timeout %s: must be positive", ErrInvalidInput, d)
		}
		c.callTimeout = d
		return nil
	}
}

// WithMaxAttempts bounds the calls Session.Do makes for one tool call (default 10).
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max attempts %d: must be at least 1", ErrInvalidInput, n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithLogger sets where the client logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: logger is nil", ErrInvalidInput)
		}
		c.logger = l
		return nil
	}
}

// WithFallbackPolicy replaces the local policy used when the sidecar does not answer.
func WithFallbackPolicy(p FallbackPolicy) Option {
	return func(c *config) error {
		if err := p.Validate(); err != nil {
			return err
		}
		c.policy = p
		return nil
	}
}

// WithGRPCDialOptions adds gRPC dial options, applied after the client's own
// (plaintext transport, reconnect backoff), so they can replace them.
func WithGRPCDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) error {
		c.dialOptions = append(c.dialOptions, opts...)
		return nil
	}
}

// Dial connects to the sidecar at addr: "host:port" or "unix:/path/to.sock";
// "" means $REBOUND_ADDR (what the deploy manifests set the agent's container),
// else DefaultAddress.
//
// Dial does not wait for the sidecar: it may start later or be down, and the
// client falls back locally until it answers. The connection is plaintext,
// meant for a sidecar on loopback or a Unix socket in the same pod.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if addr == "" {
		addr = strings.TrimSpace(os.Getenv("REBOUND_ADDR"))
	}
	if addr == "" {
		addr = DefaultAddress
	}
	target, err := grpcTarget(addr)
	if err != nil {
		return nil, err
	}
	cfg := config{
		callTimeout: DefaultCallTimeout,
		maxAttempts: DefaultMaxAttempts,
		logger:      slog.Default(),
		policy:      DefaultFallbackPolicy(),
		random:      rand.Float64,
		now:         time.Now,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidInput)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	dialOptions := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: time.Second}),
		// A sidecar connection is never worth closing for idleness: the next
		// report would pay for a new handshake.
		grpc.WithIdleTimeout(0),
	}, cfg.dialOptions...)
	conn, err := grpc.NewClient(target, dialOptions...)
	if err != nil {
		return nil, fmt.Errorf("rebound: dial %s: %w", addr, err)
	}
	loopCtx, stop := context.WithCancel(context.Background())
	c := &Client{
		addr: addr,
		conn: conn,
		rpc:  reboundpb.NewReboundClient(conn),
		cfg:  cfg,
		stop: stop,
		done: make(chan struct{}),
	}
	go c.keepConnected(loopCtx)
	return c, nil
}

// grpcTarget checks addr and turns it into a gRPC target.
func grpcTarget(addr string) (string, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if strings.TrimLeft(path, "/") == "" {
			return "", fmt.Errorf("%w: address %q: a Unix socket needs a path (unix:/path/to.sock)", ErrInvalidInput, addr)
		}
		// gRPC's unix resolver reads "unix:/abs" and "unix:rel" as they are.
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: address %q: want host:port or unix:/path: %v", ErrInvalidInput, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: address %q: port %q is not 1 to 65535", ErrInvalidInput, addr, port)
	}
	if host == "" {
		return "", fmt.Errorf("%w: address %q: the host is missing", ErrInvalidInput, addr)
	}
	// passthrough: the sidecar is local, so DNS resolution (the default) would only add latency.
	return "passthrough:///" + addr, nil
}

// keepConnected makes the connection reconnect on its own whenever it drops,
// instead of waiting for the next call, so that the sidecar is used again as
// soon as it is back.
func (c *Client) keepConnected(ctx context.Context) {
	defer close(c.done)
	for {
		state := c.conn.GetState()
		switch state {
		case connectivity.Idle:
			c.conn.Connect()
		case connectivity.Shutdown:
			return
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}

// Close closes the connection; sessions of this client must not be used afterwards.
func (c *Client) Close() error {
	c.stop()
	err := c.conn.Close()
	<-c.done
	return err
}

// Fallbacks is how many decisions the local fallback policy has made because
// the sidecar did not answer in time.
func (c *Client) Fallbacks() uint64 { return c.fallbacks.Load() }

// Address is the sidecar address the client dialed.
func (c *Client) Address() string { return c.addr }

// Session returns the session named id (one agent run). Options declare the
// session to the sidecar (StartSession) before its first report.
func (c *Client) Session(id string, opts ...SessionOption) (*Session, error) {
	if err := checkID("session id", id); err != nil {
		return nil, err
	}
	req := &reboundpb.StartSessionRequest{SessionId: id}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil SessionOption", ErrInvalidInput)
		}
		if err := opt(req); err != nil {
			return nil, err
		}
	}
	if len(opts) == 0 {
		// Nothing to declare: the sidecar creates the session on first use.
		req = nil
	}
	return newSession(c, id, req), nil
}

// rpcContext bounds one call to the sidecar. It is detached from ctx's
// cancellation on purpose: the outcome of a cancelled tool call is still worth
// reporting, and the call timeout keeps it short.
func (c *Client) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.callTimeout)
}

// failed sorts an RPC error: a bad argument is the caller's to fix and is
// returned; anything else (unreachable, too slow, a sidecar fault) is logged
// and left to the fallback, which the caller learns from a nil return.
func (c *Client) failed(op string, err error) error {
	if status.Code(err) == codes.InvalidArgument {
		return fmt.Errorf("%w: %s: %s", ErrInvalidInput, op, status.Convert(err).Message())
	}
	if !c.degraded.Swap(true) {
		attrs := []any{"op", op, "error", err, "timeout", c.cfg.callTimeout}
		// Warn once per client: an agent reporting hundreds of calls must not flood its log.
		if !c.warned.Swap(true) {
			c.cfg.logger.Warn("rebound: sidecar unreachable; using the local fallback policy and reconnecting in the background", attrs...)
		} else {
			c.cfg.logger.Debug("rebound: sidecar unreachable again; using the local fallback policy", attrs...)
		}
	}
	return nil
}

// answered notes that the sidecar answered, ending a fallback period.
func (c *Client) answered() {
	if c.degraded.Load() && c.degraded.Swap(false) {
		c.cfg.logger.Info("rebound: sidecar reachable again")
	}
}

// checkID applies the sidecar's rule for ids and names, so that a bad one
// fails here with a clear message rather than as a remote error.
func checkID(what, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%w: %s %q: must not be empty", ErrInvalidInput, what, s)
	case len(s) > maxIDBytes:
		return fmt.Errorf("%w: %s %.40q…: at most %d bytes", ErrInvalidInput, what, s, maxIDBytes)
	case strings.ContainsFunc(s, isControl):
		return fmt.Errorf("%w: %s %q: must not contain control characters", ErrInvalidInput, what, s)
	case !utf8Valid(s):
		return fmt.Errorf("%w: %s %q: must be valid UTF-8", ErrInvalidInput, what, s)
	}
	return nil
}

// maxIDBytes is the sidecar's limit on session ids, tool names and call ids.
const maxIDBytes = 256
