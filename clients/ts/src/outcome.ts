// Building an outcome from whatever a tool threw: Error subclasses from
// fetch/undici, axios, got, the OpenAI and Anthropic SDKs, Node's system
// errors and child processes, gRPC calls. Everything is read by duck typing,
// so none of those libraries is a dependency.

import { STATUS_CODES } from "node:http";

import {
  checkCost,
  checkId,
  checkInt,
  checkKeys,
  checkString,
  cleanText,
  show,
} from "./checks.js";
import { InvalidInputError } from "./errors.js";
import * as pb from "./gen/rebound/v1/rebound.js";
import { kindValue, OUTCOME_KINDS, type OutcomeKind } from "./names.js";
import { withoutOwnFrames } from "./stack.js";

/** Anything with `forEach((value, key) => ...)`: fetch's `Headers`, a `Map`. */
export interface HeadersLike {
  /** Visits each header. */
  forEach(callback: (value: string, key: string) => void): void;
}

/** Response headers: a `Headers`/`Map`, or a plain object (axios, got, Node's `IncomingHttpHeaders`). */
export type HeadersInput = HeadersLike | Readonly<Record<string, string | number | readonly string[] | null | undefined>>;

/** Outcome fields that can be set explicitly; each overrides what was read from the error. */
export interface OutcomeFields {
  /** What kind of failure this was (`unknown_tool`, `provider_error`...). */
  kind?: OutcomeKind;
  /** The HTTP status of the failed response, 100 to 599 (0 for none). */
  httpStatus?: number;
  /** Response headers; only the Retry-After family, which the sidecar reads, is kept. */
  headers?: HeadersInput;
  /** An error code: an errno name (`ECONNRESET`) or a provider's code (`insufficient_quota`). */
  code?: string;
  /** The gRPC status code of the failed call, 0 to 16. */
  grpcCode?: number;
  /** The exit code of a command. */
  exitCode?: number;
  /** The error message. */
  message?: string;
  /** The error's type name (empty clears the one read from the error). */
  exceptionType?: string;
  /** The full output or stack trace. */
  detail?: string;
  /** What the call cost, in the agent's own unit. */
  cost?: number;
  /** How long the call took, in milliseconds. */
  durationMs?: number;
}

/** The names of the outcome fields, for the unknown-option check. */
export const FIELD_KEYS = [
  "kind",
  "httpStatus",
  "headers",
  "code",
  "grpcCode",
  "exitCode",
  "message",
  "exceptionType",
  "detail",
  "cost",
  "durationMs",
] as const;

/** The names of the report options. */
const REPORT_KEYS = [...FIELD_KEYS, "error", "ok", "attempt", "callId"] as const;

/** What `Session.report` takes: the tool's error (none for a success) and fields to set or override. */
export interface ReportOptions extends OutcomeFields {
  /** The tool's error; `undefined` or `null` is a success unless `ok: false`. */
  error?: unknown;
  /** Success or failure; by default, a failure exactly when `error` is given. `ok: false` without an error reports a failure that is no exception (an unknown tool, no tool call). */
  ok?: boolean;
  /** Which attempt this was: 1 for the first call, 2 for the first retry (0 lets the sidecar count). */
  attempt?: number;
  /** The idempotency key: reporting the same call id again returns the first verdict. */
  callId?: string;
}

/**
 * A failed HTTP response as an error, carrying its status and headers: throw it
 * from a tool that uses fetch (`throw await HttpError.fromResponse(res)`) and
 * the outcome gets the status, Retry-After and the provider's error code.
 */
export class HttpError extends Error {
  /** The response's status, 100 to 599. */
  readonly status: number;
  /**
   * The response's headers, keys lowercase: the Retry-After family always, the others up to
   * {@link MAX_ERROR_HEADERS}. Only the family goes into an outcome.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The start of the response body. */
  readonly body: string;
  /**
   * The provider's error code from a JSON body: its `error.code`, else its `error.type`
   * (OpenAI's `insufficient_quota`, Anthropic's `rate_limit_error`); undefined when it has none.
   */
  readonly code: string | undefined;

  /** A failure with this status, headers and (the start of) the body. */
  constructor(status: number, init: { headers?: HeadersInput; body?: string; statusText?: string } = {}) {
    checkInt("HTTP status", status, 100, 599);
    const body = (init.body ?? "").trim();
    const text = init.statusText || STATUS_CODES[status] || "";
    super(`HTTP ${status}${text === "" ? "" : ` ${text}`}${body === "" ? "" : `: ${body}`}`);
    this.status = status;
    this.headers = init.headers === undefined ? {} : headersToRecord(init.headers, { all: true });
    this.body = body;
    this.code = body.startsWith("{") ? bodyCode(parseJson(body)) : undefined;
  }

  /** Reads a failed fetch `Response` (status, headers, the first maxBodyChars of the body and the provider's error code in it). */
  static async fromResponse(
    res: { status: number; statusText?: string; headers: HeadersLike; text(): Promise<string> },
    maxBodyChars = 4096,
  ): Promise<HttpError> {
    let body = "";
    try {
      body = (await res.text()).slice(0, maxBodyChars);
    } catch {
      // A body that cannot be read still leaves the status and headers.
    }
    return new HttpError(res.status, { headers: res.headers, body, ...(res.statusText ? { statusText: res.statusText } : {}) });
  }
}
HttpError.prototype.name = "HttpError";

/**
 * Builds the outcome of one call of `tool` from its error (a success when
 * there is none), then applies the explicit fields. From the error, and the
 * errors in its `cause` chain, it reads:
 * - the message (the chain's messages joined with ": "; of an error with stderr, the first line) and the
 *   type name (`err.name` or the class name);
 * - kind `timeout` for a `TimeoutError`-like name, a timeout errno/undici code, execa's `timedOut`, or a
 *   child process killed by its timeout; kind `cancelled` for an `AbortError`/`CanceledError`; kind
 *   `provider_error` for the OpenAI, Anthropic and Vercel AI SDKs' errors, but kind `unknown_tool` or
 *   `invalid_tool_call` for the AI SDK's errors for a tool call the model got wrong (`AI_NoSuchToolError`,
 *   `AI_InvalidToolInputError`); kind `tool_error` for anything else;
 * - `code` as a string (Node's errno name such as `ECONNRESET`, a provider's code such as `insufficient_quota`,
 *   the Azure SDK's RestError code such as `BlobNotFound`), or a JSON-RPC error code (the MCP SDK's McpError:
 *   `-32602`), or the name of an AWS SDK v3 error (with `$fault` and `$metadata`: `ThrottlingException`),
 *   else the `error.code` or `error.type` of an SDK error's parsed body (`error`; the AI SDK's `data`); for
 *   axios's and got's status-only codes (`ERR_BAD_REQUEST`), the response body's code first, and its message
 *   added to theirs;
 * - the HTTP status from `status`, `statusCode`, `response.status`, `response.statusCode` or the AWS SDK's
 *   `$metadata.httpStatusCode`;
 * - the headers from `headers`, `response.headers` or the AI SDK's `responseHeaders` (`Headers`, `Map` or a
 *   plain object);
 * - a gRPC code from a numeric `code` with `details`/`metadata` (@grpc/grpc-js's ServiceError);
 * - an exit code from `exitCode` (execa) or a child process error's numeric `code`;
 * - the detail from `stderr`, else the stack traces of the chain, without the client's own frames.
 */
export function outcomeFromError(tool: string, options: ReportOptions = {}): pb.Outcome {
  checkId("tool", tool);
  if (options instanceof Error) {
    // report(tool, err) type-checks (every option is optional) and would otherwise report a success.
    throw new InvalidInputError(`report(${show(tool)}): got an Error (${show(options.message)}); pass the error as { error }`);
  }
  checkKeys("report options", options, REPORT_KEYS);
  const failed = options.error !== undefined && options.error !== null;
  if (options.ok !== undefined && typeof options.ok !== "boolean") {
    throw new InvalidInputError(`ok ${show(options.ok)}: must be a boolean`);
  }
  if (options.ok === true && failed) {
    throw new InvalidInputError("ok: true together with an error: a call either failed or did not");
  }
  const o = pb.Outcome.create({ tool, ok: options.ok ?? !failed });
  if (failed) fillFromError(o, options.error);
  applyFields(o, options);
  if (options.attempt !== undefined) o.attempt = checkInt("attempt", options.attempt, 0, 2 ** 32 - 1);
  if (options.callId !== undefined) o.callId = checkId("call id", options.callId);
  return o;
}

/** Sets the explicit fields of an outcome, checking each. */
export function applyFields(o: pb.Outcome, f: OutcomeFields): void {
  if (f.kind !== undefined) {
    const k = kindValue(f.kind);
    if (k === undefined) throw new InvalidInputError(`kind ${show(f.kind)}: must be one of ${OUTCOME_KINDS.join(", ")}`);
    o.kind = k;
  }
  if (f.httpStatus !== undefined) o.httpStatus = checkHttpStatus(f.httpStatus);
  if (f.headers !== undefined) {
    if (typeof f.headers !== "object" || f.headers === null) {
      throw new InvalidInputError(`headers ${show(f.headers)}: must be a Headers, a Map or a plain object`);
    }
    o.headers = { ...o.headers, ...headersToRecord(f.headers) };
  }
  if (f.code !== undefined) o.code = checkString("code", f.code);
  if (f.grpcCode !== undefined) o.grpcCode = checkInt("gRPC code", f.grpcCode, 0, 16);
  if (f.exitCode !== undefined) o.exitCode = checkInt("exit code", f.exitCode, -(2 ** 31), 2 ** 31 - 1);
  if (f.message !== undefined) o.message = checkString("message", f.message);
  if (f.exceptionType !== undefined) o.exceptionType = checkString("exception type", f.exceptionType);
  if (f.detail !== undefined) o.detail = checkString("detail", f.detail);
  if (f.cost !== undefined) o.cost = checkCost("cost", f.cost);
  if (f.durationMs !== undefined) {
    if (typeof f.durationMs !== "number" || !Number.isFinite(f.durationMs) || f.durationMs < 0) {
      throw new InvalidInputError(`duration ${show(f.durationMs)}: must be zero or a positive number of milliseconds`);
    }
    o.durationMs = Math.min(Math.floor(f.durationMs), Number.MAX_SAFE_INTEGER);
  }
}

function checkHttpStatus(s: unknown): number {
  if (s === 0) return 0;
  if (typeof s !== "number" || !Number.isInteger(s) || s < 100 || s > 599) {
    throw new InvalidInputError(`HTTP status ${show(s)}: must be 100 to 599 (0 for none)`);
  }
  return s;
}

/**
 * Applies the sidecar's rules to an outcome and makes its text safe to send
 * (well-formed Unicode, bounded length): tool output often is neither.
 */
export function checkOutcome(o: pb.Outcome): void {
  checkId("tool", o.tool);
  if (o.callId !== "") checkId("call id", o.callId);
  checkCost("cost", o.cost);
  checkHttpStatus(o.httpStatus);
  if (o.grpcCode !== undefined) checkInt("gRPC code", o.grpcCode, 0, 16);
  if (o.exitCode !== undefined) checkInt("exit code", o.exitCode, -(2 ** 31), 2 ** 31 - 1);
  checkInt("attempt", o.attempt, 0, 2 ** 32 - 1);
  if (!Number.isInteger(o.kind) || o.kind < 0 || o.kind >= OUTCOME_KINDS.length) {
    throw new InvalidInputError(`outcome kind ${show(o.kind)}: unknown`);
  }
  if (!Number.isInteger(o.durationMs) || o.durationMs < 0) {
    throw new InvalidInputError(`duration ${show(o.durationMs)}: must be a whole number of milliseconds, zero or more`);
  }
  o.message = cleanText(checkString("message", o.message));
  o.detail = cleanText(checkString("detail", o.detail));
  o.exceptionType = cleanText(checkString("exception type", o.exceptionType), 1024);
  o.code = cleanText(checkString("code", o.code), 1024);
  o.headers = headersToRecord(o.headers);
}

// ------------------------------------------------------------------ reading errors

/** How deep the cause chain is followed; a cycle or a runaway chain stops there. */
const MAX_CHAIN = 8;

const TIMEOUT_CODES = new Set(["ETIMEDOUT", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
const CANCEL_CODES = new Set(["ABORT_ERR", "ERR_CANCELED"]);

type Bag = Record<string | symbol, unknown>;

/** Reads a property without letting a throwing getter or a Proxy trap escape. */
function get(obj: unknown, key: string): unknown {
  if ((typeof obj !== "object" && typeof obj !== "function") || obj === null) return undefined;
  try {
    return (obj as Bag)[key];
  } catch {
    return undefined;
  }
}

/**
 * The error and its causes, outermost first (the AI SDK RetryError's `lastError`, else AggregateError's first
 * error, counts as a cause).
 */
function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  let e: unknown = err;
  while (e !== undefined && e !== null && chain.length < MAX_CHAIN && !chain.includes(e)) {
    chain.push(e);
    const cause = get(e, "cause");
    if (cause !== undefined && cause !== null) {
      e = cause;
      continue;
    }
    // The Vercel AI SDK's RetryError: the attempt its retries ended on says what to do now.
    const last = get(e, "lastError");
    if (last !== undefined && last !== null) {
      e = last;
      continue;
    }
    const errors = get(e, "errors");
    e = Array.isArray(errors) ? errors[0] : undefined;
  }
  return chain;
}

/** The error's type name: its `name`, or its class name when `name` is the generic "Error". */
export function typeName(e: unknown): string {
  const name = get(e, "name");
  if (typeof name === "string" && name !== "" && name !== "Error") return name;
  const ctor = get(e, "constructor");
  const ctorName = get(ctor, "name");
  if (typeof ctorName === "string" && ctorName !== "" && ctorName !== "Error" && ctorName !== "Object") return ctorName;
  return "";
}

function messageOf(e: unknown): string {
  if (typeof e === "string") return e;
  const m = get(e, "message");
  if (typeof m === "string") return m;
  if (typeof e === "object" && e !== null) return "";
  return String(e);
}

function isTimeout(e: unknown): boolean {
  const name = typeName(e);
  if (/Timeout(Error)?$/.test(name)) return true;
  const code = get(e, "code");
  if (typeof code === "string") {
    if (TIMEOUT_CODES.has(code)) return true;
    // axios reports its own timeout as ECONNABORTED "timeout of 500ms exceeded".
    if (code === "ECONNABORTED" && /timeout/i.test(messageOf(e))) return true;
  }
  if (get(e, "timedOut") === true) return true;
  // A child process killed by its `timeout` option: a signal, no exit code, killed by Node.
  return get(e, "killed") === true && typeof get(e, "signal") === "string" && get(e, "code") === null;
}

/**
 * The base classes of the OpenAI and Anthropic SDKs' errors (the Python client names their packages), and
 * of the Vercel AI SDK's (its API calls, missing keys and models, output it could not parse): exported as
 * `AISDKError`, the class is `_AISDKError` in the SDK's builds (ai 6's, @ai-sdk/provider 3's).
 */
const PROVIDER_ERROR_CLASSES = new Set(["OpenAIError", "AnthropicError", "_AISDKError", "AISDKError"]);

/**
 * The Vercel AI SDK's errors for a tool call the model got wrong, by name: the tool never ran, so they are
 * the model's (kind `unknown_tool` or `invalid_tool_call`), not the tool's. `AI_InvalidToolArgumentsError`
 * is the AI SDK 4's name for `AI_InvalidToolInputError`.
 */
const TOOL_CALL_ERRORS: ReadonlyMap<string, pb.OutcomeKind> = new Map([
  ["AI_NoSuchToolError", pb.OutcomeKind.OUTCOME_KIND_UNKNOWN_TOOL],
  ["AI_InvalidToolInputError", pb.OutcomeKind.OUTCOME_KIND_INVALID_TOOL_CALL],
  ["AI_InvalidToolArgumentsError", pb.OutcomeKind.OUTCOME_KIND_INVALID_TOOL_CALL],
]);

/** True for an error an LLM provider's SDK threw: a provider error, not the tool's. */
function isProviderError(e: unknown): boolean {
  let proto: unknown = e;
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    try {
      proto = typeof proto === "object" && proto !== null ? Object.getPrototypeOf(proto) : null;
    } catch {
      return false;
    }
    if (proto === null || proto === Error.prototype) return false;
    const name = get(get(proto, "constructor"), "name");
    if (typeof name === "string" && PROVIDER_ERROR_CLASSES.has(name)) return true;
  }
  return false;
}

function isCancelled(e: unknown): boolean {
  const name = typeName(e);
  if (/AbortError$/.test(name) || /Cancell?edError$/.test(name)) return true;
  const code = get(e, "code");
  return typeof code === "string" && CANCEL_CODES.has(code);
}

function statusOf(e: unknown): number {
  const response = get(e, "response");
  // The AWS SDK for JavaScript v3's errors keep theirs in `$metadata.httpStatusCode`.
  const aws = get(get(e, "$metadata"), "httpStatusCode");
  for (const s of [get(e, "status"), get(e, "statusCode"), get(response, "status"), get(response, "statusCode"), aws]) {
    if (typeof s === "number" && Number.isInteger(s) && s >= 100 && s <= 599) return s;
  }
  return 0;
}

function headersOf(e: unknown): Record<string, string> | undefined {
  // The Vercel AI SDK's APICallError keeps the response's as `responseHeaders`.
  for (const h of [get(e, "headers"), get(get(e, "response"), "headers"), get(e, "responseHeaders")]) {
    if (typeof h === "object" && h !== null && !Array.isArray(h)) {
      const record = headersToRecord(h as HeadersInput);
      if (Object.keys(record).length > 0) return record;
    }
  }
  return undefined;
}

/** Whether `fault` is a smithy ServiceException's `$fault`. */
function isFault(fault: unknown): boolean {
  return fault === "client" || fault === "server";
}

/** The error codes JSON-RPC reserves (MCP's among them: -32602 invalid params, -32603 internal). */
const JSON_RPC_CODES = [-32768, -32000] as const;

/**
 * The codes HTTP libraries give every failed status: axios's `ERR_BAD_REQUEST` (4xx) and `ERR_BAD_RESPONSE`
 * (5xx), got's `ERR_NON_2XX_3XX_RESPONSE`. The status says as much; the response body's provider code says
 * more (OpenAI's `insufficient_quota` on a 429, through axios), so it is taken first.
 */
const STATUS_ONLY_CODES = new Set(["ERR_BAD_REQUEST", "ERR_BAD_RESPONSE", "ERR_NON_2XX_3XX_RESPONSE"]);

/** The longest response body parsed for a provider's error: a JSON error body is short. */
const MAX_JSON_BODY = 64 * 1024;

/**
 * The parsed body of the response an HTTP library's error keeps: axios's `response.data` (parsed already
 * when it was JSON), got's `response.body` (text unless asked for JSON).
 */
function responseBody(e: unknown): unknown {
  const response = get(e, "response");
  const body = get(response, "data") ?? get(response, "body");
  if (typeof body !== "string") return body;
  return body.length <= MAX_JSON_BODY && body.trimStart().startsWith("{") ? parseJson(body) : undefined;
}

/**
 * What the body of an HTTP library's failed response says, when its error's own text gives only the status
 * (axios's `Request failed with status code 429`; openapi-typescript-fetch's `ApiError`, which Qdrant's
 * client throws, says only the status text and keeps the parsed body as `data`): the body's
 * `error.message`, else Qdrant's `status.error`, else its `message`, `error` or `detail` as text (OpenAI's
 * and Anthropic's bodies, and most JSON APIs'; FastAPI's `detail`).
 */
function responseMessage(e: unknown): string {
  const code = get(e, "code");
  const statusText = get(e, "statusText");
  let body: unknown;
  if (typeof code === "string" && STATUS_ONLY_CODES.has(code.trim())) body = responseBody(e);
  else if (typeof statusText === "string" && statusText.trim() !== "" && messageOf(e).trim() === statusText.trim()) body = get(e, "data");
  else return "";
  const status = get(body, "status");
  for (const said of [get(get(body, "error"), "message"), get(status, "error"), get(body, "message"), get(body, "error"), get(body, "detail")]) {
    if (typeof said === "string" && said.trim() !== "") return said.trim();
  }
  return "";
}

function codeOf(e: unknown): string {
  const code = get(e, "code");
  if (typeof code === "string" && STATUS_ONLY_CODES.has(code.trim())) return bodyCode(responseBody(e)) ?? code.trim();
  if (typeof code === "string" && code.trim() !== "") return code;
  // The MCP SDK's McpError carries its JSON-RPC code as a number (`-32602`).
  if (Number.isInteger(code) && (code as number) >= JSON_RPC_CODES[0] && (code as number) <= JSON_RPC_CODES[1]) {
    return String(code);
  }
  // The AWS SDK for JavaScript v3's errors (smithy's ServiceException: `$fault` and `$metadata`) are named
  // by the service's error code (ThrottlingException, NoSuchKey, ValidationException).
  const name = get(e, "name");
  if (isFault(get(e, "$fault")) && typeof get(e, "$metadata") === "object" && typeof name === "string" && name.trim() !== "") {
    return name.trim();
  }
  // Anthropic's SDK errors carry the body ({"error": {"type": "overloaded_error"}}) as `error`, and no code.
  // The Vercel AI SDK's APICallError carries the provider's parsed error body as `data`.
  return bodyCode(get(e, "error")) ?? bodyCode(get(e, "data")) ?? "";
}

/**
 * A provider's error code in a response body, as the Python client reads it: the
 * body's `error.code`, else its `error.type` (OpenAI's
 * `{"error": {"code": "insufficient_quota", ...}}`, Anthropic's
 * `{"type": "error", "error": {"type": "rate_limit_error", ...}}`).
 */
function bodyCode(body: unknown): string | undefined {
  const inner = get(body, "error");
  for (const key of ["code", "type"]) {
    const value = get(inner, key);
    if (typeof value === "string" && value.trim() !== "") return value.trim();
  }
  return undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function grpcCodeOf(e: unknown): number | undefined {
  const code = get(e, "code");
  const grpcLike = typeof get(e, "details") === "string" || (typeof get(e, "metadata") === "object" && get(e, "metadata") !== null);
  if (grpcLike && typeof code === "number" && Number.isInteger(code) && code > 0 && code <= 16) return code;
  return undefined;
}

function exitCodeOf(e: unknown): number | undefined {
  const exitCode = get(e, "exitCode");
  if (typeof exitCode === "number" && Number.isInteger(exitCode)) return exitCode;
  const code = get(e, "code");
  if (typeof get(e, "cmd") === "string" && typeof code === "number" && Number.isInteger(code)) return code;
  return undefined;
}

function stderrOf(e: unknown): string {
  const stderr = get(e, "stderr");
  if (typeof stderr === "string") return stderr;
  if (stderr instanceof Uint8Array) return Buffer.from(stderr.buffer, stderr.byteOffset, stderr.byteLength).toString("utf8");
  return "";
}

function fillFromError(o: pb.Outcome, err: unknown): void {
  const chain = causeChain(err);
  // JavaScript messages leave the cause out ("fetch failed"); the causes say what happened.
  let message = "";
  for (const e of chain) {
    let m = messageOf(e).trim();
    // A child process's error says "Command failed: <cmd>" and then the whole of its stderr, which goes as the detail.
    if (stderrOf(e).trim() !== "") m = m.split("\n", 1)[0]?.trim() ?? "";
    if (m !== "" && !message.includes(m)) message = message === "" ? m : `${message}: ${m}`;
    const said = responseMessage(e);
    if (said !== "" && !message.includes(said)) message = message === "" ? said : `${message}: ${said}`;
  }
  o.message = message;
  o.exceptionType = chain.map(typeName).find((n) => n !== "") ?? "";

  // As the Python client: what the tool threw is a tool error, unless it timed out, was
  // cancelled or came from an LLM provider's SDK. The sidecar tells a parse error the tool
  // hit (JSON.parse of an HTML error page) from the model's malformed call by this.
  const toolCallKind = TOOL_CALL_ERRORS.get(typeName(err));
  if (chain.some(isTimeout)) o.kind = pb.OutcomeKind.OUTCOME_KIND_TIMEOUT;
  else if (chain.some(isCancelled)) o.kind = pb.OutcomeKind.OUTCOME_KIND_CANCELLED;
  else if (toolCallKind !== undefined) o.kind = toolCallKind;
  else if (isProviderError(err)) o.kind = pb.OutcomeKind.OUTCOME_KIND_PROVIDER_ERROR;
  else o.kind = pb.OutcomeKind.OUTCOME_KIND_TOOL_ERROR;

  for (const e of chain) {
    if (o.code === "") o.code = codeOf(e);
    if (o.httpStatus === 0) o.httpStatus = statusOf(e);
    if (Object.keys(o.headers).length === 0) o.headers = headersOf(e) ?? {};
    o.grpcCode ??= grpcCodeOf(e);
    o.exitCode ??= exitCodeOf(e);
  }
  const stderr = chain.map(stderrOf).find((s) => s.trim() !== "");
  if (stderr !== undefined) {
    o.detail = stderr;
  } else {
    const stacks = chain
      .map((e) => get(e, "stack"))
      .filter((s): s is string => typeof s === "string" && s !== "")
      .map(withoutOwnFrames);
    o.detail = stacks.join("\n[cause]: ");
  }
}

/**
 * The response headers the sidecar reads (PROVIDER_HEADERS in src/backoff.rs; a
 * test fails when the two drift apart). Only these are kept, so that cookies,
 * credentials and the rest of a response's headers never leave the process.
 * @internal Exported for that test.
 */
export const RETRY_HEADERS: ReadonlySet<string> = new Set([
  "retry-after",
  "retry-after-ms",
  "grpc-retry-pushback-ms",
  "x-ratelimit-reset",
  "x-ratelimit-reset-requests",
  "x-ratelimit-reset-tokens",
  "x-ratelimit-remaining",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-remaining-tokens",
  "x-should-retry",
]);

/** How many headers other than the Retry-After family an {@link HttpError} keeps. */
export const MAX_ERROR_HEADERS = 64;

/**
 * Flattens the {@link RETRY_HEADERS} among `h` into a record, keys lowercase,
 * joining repeated values as HTTP does; each value bounded. With `all`, the other
 * headers too, up to {@link MAX_ERROR_HEADERS} of them (for an {@link HttpError}).
 */
export function headersToRecord(h: HeadersInput, { all = false }: { all?: boolean } = {}): Record<string, string> {
  const out: Record<string, string> = {};
  let others = 0;
  const add = (key: unknown, value: unknown): void => {
    if (typeof key !== "string") return;
    // Picked by name before anything else: a response's other headers, however many, cannot crowd these out.
    const k = key.trim().toLowerCase();
    if (!RETRY_HEADERS.has(k)) {
      if (!all || k === "" || (!(k in out) && others >= MAX_ERROR_HEADERS)) return;
      if (!(k in out)) others++;
    }
    let v: string;
    if (typeof value === "string") v = value;
    else if (typeof value === "number" && Number.isFinite(value)) v = String(value);
    else if (Array.isArray(value) && value.every((x) => typeof x === "string")) v = value.join(", ");
    else return;
    out[k] = cleanText(v, 8192);
  };
  const forEach = get(h, "forEach");
  if (typeof forEach === "function" && !Array.isArray(h)) {
    try {
      (h as HeadersLike).forEach((value, key) => add(key, value));
    } catch {
      // A header object that cannot be walked adds nothing.
    }
    return out;
  }
  for (const [k, v] of Object.entries(h)) add(k, v);
  return out;
}
