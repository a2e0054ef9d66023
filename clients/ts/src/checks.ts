// Input checks that mirror the sidecar's own, so that a bad argument fails
// here with a clear message rather than as a remote error, and text that is
// safe to send.

import { InvalidInputError } from "./errors.js";

/** The sidecar's limit on session ids, tool names, call ids and label keys, in UTF-8 bytes. */
export const MAX_ID_BYTES = 256;
/** The sidecar's limit on declared tools. */
export const MAX_TOOLS = 1000;
/** The sidecar's limit on session labels. */
export const MAX_LABELS = 64;
/** The sidecar's limit on a label value, in UTF-8 bytes. */
export const MAX_LABEL_VALUE_BYTES = 1024;
/**
 * Bounds message and detail: the sidecar cuts them far shorter, and a runaway
 * tool output must not hit gRPC's message size limit.
 */
export const MAX_TEXT_BYTES = 256 * 1024;

const CONTROL = /\p{Cc}/u;

/** Describes a value in an error message, shortened. */
export function show(value: unknown): string {
  let s: string;
  try {
    s = typeof value === "string" ? JSON.stringify(value) : String(value);
  } catch {
    s = Object.prototype.toString.call(value);
  }
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}

/** Checks an id or name as the sidecar does: a non-blank string of at most 256 bytes, no control characters. */
export function checkId(what: string, value: unknown): string {
  if (typeof value !== "string") {
    throw new InvalidInputError(`${what} ${show(value)}: must be a string`);
  }
  if (value.trim() === "") {
    throw new InvalidInputError(`${what} ${show(value)}: must not be empty`);
  }
  if (Buffer.byteLength(value, "utf8") > MAX_ID_BYTES) {
    throw new InvalidInputError(`${what} ${show(value)}: at most ${MAX_ID_BYTES} bytes`);
  }
  if (CONTROL.test(value)) {
    throw new InvalidInputError(`${what} ${show(value)}: must not contain control characters`);
  }
  if (!value.isWellFormed()) {
    throw new InvalidInputError(`${what} ${show(value)}: must be valid Unicode (a lone surrogate)`);
  }
  return value;
}

/** Checks a cost or cost limit: a finite number, zero or more. */
export function checkCost(what: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new InvalidInputError(`${what} ${show(value)}: must be zero or a positive number`);
  }
  return value;
}

/** Checks an integer in [min, max]. */
export function checkInt(what: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(`${what} ${show(value)}: must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Checks a string field. */
export function checkString(what: string, value: unknown): string {
  if (typeof value !== "string") {
    throw new InvalidInputError(`${what} ${show(value)}: must be a string`);
  }
  return value;
}

/** Makes text safe to send: well-formed Unicode, at most maxBytes of UTF-8, cut on a character boundary. */
export function cleanText(s: string, maxBytes = MAX_TEXT_BYTES): string {
  let t = s.toWellFormed();
  // Most text is far under the limit; only measure bytes when it could be over.
  if (t.length * 3 <= maxBytes || Buffer.byteLength(t, "utf8") <= maxBytes) return t;
  const bytes = Buffer.from(t, "utf8");
  let end = maxBytes;
  // Step back over UTF-8 continuation bytes (10xxxxxx) to a character start.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  t = bytes.subarray(0, end).toString("utf8");
  return t;
}

/** Shortens s to at most n characters (code points), marking the cut. */
export function cut(s: string, n: number): string {
  const t = s.trim();
  const chars = Array.from(t);
  return chars.length <= n ? t : `${chars.slice(0, n).join("")}…`;
}

/**
 * Checks that options are a plain object (`{...}`, or one without a prototype,
 * from any realm). An Error, an array or a class instance would pass a check of
 * its enumerable keys with its real fields unseen: an Error's message, stack
 * and cause are not enumerable.
 */
export function checkPlainObject(what: string, options: unknown): void {
  if (typeof options !== "object" || options === null) {
    throw new InvalidInputError(`${what} ${show(options)}: must be a plain object`);
  }
  const proto: unknown = Object.getPrototypeOf(options);
  if (proto !== null && Object.getPrototypeOf(proto) !== null) {
    throw new InvalidInputError(`${what}: got ${kindOf(options)}; must be a plain object`);
  }
}

/** Names what an object is, for an error message: "an array", "a URL". */
function kindOf(value: object): string {
  if (Array.isArray(value)) return "an array";
  try {
    const name: unknown = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof name === "string" && name !== "") return `a ${name}`;
  } catch {
    // A Proxy may throw; the generic name will do.
  }
  return "an instance of a class";
}

/** Rejects keys an options object does not know, so that a misspelt option (`step_limit`) is not silently ignored. */
export function checkKeys(what: string, options: unknown, known: readonly string[]): void {
  checkPlainObject(what, options);
  for (const key of Object.keys(options as object)) {
    if (!known.includes(key)) {
      throw new InvalidInputError(`${what}: unknown option ${show(key)} (known: ${known.join(", ")})`);
    }
  }
}
