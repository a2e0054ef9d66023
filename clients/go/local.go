package rebound

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// localState is what a session remembers on the client side, always, so that
// the fallback policy can carry on where the sidecar left off: failures in a
// row per tool, identical errors in a row, the declared limits, unresolved
// errors for the context, the summary counters (steps, cost and errors
// included), the labels the session declared, and the latest call ids with
// their verdicts.
type localState struct {
	mu      sync.Mutex
	started time.Time
	limits  sessionLimits
	// labels are the labels the session declared (nil: none), for the
	// fallback's escalation reports and the local summary, as the sidecar's.
	// Never changed after newLocalState.
	labels      map[string]string
	consecutive map[string]int
	// lastTool and lastError are the tool and the normalised text of the session's
	// latest failure (lastTool is empty after a success of that tool), and
	// identical how many failures in a row had both, as the sidecar counts them.
	lastTool, lastError string
	identical           int
	// unresolved holds the latest error of each tool whose last call failed, oldest first.
	unresolved []localError
	summary    counters
	// recent holds the latest call ids, oldest first. As on the sidecar, a
	// call id reported again is counted once and answered with its first verdict.
	recent []recentCall
}

// recentCall is a call id and its verdict, nil until it is judged.
type recentCall struct {
	id      string
	verdict *reboundpb.Verdict
}

// recentCalls is how many call ids a session remembers, as the sidecar's
// default (sessions.idempotency_window).
const recentCalls = 16

// counters are the summary's numbers (a plain struct: a protobuf message must not be copied or embedded).
type counters struct {
	Calls, Errors, Retries, Escalations uint32
	Cost                                float64
	ErrorsByCategory                    map[string]uint32
	State                               reboundpb.SessionState
}

type localError struct {
	tool, kind, message string
	count               uint32
	category            Category
	// suggestion is the verdict's (a rule may have its own, as code.quota_disk); empty: the category's.
	suggestion string
}

// maxUnresolved bounds the local error list; the sidecar keeps the full history.
const maxUnresolved = 64

// contextShown is how many errors the local context shows as blocks, as the sidecar's default.
const contextShown = 3

func newLocalState(now time.Time, limits sessionLimits, labels map[string]string) *localState {
	return &localState{started: now, limits: limits, labels: copyLabels(labels), consecutive: map[string]int{}}
}

// observe counts an outcome before it is judged and returns the session's
// counters after it, for the fallback policy. A call id seen before counts
// nothing. As on the sidecar, an outcome of a stopped session counts as a step,
// a cost and an error, and nothing else: the run was told to end.
func (l *localState) observe(o *reboundpb.Outcome) fallbackInput {
	l.mu.Lock()
	defer l.mu.Unlock()
	tool := o.GetTool()
	if l.find(o.GetCallId()) >= 0 {
		return l.counters(tool)
	}
	if id := o.GetCallId(); id != "" {
		if len(l.recent) >= recentCalls {
			l.recent = l.recent[1:]
		}
		l.recent = append(l.recent, recentCall{id: id})
	}
	l.summary.Calls = min(l.summary.Calls, math.MaxUint32-1) + 1
	// Two huge finite costs must not sum to infinity, as on the sidecar.
	l.summary.Cost = min(l.summary.Cost+o.GetCost(), math.MaxFloat64)
	if !o.GetOk() {
		l.summary.Errors = min(l.summary.Errors, math.MaxUint32-1) + 1
	}
	if l.summary.State == reboundpb.SessionState_SESSION_STATE_STOPPED {
		return l.counters(tool)
	}
	idx := -1
	for i, e := range l.unresolved {
		if e.tool == tool {
			idx = i
			break
		}
	}
	if o.GetOk() {
		delete(l.consecutive, tool)
		if idx >= 0 {
			// A success of the same tool resolves its error, as on the sidecar.
			l.unresolved = append(l.unresolved[:idx], l.unresolved[idx+1:]...)
		}
		if l.lastTool == tool {
			l.lastTool, l.lastError, l.identical = "", "", 0
		}
		return l.counters(tool)
	}
	l.consecutive[tool]++
	if text := normalise(judgedText(o.GetMessage(), o.GetDetail())); l.lastTool == tool && l.lastError == text {
		l.identical++
	} else {
		l.lastTool, l.lastError, l.identical = tool, text, 1
	}
	e := localError{tool: tool, kind: errorType(o), message: shownMessage(o), count: 1}
	if idx >= 0 {
		if prev := l.unresolved[idx]; prev.message == e.message {
			e.count = prev.count + 1
		}
		l.unresolved = append(l.unresolved[:idx], l.unresolved[idx+1:]...)
	}
	if len(l.unresolved) >= maxUnresolved {
		l.unresolved = l.unresolved[1:]
	}
	l.unresolved = append(l.unresolved, e)
	return l.counters(tool)
}

// counters are the session's counters for an outcome of tool, as the fallback reads them. l.mu must be held.
func (l *localState) counters(tool string) fallbackInput {
	return fallbackInput{
		consecutive: l.consecutive[tool],
		identical:   l.identical,
		errors:      l.summary.Errors,
		steps:       l.summary.Calls,
		cost:        l.summary.Cost,
		state:       l.summary.State,
		limits:      l.limits,
		labels:      l.labels,
	}
}

// state is the session's state as the verdicts this client saw left it.
func (l *localState) state() reboundpb.SessionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.summary.State == reboundpb.SessionState_SESSION_STATE_UNSPECIFIED {
		return reboundpb.SessionState_SESSION_STATE_ACTIVE
	}
	return l.summary.State
}

// find returns the index of a call id in recent, or -1; an empty id is never found.
func (l *localState) find(id string) int {
	if id == "" {
		return -1
	}
	for i := range l.recent {
		if l.recent[i].id == id {
			return i
		}
	}
	return -1
}

// replay returns the verdict a call id already had, for the fallback to give
// again (marked replayed, as the sidecar marks it), or nil.
func (l *localState) replay(o *reboundpb.Outcome) *reboundpb.Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.find(o.GetCallId())
	if i < 0 || l.recent[i].verdict == nil {
		return nil
	}
	v := proto.Clone(l.recent[i].verdict).(*reboundpb.Verdict)
	v.CallId, v.SessionId, v.Replayed = o.GetCallId(), o.GetSessionId(), true
	return v
}

// record counts what a verdict decided, once per call id: a repeated call's
// verdict (the sidecar's replay, or a second answer to a call still in flight)
// counts nothing.
func (l *localState) record(o *reboundpb.Outcome, v *reboundpb.Verdict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := l.find(o.GetCallId()); i >= 0 {
		if l.recent[i].verdict != nil {
			return
		}
		l.recent[i].verdict = v
	}
	switch v.GetAction() {
	case ActionRetry:
		l.summary.Retries++
	case ActionEscalate:
		l.summary.Escalations++
		if l.summary.State != reboundpb.SessionState_SESSION_STATE_STOPPED {
			// A stopped run stays stopped, as on the sidecar.
			l.summary.State = reboundpb.SessionState_SESSION_STATE_ESCALATED
		}
	case ActionAbort:
		l.summary.State = reboundpb.SessionState_SESSION_STATE_STOPPED
	}
	if o.GetOk() {
		return
	}
	category := v.GetClassification().GetCategory()
	if l.summary.ErrorsByCategory == nil {
		l.summary.ErrorsByCategory = map[string]uint32{}
	}
	l.summary.ErrorsByCategory[categoryName(category)]++
	for i := range l.unresolved {
		if l.unresolved[i].tool == o.GetTool() {
			l.unresolved[i].category = category
			l.unresolved[i].suggestion = v.GetClassification().GetSuggestion()
		}
	}
}

// context builds the error context from the unresolved errors: the latest
// few as <error> blocks, the older ones counted in a summary line.
func (l *localState) context() *reboundpb.ContextResponse {
	l.mu.Lock()
	defer l.mu.Unlock()
	shown := l.unresolved[max(len(l.unresolved)-contextShown, 0):]
	hidden := len(l.unresolved) - len(shown)
	var b strings.Builder
	if hidden > 0 {
		fmt.Fprintf(&b, "%d earlier unresolved error(s) not shown.\n", hidden)
	}
	for _, e := range shown {
		suggestion := e.suggestion
		if suggestion == "" {
			suggestion = suggestions[e.category]
		}
		writeErrorBlock(&b, e.tool, e.category, errorLine(e.kind, e.message), e.count, suggestion)
	}
	return &reboundpb.ContextResponse{
		Text:         strings.TrimSuffix(b.String(), "\n"),
		ErrorsShown:  uint32(len(shown)),
		ErrorsHidden: uint32(hidden),
	}
}

// snapshot is the locally kept session summary.
func (l *localState) snapshot(now time.Time) *reboundpb.SessionSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	byCategory := make(map[string]uint32, len(l.summary.ErrorsByCategory))
	for k, v := range l.summary.ErrorsByCategory {
		byCategory[k] = v
	}
	state := l.summary.State
	if state == reboundpb.SessionState_SESSION_STATE_UNSPECIFIED {
		state = reboundpb.SessionState_SESSION_STATE_ACTIVE
	}
	return &reboundpb.SessionSummary{
		Calls:            l.summary.Calls,
		Errors:           l.summary.Errors,
		ErrorsByCategory: byCategory,
		Retries:          l.summary.Retries,
		Escalations:      l.summary.Escalations,
		Cost:             l.summary.Cost,
		DurationMs:       uint64(max(now.Sub(l.started), 0) / time.Millisecond),
		State:            state,
		Labels:           copyLabels(l.labels),
	}
}
