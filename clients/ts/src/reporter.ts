import type { ClientDuplexStream } from "@grpc/grpc-js";

import type { SessionCounts } from "./breaker.js";
import { show } from "./checks.js";
import type { Core } from "./core.js";
import { InvalidInputError } from "./errors.js";
import * as pb from "./gen/rebound/v1/rebound.js";
import { outcomeFromError, type ReportOptions } from "./outcome.js";
import type { Session } from "./session.js";
import type { Verdict } from "./verdict.js";

/** An outcome sent on a stream, waiting for its verdict. */
interface Pending {
  outcome: pb.Outcome;
  /** The session's counts after it, for the fallback. */
  counts: SessionCounts;
  /** When it was sent (performance.now()), for the call timeout. */
  sentAt: number;
  settled: boolean;
  resolve(v: Verdict): void;
  reject(e: unknown): void;
}

/** One Observe stream and the outcomes sent on it that await their verdicts, oldest first. */
interface ObserveStream {
  call: ClientDuplexStream<pb.Outcome, pb.Verdict>;
  pending: Pending[];
  /** Set once the stream is given up, by error, timeout, abort or close. */
  ended: boolean;
  /** Fires when the oldest pending outcome's call timeout may have passed. */
  timer: NodeJS.Timeout | undefined;
  /** Resolves once gRPC has finished the call (its status arrived). */
  finished: Promise<void>;
}

/**
 * Streams one session's outcomes over a single `Observe` stream, for agents
 * that report at high rates: no per-call RPC setup, and any number of
 * outcomes in flight (call `report` without awaiting each one; the sidecar
 * answers in order, one verdict per outcome).
 *
 * It fails open like the rest of the client: an outcome whose verdict does not
 * arrive within the call timeout, or whose stream breaks, is answered by the
 * local fallback policy, and the next report opens a new stream. `close()` it when done.
 */
export class Reporter {
  private readonly session: Session;
  private readonly core: Core;
  private readonly signal: AbortSignal | undefined;
  private current: ObserveStream | undefined;
  private opening: Promise<ObserveStream | undefined> | undefined;
  private closed = false;
  private readonly streams = new Set<ObserveStream>();

  /** Use `session.reporter()`. */
  constructor(session: Session, core: Core, signal: AbortSignal | undefined) {
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidInputError(`reporter signal ${show(signal)}: not an AbortSignal`);
    }
    this.session = session;
    this.core = core;
    this.signal = signal;
    signal?.addEventListener(
      "abort",
      () => {
        for (const st of this.streams) this.end(st, signal.reason);
      },
      { once: true },
    );
  }

  /** Reports the outcome of one call of `tool` (built as `Session.report` does) and resolves to its verdict. */
  async report(tool: string, options: ReportOptions = {}): Promise<Verdict> {
    return this.send(outcomeFromError(tool, options));
  }

  /** Reports an outcome built by hand (see `Session.reportOutcome`). */
  async reportOutcome(outcome: pb.DeepPartial<pb.Outcome>): Promise<Verdict> {
    if (typeof outcome !== "object" || outcome === null) throw new InvalidInputError(`outcome ${show(outcome)}: must be an object`);
    return this.send(pb.Outcome.fromPartial(outcome));
  }

  private async send(o: pb.Outcome): Promise<Verdict> {
    if (this.closed) throw new Error("rebound: report on a closed Reporter");
    const counts = this.session.prepare(o);
    let st = this.current !== undefined && !this.current.ended ? this.current : undefined;
    st ??= await this.open();
    // The sidecar may have lost the session while the stream stayed open (expiry, eviction): declare it again first.
    if (st !== undefined && this.session.undeclared && !(await this.session.ensureDeclared())) st = undefined;
    if (st === undefined || st.ended) return this.session.fallback(o, counts);
    const stream = st;
    return new Promise<Verdict>((resolve, reject) => {
      stream.pending.push({ outcome: o, counts, sentAt: performance.now(), settled: false, resolve, reject });
      // A sidecar that stops reading makes writes queue up in memory; the call timeout bounds that.
      stream.call.write(o);
      this.arm(stream);
    });
  }

  /** Opens a stream, or resolves to undefined when the sidecar does not answer (or the reporter is done). */
  private open(): Promise<ObserveStream | undefined> {
    this.opening ??= (async (): Promise<ObserveStream | undefined> => {
      if (this.signal?.aborted || this.closed) return undefined;
      if (!(await this.session.ensureDeclared())) return undefined;
      if (this.signal?.aborted || this.closed) return undefined;
      const call = this.core.observe();
      // The client was closed: answered locally, as when the sidecar is down.
      if (call === undefined) return undefined;
      let finish: () => void = () => {};
      const st: ObserveStream = {
        call,
        pending: [],
        ended: false,
        timer: undefined,
        finished: new Promise<void>((resolve) => {
          finish = resolve;
        }),
      };
      call.on("data", (v: pb.Verdict) => this.onVerdict(st, v));
      call.on("error", (err: Error) => this.end(st, err));
      call.on("end", () => this.end(st, new Error("the sidecar ended the stream")));
      call.on("status", () => {
        this.streams.delete(st);
        finish();
      });
      this.streams.add(st);
      this.current = st;
      return st;
    })().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  /** Hands a verdict to the oldest pending outcome of its stream. */
  private onVerdict(st: ObserveStream, v: pb.Verdict): void {
    const p = st.pending.shift();
    if (p === undefined) {
      this.end(st, new Error("the sidecar sent a verdict for no outcome"));
      return;
    }
    this.core.answered();
    if (p.settled) return;
    p.settled = true;
    p.resolve(this.session.accept(p.outcome, v));
  }

  /**
   * Makes sure a timer watches the oldest pending outcome. One timer per
   * stream, re-armed only when it fires, keeps the cost per outcome flat.
   */
  private arm(st: ObserveStream): void {
    const head = st.pending[0];
    if (st.timer !== undefined || head === undefined || st.ended) return;
    const wait = Math.max(head.sentAt + this.core.callTimeoutMs - performance.now(), 0);
    st.timer = setTimeout(() => {
      st.timer = undefined;
      const oldest = st.pending[0];
      if (oldest !== undefined && performance.now() - oldest.sentAt >= this.core.callTimeoutMs) {
        // The sidecar is too slow: give up on this stream so that the outcomes
        // queued behind this one are answered locally too, not one timeout each.
        this.end(st, new Error(`no verdict within ${this.core.callTimeoutMs} ms`));
      } else {
        this.arm(st);
      }
    }, wait);
  }

  /**
   * Gives a stream up and answers its pending outcomes locally (or rejects
   * them, when the sidecar rejected an argument).
   */
  private end(st: ObserveStream, cause: unknown): void {
    if (st.ended && st.pending.length === 0) return;
    st.ended = true;
    if (this.current === st) this.current = undefined;
    if (st.timer !== undefined) clearTimeout(st.timer);
    st.timer = undefined;
    const pending = st.pending;
    st.pending = [];
    // Cancelling a finished call does nothing; otherwise it frees the stream at once.
    st.call.cancel();
    if (pending.length === 0) {
      // Nothing was lost (a clean end after close, or a break between outcomes);
      // the next report finds out whether the sidecar is still there.
      return;
    }
    let rejected: unknown;
    try {
      this.core.failed("Observe", cause);
    } catch (err) {
      rejected = err;
    }
    for (const p of pending) {
      if (p.settled) continue;
      p.settled = true;
      if (rejected !== undefined) p.reject(rejected);
      else p.resolve(this.session.fallback(p.outcome, p.counts));
    }
  }

  /**
   * Ends the stream after the verdicts already asked for have arrived (or
   * timed out), and waits for it to finish. Reports after close reject.
   */
  async close(): Promise<void> {
    this.closed = true;
    // A failed declaration was already thrown to the report that caused it.
    await this.opening?.catch(() => undefined);
    const st = this.current;
    this.current = undefined;
    if (st === undefined || st.ended) return;
    st.call.end();
    // The sidecar closes its side once it has answered; bound the wait.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.core.callTimeoutMs);
    });
    await Promise.race([st.finished, late]);
    clearTimeout(timer);
    this.end(st, new Error(`the stream did not finish within ${this.core.callTimeoutMs} ms of close`));
  }
}
