import type { Action } from "./names.js";
import type { Verdict } from "./verdict.js";

/**
 * A bad argument: thrown by the client's own checks, and for an argument the
 * sidecar rejects (gRPC INVALID_ARGUMENT), never for a sidecar that is down.
 */
export class InvalidInputError extends Error {
  /** Says what was wrong, naming the field and the value. */
  constructor(message: string) {
    super(`rebound: invalid input: ${message}`);
  }
}
InvalidInputError.prototype.name = "InvalidInputError";

/**
 * What `Session.run` throws when a verdict takes the agent off its plan. The
 * subclasses say which way: {@link RecoverError}, {@link EscalationError},
 * {@link AbortRunError}. `cause` is the tool's own error, when it failed.
 */
export abstract class VerdictError extends Error {
  /** The tool whose outcome led here. */
  readonly tool: string;
  /** The full verdict. */
  readonly verdict: Verdict;
  /** The verdict's action. */
  readonly action: Action;

  /** Builds the message from the action, tool, category and the tool's error. */
  constructor(action: Action, tool: string, verdict: Verdict, cause: unknown, note = "") {
    super(describe(action, tool, verdict, cause, note), cause === undefined ? undefined : { cause });
    this.tool = tool;
    this.verdict = verdict;
    this.action = action;
  }

  /** The compact error text for the LLM's next turn. */
  get snippet(): string {
    return this.verdict.snippet;
  }
}

/**
 * The failure goes back to the LLM: `recover` (another approach), `replan`, or
 * `reclassify` (another tool); put `snippet` into its next turn. Also thrown
 * when `run` gives up after its maximum number of attempts.
 */
export class RecoverError extends VerdictError {}
RecoverError.prototype.name = "RecoverError";

/** Stop and ask a human; `report` is the escalation report as text. */
export class EscalationError extends VerdictError {
  /** The escalation report as plain text, for a human. */
  get report(): string {
    const e = this.verdict.escalation;
    return e?.text || e?.summary || "";
  }
}
EscalationError.prototype.name = "EscalationError";

/**
 * End the run: cancelled, a fatal failure, a limit reached, an identical-error
 * loop. (Not named AbortError, which is what an aborted AbortSignal throws.)
 */
export class AbortRunError extends VerdictError {}
AbortRunError.prototype.name = "AbortRunError";

function describe(action: Action, tool: string, verdict: Verdict, cause: unknown, note: string): string {
  let s = `rebound: ${action} after ${JSON.stringify(tool)}`;
  if (verdict.category !== "unspecified") s += ` (${verdict.category})`;
  if (verdict.fallback) s += " [local fallback]";
  if (note !== "") s += `: ${note}`;
  if (cause !== undefined) s += `: ${cause instanceof Error ? cause.message : String(cause)}`;
  return s;
}
