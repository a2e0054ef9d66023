package rebound

import (
	"time"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// Action is what the agent should do next.
type Action = reboundpb.Action

// The actions a verdict can carry.
const (
	// ActionContinue: the call succeeded; go on.
	ActionContinue = reboundpb.Action_ACTION_CONTINUE
	// ActionRetry: call the same tool with the same arguments after Verdict.Delay.
	ActionRetry = reboundpb.Action_ACTION_RETRY
	// ActionRecover: give the snippet to the LLM and let it choose another approach.
	ActionRecover = reboundpb.Action_ACTION_RECOVER
	// ActionReplan: change the plan (context too long, content filtered, permission).
	ActionReplan = reboundpb.Action_ACTION_REPLAN
	// ActionReclassify: choose another tool.
	ActionReclassify = reboundpb.Action_ACTION_RECLASSIFY
	// ActionEscalate: stop and ask a human; the verdict carries an escalation report.
	ActionEscalate = reboundpb.Action_ACTION_ESCALATE
	// ActionAbort: end the run.
	ActionAbort = reboundpb.Action_ACTION_ABORT
)

// Category is the kind of failure.
type Category = reboundpb.Category

// Kind is what kind of outcome a failure was, as the agent saw it.
type Kind = reboundpb.OutcomeKind

// The outcome kinds.
const (
	// KindToolError: the tool ran and failed (also what an unset kind means).
	KindToolError = reboundpb.OutcomeKind_OUTCOME_KIND_TOOL_ERROR
	// KindNoToolCall: the LLM answered without the tool call it had to make.
	KindNoToolCall = reboundpb.OutcomeKind_OUTCOME_KIND_NO_TOOL_CALL
	// KindInvalidToolCall: the LLM's tool call was malformed.
	KindInvalidToolCall = reboundpb.OutcomeKind_OUTCOME_KIND_INVALID_TOOL_CALL
	// KindUnknownTool: the LLM named a tool that does not exist.
	KindUnknownTool = reboundpb.OutcomeKind_OUTCOME_KIND_UNKNOWN_TOOL
	// KindTimeout: the call did not finish in time.
	KindTimeout = reboundpb.OutcomeKind_OUTCOME_KIND_TIMEOUT
	// KindCancelled: the call was cancelled.
	KindCancelled = reboundpb.OutcomeKind_OUTCOME_KIND_CANCELLED
	// KindProviderError: the LLM provider itself failed.
	KindProviderError = reboundpb.OutcomeKind_OUTCOME_KIND_PROVIDER_ERROR
)

// Verdict is the answer to one outcome: the sidecar's, or the local fallback
// policy's when the sidecar could not be reached in time.
type Verdict struct {
	// Verdict is the full answer; its fields (Action, Snippet, Escalation...) read directly.
	*reboundpb.Verdict
	// Fallback is true when the local fallback policy decided because the sidecar did not answer.
	Fallback bool
}

// Delay is how long to wait before retrying (zero unless the action is retry).
func (v *Verdict) Delay() time.Duration {
	return time.Duration(v.pb().GetRetry().GetDelayMs()) * time.Millisecond
}

// Category is the kind of failure (unspecified for a success).
func (v *Verdict) Category() Category { return v.pb().GetClassification().GetCategory() }

// Retryable reports whether the same call may succeed if retried.
func (v *Verdict) Retryable() bool { return v.pb().GetClassification().GetRetryable() }

// pb is the protobuf verdict, nil-safe so that accessors work on a nil *Verdict.
func (v *Verdict) pb() *reboundpb.Verdict {
	if v == nil {
		return nil
	}
	return v.Verdict
}
