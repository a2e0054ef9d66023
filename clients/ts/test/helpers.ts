// Shared by the tests: unique names, a log recorder, the call deadline for
// tests that expect the sidecar's own answer, a way to make the sidecar
// forget a session, a local HTTP server, real servers' error bodies and the
// repository's shared test data.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

import { credentials, Metadata } from "@grpc/grpc-js";

import { proto, type Logger } from "../src/index.js";

/**
 * The call deadline for tests that expect the sidecar's own answer: generous,
 * because CI machines are shared and a debug sidecar under load can take longer
 * than the 250 ms production default (the fail-open tests set their own).
 */
export const LIVE_TIMEOUT_MS = 3000;

/** The repository's tests/data/, shared with the sidecar and the other clients (this file runs as clients/ts/build/test/helpers.js). */
export const TEST_DATA = fileURLToPath(new URL("../../../../tests/data/", import.meta.url));

/** The objects of a JSON Lines file under {@link TEST_DATA}, one a line. */
export function lines<T>(file: string): T[] {
  return readFileSync(TEST_DATA + file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as T);
}

let seq = 0;
/** Makes names unique per test process, so that tests never share sidecar state. */
const nonce = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;

/** A session id unique to this test and call. */
export function sessionId(name: string): string {
  return `ts-${name.replace(/[^\w.-]+/g, "_").slice(0, 80)}-${nonce}-${++seq}`;
}

/**
 * One test's tool names: the sidecar's tool breaker and retry budget are
 * shared by all sessions, so tests that reused a name would see each other's failures.
 */
export function toolNames(): { search: string; fetch: string; llm: string; serch: string } {
  const n = `${++seq}${nonce}`;
  return { search: `search${n}`, fetch: `fetch${n}`, llm: `llm${n}`, serch: `serch${n}` };
}

/** A Logger that keeps its lines for assertions. */
export class LogRecorder implements Logger {
  /** Every line, as "level message {fields}". */
  readonly lines: string[] = [];

  /** Records a warning. */
  warn(message: string, fields?: Record<string, unknown>): void {
    this.lines.push(`warn ${message} ${JSON.stringify(fields ?? {})}`);
  }

  /** Records an info line. */
  info(message: string, fields?: Record<string, unknown>): void {
    this.lines.push(`info ${message} ${JSON.stringify(fields ?? {})}`);
  }

  /** Records a debug line. */
  debug(message: string, fields?: Record<string, unknown>): void {
    this.lines.push(`debug ${message} ${JSON.stringify(fields ?? {})}`);
  }

  /** How many lines of this level were logged. */
  count(level: "warn" | "info" | "debug"): number {
    return this.lines.filter((l) => l.startsWith(`${level} `)).length;
  }

  /** All lines, for failure messages. */
  toString(): string {
    return this.lines.join("\n");
  }
}

/**
 * Ends a session behind its client's back, with a raw EndSession on a channel
 * of its own: the sidecar at `addr` forgets it as after a restart, an idle
 * expiry or an eviction, and creates it anew, undeclared, on its next report.
 */
export async function forget(addr: string, id: string): Promise<void> {
  const raw = new proto.ReboundClient(addr, credentials.createInsecure());
  try {
    const resp = await new Promise<proto.EndSessionResponse>((resolve, reject) => {
      raw.endSession(proto.EndSessionRequest.create({ sessionId: id }), new Metadata(), { deadline: Date.now() + LIVE_TIMEOUT_MS }, (err, res) => {
        if (err !== null) reject(err);
        else resolve(res);
      });
    });
    assert.equal(resp.found, true, `the sidecar did not know session ${id}`);
  } finally {
    raw.close();
  }
}

/** A local HTTP server answering with `handler`, on an ephemeral loopback port. */
export async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** nginx's 502 page, which a tool that parses its upstream's JSON gets when the upstream is down. */
export const NGINX_502_PAGE = `<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>nginx</center>
</body>
</html>
`;

/** OpenAI's 429 body for an account out of credits (platform.openai.com/docs/guides/error-codes). */
export const OPENAI_QUOTA_BODY = JSON.stringify({
  error: {
    message:
      "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
    type: "insufficient_quota",
    param: null,
    code: "insufficient_quota",
  },
});
