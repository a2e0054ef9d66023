package rebound

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// ErrInvalidInput is wrapped by every error that a bad argument causes, in the
// client's own checks or in the sidecar's (gRPC InvalidArgument).
var ErrInvalidInput = errors.New("rebound: invalid input")

// EscalationError is returned by Session.Do when the verdict says escalate:
// stop and ask a human.
type EscalationError struct {
	// Tool is the tool whose outcome escalated.
	Tool string
	// Verdict is the escalating verdict; Verdict.Escalation holds the report.
	Verdict *Verdict
	// Err is the tool's own error (nil if the tool succeeded but a limit escalated).
	Err error
	// Result is the tool's result when it succeeded and a limit escalated anyway
	// (set by DoResult; Do's function returns no result, so from Do it is nil).
	Result any
}

// Error says which tool escalated, in which category, why, and the tool's error.
func (e *EscalationError) Error() string { return describe("escalate", e.Tool, e.Verdict, e.Err) }

// Unwrap returns the tool's error, so errors.Is sees through to it.
func (e *EscalationError) Unwrap() error { return e.Err }

// Report is the escalation report as plain text, for a human.
func (e *EscalationError) Report() string {
	if t := e.Verdict.pb().GetEscalation().GetText(); t != "" {
		return t
	}
	return e.Verdict.pb().GetEscalation().GetSummary()
}

// AbortError is returned by Session.Do when the verdict says abort: end the run.
type AbortError struct {
	// Tool is the tool whose outcome aborted the run.
	Tool string
	// Verdict is the aborting verdict; Verdict.Breaker says why.
	Verdict *Verdict
	// Err is the tool's own error (nil if the tool succeeded but a limit aborted).
	Err error
	// Result is the tool's result when it succeeded and a limit (steps, cost)
	// aborted the run anyway (set by DoResult; Do's function returns no result,
	// so from Do it is nil).
	Result any
}

// Error says which tool aborted the run, in which category, why, and the tool's error.
func (e *AbortError) Error() string { return describe("abort", e.Tool, e.Verdict, e.Err) }

// Unwrap returns the tool's error, so errors.Is sees through to it.
func (e *AbortError) Unwrap() error { return e.Err }

// RecoverError is returned by Session.Do when the verdict hands the failure
// back to the LLM: recover (another approach), replan, or reclassify (another
// tool). Put Snippet into the LLM's next turn.
type RecoverError struct {
	// Tool is the tool that failed.
	Tool string
	// Action is ActionRecover, ActionReplan or ActionReclassify.
	Action Action
	// Snippet is the compact error text for the LLM.
	Snippet string
	// Verdict is the full verdict.
	Verdict *Verdict
	// Err is the tool's own error (nil if the tool succeeded but the verdict still sent the LLM back).
	Err error
	// Result is the tool's result when it succeeded (set by DoResult; nil from Do).
	Result any
}

// Error says which tool failed, what to do instead, why, and the tool's error.
func (e *RecoverError) Error() string {
	return describe(actionName(e.Action), e.Tool, e.Verdict, e.Err)
}

// Unwrap returns the tool's error, so errors.Is sees through to it.
func (e *RecoverError) Unwrap() error { return e.Err }

// actionName is the action's lowercase name without its prefix ("retry").
func actionName(a Action) string { return shortName(a.String(), "ACTION_") }

// categoryName is the category's lowercase name without its prefix ("rate_limited").
func categoryName(c Category) string { return shortName(c.String(), "CATEGORY_") }

// reasonName is the reason's lowercase name without its prefix ("step_limit").
func reasonName(r reboundpb.Reason) string { return shortName(r.String(), "REASON_") }

// shortName is a protobuf enum value's name as the sidecar writes it: lowercase, without the enum's prefix.
func shortName(name, prefix string) string { return strings.ToLower(strings.TrimPrefix(name, prefix)) }

// describe is a verdict error's text: the action, the tool, the category and
// the reason (a breaker or limit: step_limit, identical_errors...) when the
// verdict has them, then the tool's error.
func describe(action, tool string, v *Verdict, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rebound: %s after %q", action, tool)
	if c := v.Category(); c != 0 {
		fmt.Fprintf(&b, " (%s)", categoryName(c))
	}
	if r := v.pb().GetBreaker().GetReason(); r != 0 {
		fmt.Fprintf(&b, " (reason %s)", reasonName(r))
	}
	if v != nil && v.Fallback {
		b.WriteString(" [local fallback]")
	}
	if err != nil {
		// Agents log these errors: secrets in the tool's error are redacted as in a snippet.
		// The tool's error itself (Unwrap) is left as it came.
		b.WriteString(": ")
		b.WriteString(redact(err.Error()))
	}
	return b.String()
}
