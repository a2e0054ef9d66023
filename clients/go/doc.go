// Package rebound is the Go client for the Rebound sidecar, which tells an AI
// agent what to do after each tool call.
//
// Dial the sidecar once, open a Session per agent run, and run each tool call
// through Session.Do: it reports the outcome, sleeps and retries when the
// verdict says retry, and returns a typed error (*RecoverError,
// *EscalationError, *AbortError) when the agent must change course.
//
// The client fails open: each call to the sidecar has a short deadline
// (250 ms by default), and when the sidecar cannot be reached in time a local
// fallback policy decides instead, so an agent never stops because its sidecar
// did. The fallback classifies by the structured signals of the sidecar's
// rules that read one signal alone (the outcome's kind, an error code, an
// exception type, a gRPC code, an HTTP status, an exit code), with their
// values, ranked as the sidecar scores them, and answers each category with
// the sidecar's seed defaults; it reads no message words (see FallbackPolicy).
// gRPC keeps reconnecting in the background and the sidecar is used again as
// soon as it answers.
package rebound
