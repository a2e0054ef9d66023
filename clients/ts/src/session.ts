import { randomBytes } from "node:crypto";

import { declaredLimits, type SessionCounts } from "./breaker.js";
import {
  checkCost,
  checkId,
  checkInt,
  checkKeys,
  checkPlainObject,
  MAX_LABEL_VALUE_BYTES,
  MAX_LABELS,
  MAX_TOOLS,
  show,
} from "./checks.js";
import { refused, type Core } from "./core.js";
import { AbortRunError, EscalationError, InvalidInputError, RecoverError } from "./errors.js";
import { decide } from "./fallback.js";
import * as pb from "./gen/rebound/v1/rebound.js";
import { LocalState } from "./local.js";
import {
  breakerStateName,
  reasonName,
  sessionStateName,
  type BreakerState,
  type Reason,
  type SessionState,
} from "./names.js";
import { checkOutcome, FIELD_KEYS, outcomeFromError, type OutcomeFields, type ReportOptions } from "./outcome.js";
import { Reporter } from "./reporter.js";
import { Verdict } from "./verdict.js";

/** What a session declares to the sidecar (StartSession) before its first report. */
export interface SessionOptions {
  /** The tool names the agent has, so that an unknown tool's verdict can suggest the nearest. */
  tools?: readonly string[];
  /** The most outcomes the session may report; 0 keeps the sidecar's default. */
  stepLimit?: number;
  /** The most cost the session may spend; 0 keeps the sidecar's default. */
  costLimit?: number;
  /** How many errors escalate the session; 0 keeps the sidecar's default. */
  errorLimit?: number;
  /** A named policy profile from the sidecar's config. */
  profile?: string;
  /** Free labels kept with the session. */
  labels?: Readonly<Record<string, string>>;
}

/** What `run` passes to the tool function. */
export interface RunContext {
  /** The signal given to `run`, to pass on to fetch, child processes and the like. */
  signal: AbortSignal | undefined;
  /** Which attempt this is: 1 for the first call, 2 for the first retry. */
  attempt: number;
}

/** Options of `run`: an AbortSignal, and outcome fields applied to every attempt's outcome. */
export interface RunOptions extends OutcomeFields {
  /** Aborts the run: checked before each attempt and while waiting to retry. */
  signal?: AbortSignal;
}

/** The answer to `admit`. */
export interface Admission {
  /** True when the call may go ahead. */
  allowed: boolean;
  /** Why not, when not allowed. */
  reason: Reason;
  /** When to come back, in milliseconds from now (0 when allowed or never). */
  retryAfterMs: number;
  /** The tool's breaker state. */
  toolState: BreakerState;
  /** The session's state. */
  sessionState: SessionState;
  /** A sentence saying why, for logs and humans. */
  message: string;
  /** True when the local fallback answered (it always allows). */
  fallback: boolean;
}

/** The error context for the session's next LLM turn. */
export interface ErrorContext {
  /** The text to put into the prompt (empty when nothing is unresolved). */
  text: string;
  /** How many errors are shown as blocks. */
  errorsShown: number;
  /**
   * How many unresolved errors are not shown as blocks: counted in the summary line, or left out
   * with it when a token budget leaves room for the newest block alone.
   */
  errorsHidden: number;
  /** The text's length in tokens, when a token budget applies (0 otherwise). */
  tokens: number;
  /** True when the text was built locally because the sidecar did not answer. */
  fallback: boolean;
}

/** What happened in a session. */
export interface SessionSummary {
  /** Outcomes reported. */
  calls: number;
  /** Failures reported. */
  errors: number;
  /** Failures by category name. */
  errorsByCategory: Record<string, number>;
  /** Retries asked for. */
  retries: number;
  /** Escalations answered. */
  escalations: number;
  /** Cost reported. */
  cost: number;
  /** How long the session ran, in milliseconds. */
  durationMs: number;
  /** The state it ended in. */
  state: SessionState;
  /** The labels the session declared (the `labels` option). */
  labels: Record<string, string>;
  /** True when this is the client's own count because the sidecar did not answer or had forgotten the session. */
  fallback: boolean;
}

/** Report options that `run` sets itself: each attempt is its own call with its own call id. */
const RUN_OWN = ["error", "ok", "attempt", "callId"] as const;

/** One agent run on one client. Its methods never throw because the sidecar is down; see `run`. */
export class Session {
  /** The session's id. */
  readonly id: string;
  private readonly core: Core;
  /** Sent as StartSession before the first report; undefined when there is nothing to declare. */
  private readonly declaration: pb.StartSessionRequest | undefined;
  /**
   * True once the sidecar has accepted the declaration. A fallback clears it,
   * because the sidecar may have restarted and forgotten the session, and so
   * does a verdict showing that the sidecar started the session anew.
   */
  private declared = false;
  /** True once a verdict came from the sidecar (not from the fallback) since the session was last marked lost. */
  private answeredBefore = false;
  /** True once the sidecar has accepted the declaration at least once: a later refusal is a re-declaration's. */
  private acceptedOnce = false;
  /**
   * Counts the times the sidecar may have lost the session. A StartSession
   * counts only in the epoch it was sent in: one answered after the client
   * noticed a loss may have reached the sidecar before the loss.
   */
  private epoch = 0;
  private declaring: Promise<Declared> | undefined;
  private readonly callPrefix: string;
  private calls = 0;
  /** @internal What the client remembers of the session, for the fallback. */
  readonly local: LocalState;

  /** Use `client.session(id, options)`. */
  constructor(core: Core, id: string, options: SessionOptions | undefined) {
    this.core = core;
    this.id = checkId("session id", id);
    this.declaration = options === undefined ? undefined : declaration(id, options);
    // Call ids only need to be unique within the session; a random prefix keeps
    // two processes that reuse a session id apart.
    this.callPrefix = randomBytes(6).toString("hex");
    this.local = new LocalState(core.now(), declaredLimits(this.declaration), this.declaration?.labels);
  }

  /**
   * Declares the session to the sidecar now (StartSession; idempotent) and
   * returns the limits in force. Without it, the declaration goes with the
   * first report. Resolves to undefined when the sidecar does not answer (the
   * declaration is sent again later); rejects with InvalidInputError when the
   * sidecar rejects it, unless it accepted it before (see `declare`).
   */
  async start(): Promise<pb.StartSessionResponse | undefined> {
    const result = await this.declare();
    return typeof result === "string" ? undefined : result;
  }

  /**
   * Sends the declaration. A refusal after the sidecar accepted the same
   * declaration before is not the caller's to fix: a config reload removed
   * the profile it names, say, and the sidecar then lost the session. Throwing
   * would fail every later call of the run, so it is logged once and the
   * session counts as declared (without its setup on the sidecar).
   */
  private async declare(): Promise<Declared> {
    const req = this.declaration ?? pb.StartSessionRequest.create({ sessionId: this.id });
    const epoch = this.epoch;
    let resp: pb.StartSessionResponse;
    try {
      resp = await this.core.startSession(req);
    } catch (err) {
      const refusal = refused(err);
      if (refusal === undefined || !this.acceptedOnce) {
        this.core.failed("StartSession", err);
        return "unanswered";
      }
      this.core.answered();
      const message = `rebound: the sidecar refused to declare session ${show(this.id)} again; going on without its declaration: ${refusal}`;
      this.core.log("warn", message, { session: this.id, error: refusal });
      if (epoch === this.epoch) this.declared = true;
      return "refused";
    }
    this.core.answered();
    this.acceptedOnce = true;
    if (epoch === this.epoch) this.declared = true;
    return resp;
  }

  /**
   * Reports the outcome of one call of `tool` and returns the verdict: a
   * failure when `options.error` is given (the outcome is read from it, see
   * `outcomeFromError`), a success otherwise. Rejects only for bad input; when
   * the sidecar does not answer in time, the local fallback policy decides and
   * `verdict.fallback` is true.
   */
  async report(tool: string, options: ReportOptions = {}): Promise<Verdict> {
    return this.send(outcomeFromError(tool, options));
  }

  /**
   * Reports an outcome built by hand as the generated message (`ok` defaults
   * to false, as in the proto). Fills in the session id and, when empty, a call id.
   */
  async reportOutcome(outcome: pb.DeepPartial<pb.Outcome>): Promise<Verdict> {
    if (typeof outcome !== "object" || outcome === null) throw new InvalidInputError(`outcome ${show(outcome)}: must be an object`);
    return this.send(pb.Outcome.fromPartial(outcome));
  }

  private async send(o: pb.Outcome): Promise<Verdict> {
    const counts = this.prepare(o);
    if (!(await this.ensureDeclared())) {
      // The sidecar just failed to answer: do not make the agent wait a second deadline.
      return this.fallback(o, counts);
    }
    let pv: pb.Verdict;
    try {
      pv = await this.core.report(o);
    } catch (err) {
      this.core.failed("Report", err);
      return this.fallback(o, counts);
    }
    this.core.answered();
    return this.accept(o, pv);
  }

  /** @internal Declaration still owed to the sidecar: the next call must send it first. */
  get undeclared(): boolean {
    return this.declaration !== undefined && !this.declared;
  }

  /**
   * @internal Takes a verdict from the sidecar. Its first step, after earlier
   * verdicts, means the sidecar started the session anew (it restarted, or
   * expired or evicted the session) without the declared tools and limits:
   * the next call declares it again. With reports in flight a verdict can
   * arrive out of turn; such a false alarm costs one idempotent StartSession.
   */
  accept(o: pb.Outcome, pv: pb.Verdict): Verdict {
    // A replayed verdict carries the counters of the call it first answered.
    if (this.answeredBefore && pv.breaker?.steps === 1 && !pv.replayed) this.lost();
    else this.answeredBefore = true;
    this.local.record(o, pv);
    return new Verdict(pv);
  }

  /**
   * @internal Checks an outcome, fills in the session and call ids, and counts
   * it locally; returns the session's counts after it, for the fallback.
   */
  prepare(o: pb.Outcome): SessionCounts {
    if (o.sessionId !== "" && o.sessionId !== this.id) {
      throw new InvalidInputError(`an outcome for session ${show(o.sessionId)} reported to session ${show(this.id)}`);
    }
    checkOutcome(o);
    o.sessionId = this.id;
    if (o.callId === "") o.callId = `${this.callPrefix}-${++this.calls}`;
    return this.local.observe(o);
  }

  /** @internal Sends the declaration if the sidecar has not accepted it yet; false means it did not answer. */
  async ensureDeclared(): Promise<boolean> {
    if (!this.undeclared) return true;
    // Concurrent reports share one StartSession call.
    this.declaring ??= this.declare().finally(() => {
      this.declaring = undefined;
    });
    return (await this.declaring) !== "unanswered";
  }

  /**
   * @internal Notes that the sidecar may have lost the session: the next call
   * declares it again, and the first verdict after that, which may well be
   * step 1 of the session the sidecar starts anew, is not taken for another loss.
   */
  lost(): void {
    this.epoch++;
    this.declared = false;
    this.answeredBefore = false;
  }

  /** @internal Answers an outcome with the local policy, on the session's counts after it (from `prepare`). */
  fallback(o: pb.Outcome, counts: SessionCounts): Verdict {
    this.core.fallbacks++;
    this.lost();
    // A repeated call id gets its first verdict again, as the sidecar would give it.
    const earlier = this.local.recall(o.callId);
    if (earlier !== undefined) return new Verdict(pb.Verdict.fromPartial({ ...earlier, replayed: true }), true);
    const pv = decide(this.core.policy, o, {
      ...counts,
      limits: this.local.limits,
      labels: this.local.labels,
      nowMs: this.core.now(),
      random: this.core.random(),
    });
    this.local.record(o, pv);
    return new Verdict(pv, true);
  }

  /**
   * Runs `fn` as one call of `tool` and acts on the verdicts: reports each
   * outcome, sleeps and calls `fn` again while the verdict says retry, and
   * resolves to `fn`'s value once a call succeeds. Otherwise it rejects with a
   * {@link RecoverError} (recover, replan, reclassify: give its `snippet` to
   * the LLM), an {@link EscalationError} or an {@link AbortRunError}, each
   * with the tool's error as `cause`, or, when a verdict stops the run after a
   * successful call (a step or cost limit reached), with its value as `result`.
   * When `options.signal` aborts before an attempt or while waiting to retry,
   * it rejects with the signal's reason.
   */
  async run<T>(tool: string, fn: (call: RunContext) => T | Promise<T>, options: RunOptions = {}): Promise<T> {
    checkId("tool", tool);
    if (typeof fn !== "function") throw new InvalidInputError(`run(${show(tool)}): the tool ${show(fn)} is not a function`);
    checkPlainObject("run options", options);
    const { signal, ...fields } = options;
    for (const key of RUN_OWN) {
      if (key in fields) throw new InvalidInputError(`run(${show(tool)}): ${key} is run's own to set`);
    }
    checkKeys("run options", fields, FIELD_KEYS);
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidInputError(`run(${show(tool)}): signal ${show(signal)} is not an AbortSignal`);
    }
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const start = performance.now();
      let value: T | undefined;
      let error: unknown;
      let failed = false;
      try {
        value = await fn({ signal, attempt });
      } catch (e) {
        failed = true;
        // `throw undefined` is still a failure; report needs an error to say so.
        error = e ?? new Error(`${tool} threw ${String(e)}`);
      }
      const report: ReportOptions = { attempt, durationMs: performance.now() - start, ...fields };
      if (failed) report.error = error;
      const verdict = await this.report(tool, report);
      // A verdict can stop the run after a successful call too (a limit reached): keep what the tool returned.
      const stop = failed ? { cause: error } : { result: value };
      switch (verdict.action) {
        case "continue":
          if (failed) throw error;
          return value as T;
        case "retry":
          if (!failed) return value as T;
          if (attempt >= this.core.maxAttempts) {
            throw new RecoverError("recover", tool, verdict, { ...stop, note: `gave up after ${attempt} attempts` });
          }
          await sleep(verdict.delayMs, signal);
          break;
        case "escalate":
          throw new EscalationError("escalate", tool, verdict, stop);
        case "abort":
          throw new AbortRunError("abort", tool, verdict, stop);
        case "recover":
        case "replan":
        case "reclassify":
          throw new RecoverError(verdict.action, tool, verdict, stop);
        default:
          // An action newer than this client: back to the LLM.
          throw new RecoverError("recover", tool, verdict, stop);
      }
    }
  }

  /**
   * Opens a streaming reporter over one `Observe` stream, for high rates. The
   * signal, when given, bounds its life: once aborted, outcomes are answered locally.
   */
  reporter(options: { signal?: AbortSignal } = {}): Reporter {
    checkKeys("reporter options", options, ["signal"]);
    return new Reporter(this, this.core, options.signal);
  }

  /** Asks whether `tool` may be called now (its breaker may be open, the session stopped). Allowed when the sidecar does not answer, unless a verdict this client saw aborted the session. */
  async admit(tool: string): Promise<Admission> {
    checkId("tool", tool);
    let resp: pb.AdmitResponse;
    try {
      resp = await this.core.admit(pb.AdmitRequest.create({ sessionId: this.id, tool }));
    } catch (err) {
      this.core.failed("Admit", err);
      this.core.fallbacks++;
      // Fail open, unless a verdict this client saw aborted the session, as the sidecar would say.
      const stopped = this.local.state === pb.SessionState.SESSION_STATE_STOPPED;
      return {
        allowed: !stopped,
        reason: stopped ? "session_stopped" : "unspecified",
        retryAfterMs: 0,
        toolState: "unspecified",
        sessionState: sessionStateName(this.local.state),
        message: stopped
          ? "the session was aborted; start a new one (local fallback: the Rebound sidecar did not answer)"
          : "allowed by the local fallback: the Rebound sidecar did not answer",
        fallback: true,
      };
    }
    this.core.answered();
    return {
      allowed: resp.allowed,
      reason: reasonName(resp.reason),
      retryAfterMs: resp.retryAfterMs,
      toolState: breakerStateName(resp.toolState),
      sessionState: sessionStateName(resp.sessionState),
      message: resp.message,
      fallback: false,
    };
  }

  /**
   * The compacted error context for the session's next LLM turn (empty text
   * when nothing is unresolved). `maxTokens` asks for a token budget. When the
   * sidecar does not answer, the text is built from the errors this client
   * has seen (without a budget).
   */
  async context(options: { maxTokens?: number } = {}): Promise<ErrorContext> {
    checkKeys("context options", options, ["maxTokens"]);
    const maxTokens = checkInt("maxTokens", options.maxTokens ?? 0, 0, 2 ** 32 - 1);
    let resp: pb.ContextResponse;
    let fallback = false;
    try {
      resp = await this.core.context(pb.ContextRequest.create({ sessionId: this.id, maxTokens }));
      this.core.answered();
    } catch (err) {
      this.core.failed("Context", err);
      this.core.fallbacks++;
      resp = this.local.context();
      fallback = true;
    }
    return { text: resp.text, errorsShown: resp.errorsShown, errorsHidden: resp.errorsHidden, tokens: resp.tokens, fallback };
  }

  /** Ends the session on the sidecar and returns its summary; the client's own count when the sidecar does not answer. */
  async end(): Promise<SessionSummary> {
    let resp: pb.EndSessionResponse;
    try {
      resp = await this.core.endSession(pb.EndSessionRequest.create({ sessionId: this.id }));
    } catch (err) {
      this.core.failed("EndSession", err);
      this.core.fallbacks++;
      return summary(this.local.snapshot(this.core.now()), true);
    }
    this.core.answered();
    if (!resp.found || resp.summary === undefined) {
      // Expired on the sidecar (or it restarted): what this client saw is the best summary left.
      return summary(this.local.snapshot(this.core.now()), true);
    }
    return summary(resp.summary, false);
  }
}

/** What became of a StartSession: the sidecar's answer, a re-declaration it refused and the session went on without, or no answer. */
type Declared = pb.StartSessionResponse | "refused" | "unanswered";

function summary(s: pb.SessionSummary, fallback: boolean): SessionSummary {
  return {
    calls: s.calls,
    errors: s.errors,
    errorsByCategory: { ...s.errorsByCategory },
    retries: s.retries,
    escalations: s.escalations,
    cost: s.cost,
    durationMs: s.durationMs,
    state: sessionStateName(s.state),
    labels: { ...s.labels },
    fallback,
  };
}

/** Checks the session options and builds the StartSession request; undefined when there is nothing to declare. */
function declaration(id: string, options: SessionOptions): pb.StartSessionRequest | undefined {
  if (typeof options !== "object" || options === null) {
    throw new InvalidInputError(`session options ${show(options)}: must be an object`);
  }
  checkKeys("session options", options, ["tools", "stepLimit", "costLimit", "errorLimit", "profile", "labels"]);
  if (Object.values(options).every((v) => v === undefined)) {
    // Nothing to declare: the sidecar creates the session on first use.
    return undefined;
  }
  const req = pb.StartSessionRequest.create({ sessionId: id });
  if (options.tools !== undefined) {
    if (!Array.isArray(options.tools)) throw new InvalidInputError(`tools ${show(options.tools)}: must be an array of names`);
    if (options.tools.length > MAX_TOOLS) throw new InvalidInputError(`${options.tools.length} tools: at most ${MAX_TOOLS}`);
    req.tools = options.tools.map((t, i) => checkId(`tools[${i}]`, t));
  }
  if (options.stepLimit !== undefined) req.stepLimit = checkInt("stepLimit", options.stepLimit, 0, 2 ** 32 - 1);
  if (options.costLimit !== undefined) req.costLimit = checkCost("costLimit", options.costLimit);
  if (options.errorLimit !== undefined) req.errorLimit = checkInt("errorLimit", options.errorLimit, 0, 2 ** 32 - 1);
  if (options.profile !== undefined) req.profile = checkId("profile", options.profile);
  if (options.labels !== undefined) {
    if (typeof options.labels !== "object" || options.labels === null) {
      throw new InvalidInputError(`labels ${show(options.labels)}: must be an object of strings`);
    }
    const entries = Object.entries(options.labels);
    if (entries.length > MAX_LABELS) throw new InvalidInputError(`${entries.length} labels: at most ${MAX_LABELS}`);
    for (const [k, v] of entries) {
      checkId("label key", k);
      if (typeof v !== "string" || Buffer.byteLength(v, "utf8") > MAX_LABEL_VALUE_BYTES || !v.isWellFormed()) {
        throw new InvalidInputError(`label ${show(k)}: the value must be a string of at most ${MAX_LABEL_VALUE_BYTES} bytes`);
      }
      req.labels[k] = v;
    }
  }
  return req;
}

/** Waits ms milliseconds, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
