package rebound

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// Session is one agent run on one client. It is safe for concurrent use.
type Session struct {
	c  *Client
	id string
	// declare is sent as StartSession before the first report; nil when there is nothing to declare.
	declare *reboundpb.StartSessionRequest
	// declared says whether the sidecar holds declare.
	declared declaration

	callPrefix string
	calls      atomic.Uint64
	local      *localState
}

// declaration tracks whether the sidecar holds a session's declaration. The
// sidecar can lose a session without telling: it restarts (the client falls
// back meanwhile) or evicts it (idle expiry, capacity) and creates it afresh,
// undeclared, on the next report. Either way the declaration is sent again.
type declaration struct {
	mu sync.Mutex
	// epoch counts the times the sidecar may have lost the session. A
	// declaration counts only in the epoch it was sent in: a StartSession the
	// sidecar accepted before it lost the session can be answered after the
	// client noticed the loss, and must not count then.
	epoch uint64
	// held says the declaration need not be sent in this epoch: the sidecar
	// accepted it, or refused it as bad input after accepting it before.
	held bool
	// welcomed says the sidecar accepted the declaration in some epoch.
	welcomed bool
	// heard says a verdict from the sidecar (not the fallback) has arrived in
	// this epoch; a session's first step counts as a loss only then.
	heard bool
}

// needed reports whether the declaration must be sent (again).
func (d *declaration) needed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.held
}

// sending returns the epoch of a declaration about to be sent.
func (d *declaration) sending() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch
}

// accepted notes that the sidecar accepted the declaration sent in epoch.
func (d *declaration) accepted(epoch uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.welcomed = true
	if epoch == d.epoch {
		d.held = true
	}
}

// refused notes that the sidecar refused the declaration sent in epoch as bad
// input. again says it accepted the declaration before, so the refusal comes
// from a change on its side (a config reload that removed a profile) and the
// session goes on undeclared; first says this call is the first to note the
// refusal in epoch, the one to log it.
func (d *declaration) refused(epoch uint64) (again, first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.welcomed {
		return false, false
	}
	if epoch != d.epoch || d.held {
		return true, false
	}
	d.held = true
	return true, true
}

// lost notes that the sidecar may have forgotten the session.
func (d *declaration) lost() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forget()
}

// forget starts a new epoch, in which the declaration must be sent again and
// the first verdict (the declared session's first step, if the sidecar did
// lose it) is no further loss. d.mu must be held.
func (d *declaration) forget() {
	d.epoch++
	d.held = false
	d.heard = false
}

// verdict notes a verdict from the sidecar. Its first step, when the session
// had a sidecar verdict before, means the sidecar started the session anew;
// a replayed verdict (a repeated call id) is an old answer and says nothing.
// Verdicts that arrive out of order can look like that too; the cost is one
// more (idempotent) StartSession.
func (d *declaration) verdict(pv *reboundpb.Verdict) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.heard && pv.GetBreaker().GetSteps() == 1 && !pv.GetReplayed() {
		d.forget()
		return
	}
	d.heard = true
}

// SessionOption declares something about a session to the sidecar.
type SessionOption func(*reboundpb.StartSessionRequest) error

// WithTools names the tools the agent has, so that an unknown tool's verdict can suggest the nearest.
func WithTools(names ...string) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if len(r.Tools)+len(names) > maxTools {
			return fmt.Errorf("%w: %d tools: at most %d", ErrInvalidInput, len(r.Tools)+len(names), maxTools)
		}
		for _, n := range names {
			if err := checkID("tool", n); err != nil {
				return err
			}
		}
		r.Tools = append(r.Tools, names...)
		return nil
	}
}

// WithStepLimit caps the outcomes the session may report; 0 keeps the sidecar's default.
func WithStepLimit(n int) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if n < 0 || uint64(n) > math.MaxUint32 {
			return fmt.Errorf("%w: step limit %d: must be 0 to %d", ErrInvalidInput, n, uint32(math.MaxUint32))
		}
		r.StepLimit = uint32(n)
		return nil
	}
}

// WithCostLimit caps the cost the session may report; 0 keeps the sidecar's default.
func WithCostLimit(cost float64) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if err := checkCost("cost limit", cost); err != nil {
			return err
		}
		r.CostLimit = cost
		return nil
	}
}

// WithErrorLimit sets how many errors escalate the session; 0 keeps the sidecar's default.
func WithErrorLimit(n int) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if n < 0 || uint64(n) > math.MaxUint32 {
			return fmt.Errorf("%w: error limit %d: must be 0 to %d", ErrInvalidInput, n, uint32(math.MaxUint32))
		}
		r.ErrorLimit = uint32(n)
		return nil
	}
}

// WithProfile selects a named policy profile from the sidecar's config.
func WithProfile(name string) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if err := checkID("profile", name); err != nil {
			return err
		}
		r.Profile = name
		return nil
	}
}

// WithLabels attaches free labels to the session (merged with earlier ones).
func WithLabels(labels map[string]string) SessionOption {
	return func(r *reboundpb.StartSessionRequest) error {
		if r.Labels == nil {
			r.Labels = make(map[string]string, len(labels))
		}
		for k, v := range labels {
			if err := checkID("label key", k); err != nil {
				return err
			}
			if len(v) > maxLabelValueBytes || !utf8Valid(v) {
				return fmt.Errorf("%w: label %q: the value must be valid UTF-8 of at most %d bytes", ErrInvalidInput, k, maxLabelValueBytes)
			}
			r.Labels[k] = v
		}
		if len(r.Labels) > maxLabels {
			return fmt.Errorf("%w: %d labels: at most %d", ErrInvalidInput, len(r.Labels), maxLabels)
		}
		return nil
	}
}

// The sidecar's limits on a session declaration.
const (
	maxTools           = 1000
	maxLabels          = 64
	maxLabelValueBytes = 1024
)

func newSession(c *Client, id string, declare *reboundpb.StartSessionRequest) *Session {
	var b [6]byte
	// Call ids only need to be unique within the session; a random prefix keeps two
	// processes that reuse a session id apart.
	_, _ = rand.Read(b[:])
	return &Session{
		c:          c,
		id:         id,
		declare:    declare,
		callPrefix: hex.EncodeToString(b[:]),
		local:      newLocalState(c.cfg.now(), declaredLimits(declare), declare.GetLabels()),
	}
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Start declares the session to the sidecar now (StartSession; idempotent)
// and returns the limits in force. Without it, the declaration goes with the
// first report. When the sidecar does not answer, Start returns a nil
// response and no error: the declaration is sent again later.
func (s *Session) Start(ctx context.Context) (*reboundpb.StartSessionResponse, error) {
	resp, _, err := s.start(ctx)
	if err != nil {
		return nil, s.c.failed("StartSession", err)
	}
	return resp, nil
}

// start sends the declaration; it returns the epoch it was sent in and the
// RPC's error as it came.
func (s *Session) start(ctx context.Context) (*reboundpb.StartSessionResponse, uint64, error) {
	req := s.declare
	if req == nil {
		req = &reboundpb.StartSessionRequest{SessionId: s.id}
	}
	epoch := s.declared.sending()
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := s.c.rpc.StartSession(rctx, req)
	if err != nil {
		return nil, epoch, err
	}
	s.c.answered()
	s.declared.accepted(epoch)
	return resp, epoch, nil
}

// Report reports the outcome of one call of tool (a failure when err is not
// nil) and returns the verdict. The outcome is built from err (see
// OutcomeFromError) and then from opts. Report returns an error only for bad
// input; when the sidecar does not answer in time, the local fallback policy
// decides and the verdict says so (Verdict.Fallback).
func (s *Session) Report(ctx context.Context, tool string, err error, opts ...ReportOption) (*Verdict, error) {
	o, berr := OutcomeFromError(tool, err, opts...)
	if berr != nil {
		return nil, berr
	}
	return s.report(ctx, o, false)
}

// ReportOutcome reports an outcome built by hand, for failures that are no Go
// error (the LLM made no tool call, or named an unknown tool). o is left as it
// is, so that it can be reported again as a new call: the session id and, when
// o has none, a call id (the verdict's CallId) go into a copy.
func (s *Session) ReportOutcome(ctx context.Context, o *reboundpb.Outcome) (*Verdict, error) {
	return s.report(ctx, cloneOutcome(o), false)
}

// cloneOutcome is a deep copy of an outcome built by hand, which the client
// must not change: filling a call id into the caller's outcome would make
// each later report of it a replay of the first (nil stays nil).
func cloneOutcome(o *reboundpb.Outcome) *reboundpb.Outcome {
	if o == nil {
		return nil
	}
	return proto.Clone(o).(*reboundpb.Outcome)
}

// report reports an outcome the client may change. silent says the sidecar
// has just failed to answer the session's declaration: the fallback answers.
func (s *Session) report(ctx context.Context, o *reboundpb.Outcome, silent bool) (*Verdict, error) {
	counters, err := s.prepare(o)
	if err != nil {
		return nil, err
	}
	if silent {
		return s.fallback(o, counters), nil
	}
	if ok, err := s.ensureDeclared(ctx); err != nil {
		return nil, err
	} else if !ok {
		// The sidecar just failed to answer: do not make the agent wait a second deadline.
		return s.fallback(o, counters), nil
	}
	rctx, cancel := s.c.rpcContext(ctx)
	pv, err := s.c.rpc.Report(rctx, o)
	cancel()
	if err != nil {
		if err := s.c.failed("Report", err); err != nil {
			return nil, err
		}
		return s.fallback(o, counters), nil
	}
	s.c.answered()
	s.declared.verdict(pv)
	s.local.record(o, pv)
	return &Verdict{Verdict: pv}, nil
}

// prepare checks an outcome, fills in the session and call ids, and counts it
// locally; it returns the session's counters after it.
func (s *Session) prepare(o *reboundpb.Outcome) (fallbackInput, error) {
	if o == nil {
		return fallbackInput{}, fmt.Errorf("%w: nil outcome", ErrInvalidInput)
	}
	if o.SessionId != "" && o.SessionId != s.id {
		return fallbackInput{}, fmt.Errorf("%w: outcome for session %q reported to session %q", ErrInvalidInput, o.SessionId, s.id)
	}
	if err := checkOutcome(o); err != nil {
		return fallbackInput{}, err
	}
	o.SessionId = s.id
	if o.CallId == "" {
		o.CallId = s.callPrefix + "-" + strconv.FormatUint(s.calls.Add(1), 10)
	}
	return s.local.observe(o), nil
}

// ensureDeclared sends the session's declaration if the sidecar has not
// accepted it yet; false means the sidecar did not answer.
//
// A declaration the sidecar accepted before and refuses now as bad input is
// no error of the caller's: a config reload removed its profile while the
// session ran, and the sidecar then lost the session. Failing every later
// call would stop the run over it, so the session goes on undeclared (the
// sidecar's default policy applies) and the refusal is logged once.
func (s *Session) ensureDeclared(ctx context.Context) (bool, error) {
	if s.declare == nil || !s.declared.needed() {
		return true, nil
	}
	_, epoch, err := s.start(ctx)
	if err == nil {
		return true, nil
	}
	if status.Code(err) == codes.InvalidArgument {
		if again, first := s.declared.refused(epoch); again {
			s.c.answered()
			if first {
				s.c.cfg.logger.Warn("rebound: the sidecar refused the session's declaration, which it had accepted before; going on without it",
					"session", s.id, "reason", status.Convert(err).Message())
			}
			return true, nil
		}
	}
	return false, s.c.failed("StartSession", err)
}

// fallback answers an outcome with the local policy, given the session's counters after it.
func (s *Session) fallback(o *reboundpb.Outcome, in fallbackInput) *Verdict {
	s.c.fallbacks.Add(1)
	// The sidecar may have restarted and forgotten the session.
	s.declared.lost()
	if pv := s.local.replay(o); pv != nil {
		// A call id reported again gets its first verdict, as from the sidecar.
		return &Verdict{Verdict: pv, Fallback: true}
	}
	in.now, in.random = s.c.cfg.now(), s.c.cfg.random()
	pv := s.c.cfg.policy.decide(o, in)
	s.local.record(o, pv)
	return &Verdict{Verdict: pv, Fallback: true}
}

// Do runs fn as one call of tool and acts on the verdicts: it reports each
// outcome, sleeps and calls fn again while the verdict says retry (returning
// early with ctx's error when ctx is done), and returns nil once a call
// succeeds. Otherwise it returns a *RecoverError (recover, replan,
// reclassify: give its Snippet to the LLM), an *EscalationError or an
// *AbortError, each wrapping fn's error. opts apply to every outcome, but
// WithCallID and WithAttempt are refused (ErrInvalidInput, before fn runs):
// each attempt is a call of its own, which Do numbers and gives its own call id.
// The session is declared before fn first runs, so that a declaration the
// sidecar refuses (WithProfile naming a profile it lacks) returns
// ErrInvalidInput before fn has any effect.
// A call that succeeds can still be stopped (a step or cost limit): the error
// then wraps no tool error (Err is nil). DoResult does the same for a tool
// that returns a result.
func (s *Session) Do(ctx context.Context, tool string, fn func(ctx context.Context) error, opts ...ReportOption) error {
	if fn == nil {
		return fmt.Errorf("%w: Do(%q) with a nil function", ErrInvalidInput, tool)
	}
	return s.do(ctx, tool, fn, nil, opts)
}

// DoResult is Session.Do for a tool that returns a result: it returns the
// result of the call that succeeded. When a verdict stops the run after that
// call succeeded (a step or cost limit), it returns the result together with
// the verdict error, whose Result field holds it too, so that an agent that
// only looks at the error does not lose what the tool did. After a failure
// the result is T's zero value.
func DoResult[T any](ctx context.Context, s *Session, tool string, fn func(ctx context.Context) (T, error), opts ...ReportOption) (T, error) {
	var result T
	if fn == nil {
		return result, fmt.Errorf("%w: DoResult(%q) with a nil function", ErrInvalidInput, tool)
	}
	err := s.do(ctx, tool, func(ctx context.Context) error {
		var err error
		if result, err = fn(ctx); err != nil {
			var zero T
			result = zero
		}
		return err
	}, func() any { return result }, opts)
	return result, err
}

// do is Do; result, when not nil, gives the result of the call that succeeded.
func (s *Session) do(ctx context.Context, tool string, fn func(ctx context.Context) error, result func() any, opts []ReportOption) error {
	if err := checkID("tool", tool); err != nil {
		return err
	}
	if err := checkDoOptions(tool, opts); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A declaration the sidecar refuses must fail before fn acts, not after; a sidecar
	// that does not answer is no reason not to run fn.
	answered, err := s.ensureDeclared(ctx)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		callErr := fn(ctx)
		elapsed := time.Since(start)

		// The caller's options come last so that they can override the duration.
		o, err := OutcomeFromError(tool, callErr, append([]ReportOption{WithAttempt(attempt), WithDuration(elapsed)}, opts...)...)
		if err != nil {
			return errors.Join(err, callErr)
		}
		// Without an answer to the declaration just now, the first report does not wait a second deadline.
		v, err := s.report(ctx, o, attempt == 1 && !answered)
		if err != nil {
			return errors.Join(err, callErr)
		}
		var res any
		if callErr == nil && result != nil {
			res = result()
		}
		switch v.Action {
		case ActionContinue:
			return callErr
		case ActionRetry:
			if callErr == nil {
				return nil
			}
			if attempt >= s.c.cfg.maxAttempts {
				return &RecoverError{Tool: tool, Action: ActionRecover, Snippet: v.Snippet, Verdict: v,
					Err: fmt.Errorf("gave up after %d attempts: %w", attempt, callErr)}
			}
			if err := sleep(ctx, v.Delay()); err != nil {
				return fmt.Errorf("rebound: waiting to retry %q: %w (last error: %w)", tool, err, callErr)
			}
		case ActionEscalate:
			return &EscalationError{Tool: tool, Verdict: v, Err: callErr, Result: res}
		case ActionAbort:
			return &AbortError{Tool: tool, Verdict: v, Err: callErr, Result: res}
		default:
			// Recover, replan, reclassify, and any action newer than this client: back to the LLM.
			return &RecoverError{Tool: tool, Action: v.Action, Snippet: v.Snippet, Verdict: v, Err: callErr, Result: res}
		}
	}
}

// checkDoOptions refuses the options that would set what Do sets for each
// attempt. One call id for all attempts has the sidecar replay the first
// verdict (retry) to every later one, so a failing tool is retried until
// WithMaxAttempts instead of escalating; a fixed attempt number freezes the
// retry count likewise. The options are tried on two scratch outcomes whose
// call ids and attempts differ: an option that sets either changes one of them.
func checkDoOptions(tool string, opts []ReportOption) error {
	for _, o := range []*reboundpb.Outcome{{Tool: tool}, {Tool: tool, CallId: "\x00", Attempt: 1}} {
		callID, attempt := o.CallId, o.Attempt
		for _, opt := range opts {
			if opt == nil {
				return fmt.Errorf("%w: nil ReportOption", ErrInvalidInput)
			}
			if err := opt(o); err != nil {
				return err
			}
		}
		if o.CallId != callID {
			return fmt.Errorf("%w: Do(%q) with WithCallID: Do gives each attempt a call id of its own "+
				"(with one id for all, the sidecar would answer every retry with the first verdict)", ErrInvalidInput, tool)
		}
		if o.Attempt != attempt {
			return fmt.Errorf("%w: Do(%q) with WithAttempt: Do numbers the attempts itself", ErrInvalidInput, tool)
		}
	}
	return nil
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Admit asks whether tool may be called now (its breaker may be open, the
// session stopped). When the sidecar does not answer, the call is allowed.
func (s *Session) Admit(ctx context.Context, tool string) (*reboundpb.AdmitResponse, error) {
	if err := checkID("tool", tool); err != nil {
		return nil, err
	}
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := s.c.rpc.Admit(rctx, &reboundpb.AdmitRequest{SessionId: s.id, Tool: tool})
	if err != nil {
		if err := s.c.failed("Admit", err); err != nil {
			return nil, err
		}
		s.c.fallbacks.Add(1)
		// Fail open, unless a verdict this client saw aborted the session, as the sidecar would say.
		state := s.local.state()
		if state == reboundpb.SessionState_SESSION_STATE_STOPPED {
			return &reboundpb.AdmitResponse{
				Reason:       reboundpb.Reason_REASON_SESSION_STOPPED,
				SessionState: state,
				Message:      "the session was aborted; start a new one (local fallback: the Rebound sidecar did not answer)",
			}, nil
		}
		return &reboundpb.AdmitResponse{
			Allowed:      true,
			SessionState: state,
			Message:      "allowed by the local fallback: the Rebound sidecar did not answer",
		}, nil
	}
	s.c.answered()
	return resp, nil
}

// ContextOption shapes the error context Session.Context asks for.
type ContextOption func(*reboundpb.ContextRequest) error

// WithMaxTokens sets a token budget for the context text; the oldest errors go first to fit.
func WithMaxTokens(n int) ContextOption {
	return func(r *reboundpb.ContextRequest) error {
		if n < 0 || uint64(n) > math.MaxUint32 {
			return fmt.Errorf("%w: max tokens %d: must be 0 to %d", ErrInvalidInput, n, uint32(math.MaxUint32))
		}
		r.MaxTokens = uint32(n)
		return nil
	}
}

// Context returns the compacted error context for the session's next LLM
// turn (empty text when nothing is unresolved). When the sidecar does not
// answer, the text is built locally from the errors this client has seen
// (without a token budget).
func (s *Session) Context(ctx context.Context, opts ...ContextOption) (*reboundpb.ContextResponse, error) {
	req := &reboundpb.ContextRequest{SessionId: s.id}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil ContextOption", ErrInvalidInput)
		}
		if err := opt(req); err != nil {
			return nil, err
		}
	}
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := s.c.rpc.Context(rctx, req)
	if err != nil {
		if err := s.c.failed("Context", err); err != nil {
			return nil, err
		}
		s.c.fallbacks.Add(1)
		return s.local.context(), nil
	}
	s.c.answered()
	return resp, nil
}

// End ends the session on the sidecar and returns its summary. When the
// sidecar does not answer, the summary is the one this client kept locally.
func (s *Session) End(ctx context.Context) (*reboundpb.SessionSummary, error) {
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := s.c.rpc.EndSession(rctx, &reboundpb.EndSessionRequest{SessionId: s.id})
	if err != nil {
		if err := s.c.failed("EndSession", err); err != nil {
			return nil, err
		}
		s.c.fallbacks.Add(1)
		return s.local.snapshot(s.c.cfg.now()), nil
	}
	s.c.answered()
	if !resp.GetFound() {
		// Expired on the sidecar (or it restarted): what this client saw is the best summary left.
		return s.local.snapshot(s.c.cfg.now()), nil
	}
	return resp.GetSummary(), nil
}
