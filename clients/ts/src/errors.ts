import { cut } from "./checks.js";
import type { Action } from "./names.js";
import { redactHead, REDACTED_UNITS } from "./redact.js";
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

/** What a {@link VerdictError} is built from, besides its action, tool and verdict. */
export interface VerdictErrorInit {
  /** The tool's own error, when the call failed. */
  cause?: unknown;
  /** What the tool returned, when the call succeeded and the verdict still stopped the run. */
  result?: unknown;
  /** A word on why, for the message (`gave up after 10 attempts`). */
  note?: string;
}

/**
 * What `Session.run` throws when a verdict takes the agent off its plan. The
 * subclasses say which way: {@link RecoverError}, {@link EscalationError},
 * {@link AbortRunError}. `cause` is the tool's own error, when it failed;
 * `result` what it returned, when it succeeded and a verdict still stopped the
 * run (a step or cost limit reached, the session stopped).
 */
export abstract class VerdictError extends Error {
  /** The tool whose outcome led here. */
  readonly tool: string;
  /** The full verdict. */
  readonly verdict: Verdict;
  /** The verdict's action. */
  readonly action: Action;
  /**
   * What the tool returned when its call succeeded and the verdict still stopped the
   * run, so that the call's effect is not lost; undefined when the call failed (see
   * `cause`). A tool may return undefined too: no `cause` tells a success.
   */
  readonly result: unknown;

  /**
   * Builds the message from the action, tool, category, the verdict's reason and the
   * tool's error, redacted (the error itself stays as it was, as `cause`).
   */
  constructor(action: Action, tool: string, verdict: Verdict, init: VerdictErrorInit = {}) {
    const { cause, result, note = "" } = init;
    super(describe(action, tool, verdict, cause, note), cause === undefined ? undefined : { cause });
    this.tool = tool;
    this.verdict = verdict;
    this.action = action;
    this.result = result;
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

/** How much of a thrown value that is no Error a message shows, in characters. */
const MAX_VALUE_CHARS = 200;

/**
 * `rebound: abort after "charge_card" (reason step_limit)`: the category and the
 * verdict's reason when there is one, then the tool's error with its secrets
 * redacted, since agents log these messages as they are.
 */
function describe(action: Action, tool: string, verdict: Verdict, cause: unknown, note: string): string {
  let s = `rebound: ${action} after ${JSON.stringify(tool)}`;
  if (verdict.category !== "unspecified") s += ` (${verdict.category})`;
  if (verdict.reason !== "unspecified") s += ` (reason ${verdict.reason})`;
  if (verdict.fallback) s += " [local fallback]";
  if (note !== "") s += `: ${note}`;
  if (cause !== undefined) {
    const text = causeText(cause);
    s += `: ${redactHead(text)}${text.length > REDACTED_UNITS ? "…" : ""}`;
  }
  return s;
}

/**
 * The text of what the tool threw: an error's message, a string as it is, and for
 * anything else (`throw { status: 404, message: "Repository not found" }`) its
 * `message` when that is a string, else its JSON, cut short.
 */
function causeText(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  if (typeof cause === "string") return cause;
  let text: string;
  try {
    const message = (cause as { message?: unknown } | null)?.message;
    text = typeof message === "string" ? message : (JSON.stringify(cause) ?? String(cause));
  } catch {
    // A getter that throws, a cycle, a BigInt: what the value is, at least.
    text = Object.prototype.toString.call(cause);
  }
  return typeof cause === "object" && cause !== null ? cut(text, MAX_VALUE_CHARS) : text;
}
