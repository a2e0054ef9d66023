// The fallback's session breakers, the sidecar's (src/breaker.rs and the
// guard in src/verdict.rs): on the policy alone, then through the session's
// client-side memory as a session drives it, outcome after outcome, and
// against the sidecar itself (rebound replay) on the same outcomes.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { NO_LIMITS, type DeclaredLimits } from "../src/breaker.js";
import { decide, DEFAULT_FALLBACK_POLICY, fallbackPolicy, type FallbackInput, type FallbackPolicy } from "../src/fallback.js";
import * as pb from "../src/gen/rebound/v1/rebound.js";
import { LocalState } from "../src/local.js";
import { actionName, categoryName, reasonName, sessionStateName } from "../src/names.js";
import { TEST_DATA } from "./helpers.js";
import { sidecarBin } from "./sidecar.mjs";

const STEP_LIMIT_SNIPPET = "<error>\nThe session reached its step limit; end the run.\n</error>";
const COST_LIMIT_SNIPPET = "<error>\nThe session reached its cost limit; end the run.\n</error>";
const STOPPED_SNIPPET = "<error>\nThe session was stopped earlier; end the run.\n</error>";

/** A verdict's action, reason and session state, by name. */
function read(v: pb.Verdict): [string, string, string] {
  return [actionName(v.action), reasonName(v.breaker?.reason ?? 0), sessionStateName(v.breaker?.sessionState ?? 0)];
}

/** The policy's verdict on one outcome, with the session's counts given. */
function judge(outcome: pb.DeepPartial<pb.Outcome>, counts: Partial<FallbackInput>, policy: Readonly<FallbackPolicy> = DEFAULT_FALLBACK_POLICY): pb.Verdict {
  const o = pb.Outcome.fromPartial({ tool: "db", ...outcome });
  return decide(policy, o, { consecutive: o.ok ? 0 : 1, nowMs: 0, random: 0.5, ...counts });
}

describe("on the policy alone", () => {
  it("aborts the fifth identical error, and fills the counters as the sidecar does", () => {
    const v = judge({ httpStatus: 503 }, { consecutive: 1, identicalErrors: 5, sessionErrors: 5, steps: 7, cost: 0.25 });
    assert.deepEqual(read(v), ["abort", "identical_errors", "stopped"]);
    assert.equal(v.retry, undefined);
    assert.equal(v.escalation, undefined);
    assert.ok(v.snippet.endsWith("\nThe run is over: stop."), v.snippet);
    const b = v.breaker as pb.BreakerStatus;
    assert.deepEqual([b.consecutiveFailures, b.identicalErrors, b.sessionErrors, b.steps, b.cost], [1, 5, 5, 7, 0.25]);
    assert.deepEqual(read(judge({ httpStatus: 503 }, { identicalErrors: 4 })).slice(0, 2), ["retry", "unspecified"]);
  });

  it("settles the breakers over the category's plan in the sidecar's order", () => {
    const cancelled = { kind: pb.OutcomeKind.OUTCOME_KIND_CANCELLED };
    // A breaker's abort wins over everything, a cancel's abort over an escalation.
    assert.deepEqual(read(judge(cancelled, { identicalErrors: 5 })), ["abort", "identical_errors", "stopped"]);
    assert.deepEqual(read(judge(cancelled, { consecutive: 3 })), ["abort", "category_policy", "stopped"]);
    // A step limit aborts before three failures in a row escalate.
    const limits: DeclaredLimits = { stepLimit: 4, costLimit: 0, errorLimit: 0 };
    assert.deepEqual(read(judge({ httpStatus: 503 }, { consecutive: 3, steps: 4, limits })), ["abort", "step_limit", "stopped"]);
    // An escalation breaker wins over the category's own escalation and over a retry.
    const auth = judge({ httpStatus: 401 }, { consecutive: 3 });
    assert.deepEqual(read(auth), ["escalate", "consecutive_failures", "escalated"]);
    assert.ok(auth.escalation?.summary.startsWith('tool "db" failed 3 times in a row'), auth.escalation?.summary);
    const wait = judge({ httpStatus: 429, headers: { "Retry-After": "3600" } }, { sessionErrors: 10 });
    assert.deepEqual(read(wait), ["escalate", "session_errors", "escalated"]);
  });

  it("escalates the tenth error of the session, or the declared number", () => {
    const v = judge({ tool: "fetch", httpStatus: 404 }, { sessionErrors: 10 });
    assert.deepEqual(read(v), ["escalate", "session_errors", "escalated"]);
    assert.ok(v.escalation?.summary.startsWith('10 errors in this session, the last from tool "fetch"'), v.escalation?.summary);
    assert.ok(v.snippet.endsWith("\nThis needs a human: stop and report the error."), v.snippet);
    assert.equal(actionName(judge({ httpStatus: 404 }, { sessionErrors: 9 }).action), "recover");
    const declared = { limits: { ...NO_LIMITS, errorLimit: 3 } };
    assert.deepEqual(read(judge({ httpStatus: 404 }, { sessionErrors: 3, ...declared })).slice(0, 2), ["escalate", "session_errors"]);
    // 0 turns the policy's breakers off; a declared error limit still holds.
    const off = fallbackPolicy({ maxSessionErrors: 0, maxIdenticalErrors: 0 });
    assert.equal(actionName(judge({ httpStatus: 404 }, { sessionErrors: 1000, identicalErrors: 1000 }, off).action), "recover");
    assert.equal(actionName(judge({ httpStatus: 404 }, { sessionErrors: 3, ...declared }, off).action), "escalate");
  });

  it("aborts a success that reaches a declared step or cost limit, saying which", () => {
    const steps: DeclaredLimits = { stepLimit: 2, costLimit: 0, errorLimit: 0 };
    let v = judge({ ok: true }, { steps: 2, limits: steps });
    assert.deepEqual(read(v), ["abort", "step_limit", "stopped"]);
    assert.equal(v.snippet, STEP_LIMIT_SNIPPET);
    assert.deepEqual(read(judge({ ok: true }, { steps: 1, limits: steps })), ["continue", "unspecified", "active"]);
    const cost: DeclaredLimits = { stepLimit: 0, costLimit: 1, errorLimit: 0 };
    v = judge({ ok: true }, { steps: 2, cost: 1.2, limits: cost });
    assert.deepEqual(read(v), ["abort", "cost_limit", "stopped"]);
    assert.equal(v.snippet, COST_LIMIT_SNIPPET);
    assert.equal(actionName(judge({ ok: true }, { cost: 0.99, limits: cost }).action), "continue");
    // Without a declaration there is no step or cost limit.
    assert.equal(actionName(judge({ ok: true }, { steps: 1_000_000, cost: 1e9 }).action), "continue");
  });

  it("answers every outcome of a stopped session abort, session_stopped", () => {
    for (const outcome of [{ ok: true }, { httpStatus: 503 }, { httpStatus: 401 }]) {
      const v = judge(outcome, { state: pb.SessionState.SESSION_STATE_STOPPED, steps: 9 });
      assert.deepEqual(read(v), ["abort", "session_stopped", "stopped"], JSON.stringify(outcome));
      assert.equal(v.snippet, STOPPED_SNIPPET);
      assert.deepEqual([v.retry, v.escalation, v.breaker?.steps], [undefined, undefined, 9]);
    }
  });

  it("promises no retry that a session breaker would stop", () => {
    // Consecutive failures off, so that the other two breakers show.
    const loose = fallbackPolicy({ maxConsecutiveFailures: 0 });
    const left = (counts: Partial<FallbackInput>): number | undefined => judge({ httpStatus: 503 }, counts, loose).retry?.attemptsLeft;
    assert.equal(left({ identicalErrors: 1, sessionErrors: 1 }), 2, "the retries bound it");
    assert.equal(left({ identicalErrors: 3, sessionErrors: 3 }), 1, "the fifth identical error aborts");
    assert.equal(left({ identicalErrors: 4, sessionErrors: 4 }), 0);
    assert.equal(left({ identicalErrors: 1, sessionErrors: 9 }), 0, "the tenth error escalates");
    assert.equal(left({ identicalErrors: 1, sessionErrors: 2, limits: { ...NO_LIMITS, errorLimit: 4 } }), 1);
  });
});

/** A session's memory and the fallback deciding on it, as a session drives them. */
class Run {
  readonly state: LocalState;
  private n = 0;

  constructor(limits: Partial<DeclaredLimits> = {}, readonly policy: Readonly<FallbackPolicy> = DEFAULT_FALLBACK_POLICY) {
    this.state = new LocalState(0, { ...NO_LIMITS, ...limits });
  }

  /** Reports one outcome and returns the fallback's verdict on it. */
  report(outcome: pb.DeepPartial<pb.Outcome>): pb.Verdict {
    const o = pb.Outcome.fromPartial({ callId: `c${++this.n}`, ...outcome });
    const v = decide(this.policy, o, { ...this.state.observe(o), limits: this.state.limits, nowMs: 0, random: 0.5 });
    this.state.record(o, v);
    return v;
  }
}

describe("through the session's memory", () => {
  // Real: psycopg's error when the server stops accepting connections, with the wait that varies,
  // reported with kind timeout: no sidecar rule lists its type, which alone would be no signal.
  const timeout = (s: string): pb.DeepPartial<pb.Outcome> => ({
    tool: "db",
    kind: pb.OutcomeKind.OUTCOME_KIND_TIMEOUT,
    exceptionType: "psycopg.errors.ConnectionTimeout",
    message: `connection timeout expired after ${s}s`,
  });

  it("aborts the fifth identical failure, different numbers and all, and every outcome after it", () => {
    const run = new Run();
    const verdicts = ["30.1", "30.4", "29.8", "30.0", "31.2"].map((s) => run.report(timeout(s)));
    assert.deepEqual(verdicts.map((v) => v.breaker?.identicalErrors), [1, 2, 3, 4, 5]);
    // The third and fourth escalate (three failures in a row), the fifth aborts.
    assert.deepEqual(verdicts.map((v) => actionName(v.action)), ["retry", "retry", "escalate", "escalate", "abort"]);
    assert.deepEqual(read(verdicts[4] as pb.Verdict), ["abort", "identical_errors", "stopped"]);
    const after = run.report({ tool: "db", ok: true });
    assert.deepEqual(read(after), ["abort", "session_stopped", "stopped"]);
    assert.equal(after.snippet, STOPPED_SNIPPET);
    // Still counted, as on the sidecar: the local summary shows what the run did after its abort.
    assert.equal(run.report({ tool: "fetch", httpStatus: 503 }).breaker?.reason, pb.Reason.REASON_SESSION_STOPPED);
    const sum = run.state.snapshot(0);
    assert.deepEqual([sum.calls, sum.errors, sum.escalations, sum.state], [7, 6, 2, pb.SessionState.SESSION_STATE_STOPPED]);
    assert.deepEqual(sum.errorsByCategory, { timeout: 5, unavailable: 1 });
  });

  it("starts the count again after a success of the tool, another message or another tool's failure", () => {
    const run = new Run({}, fallbackPolicy({ maxConsecutiveFailures: 0 }));
    const identical = (): number | undefined => run.report(timeout("30.1")).breaker?.identicalErrors;
    for (let i = 0; i < 4; i++) identical();
    run.report({ tool: "search", ok: true });
    assert.equal(identical(), 5, "another tool's success clears nothing");
    const fresh = new Run({}, run.policy);
    for (let i = 0; i < 4; i++) fresh.report(timeout("30.1"));
    assert.equal(fresh.report({ tool: "db", ok: true }).breaker?.identicalErrors, 0);
    assert.equal(fresh.report(timeout("30.1")).breaker?.identicalErrors, 1);
    assert.equal(fresh.report({ ...timeout("30.1"), message: "connection refused" }).breaker?.identicalErrors, 1);
    assert.equal(fresh.report({ ...timeout("30.1"), tool: "cache" }).breaker?.identicalErrors, 1);
    assert.equal(fresh.report({ ...timeout("30.1"), tool: "cache" }).breaker?.identicalErrors, 2);
  });

  it("judges the detail when the message is empty, as the sidecar judges a one-line detail", () => {
    const run = new Run();
    const panic = (line: number): pb.DeepPartial<pb.Outcome> => ({ tool: "parse", detail: `thread 'main' panicked at src/main.rs:${line}:5` });
    assert.deepEqual([1, 2].map((n) => run.report(panic(10 + n)).breaker?.identicalErrors), [1, 2]);
    assert.equal(run.report({ tool: "parse", detail: "stack overflow" }).breaker?.identicalErrors, 1);
  });

  it("judges a Python traceback with no message by its exception, not by its outermost frames", () => {
    // Real Python 3.11 tracebacks (tests/data/traces/make/failures.py, `tool_arguments`): one tool's
    // arguments malformed two ways, through the same frames to two exceptions, as the sidecar's test.
    const read = (name: string): string => readFileSync(`${TEST_DATA}traces/${name}`, "utf8");
    const truncated = read("py-tool-arguments-truncated.txt");
    const quoted = read("py-tool-arguments-single-quoted.txt");
    const run = new Run();
    const details = [truncated, quoted, quoted, truncated.replace("column 37 (char 36)", "column 52 (char 51)")];
    assert.deepEqual(details.map((detail) => run.report({ tool: "search_web", detail }).breaker?.identicalErrors), [1, 1, 2, 1]);
  });

  it("escalates the tenth error across tools", () => {
    const run = new Run();
    const verdicts = Array.from({ length: 10 }, (_, i) => run.report({ tool: `tool${i}`, httpStatus: 404, message: `no page ${i}` }));
    assert.deepEqual(verdicts.slice(0, 9).map((v) => actionName(v.action)), Array(9).fill("recover"));
    const last = verdicts[9] as pb.Verdict;
    assert.deepEqual(read(last), ["escalate", "session_errors", "escalated"]);
    assert.equal(last.breaker?.sessionErrors, 10);
    assert.ok(last.escalation?.summary.startsWith('10 errors in this session, the last from tool "tool9"'), last.escalation?.summary);
  });

  it("enforces the declared step, cost and error limits", () => {
    let run = new Run({ stepLimit: 2 });
    assert.equal(actionName(run.report({ tool: "search", ok: true }).action), "continue");
    const second = run.report({ tool: "search", ok: true });
    assert.deepEqual(read(second), ["abort", "step_limit", "stopped"]);
    assert.equal(second.snippet, STEP_LIMIT_SNIPPET);
    run = new Run({ costLimit: 1 });
    assert.equal(actionName(run.report({ tool: "llm", ok: true, cost: 0.6 }).action), "continue");
    const costly = run.report({ tool: "llm", ok: true, cost: 0.6 });
    assert.deepEqual([...read(costly), costly.snippet], ["abort", "cost_limit", "stopped", COST_LIMIT_SNIPPET]);
    run = new Run({ errorLimit: 2 });
    run.report({ tool: "a", httpStatus: 404 });
    assert.deepEqual(read(run.report({ tool: "b", httpStatus: 404 })).slice(0, 2), ["escalate", "session_errors"]);
  });

  it("keeps an escalated session escalated and a stopped one stopped", () => {
    const run = new Run();
    run.report({ tool: "llm", httpStatus: 401 });
    assert.deepEqual(read(run.report({ tool: "search", ok: true })), ["continue", "unspecified", "escalated"]);
    run.report({ tool: "search", kind: pb.OutcomeKind.OUTCOME_KIND_CANCELLED });
    run.report({ tool: "llm", httpStatus: 401 });
    assert.equal(run.state.state, pb.SessionState.SESSION_STATE_STOPPED);
  });
});

it("decides as the sidecar does on the same outcomes (rebound replay)", () => {
  // Outcomes whose coarse signals the fallback reads as the sidecar does, so that what
  // differs would be the breakers. One tool name per session: the sidecar's tool breakers are shared.
  const fail = (tool: string, message: string, status = 503): Record<string, unknown> => ({ tool, http_status: status, message });
  const sessions: Record<string, Record<string, unknown>[]> = {
    // Five identical errors, the numbers aside: retried twice, escalated twice, aborted; then stopped.
    identical: [1, 2, 3, 4, 5].map((n) => fail("db", `upstream timed out after 30.${n}s`)).concat([{ tool: "db", ok: true }, { tool: "db2", ok: true }]),
    // Ten errors across tools: the tenth escalates.
    errors: Array.from({ length: 10 }, (_, i) => fail(`page${i}`, `page ${i} not found`, 404)),
    // A success of the tool starts the counts again.
    reset: [fail("api", "timed out after 1.5s"), fail("api", "timed out after 2.5s"), { tool: "api", ok: true }, fail("api", "timed out after 3.5s")],
    // A cancel's abort stands over the third failure in a row; a 401's escalation gives way to the breaker's.
    cancel: [fail("q", "Service Unavailable"), fail("q", "Service Unavailable"), { tool: "q", kind: "cancelled", message: "user interrupt" }],
    auth: [1, 2, 3].map(() => fail("w", "Unauthorized", 401)),
    // The detail, when there is no message, is what is compared.
    detail: [12, 13, 14].map((n) => ({ tool: "widget", detail: `widget frobnication declined for item ${n}` })),
    // An internal 5xx is retried once, an unavailable one three times (the third failure in a row
    // escalates first), with or without attempt numbers. Few failures of one tool: the sidecar's
    // tool breaker would open first.
    internal: [
      ...[1, 2, 3, 4].map(() => fail("crm", "Internal Server Error", 500)),
      ...[1, 2].map((attempt) => ({ ...fail("crm2", "Not Implemented", 501), attempt })),
    ],
    unavailable: [
      ...[1, 2, 3].map(() => fail("api", "Service Unavailable", 503)),
      ...[1, 2, 3].map((attempt) => ({ ...fail("api2", "Bad Gateway", 502), attempt })),
    ],
    mixed: [
      fail("m", "Internal Server Error", 500), fail("m", "Service Unavailable", 503), { tool: "m", ok: true },
      fail("m", "Service Unavailable", 503), fail("m", "Internal Server Error", 500), { tool: "m", ok: true },
      fail("m", "oops", 599), { tool: "m", ok: true }, fail("m", "overloaded", 529),
    ],
    attempts: [
      ...[1, 2, 3, 4].flatMap((attempt) => [{ ...fail("n", "Service Unavailable", 503), attempt }, { tool: "n", ok: true }]),
      { ...fail("o", "Internal Server Error", 500), attempt: 1 }, { tool: "o", ok: true }, { ...fail("o", "Internal Server Error", 500), attempt: 2 },
    ],
  };
  const lines = Object.entries(sessions).flatMap(([id, outcomes]) =>
    outcomes.map((o) => ({ session_id: id, ok: false, ...o })),
  );
  const run = spawnSync(sidecarBin(), ["replay", "-"], { input: `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  const sidecar = run.stdout.trim().split("\n").map((line) => JSON.parse(line) as ReplayVerdict);
  assert.equal(sidecar.length, lines.length, run.stdout);
  const runs = new Map<string, Run>();
  lines.forEach((line, i) => {
    const r = runs.get(line.session_id) ?? new Run();
    runs.set(line.session_id, r);
    const { session_id: sessionId, http_status: httpStatus, kind, ...rest } = line as typeof line & { http_status?: number; kind?: string };
    const ours = r.report({ sessionId, httpStatus, kind: kind === "cancelled" ? pb.OutcomeKind.OUTCOME_KIND_CANCELLED : undefined, ...rest });
    const theirs = sidecar[i] as ReplayVerdict;
    const b = ours.breaker as pb.BreakerStatus;
    // A 5xx's category too: the fallback splits them as the sidecar does.
    const fivexx = (httpStatus ?? 0) >= 500;
    assert.deepEqual(
      {
        action: actionName(ours.action),
        category: fivexx ? categoryName(ours.classification?.category ?? 0) : null,
        reason: reasonName(b.reason),
        attemptsLeft: ours.retry?.attemptsLeft ?? null,
        counts: [b.consecutiveFailures, b.sessionErrors, b.identicalErrors, b.steps, sessionStateName(b.sessionState)],
      },
      {
        action: theirs.action,
        category: fivexx ? theirs.category : null,
        reason: theirs.breaker.reason ?? "unspecified",
        attemptsLeft: theirs.attempts_left,
        counts: [
          theirs.breaker.consecutive_failures,
          theirs.breaker.session_errors,
          theirs.breaker.identical_errors,
          theirs.breaker.steps,
          theirs.breaker.session_state,
        ],
      },
      `${JSON.stringify(line)} (line ${i + 1})`,
    );
  });
});

/** What the test reads of a `rebound replay` verdict line. */
interface ReplayVerdict {
  action: string;
  category: string | null;
  attempts_left: number | null;
  breaker: {
    reason: string | null;
    consecutive_failures: number;
    session_errors: number;
    identical_errors: number;
    steps: number;
    session_state: string;
  };
}
