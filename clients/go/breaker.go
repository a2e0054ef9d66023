package rebound

import (
	"fmt"
	"math"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// The fallback's session breakers, the sidecar's (src/breaker.rs): pure
// functions over a session's counters after an outcome (fallbackInput). Aborts
// (identical errors in a row, a step or cost limit) come before escalations
// (failures of one tool in a row, the session's errors), because an abort ends
// the run. The fallback has no tool breaker and no retry budget: those need
// what other sessions and sidecars saw.

// sessionLimits are the limits a session declared (StartSession); 0 asks for
// the default: no step limit, no cost limit, the policy's MaxSessionErrors.
type sessionLimits struct {
	steps, errors uint32
	cost          float64
}

// declaredLimits are the limits of a session's declaration (nil: none).
func declaredLimits(r *reboundpb.StartSessionRequest) sessionLimits {
	return sessionLimits{steps: r.GetStepLimit(), errors: r.GetErrorLimit(), cost: r.GetCostLimit()}
}

// errorLimit is how many errors escalate the session, its declared limit
// over the policy's (DeclaredLimits::under on the sidecar); 0 is none.
func (p FallbackPolicy) errorLimit(in fallbackInput) int {
	if in.limits.errors > 0 {
		return int(min(uint64(in.limits.errors), math.MaxInt32))
	}
	return p.MaxSessionErrors
}

// limitReached says whether the session reached its step or cost limit (for
// successes and failures alike), and which.
func limitReached(in fallbackInput) (reboundpb.Reason, bool) {
	switch {
	case in.limits.steps > 0 && in.steps >= in.limits.steps:
		return reboundpb.Reason_REASON_STEP_LIMIT, true
	case in.limits.cost > 0 && in.cost >= in.limits.cost:
		return reboundpb.Reason_REASON_COST_LIMIT, true
	}
	return reboundpb.Reason_REASON_UNSPECIFIED, false
}

// onFailure is the session breaker that trips on a failure, if any, with the action it asks for.
func (p FallbackPolicy) onFailure(in fallbackInput) (Action, reboundpb.Reason, bool) {
	if p.MaxIdenticalErrors > 0 && in.identical >= p.MaxIdenticalErrors {
		return ActionAbort, reboundpb.Reason_REASON_IDENTICAL_ERRORS, true
	}
	if reason, ok := limitReached(in); ok {
		return ActionAbort, reason, true
	}
	if p.MaxConsecutiveFailures > 0 && in.consecutive >= p.MaxConsecutiveFailures {
		return ActionEscalate, reboundpb.Reason_REASON_CONSECUTIVE_FAILURES, true
	}
	if limit := p.errorLimit(in); limit > 0 && int64(in.errors) >= int64(limit) {
		return ActionEscalate, reboundpb.Reason_REASON_SESSION_ERRORS, true
	}
	return reboundpb.Action_ACTION_UNSPECIFIED, reboundpb.Reason_REASON_UNSPECIFIED, false
}

// failuresBeforeATrip is how many more failures in a row the session breakers
// let pass before one trips: the retries a retry verdict can still promise.
// Each counts as the same error again, which a retry of the same call most
// often gives.
func (p FallbackPolicy) failuresBeforeATrip(in fallbackInput) uint32 {
	left := uint32(math.MaxUint32)
	for _, b := range [...]struct{ limit, count int }{
		{p.MaxIdenticalErrors, in.identical},
		{p.MaxConsecutiveFailures, in.consecutive},
		{p.errorLimit(in), int(min(uint64(in.errors), math.MaxInt32))},
	} {
		if b.limit > 0 {
			// This failure counts in each, even when a caller's count left it out.
			left = min(left, uint32(max(b.limit-max(b.count, 1)-1, 0)))
		}
	}
	return left
}

// escalationWhy is the first line of a breaker's escalation report.
func escalationWhy(o *reboundpb.Outcome, reason reboundpb.Reason, in fallbackInput) string {
	if reason == reboundpb.Reason_REASON_SESSION_ERRORS {
		return fmt.Sprintf("%d errors in the session, the last from tool %q", in.errors, o.GetTool())
	}
	return fmt.Sprintf("tool %q failed %d times in a row", o.GetTool(), in.consecutive)
}

// stoppedSnippet answers every outcome of a session stopped earlier, in the sidecar's words.
const stoppedSnippet = "<error>\nThe session was stopped earlier; end the run.\n</error>"

// limitSnippet is the snippet of a success that reached a session limit, in the sidecar's words.
func limitSnippet(reason reboundpb.Reason) string {
	limit := "step"
	if reason == reboundpb.Reason_REASON_COST_LIMIT {
		limit = "cost"
	}
	return "<error>\nThe session reached its " + limit + " limit; end the run.\n</error>"
}
