// The fallback's session breakers, the sidecar's (src/breaker.rs): pure
// functions over a session's counts after an outcome. Aborts (identical errors
// in a row, a step or cost limit) come before escalations (failures of one
// tool in a row, the session's errors), because an abort ends the run. The
// fallback has no tool breaker and no retry budget: those need what other
// sessions and sidecars saw.

import type { FallbackPolicy } from "./fallback.js";
import * as pb from "./gen/rebound/v1/rebound.js";

/** What the session breakers read: the session's counts after the outcome being judged, and its state before it. */
export interface SessionCounts {
  /** Failures of the outcome's tool in a row in the session, this one included. */
  consecutive: number;
  /** Failures in a row with the same tool and normalised message (see `normalise`), this one included. */
  identicalErrors: number;
  /** Failures in the session, this one included. */
  sessionErrors: number;
  /** Outcomes in the session, this one included. */
  steps: number;
  /** Cost reported in the session, this outcome's included. */
  cost: number;
  /** The session's state before this outcome: once stopped, every outcome is answered abort. */
  state: pb.SessionState;
}

/**
 * The limits a session declared (StartSession's `stepLimit`, `costLimit`,
 * `errorLimit`); 0 asks for the default, as on the sidecar: no step or cost
 * limit, and the policy's `maxSessionErrors`.
 */
export interface DeclaredLimits {
  /** Outcomes in the session that abort it. */
  stepLimit: number;
  /** Cost reported in the session that aborts it. */
  costLimit: number;
  /** Errors in the session that escalate it. */
  errorLimit: number;
}

/** No declaration: the policy's defaults. */
export const NO_LIMITS: Readonly<DeclaredLimits> = Object.freeze({ stepLimit: 0, costLimit: 0, errorLimit: 0 });

/** The limits a StartSession request declares; none without one. */
export function declaredLimits(req: pb.StartSessionRequest | undefined): Readonly<DeclaredLimits> {
  if (req === undefined) return NO_LIMITS;
  return { stepLimit: req.stepLimit, costLimit: req.costLimit, errorLimit: req.errorLimit };
}

/** The errors in a session that escalate: the declared limit over the policy's (`DeclaredLimits::under`); 0 is none. */
function errorLimit(p: Readonly<FallbackPolicy>, limits: Readonly<DeclaredLimits>): number {
  return limits.errorLimit > 0 ? limits.errorLimit : p.maxSessionErrors;
}

/** Which declared step or cost limit the session reached, if any (for successes and failures alike). */
export function limitReached(c: Readonly<SessionCounts>, limits: Readonly<DeclaredLimits>): pb.Reason | undefined {
  if (limits.stepLimit > 0 && c.steps >= limits.stepLimit) return pb.Reason.REASON_STEP_LIMIT;
  if (limits.costLimit > 0 && c.cost >= limits.costLimit) return pb.Reason.REASON_COST_LIMIT;
  return undefined;
}

/** The session breaker a failure trips, if any, with the action it asks for; a threshold of 0 is off. */
export function onFailure(
  p: Readonly<FallbackPolicy>,
  c: Readonly<SessionCounts>,
  limits: Readonly<DeclaredLimits>,
): [pb.Action, pb.Reason] | undefined {
  if (p.maxIdenticalErrors > 0 && c.identicalErrors >= p.maxIdenticalErrors) {
    return [pb.Action.ACTION_ABORT, pb.Reason.REASON_IDENTICAL_ERRORS];
  }
  const limit = limitReached(c, limits);
  if (limit !== undefined) return [pb.Action.ACTION_ABORT, limit];
  if (p.maxConsecutiveFailures > 0 && c.consecutive >= p.maxConsecutiveFailures) {
    return [pb.Action.ACTION_ESCALATE, pb.Reason.REASON_CONSECUTIVE_FAILURES];
  }
  const errors = errorLimit(p, limits);
  if (errors > 0 && c.sessionErrors >= errors) return [pb.Action.ACTION_ESCALATE, pb.Reason.REASON_SESSION_ERRORS];
  return undefined;
}

/**
 * How many more failures in a row the session breakers let pass before one
 * trips: the retries a retry verdict can still promise. Each counts as the same
 * error again, which a retry of the same call most often gives. Infinity when
 * every breaker is off.
 */
export function failuresBeforeATrip(p: Readonly<FallbackPolicy>, c: Readonly<SessionCounts>, limits: Readonly<DeclaredLimits>): number {
  let left = Infinity;
  for (const [limit, count] of [
    [p.maxIdenticalErrors, c.identicalErrors],
    [p.maxConsecutiveFailures, c.consecutive],
    [errorLimit(p, limits), c.sessionErrors],
  ] as const) {
    // This failure counts in each, even when a caller's count left it out.
    if (limit > 0) left = Math.min(left, Math.max(limit - Math.max(count, 1) - 1, 0));
  }
  return left;
}

/** The snippet of every outcome after an abort, in the sidecar's words. */
export const STOPPED_SNIPPET = "<error>\nThe session was stopped earlier; end the run.\n</error>";

/** The snippet of a success that reached a step or cost limit, in the sidecar's words. */
export function limitSnippet(reason: pb.Reason): string {
  const limit = reason === pb.Reason.REASON_COST_LIMIT ? "cost" : "step";
  return `<error>\nThe session reached its ${limit} limit; end the run.\n</error>`;
}
