// The shared vectors (tests/vectors/*.json) against the real sidecar, each
// case in a fresh session, in three passes that reach the sidecar three ways:
//   outcome: the vector's outcome as the generated message (reportOutcome);
//   fields:  a plain Error plus explicit outcome fields (report);
//   error:   an error shaped as libraries shape theirs (name, status, headers,
//            code, exitCode), every field read from it by outcomeFromError.
// Each pass has its own tool names: the tool breaker and retry budget are
// shared across sessions (see tests/vectors/README.md). A fourth pass runs each
// case through the local fallback alone, no sidecar: the case's `fallback`
// expectation where it has one (the fallback reads fewer signals), else `expect`.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { decide, DEFAULT_FALLBACK_POLICY } from "../src/fallback.js";
import * as pb from "../src/gen/rebound/v1/rebound.js";
import { Client, Verdict, type OutcomeKind, type ReportOptions } from "../src/index.js";
import { kindName, kindValue } from "../src/names.js";
import { outcomeFromError } from "../src/outcome.js";
import { LIVE_TIMEOUT_MS, LogRecorder, sessionId } from "./helpers.js";
import { Sidecar } from "./sidecar.mjs";

/** The vector's outcome, with the proto's field names. */
interface VectorOutcome {
  tool: string;
  ok: boolean;
  kind?: OutcomeKind;
  message?: string;
  exception_type?: string;
  http_status?: number;
  grpc_code?: number;
  exit_code?: number;
  code?: string;
  headers?: Record<string, string>;
  detail?: string;
  attempt?: number;
  duration_ms?: number;
  cost?: number;
}

/** What a verdict must say: its action, category and retryable, and its delay's bounds for a retry. */
interface VectorExpect {
  action: string;
  category: string;
  retryable: boolean;
  delay_ms_min?: number;
  delay_ms_max?: number;
}

interface VectorCase {
  name: string;
  source: string;
  outcome: VectorOutcome;
  expect: VectorExpect;
  /** What the local fallback answers instead, where it reads fewer signals than the sidecar, and why. */
  fallback?: VectorExpect & { why: string };
}

const KNOWN_FIELDS = new Set([
  "tool", "ok", "kind", "message", "exception_type", "http_status", "grpc_code", "exit_code", "code", "headers", "detail",
  "attempt", "duration_ms", "cost",
]);

// This file runs as clients/ts/build/test/vectors.test.js; the vectors are in the repository's tests/vectors.
const dir = fileURLToPath(new URL("../../../../tests/vectors/", import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
const cases: VectorCase[] = files.flatMap((f) => JSON.parse(readFileSync(dir + f, "utf8")) as VectorCase[]);

/** The vector's outcome as the generated message. */
function asProto(o: VectorOutcome, tool: string): pb.DeepPartial<pb.Outcome> {
  for (const key of Object.keys(o)) assert.ok(KNOWN_FIELDS.has(key), `unknown outcome field ${key} in the vectors`);
  const kind = o.kind === undefined ? undefined : kindValue(o.kind);
  assert.ok(o.kind === undefined || kind !== undefined, `unknown kind ${o.kind}`);
  return {
    tool,
    ok: o.ok,
    ...(kind === undefined ? {} : { kind }),
    ...(o.message === undefined ? {} : { message: o.message }),
    ...(o.exception_type === undefined ? {} : { exceptionType: o.exception_type }),
    ...(o.http_status === undefined ? {} : { httpStatus: o.http_status }),
    ...(o.grpc_code === undefined ? {} : { grpcCode: o.grpc_code }),
    ...(o.exit_code === undefined ? {} : { exitCode: o.exit_code }),
    ...(o.code === undefined ? {} : { code: o.code }),
    ...(o.headers === undefined ? {} : { headers: o.headers }),
    ...(o.detail === undefined ? {} : { detail: o.detail }),
    ...(o.attempt === undefined ? {} : { attempt: o.attempt }),
    ...(o.duration_ms === undefined ? {} : { durationMs: o.duration_ms }),
    ...(o.cost === undefined ? {} : { cost: o.cost }),
  };
}

/** A plain Error plus every field explicitly. */
function asFields(o: VectorOutcome): ReportOptions {
  if (o.ok) return {};
  return {
    error: new Error(o.message ?? ""),
    // The vectors name their own exception types (or none); a plain Error adds none.
    exceptionType: o.exception_type ?? "",
    ...(o.kind === undefined ? {} : { kind: o.kind }),
    ...(o.http_status === undefined ? {} : { httpStatus: o.http_status }),
    ...(o.grpc_code === undefined ? {} : { grpcCode: o.grpc_code }),
    ...(o.exit_code === undefined ? {} : { exitCode: o.exit_code }),
    ...(o.code === undefined ? {} : { code: o.code }),
    ...(o.headers === undefined ? {} : { headers: new Map(Object.entries(o.headers)) }),
  };
}

/** The kinds an error itself can show; the others are the agent's to say. */
const DERIVED_KINDS: ReadonlySet<string> = new Set(["timeout", "cancelled"]);

/** An error shaped as the libraries shape theirs; only kinds no error can show are given explicitly. */
function asLibraryError(o: VectorOutcome): ReportOptions {
  if (o.ok) return {};
  const err = new Error(o.message ?? "");
  if (o.exception_type !== undefined) err.name = o.exception_type;
  if (o.http_status !== undefined) Object.assign(err, { status: o.http_status });
  if (o.headers !== undefined) Object.assign(err, { headers: new Headers(o.headers) });
  if (o.code !== undefined) Object.assign(err, { code: o.code });
  if (o.exit_code !== undefined) Object.assign(err, { exitCode: o.exit_code });
  if (o.grpc_code !== undefined) Object.assign(err, { code: o.grpc_code, details: o.message ?? "" });
  return { error: err, ...(o.kind !== undefined && !DERIVED_KINDS.has(o.kind) ? { kind: o.kind } : {}) };
}

let sidecar: Sidecar;
let client: Client;

before(async () => {
  // A sidecar of its own: the vectors expect one that no other test has used.
  sidecar = await Sidecar.start();
  client = new Client(sidecar.grpc, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: new LogRecorder() });
});

after(async () => {
  client.close();
  await sidecar.stop();
});

function check(vc: VectorCase, v: Verdict): void {
  assert.equal(v.fallback, false, `the local fallback answered, not the sidecar (${vc.source})`);
  assert.equal(v.action, vc.expect.action, `action (rule ${v.rule})`);
  assert.equal(v.category, vc.expect.category, `category (rule ${v.rule})`);
  assert.equal(v.retryable, vc.expect.retryable, "retryable");
  if (vc.expect.delay_ms_min !== undefined) assert.ok(v.delayMs >= vc.expect.delay_ms_min, `delay ${v.delayMs} < ${vc.expect.delay_ms_min}`);
  if (vc.expect.delay_ms_max !== undefined) assert.ok(v.delayMs <= vc.expect.delay_ms_max, `delay ${v.delayMs} > ${vc.expect.delay_ms_max}`);
}

describe("shared vectors, fallback pass (no sidecar)", () => {
  // A fixed instant: an HTTP-date Retry-After then always means the same wait.
  const NOW = Date.UTC(2025, 2, 14, 12, 0, 0);
  for (const vc of cases) {
    it(vc.name, () => {
      const expect = vc.fallback ?? vc.expect;
      const o = pb.Outcome.fromPartial(asProto(vc.outcome, vc.outcome.tool));
      // Both ends of the jitter; a failure is its tool's first in a row.
      for (const random of [0, 0.999999]) {
        const v = new Verdict(decide(DEFAULT_FALLBACK_POLICY, o, { consecutive: o.ok ? 0 : 1, nowMs: NOW, random }), true);
        const at = `rule ${v.rule}, random ${random}; source: ${vc.source}`;
        assert.equal(v.action, expect.action, `action (${at})`);
        assert.equal(v.category, expect.category, `category (${at})`);
        assert.equal(v.retryable, expect.retryable, `retryable (${at})`);
        const [lo, hi] = [expect.delay_ms_min ?? 0, expect.delay_ms_max ?? 0];
        assert.ok(v.delayMs >= lo && v.delayMs <= hi, `delay ${v.delayMs} outside [${lo}, ${hi}] (${at})`);
      }
    });
  }
});

it("found the shared vectors", () => {
  assert.ok(cases.length >= 20, `only ${cases.length} cases in ${dir}`);
});

for (const pass of ["outcome", "fields", "error"] as const) {
  describe(`shared vectors, ${pass} pass`, () => {
    for (const vc of cases) {
      it(vc.name, async () => {
        const tool = `${vc.outcome.tool}-${pass}`;
        const session = client.session(sessionId(`${pass}-${vc.name}`));
        let v: Verdict;
        if (pass === "outcome") {
          v = await session.reportOutcome(asProto(vc.outcome, tool));
        } else {
          const options = pass === "fields" ? asFields(vc.outcome) : asLibraryError(vc.outcome);
          if (pass === "error") {
            // The outcome read from the error is the vector's own (the stack aside), and a tool error
            // where the vector names no kind: what the tool threw is the tool's, as the Python client says;
            // but a timeout where the error's name ends in Timeout or TimeoutError, as outcomeFromError reads one.
            const o = outcomeFromError(tool, options);
            const want = pb.Outcome.fromPartial(asProto(vc.outcome, tool));
            if (!want.ok && want.kind === pb.OutcomeKind.OUTCOME_KIND_UNSPECIFIED) {
              const timedOut = /Timeout(Error)?$/.test(want.exceptionType);
              want.kind = timedOut ? pb.OutcomeKind.OUTCOME_KIND_TIMEOUT : pb.OutcomeKind.OUTCOME_KIND_TOOL_ERROR;
            }
            assert.deepEqual(
              { ...o, detail: "" },
              { ...want, headers: Object.fromEntries(Object.entries(want.headers).map(([k, x]) => [k.toLowerCase(), x])) },
              `the outcome read from the error (kind ${kindName(o.kind)})`,
            );
          }
          v = await session.report(tool, options);
        }
        check(vc, v);
      });
    }
  });
}
