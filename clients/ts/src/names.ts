// The proto's enums as lowercase string names ("rate_limited"), the way the
// DESIGN, the shared test vectors and TypeScript code read best. Each list is
// indexed by the enum's wire number (the proto numbers them 0, 1, 2, ... with
// no gaps; a unit test checks the lists against the generated enums).

import * as pb from "./gen/rebound/v1/rebound.js";

/** The actions, by wire number. */
export const ACTIONS = ["unspecified", "continue", "retry", "recover", "replan", "reclassify", "escalate", "abort"] as const;
/** What the agent should do next: `continue`, `retry`, `recover`, `replan`, `reclassify`, `escalate`, `abort`. */
export type Action = (typeof ACTIONS)[number];

/** The categories, by wire number. */
export const CATEGORIES = [
  "unspecified",
  "timeout",
  "rate_limited",
  "network",
  "unavailable",
  "internal",
  "auth",
  "permission_denied",
  "quota_exceeded",
  "not_found",
  "validation",
  "conflict",
  "format",
  "unknown_tool",
  "context_length",
  "content_filter",
  "cancelled",
  "unknown",
] as const;
/** The kind of failure (`unspecified` for a success). */
export type Category = (typeof CATEGORIES)[number];

/** The outcome kinds, by wire number. */
export const OUTCOME_KINDS = [
  "unspecified",
  "tool_error",
  "no_tool_call",
  "invalid_tool_call",
  "unknown_tool",
  "timeout",
  "cancelled",
  "provider_error",
] as const;
/** What kind of outcome a failure was, as the agent saw it. */
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

/** The breaker states, by wire number. */
export const BREAKER_STATES = ["unspecified", "closed", "open", "half_open"] as const;
/** A circuit breaker's state: `closed` lets calls through, `open` stops them, `half_open` probes. */
export type BreakerState = (typeof BREAKER_STATES)[number];

/** The session states, by wire number. */
export const SESSION_STATES = ["unspecified", "active", "escalated", "stopped"] as const;
/** A session's state. */
export type SessionState = (typeof SESSION_STATES)[number];

/** The reasons, by wire number. */
export const REASONS = [
  "unspecified",
  "category_policy",
  "retries_exhausted",
  "consecutive_failures",
  "session_errors",
  "identical_errors",
  "step_limit",
  "cost_limit",
  "session_stopped",
  "tool_breaker_open",
  "retry_budget_exhausted",
  "delay_too_long",
  "server_pushback",
] as const;
/** Why a verdict is not the category's plain default (or why Admit said no). */
export type Reason = (typeof REASONS)[number];

/** The name of a wire value; a number this client does not know (from a newer sidecar) reads as `unspecified`. */
function nameOf<T extends string>(names: readonly T[], value: number): T {
  return names[value] ?? (names[0] as T);
}

/** The action's name. */
export const actionName = (a: pb.Action): Action => nameOf(ACTIONS, a);
/** The category's name. */
export const categoryName = (c: pb.Category): Category => nameOf(CATEGORIES, c);
/** The outcome kind's name. */
export const kindName = (k: pb.OutcomeKind): OutcomeKind => nameOf(OUTCOME_KINDS, k);
/** The breaker state's name. */
export const breakerStateName = (s: pb.BreakerState): BreakerState => nameOf(BREAKER_STATES, s);
/** The session state's name. */
export const sessionStateName = (s: pb.SessionState): SessionState => nameOf(SESSION_STATES, s);
/** The reason's name. */
export const reasonName = (r: pb.Reason): Reason => nameOf(REASONS, r);

/** The wire value of a named outcome kind, or undefined for a name this client does not know. */
export function kindValue(name: string): pb.OutcomeKind | undefined {
  const i = (OUTCOME_KINDS as readonly string[]).indexOf(name);
  return i < 0 ? undefined : (i as pb.OutcomeKind);
}

/** The wire value of a named category. */
export function categoryValue(name: Category): pb.Category {
  return CATEGORIES.indexOf(name) as pb.Category;
}

/** The wire value of a named action. */
export function actionValue(name: Action): pb.Action {
  return ACTIONS.indexOf(name) as pb.Action;
}

/** The wire value of a named reason. */
export function reasonValue(name: Reason): pb.Reason {
  return REASONS.indexOf(name) as pb.Reason;
}

/** The wire value of a named session state. */
export function sessionStateValue(name: SessionState): pb.SessionState {
  return SESSION_STATES.indexOf(name) as pb.SessionState;
}
