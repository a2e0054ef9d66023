/**
 * The TypeScript client for Rebound, the sidecar that tells an AI agent what
 * to do after each tool call.
 *
 * ```ts
 * const client = new Client("127.0.0.1:50051");
 * const session = client.session("run-42", { tools: ["search"] });
 * const result = await session.run("search", ({ signal }) => search(query, { signal }));
 * ```
 *
 * @module
 */

export { Client, connect, DEFAULT_ADDRESS } from "./client.js";
export { DEFAULT_CALL_TIMEOUT_MS, DEFAULT_MAX_ATTEMPTS, type ClientOptions, type Logger } from "./core.js";
export {
  AbortRunError,
  EscalationError,
  InvalidInputError,
  RecoverError,
  VerdictError,
  type VerdictErrorInit,
} from "./errors.js";
export { DEFAULT_FALLBACK_POLICY, type FallbackPolicy } from "./fallback.js";
export type { Action, BreakerState, Category, OutcomeKind, Reason, SessionState } from "./names.js";
export {
  HttpError,
  outcomeFromError,
  type HeadersInput,
  type HeadersLike,
  type OutcomeFields,
  type ReportOptions,
} from "./outcome.js";
export { Reporter } from "./reporter.js";
export {
  Session,
  type Admission,
  type ErrorContext,
  type RunContext,
  type RunOptions,
  type SessionOptions,
  type SessionSummary,
} from "./session.js";
export { Verdict } from "./verdict.js";
/** The generated protobuf messages and gRPC client, for fields this API does not surface. */
export * as proto from "./gen/rebound/v1/rebound.js";
