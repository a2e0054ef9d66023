import type * as pb from "./gen/rebound/v1/rebound.js";
import {
  actionName,
  breakerStateName,
  categoryName,
  reasonName,
  sessionStateName,
  type Action,
  type BreakerState,
  type Category,
  type Reason,
  type SessionState,
} from "./names.js";

/**
 * The answer to one outcome: the sidecar's, or the local fallback policy's when
 * the sidecar could not be reached in time (`fallback` is then true). The
 * getters read the generated message (`proto`) with enums as lowercase names.
 */
export class Verdict {
  /** The verdict as the generated protobuf message, every field included. */
  readonly proto: pb.Verdict;
  /** True when the client's local fallback policy decided because the sidecar did not answer. */
  readonly fallback: boolean;

  /** Wraps a generated verdict; `fallback` marks one the local policy made. */
  constructor(proto: pb.Verdict, fallback = false) {
    this.proto = proto;
    this.fallback = fallback;
  }

  /** What the agent should do next. */
  get action(): Action {
    return actionName(this.proto.action);
  }

  /** The kind of failure (`unspecified` for a success). */
  get category(): Category {
    return categoryName(this.proto.classification?.category ?? 0);
  }

  /** Whether the same call may succeed if retried. */
  get retryable(): boolean {
    return this.proto.classification?.retryable ?? false;
  }

  /** The id of the rule that matched (`fallback.*` when the local policy decided). */
  get rule(): string {
    return this.proto.classification?.rule ?? "";
  }

  /** What to do about the failure, for the LLM or a human. */
  get suggestion(): string {
    return this.proto.classification?.suggestion ?? "";
  }

  /** How long to wait before retrying, in milliseconds (0 unless the action is retry). */
  get delayMs(): number {
    return this.proto.retry?.delayMs ?? 0;
  }

  /** The retry plan (set when the action is retry). */
  get retry(): pb.RetryPlan | undefined {
    return this.proto.retry;
  }

  /** Text for the LLM's next turn (empty on success). */
  get snippet(): string {
    return this.proto.snippet;
  }

  /** The outcome's call id. */
  get callId(): string {
    return this.proto.callId;
  }

  /** The outcome's session id. */
  get sessionId(): string {
    return this.proto.sessionId;
  }

  /** The breakers' view after this outcome (counters, trip reason). */
  get breaker(): pb.BreakerStatus | undefined {
    return this.proto.breaker;
  }

  /** Why the action differs from the category's default, if it does. */
  get reason(): Reason {
    return reasonName(this.proto.breaker?.reason ?? 0);
  }

  /** The tool's breaker state across sessions. */
  get toolState(): BreakerState {
    return breakerStateName(this.proto.breaker?.toolState ?? 0);
  }

  /** The session's state after this outcome. */
  get sessionState(): SessionState {
    return sessionStateName(this.proto.breaker?.sessionState ?? 0);
  }

  /** For an escalation, the report a human can read. */
  get escalation(): pb.EscalationReport | undefined {
    return this.proto.escalation;
  }

  /** False in shadow mode: the action is advisory. */
  get enforced(): boolean {
    return this.proto.enforced;
  }

  /** True when this verdict was returned again for a repeated call id. */
  get replayed(): boolean {
    return this.proto.replayed;
  }
}
