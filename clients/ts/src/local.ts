// What a session remembers on the client side, always, so that the fallback
// policy can carry on where the sidecar left off: the session breakers' counts
// (failures in a row per tool, identical errors in a row, errors, steps, cost,
// the state), the limits and labels the session declared, unresolved errors
// for the context, the summary counters, and the verdicts of the latest calls
// for a repeated call id.

import { NO_LIMITS, type DeclaredLimits, type SessionCounts } from "./breaker.js";
import { errorBlock, errorType, shownMessage, type ErrorBlock } from "./fallback.js";
import { judgedText, normalise } from "./fingerprint.js";
import * as pb from "./gen/rebound/v1/rebound.js";
import { categoryName } from "./names.js";

/** Bounds the local error list; the sidecar keeps the full history. */
const MAX_UNRESOLVED = 64;
/** How many errors the local context shows as blocks, as the sidecar's default. */
const CONTEXT_SHOWN = 3;
/** How many of the latest calls' verdicts are kept for a repeated call id, as the sidecar's default `sessions.idempotency_window`. */
const REMEMBERED_CALLS = 16;

/** A session's client-side memory. */
export class LocalState {
  private readonly started: number;
  /** The limits the session declared, which the fallback enforces. */
  readonly limits: Readonly<DeclaredLimits>;
  /** The labels the session declared, which the fallback's escalation reports and the local summary carry, as the sidecar's do. */
  readonly labels: Readonly<Record<string, string>>;
  private readonly consecutive = new Map<string, number>();
  /**
   * The tool and normalised message of the session's latest failure, while no
   * success of that tool came after it, and how many failures in a row had both,
   * as the sidecar counts identical errors.
   */
  private lastError: { tool: string; text: string } | undefined;
  private identical = 0;
  /** The latest error of each tool whose last call failed, oldest first. */
  private unresolved: ErrorBlock[] = [];
  private calls = 0;
  private errors = 0;
  private retries = 0;
  private escalations = 0;
  private cost = 0;
  private readonly errorsByCategory: Record<string, number> = {};
  private sessionState = pb.SessionState.SESSION_STATE_ACTIVE;
  /** The latest call ids, oldest first, each with its verdict once it has one. */
  private readonly recent = new Map<string, pb.Verdict | undefined>();

  /** Starts the memory at nowMs, for a session that declared `limits` and `labels`. */
  constructor(nowMs: number, limits: Readonly<DeclaredLimits> = NO_LIMITS, labels: Readonly<Record<string, string>> = {}) {
    this.started = nowMs;
    this.limits = limits;
    this.labels = Object.freeze({ ...labels });
  }

  /**
   * Counts an outcome before it is judged; returns the session's counts after
   * it, for the fallback. A call id among the latest calls' is a repeat, as on
   * the sidecar: it counts nothing again. After an abort, an outcome still counts
   * as a step, a cost and an error, and nothing else, as on the sidecar: the
   * run was told to end.
   */
  observe(o: pb.Outcome): SessionCounts {
    if (o.callId !== "") {
      if (this.recent.has(o.callId)) return this.counts(o.ok ? 0 : (this.consecutive.get(o.tool) ?? 0));
      this.recent.set(o.callId, undefined);
      if (this.recent.size > REMEMBERED_CALLS) this.recent.delete(this.recent.keys().next().value as string);
    }
    this.calls++;
    // Two huge finite costs must not sum to infinity, as on the sidecar.
    this.cost = Math.min(this.cost + o.cost, Number.MAX_VALUE);
    if (!o.ok) this.errors++;
    if (this.sessionState === pb.SessionState.SESSION_STATE_STOPPED) return this.counts(this.consecutive.get(o.tool) ?? 0);
    const idx = this.unresolved.findIndex((e) => e.tool === o.tool);
    if (o.ok) {
      this.consecutive.delete(o.tool);
      // A success of the same tool resolves its error, as on the sidecar.
      if (idx >= 0) this.unresolved.splice(idx, 1);
      if (this.lastError?.tool === o.tool) {
        this.lastError = undefined;
        this.identical = 0;
      }
      return this.counts(0);
    }
    const n = (this.consecutive.get(o.tool) ?? 0) + 1;
    this.consecutive.set(o.tool, n);
    const text = normalise(judgedText(o.message, o.detail));
    const same = this.lastError?.tool === o.tool && this.lastError.text === text;
    this.identical = same ? this.identical + 1 : 1;
    this.lastError = { tool: o.tool, text };
    const e: ErrorBlock = {
      tool: o.tool,
      type: errorType(o),
      message: shownMessage(o.message),
      count: 1,
      category: pb.Category.CATEGORY_UNSPECIFIED,
      suggestion: "",
    };
    if (idx >= 0) {
      const [prev] = this.unresolved.splice(idx, 1);
      if (prev !== undefined && prev.message === e.message) e.count = prev.count + 1;
    }
    if (this.unresolved.length >= MAX_UNRESOLVED) this.unresolved.shift();
    this.unresolved.push(e);
    return this.counts(n);
  }

  /** The session's counts now, with `consecutive` failures of the outcome's tool. */
  private counts(consecutive: number): SessionCounts {
    return {
      consecutive,
      identicalErrors: this.identical,
      sessionErrors: this.errors,
      steps: this.calls,
      cost: this.cost,
      state: this.sessionState,
    };
  }

  /** Counts what a verdict decided, once per call id: a repeat's verdict was counted with the first. */
  record(o: pb.Outcome, v: pb.Verdict): void {
    if (this.recent.get(o.callId) !== undefined) return;
    if (this.recent.has(o.callId)) this.recent.set(o.callId, v);
    switch (v.action) {
      case pb.Action.ACTION_RETRY:
        this.retries++;
        break;
      case pb.Action.ACTION_ESCALATE:
        this.escalations++;
        // A stopped run stays stopped, as on the sidecar.
        if (this.sessionState !== pb.SessionState.SESSION_STATE_STOPPED) this.sessionState = pb.SessionState.SESSION_STATE_ESCALATED;
        break;
      case pb.Action.ACTION_ABORT:
        this.sessionState = pb.SessionState.SESSION_STATE_STOPPED;
        break;
      default:
    }
    if (o.ok) return;
    const category = v.classification?.category ?? pb.Category.CATEGORY_UNSPECIFIED;
    const name = categoryName(category);
    this.errorsByCategory[name] = (this.errorsByCategory[name] ?? 0) + 1;
    // An outcome after the abort did not go into the context (see `observe`).
    if (v.breaker?.reason === pb.Reason.REASON_SESSION_STOPPED) return;
    for (const e of this.unresolved) {
      if (e.tool !== o.tool) continue;
      e.category = category;
      e.suggestion = v.classification?.suggestion ?? "";
    }
  }

  /** The verdict already given to this call id, while it is among the latest calls'. */
  recall(callId: string): pb.Verdict | undefined {
    return this.recent.get(callId);
  }

  /** The error context from the unresolved errors: the latest few as `<error>` blocks, older ones counted. */
  context(): pb.ContextResponse {
    const shown = this.unresolved.slice(-CONTEXT_SHOWN);
    const hidden = this.unresolved.length - shown.length;
    const lines: string[] = [];
    if (hidden > 0) lines.push(`${hidden} earlier unresolved error(s) not shown.`);
    for (const e of shown) lines.push(errorBlock(e));
    return pb.ContextResponse.create({ text: lines.join("\n"), errorsShown: shown.length, errorsHidden: hidden });
  }

  /** The session's state as the verdicts this client saw left it. */
  get state(): pb.SessionState {
    return this.sessionState;
  }

  /** The locally kept session summary. */
  snapshot(nowMs: number): pb.SessionSummary {
    return pb.SessionSummary.create({
      calls: this.calls,
      errors: this.errors,
      errorsByCategory: { ...this.errorsByCategory },
      retries: this.retries,
      escalations: this.escalations,
      cost: this.cost,
      durationMs: Math.max(Math.floor(nowMs - this.started), 0),
      state: this.sessionState,
      labels: { ...this.labels },
    });
  }
}
