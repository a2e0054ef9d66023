package rebound

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// Reporter streams one session's outcomes over a single Observe stream, for
// agents that report at high rates: no per-call RPC setup, and any number of
// outcomes in flight at once, from one goroutine (Send, then Wait later) or
// many (Report). The sidecar answers in order, one verdict per outcome.
//
// It fails open like the rest of the client: an outcome whose verdict does
// not arrive within the call timeout, or whose stream breaks, is answered by
// the local fallback policy, and the next Send opens a new stream. A Reporter
// is safe for concurrent use; Close it when done.
type Reporter struct {
	s   *Session
	ctx context.Context // bounds every stream the reporter opens

	mu      sync.Mutex // orders sends with the queue of pending verdicts
	current *observeStream
	closed  bool
	loops   sync.WaitGroup
}

// observeStream is one Observe stream and the outcomes sent on it that await
// their verdicts, oldest first.
type observeStream struct {
	rpc     grpc.BidiStreamingClient[reboundpb.Outcome, reboundpb.Verdict]
	cancel  context.CancelFunc
	pending []*Pending
	// ended is set once the stream is given up, by error, timeout or Close.
	ended bool
}

// Pending is an outcome sent on a Reporter whose verdict may not have arrived yet.
type Pending struct {
	r       *Reporter
	stream  *observeStream // nil when the fallback answered at once
	outcome *reboundpb.Outcome
	// counters are the session's after the outcome, for the fallback to answer it with.
	counters fallbackInput
	sent     time.Time

	once    sync.Once
	done    chan struct{}
	verdict *Verdict
	err     error
}

// Reporter opens a streaming reporter for the session. ctx bounds its life:
// once ctx is done, its streams are closed and outcomes answered locally.
func (s *Session) Reporter(ctx context.Context) (*Reporter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Reporter{s: s, ctx: ctx}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Opening now moves the setup out of the first Send; failing to is not an error (fail-open).
	if _, err := r.streamLocked(); err != nil {
		return nil, err
	}
	return r, nil
}

// Report sends the outcome of one call of tool (built as Session.Report does)
// and waits for its verdict.
func (r *Reporter) Report(ctx context.Context, tool string, err error, opts ...ReportOption) (*Verdict, error) {
	p, serr := r.Send(tool, err, opts...)
	if serr != nil {
		return nil, serr
	}
	return p.Wait(ctx)
}

// Send sends the outcome of one call of tool without waiting for its verdict.
func (r *Reporter) Send(tool string, err error, opts ...ReportOption) (*Pending, error) {
	o, berr := OutcomeFromError(tool, err, opts...)
	if berr != nil {
		return nil, berr
	}
	return r.send(o)
}

// SendOutcome sends an outcome built by hand (see Session.ReportOutcome) without
// waiting for its verdict; o is left as it is.
func (r *Reporter) SendOutcome(o *reboundpb.Outcome) (*Pending, error) {
	return r.send(cloneOutcome(o))
}

// send sends an outcome the client may change.
func (r *Reporter) send(o *reboundpb.Outcome) (*Pending, error) {
	counters, err := r.s.prepare(o)
	if err != nil {
		return nil, err
	}
	p := &Pending{r: r, outcome: o, counters: counters, sent: time.Now(), done: make(chan struct{})}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("rebound: Send on a closed Reporter")
	}
	st, err := r.streamLocked()
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if st == nil {
		r.mu.Unlock()
		p.answerLocally()
		return p, nil
	}
	// A sidecar that stops reading would block Send on flow control for ever;
	// past the call timeout the stream is torn down, which unblocks it.
	guard := time.AfterFunc(r.s.c.cfg.callTimeout, st.cancel)
	sendErr := st.rpc.Send(o)
	guard.Stop()
	if sendErr != nil {
		r.mu.Unlock()
		// Send only says io.EOF; the stream's real error reaches the receive loop.
		r.end(st, sendErr)
		_ = r.s.c.failed("Observe", sendErr)
		p.answerLocally()
		return p, nil
	}
	p.stream = st
	st.pending = append(st.pending, p)
	r.mu.Unlock()
	return p, nil
}

// Wait returns the outcome's verdict: the sidecar's, or the fallback's once
// the call timeout has passed since Send. It returns early with ctx's error.
func (p *Pending) Wait(ctx context.Context) (*Verdict, error) {
	select {
	case <-p.done:
		return p.verdict, p.err
	default:
	}
	timer := time.NewTimer(max(p.r.s.c.cfg.callTimeout-time.Since(p.sent), 0))
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		// The sidecar is too slow: give up on this stream so that the outcomes
		// queued behind this one are answered locally too, not one timeout each.
		p.r.end(p.stream, context.DeadlineExceeded)
		p.answerLocally()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-p.done
	return p.verdict, p.err
}

// Close ends the stream after the verdicts already sent for have arrived (or
// timed out), and waits for it to finish.
func (r *Reporter) Close() error {
	r.mu.Lock()
	r.closed = true
	st := r.current
	r.current = nil
	r.mu.Unlock()
	if st != nil {
		if err := st.rpc.CloseSend(); err != nil {
			r.end(st, err)
		}
		// The receive loop ends when the sidecar closes its side; bound the wait.
		guard := time.AfterFunc(r.s.c.cfg.callTimeout, st.cancel)
		defer guard.Stop()
	}
	r.loops.Wait()
	return nil
}

// streamLocked returns the open stream, opening one if there is none, once
// the session is declared; nil (and no error) means the sidecar did not
// answer. r.mu must be held.
func (r *Reporter) streamLocked() (*observeStream, error) {
	live := r.current != nil && !r.current.ended
	if !live {
		r.current = nil
		if err := r.ctx.Err(); err != nil {
			return nil, nil
		}
	}
	// On a live stream too: the sidecar may have evicted the session since the stream opened.
	ok, err := r.s.ensureDeclared(r.ctx)
	if err != nil || !ok {
		return nil, err
	}
	if live {
		return r.current, nil
	}
	ctx, cancel := context.WithCancel(r.ctx)
	// Opening waits while the connection is being made; the call timeout bounds that.
	guard := time.AfterFunc(r.s.c.cfg.callTimeout, cancel)
	rpc, err := r.s.c.rpc.Observe(ctx)
	if !guard.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return nil, r.s.c.failed("Observe", err)
	}
	st := &observeStream{rpc: rpc, cancel: cancel}
	r.current = st
	r.loops.Add(1)
	go r.receive(st)
	return st, nil
}

// receive hands each verdict to the oldest pending outcome of its stream.
func (r *Reporter) receive(st *observeStream) {
	defer r.loops.Done()
	for {
		pv, err := st.rpc.Recv()
		if err != nil {
			r.end(st, err)
			return
		}
		r.mu.Lock()
		if len(st.pending) == 0 {
			r.mu.Unlock()
			r.end(st, errors.New("rebound: the sidecar sent a verdict for no outcome"))
			return
		}
		p := st.pending[0]
		st.pending = st.pending[1:]
		r.mu.Unlock()
		r.s.c.answered()
		r.s.declared.verdict(pv)
		if p.resolve(&Verdict{Verdict: pv}, nil) {
			r.s.local.record(p.outcome, pv)
		}
	}
}

// end gives a stream up and answers its pending outcomes locally (or with the
// error, when the sidecar rejected an argument).
func (r *Reporter) end(st *observeStream, cause error) {
	if st == nil {
		return
	}
	r.mu.Lock()
	if st.ended && len(st.pending) == 0 {
		r.mu.Unlock()
		return
	}
	st.ended = true
	if r.current == st {
		r.current = nil
	}
	pending := st.pending
	st.pending = nil
	r.mu.Unlock()
	st.cancel()

	if len(pending) == 0 {
		// Nothing was lost (a clean end after Close, or a break between outcomes);
		// the next Send finds out whether the sidecar is still there.
		return
	}
	if err := r.s.c.failed("Observe", cause); err != nil {
		for _, p := range pending {
			p.resolve(nil, fmt.Errorf("%w (the stream ended with it)", err))
		}
		return
	}
	for _, p := range pending {
		p.answerLocally()
	}
}

// answerLocally resolves the outcome with the fallback policy, unless it already has its verdict.
func (p *Pending) answerLocally() {
	p.once.Do(func() {
		p.verdict = p.r.s.fallback(p.outcome, p.counters)
		close(p.done)
	})
}

// resolve sets the outcome's answer once; it reports whether this call did.
func (p *Pending) resolve(v *Verdict, err error) bool {
	won := false
	p.once.Do(func() {
		p.verdict, p.err, won = v, err, true
		close(p.done)
	})
	return won
}
