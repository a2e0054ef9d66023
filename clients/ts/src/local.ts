// What a session remembers on the client side, always, so that the fallback
// policy can carry on where the sidecar left off: failures in a row per tool,
// unresolved errors for the context, the summary counters, and the verdicts of
// the latest calls for a repeated call id.

import { errorBlock, errorType, shownMessage, type ErrorBlock } from "./fallback.js";
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
  private readonly consecutive = new Map<string, number>();
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

  /** Starts the memory at nowMs. */
  constructor(nowMs: number) {
    this.started = nowMs;
  }

  /**
   * Counts an outcome before it is judged; returns the failures of its tool in
   * a row, this one included. A call id among the latest calls' is a repeat, as
   * on the sidecar: it counts nothing again.
   */
  observe(o: pb.Outcome): number {
    if (o.callId !== "") {
      if (this.recent.has(o.callId)) return this.consecutive.get(o.tool) ?? 0;
      this.recent.set(o.callId, undefined);
      if (this.recent.size > REMEMBERED_CALLS) this.recent.delete(this.recent.keys().next().value as string);
    }
    this.calls++;
    this.cost += o.cost;
    const idx = this.unresolved.findIndex((e) => e.tool === o.tool);
    if (o.ok) {
      this.consecutive.delete(o.tool);
      // A success of the same tool resolves its error, as on the sidecar.
      if (idx >= 0) this.unresolved.splice(idx, 1);
      return 0;
    }
    this.errors++;
    const n = (this.consecutive.get(o.tool) ?? 0) + 1;
    this.consecutive.set(o.tool, n);
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
    return n;
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
        this.sessionState = pb.SessionState.SESSION_STATE_ESCALATED;
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
    });
  }
}
