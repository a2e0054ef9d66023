// The connection to the sidecar that a Client and its Sessions share: the
// gRPC channel, the per-call deadline, the fail-open bookkeeping (the warning
// logged once, the fallback counter) and the background reconnect.

import {
  connectivityState,
  credentials,
  Metadata,
  status,
  type CallOptions,
  type ChannelOptions,
  type ClientDuplexStream,
  type ClientUnaryCall,
  type ServiceError,
} from "@grpc/grpc-js";

import { checkInt, checkKeys, show } from "./checks.js";
import { InvalidInputError } from "./errors.js";
import { fallbackPolicy, type FallbackPolicy } from "./fallback.js";
import * as pb from "./gen/rebound/v1/rebound.js";

/** The deadline of each call to the sidecar: past it, the local fallback policy decides. */
export const DEFAULT_CALL_TIMEOUT_MS = 250;
/** Bounds the calls `Session.run` makes for one tool call, a guard against a policy that would retry for ever. */
export const DEFAULT_MAX_ATTEMPTS = 10;

/** Where the client logs: `console` fits, and so does any logger with these methods (winston, a pino child wrapped). */
export interface Logger {
  /** The sidecar became unreachable (logged once per client). */
  warn(message: string, fields?: Record<string, unknown>): void;
  /** The sidecar answers again. */
  info(message: string, fields?: Record<string, unknown>): void;
  /** Later periods of unreachability, after the one warning. */
  debug?(message: string, fields?: Record<string, unknown>): void;
}

/** How a Client talks to its sidecar. */
export interface ClientOptions {
  /** The deadline of each call to the sidecar, in milliseconds (default 250). */
  callTimeoutMs?: number;
  /** Bounds the calls `Session.run` makes for one tool call (default 10). */
  maxAttempts?: number;
  /** Where the client logs (default: stderr through `console.warn`). */
  logger?: Logger;
  /** Overrides of the local policy used when the sidecar does not answer (default: the seed defaults). */
  fallbackPolicy?: Partial<FallbackPolicy>;
  /** Extra @grpc/grpc-js channel options, applied over the client's own. */
  channelOptions?: ChannelOptions;
  /** The randomness behind the fallback's jitter, uniform in [0, 1) (default `Math.random`); for tests. */
  random?: () => number;
  /** The clock, in milliseconds since the epoch (default `Date.now`); for tests. */
  now?: () => number;
}

/** Writes to stderr: a library must not write to a program's stdout. */
const stderrLogger: Logger = {
  warn: (message, fields) => console.warn(message, ...(fields === undefined ? [] : [fields])),
  info: (message, fields) => console.warn(message, ...(fields === undefined ? [] : [fields])),
};

/**
 * The channel's own options. Reconnect backoff is far tighter than gRPC's
 * default (up to 120 s between tries) because the sidecar is local: a refused
 * connection costs next to nothing, and when the sidecar is back the agent
 * should use it within a second or so. A proxy from the environment must
 * never sit between an agent and its loopback sidecar.
 */
const CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
  "grpc.enable_http_proxy": 0,
};

type Unary<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

/** The shared state behind a Client and its Sessions. */
export class Core {
  /** The generated gRPC client. */
  readonly rpc: pb.ReboundClient;
  /** The address as given. */
  readonly addr: string;
  /** Each call's deadline, in milliseconds. */
  readonly callTimeoutMs: number;
  /** The guard on `run`'s attempts. */
  readonly maxAttempts: number;
  /** Where to log. */
  readonly logger: Logger;
  /** The local fallback policy. */
  readonly policy: Readonly<FallbackPolicy>;
  /** The jitter's randomness. */
  readonly random: () => number;
  /** The clock. */
  readonly now: () => number;
  /** How many decisions the local policy made. */
  fallbacks = 0;
  private degraded = false;
  private warned = false;
  private closed = false;
  /** The Observe streams open on the channel: close() cancels them, which closing the channel does not. */
  private readonly streams = new Set<ClientDuplexStream<pb.Outcome, pb.Verdict>>();

  /** Checks the options and opens the channel (it connects in the background). */
  constructor(addr: string, options: ClientOptions) {
    if (typeof options !== "object" || options === null) {
      throw new InvalidInputError(`client options ${show(options)}: must be an object`);
    }
    checkKeys("client options", options, [
      "callTimeoutMs",
      "maxAttempts",
      "logger",
      "fallbackPolicy",
      "channelOptions",
      "random",
      "now",
    ]);
    this.addr = addr;
    const target = grpcTarget(addr);
    this.callTimeoutMs = checkInt("callTimeoutMs", options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, 1, 3_600_000);
    this.maxAttempts = checkInt("maxAttempts", options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, 1, 1000);
    const logger = options.logger ?? stderrLogger;
    if (typeof logger.warn !== "function" || typeof logger.info !== "function") {
      throw new InvalidInputError("logger: must have warn and info methods");
    }
    this.logger = logger;
    this.policy = fallbackPolicy(options.fallbackPolicy);
    for (const [name, fn] of [["random", options.random], ["now", options.now]] as const) {
      if (fn !== undefined && typeof fn !== "function") throw new InvalidInputError(`${name} ${show(fn)}: must be a function`);
    }
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
    this.rpc = new pb.ReboundClient(target, credentials.createInsecure(), { ...CHANNEL_OPTIONS, ...options.channelOptions });
    this.keepConnected();
  }

  /**
   * Makes the channel reconnect on its own whenever it drops or goes idle,
   * instead of waiting for the next call, so that the sidecar is used again as
   * soon as it is back. gRPC spaces the attempts by its reconnect backoff.
   */
  private keepConnected(): void {
    if (this.closed) return;
    const channel = this.rpc.getChannel();
    const state = channel.getConnectivityState(true);
    if (state === connectivityState.SHUTDOWN) return;
    channel.watchConnectivityState(state, Infinity, () => this.keepConnected());
  }

  /**
   * Closes the channel; calls in flight fail and fall back. Open streams are
   * cancelled, so that their outcomes still waiting fall back too and nothing
   * of the client keeps Node running.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const call of this.streams) call.cancel();
    this.rpc.close();
  }

  /** True once closed. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** One unary call with the call deadline. */
  private unary<Req, Res>(method: Unary<Req, Res>, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.rpc, request, new Metadata(), { deadline: Date.now() + this.callTimeoutMs }, (err, res) => {
        if (err !== null) reject(err);
        else resolve(res);
      });
    });
  }

  /** Opens an Observe stream, which close() cancels; undefined once closed. */
  observe(): ClientDuplexStream<pb.Outcome, pb.Verdict> | undefined {
    if (this.closed) return undefined;
    const call = this.rpc.observe();
    this.streams.add(call);
    call.on("status", () => this.streams.delete(call));
    return call;
  }

  /** StartSession with the call deadline. */
  startSession(req: pb.StartSessionRequest): Promise<pb.StartSessionResponse> {
    return this.unary<pb.StartSessionRequest, pb.StartSessionResponse>(this.rpc.startSession, req);
  }

  /** Report with the call deadline. */
  report(o: pb.Outcome): Promise<pb.Verdict> {
    return this.unary<pb.Outcome, pb.Verdict>(this.rpc.report, o);
  }

  /** Admit with the call deadline. */
  admit(req: pb.AdmitRequest): Promise<pb.AdmitResponse> {
    return this.unary<pb.AdmitRequest, pb.AdmitResponse>(this.rpc.admit, req);
  }

  /** Context with the call deadline. */
  context(req: pb.ContextRequest): Promise<pb.ContextResponse> {
    return this.unary<pb.ContextRequest, pb.ContextResponse>(this.rpc.context, req);
  }

  /** EndSession with the call deadline. */
  endSession(req: pb.EndSessionRequest): Promise<pb.EndSessionResponse> {
    return this.unary<pb.EndSessionRequest, pb.EndSessionResponse>(this.rpc.endSession, req);
  }

  /**
   * Sorts an RPC error: a rejected argument is the caller's to fix and is
   * thrown as InvalidInputError; anything else (unreachable, too slow, a
   * sidecar fault) is logged and left to the fallback, which the caller
   * learns from a normal return.
   */
  failed(op: string, err: unknown): void {
    const details = refused(err);
    if (details !== undefined) throw new InvalidInputError(`${op}: the sidecar rejected it: ${details}`);
    if (this.degraded) return;
    this.degraded = true;
    const fields = {
      op,
      error: err instanceof Error ? err.message : String(err),
      addr: this.addr,
      timeoutMs: this.callTimeoutMs,
    };
    // Warn once per client: an agent reporting hundreds of calls must not flood its log.
    if (!this.warned) {
      this.warned = true;
      this.log("warn", "rebound: sidecar unreachable; using the local fallback policy and reconnecting in the background", fields);
    } else {
      this.log("debug", "rebound: sidecar unreachable again; using the local fallback policy", fields);
    }
  }

  /** Notes that the sidecar answered, ending a fallback period. */
  answered(): void {
    if (!this.degraded) return;
    this.degraded = false;
    this.log("info", "rebound: sidecar reachable again", { addr: this.addr });
  }

  /** @internal Logs without ever throwing: a broken logger must not be what stops the agent. */
  log(level: keyof Logger, message: string, fields: Record<string, unknown>): void {
    try {
      this.logger[level]?.(message, fields);
    } catch {
      // Nothing sensible is left to do with a log line the logger refused.
    }
  }
}

/** The sidecar's message when it rejected an argument (INVALID_ARGUMENT); undefined for any other error. */
export function refused(err: unknown): string | undefined {
  const e = err as Partial<ServiceError> | null;
  return e?.code === status.INVALID_ARGUMENT ? String(e.details) : undefined;
}

/** Checks an address (`host:port` or `unix:/path`) and turns it into a gRPC target. */
export function grpcTarget(addr: unknown): string {
  if (typeof addr !== "string") throw new InvalidInputError(`address ${show(addr)}: must be a string`);
  if (addr.startsWith("unix:")) {
    if (addr.slice(5).replace(/^\/+/, "") === "") {
      throw new InvalidInputError(`address ${show(addr)}: a Unix socket needs a path (unix:/path/to.sock)`);
    }
    // grpc-js reads "unix:/abs", "unix:///abs" and "unix:relative" as they are.
    return addr;
  }
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]\s/]+):(\d{1,5})$/.exec(addr);
  if (m === null) {
    throw new InvalidInputError(`address ${show(addr)}: want host:port, [ipv6]:port or unix:/path`);
  }
  const port = Number(m[2]);
  if (port < 1 || port > 65535) throw new InvalidInputError(`address ${show(addr)}: port ${port} is not 1 to 65535`);
  return addr;
}
