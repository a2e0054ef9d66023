// Fail-open: the sidecar is killed mid-test, hangs, freezes or was never
// there, and the client keeps deciding with its local policy (warning once),
// then uses the sidecar again, without being recreated, once it is back.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

import { AbortRunError, Client, EscalationError, HttpError, type Verdict } from "../src/index.js";
import { LIVE_TIMEOUT_MS, LogRecorder, sessionId, toolNames } from "./helpers.js";
import { Sidecar } from "./sidecar.mjs";

/** The seed policy with short delays, so that fallback retries do not slow the tests. */
const FAST_POLICY = { baseDelayMs: 10, maxDelayMs: 100 };

const scratch = mkdtempSync(join(tmpdir(), "rb"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Reports until the sidecar answers again, or fails after 15 s. */
async function untilSidecarAnswers(what: string, report: () => Promise<Verdict>): Promise<Verdict> {
  const deadline = performance.now() + 15_000;
  for (;;) {
    const v = await report();
    if (!v.fallback) return v;
    if (performance.now() > deadline) assert.fail(`${what}: still answered locally 15 s after the sidecar came back`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function timed(what: string, limitMs: number, report: () => Promise<Verdict>): Promise<Verdict> {
  const start = performance.now();
  const v = await report();
  const elapsed = performance.now() - start;
  assert.ok(elapsed < limitMs, `${what} took ${elapsed.toFixed(0)} ms: the agent was held up`);
  return v;
}

for (const transport of ["unix", "tcp"] as const) {
  it(`falls back when the sidecar is killed mid-run and uses it again once it is back (${transport})`, async () => {
    const t = toolNames();
    const first = await Sidecar.start(transport === "unix" ? `unix:${join(scratch, "rebound.sock")}` : "127.0.0.1:0");
    // Back on the same address: the port the first one got, or the same socket path.
    const addr = first.grpc;
    const logs = new LogRecorder();
    const client = new Client(addr, { logger: logs, fallbackPolicy: FAST_POLICY, callTimeoutMs: LIVE_TIMEOUT_MS });
    let second: Sidecar | undefined;
    try {
      const s = client.session(sessionId(`failopen-${transport}`), { tools: [t.search, t.fetch] });
      const unavailable = new HttpError(503);

      let v = await s.report(t.search, { error: unavailable });
      assert.equal(v.fallback, false, "with the sidecar up, its verdict");
      await s.report(t.search);

      await first.kill();

      // Report: the local policy retries a 503 with the fast backoff.
      v = await timed("the fallback verdict", 2000, () => s.report(t.search, { error: unavailable }));
      assert.equal(v.fallback, true);
      assert.equal(v.action, "retry");
      assert.ok(v.delayMs >= 8 && v.delayMs <= 12, `delay ${v.delayMs} ms, want 10 ms ±20 %`);
      assert.match(v.rule, /^fallback\./);
      assert.equal(client.fallbacks, 1);

      // run: the failure above counts, so this call fails once more and then succeeds.
      let calls = 0;
      const value = await s.run(t.search, () => {
        calls++;
        if (calls === 1) throw unavailable;
        return "found";
      });
      assert.equal(value, "found");
      assert.equal(calls, 2);

      // Three failures of one tool in a row escalate locally.
      await s.report(t.fetch, { error: unavailable });
      await s.report(t.fetch, { error: unavailable });
      const err = await s.run(t.fetch, () => Promise.reject(unavailable)).catch((e: unknown) => e);
      assert.ok(err instanceof EscalationError, `got ${String(err)}`);
      assert.equal(err.verdict.fallback, true);
      assert.match(err.report, /3 times in a row/);

      // The other calls answer locally too.
      const r = s.reporter();
      v = await r.report(t.search);
      assert.deepEqual([v.fallback, v.action], [true, "continue"]);
      await r.close();
      const cx = await s.context();
      assert.equal(cx.fallback, true);
      assert.ok(cx.text.includes(`<error tool="${t.fetch}" type="unavailable">`), cx.text);
      const admission = await s.admit(t.search);
      assert.deepEqual([admission.allowed, admission.fallback], [true, true]);
      assert.equal(logs.count("warn"), 1, logs.toString());
      assert.ok(client.fallbacks >= 8, `fallbacks = ${client.fallbacks}, want one per local decision`);

      // Back on the same address: the client reconnects by itself and uses it again.
      second = await Sidecar.start(addr);
      v = await untilSidecarAnswers("Report", () => s.report(t.search, { error: unavailable }));
      assert.doesNotMatch(v.rule, /^fallback\./);
      assert.ok(logs.toString().includes("sidecar reachable again"), logs.toString());
      // The declaration was sent again: the restarted sidecar knows the session's tools.
      v = await s.report(t.serch, { ok: false, kind: "unknown_tool", message: `Tool ${t.serch} not found` });
      assert.equal(v.fallback, false);
      assert.equal(v.action, "reclassify");
      assert.ok(v.snippet.includes(t.search), v.snippet);
      const stream = s.reporter();
      await untilSidecarAnswers("Reporter", () => stream.report(t.search));
      await stream.close();
      assert.equal(logs.count("warn"), 1, `still one warning:\n${logs.toString()}`);
    } finally {
      client.close();
      await first.kill();
      await second?.stop();
    }
  });
}

it("aborts the fifth identical failure locally, counting on from the sidecar's, once the sidecar is gone", async () => {
  const sidecar = await Sidecar.start();
  const client = new Client(sidecar.grpc, { logger: new LogRecorder(), fallbackPolicy: FAST_POLICY, callTimeoutMs: LIVE_TIMEOUT_MS });
  try {
    const s = client.session(sessionId("identical"));
    const { search: db } = toolNames();
    // Real: psycopg's error when the server stops accepting connections, with the wait that varies.
    const report = (n: number): Promise<Verdict> => s.report(db, { error: new Error(`connection timeout expired after 30.${n}s`) });
    for (const n of [1, 2]) {
      const v = await report(n);
      assert.deepEqual([v.fallback, v.breaker?.identicalErrors], [false, n], "with the sidecar up, its verdict");
    }
    await sidecar.kill();
    let v: Verdict | undefined;
    for (const n of [3, 4, 5]) v = await report(n);
    assert.deepEqual([v?.fallback, v?.action, v?.reason, v?.breaker?.identicalErrors], [true, "abort", "identical_errors", 5]);
    // The run was told to end: a call that succeeds after it is answered abort too, its result kept.
    const err = await s.run(db, () => "rows").catch((e: unknown) => e);
    assert.ok(err instanceof AbortRunError, `got ${String(err)}`);
    assert.deepEqual([err.verdict.reason, err.result, err.snippet], ["session_stopped", "rows", "<error>\nThe session was stopped earlier; end the run.\n</error>"]);
    const sum = await s.end();
    assert.deepEqual([sum.fallback, sum.calls, sum.errors, sum.state], [true, 6, 5, "stopped"]);
  } finally {
    client.close();
    await sidecar.kill();
  }
});

it("enforces the limits a session declared when the sidecar cannot be reached", async () => {
  const client = new Client("unix:/nonexistent/rebound.sock", { logger: new LogRecorder() });
  try {
    const s = client.session(sessionId("declared-limits"), { stepLimit: 2 });
    assert.equal(await s.run("search", () => "first"), "first");
    const err = await s.run("search", () => "second").catch((e: unknown) => e);
    assert.ok(err instanceof AbortRunError, `got ${String(err)}`);
    assert.deepEqual([err.verdict.fallback, err.verdict.reason, err.result], [true, "step_limit", "second"]);
    assert.equal(err.snippet, "<error>\nThe session reached its step limit; end the run.\n</error>");
    const costly = client.session(sessionId("declared-cost"), { costLimit: 1 });
    await costly.report("llm", { cost: 0.6 });
    assert.deepEqual([(await costly.report("llm", { cost: 0.6 })).reason, (await costly.admit("llm")).allowed], ["cost_limit", false]);
  } finally {
    client.close();
  }
});

it("gives the declared labels back in a local escalation report and summary, as the sidecar does", async () => {
  // The sidecar returns a session's StartSession labels in its escalation reports (a field, and a
  // `Labels:` line right after the text's first line, sorted by key in UTF-8 byte order) and in its
  // EndSession summary; the fallback does the same with the labels the session declared. The last
  // two keys sort the other way round by UTF-16 code unit.
  // A value's line break and a secret stay out of the text, as on the sidecar.
  const labels = {
    user: "alice",
    run: "nightly-42",
    Z: "1",
    é: "2",
    "\u{1F600}": "3",
    "\uFF5A": "4",
    note: "a\nb",
    token: "abcdef0123456789",
  };
  const line = "Labels: Z=1, note=a b, run=nightly-42, token=[REDACTED:token], user=alice, é=2, \uFF5A=4, \u{1F600}=3";
  const sidecar = await Sidecar.start();
  const up = new Client(sidecar.grpc, { logger: new LogRecorder(), callTimeoutMs: LIVE_TIMEOUT_MS });
  const down = new Client("unix:/nonexistent/rebound.sock", { logger: new LogRecorder() });
  try {
    for (const client of [up, down]) {
      const s = client.session(sessionId("labels"), { labels });
      const v = await s.report(toolNames().llm, { error: new HttpError(401) });
      assert.deepEqual([v.fallback, v.action], [client === down, "escalate"]);
      const report = v.escalation;
      assert.ok(report !== undefined);
      assert.deepEqual(report.labels, labels);
      const text = report.text.split("\n");
      assert.equal(text[1], line, report.text);
      if (v.fallback) {
        assert.equal(text[0], report.summary, report.text);
        assert.match(text[2] ?? "", /^last error: /, report.text);
      } else {
        assert.match(text[0] ?? "", /^Rebound escalation: /, report.text);
      }
      const sum = await s.end();
      assert.deepEqual([sum.fallback, sum.labels, sum.escalations], [client === down, labels, 1]);
    }
    // A session that declared none: no field, no line, as on the sidecar.
    const s = down.session(sessionId("no-labels"));
    const v = await s.report("llm", { error: new HttpError(401) });
    assert.deepEqual([v.fallback, v.escalation?.labels, v.escalation?.text.includes("Labels:")], [true, {}, false]);
    assert.deepEqual((await s.end()).labels, {});
  } finally {
    up.close();
    down.close();
    await sidecar.stop();
  }
});

it("gives up at the call deadline when the sidecar accepts connections but never answers", async () => {
  const sockets: Socket[] = [];
  const silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const { port } = silent.address() as { port: number };
  const logs = new LogRecorder();
  const client = new Client(`127.0.0.1:${port}`, { logger: logs, callTimeoutMs: 100 });
  try {
    const s = client.session(sessionId("hang"));
    for (let i = 0; i < 3; i++) {
      const v = await timed(`report ${i}`, 1000, () => s.report("search", { error: new HttpError(401) }));
      assert.deepEqual([v.fallback, v.action], [true, "escalate"]);
    }
    assert.ok(sockets.length > 0, "the client never connected to the silent listener");
    assert.equal(client.fallbacks, 3);
    assert.equal(logs.count("warn"), 1, logs.toString());
  } finally {
    client.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

it("decides locally when nothing listens at all, with the default deadline", async () => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const logs = new LogRecorder();
  const client = new Client(`127.0.0.1:${port}`, { logger: logs });
  try {
    const s = client.session(sessionId("nothing"));
    const v = await timed("Report", 1000, () =>
      s.report("llm", { error: new HttpError(429, { headers: { "Retry-After": "2" } }) }),
    );
    assert.deepEqual([v.fallback, v.action, v.retry?.providerDelay], [true, "retry", true]);
    assert.ok(v.delayMs >= 2000 && v.delayMs <= 2400, `delay ${v.delayMs} ms, want the provider's 2 s +20 % at most`);
    const sum = await s.end();
    assert.deepEqual([sum.fallback, sum.calls, sum.retries, sum.errorsByCategory.rate_limited], [true, 1, 1, 1]);
    assert.equal(logs.count("warn"), 1);
  } finally {
    client.close();
  }
});

it("answers Admit from the local verdicts: an escalated session is allowed, an aborted one refused", async () => {
  const client = new Client("unix:/nonexistent/rebound.sock", { logger: new LogRecorder() });
  try {
    const s = client.session(sessionId("fallback-admit"));
    let v = await s.report("search", { error: new HttpError(401) });
    assert.deepEqual([v.fallback, v.action], [true, "escalate"]);
    let admission = await s.admit("search");
    assert.deepEqual([admission.allowed, admission.sessionState], [true, "escalated"]);
    v = await s.report("search", { error: new DOMException("The operation was aborted.", "AbortError") });
    assert.deepEqual([v.fallback, v.action], [true, "abort"]);
    admission = await s.admit("search");
    assert.deepEqual([admission.allowed, admission.reason, admission.sessionState], [false, "session_stopped", "stopped"]);
  } finally {
    client.close();
  }
});

it("keeps deciding when the logger itself throws", async () => {
  const broken = {
    warn(): void {
      throw new Error("log sink is full");
    },
    info(): void {
      throw new Error("log sink is full");
    },
  };
  const client = new Client("unix:/nonexistent/rebound.sock", { logger: broken });
  try {
    const v = await client.session(sessionId("broken-logger")).report("search", { error: new HttpError(503) });
    assert.deepEqual([v.fallback, v.action], [true, "retry"]);
  } finally {
    client.close();
  }
});

describe("a frozen sidecar (SIGSTOP)", () => {
  it("is given up at the deadline, unary and streamed, and used again once it thaws", async () => {
    const t = toolNames();
    const sidecar = await Sidecar.start();
    const logs = new LogRecorder();
    const client = new Client(sidecar.grpc, { logger: logs, callTimeoutMs: 250 });
    try {
      const s = client.session(sessionId("freeze"));
      const r = s.reporter();
      // The first report waits for the connection; give it the sidecar's own answer.
      await untilSidecarAnswers("warm-up", () => r.report(t.search));

      await sidecar.pause();
      const unavailable = new HttpError(503);
      let v = await timed("Report while frozen", 1500, () => s.report(t.search, { error: unavailable }));
      assert.deepEqual([v.fallback, v.action], [true, "retry"]);
      v = await timed("Reporter.report while frozen", 1500, () => r.report(t.fetch, { error: unavailable }));
      assert.deepEqual([v.fallback, v.action], [true, "retry"]);
      // Several in flight on one stream: all answered locally, in about one deadline.
      const start = performance.now();
      const pending = [0, 1, 2].map((i) => r.report(`db${i}${t.search}`, { error: new HttpError(502) }));
      for (const p of await Promise.all(pending)) assert.deepEqual([p.fallback, p.action], [true, "retry"]);
      assert.ok(performance.now() - start < 1500, "the queued outcomes waited one deadline each");

      sidecar.resume();
      await untilSidecarAnswers("Report", () => s.report(t.search));
      await untilSidecarAnswers("Reporter.report", () => r.report(t.search));
      await r.close();
      assert.equal(logs.count("warn"), 1, logs.toString());
    } finally {
      sidecar.resume();
      client.close();
      await sidecar.stop();
    }
  });

  it("answers a reporter's outcomes locally once its signal aborts", async () => {
    const sidecar = await Sidecar.start();
    const client = new Client(sidecar.grpc, { logger: new LogRecorder(), callTimeoutMs: LIVE_TIMEOUT_MS });
    try {
      const controller = new AbortController();
      const r = client.session(sessionId("reporter-abort")).reporter({ signal: controller.signal });
      assert.equal((await r.report("search")).fallback, false);
      await sidecar.pause();
      const pending = r.report("search");
      controller.abort();
      const v = await timed("the aborted stream's outcome", 1000, () => pending);
      assert.equal(v.fallback, true);
      assert.equal((await r.report("search")).fallback, true, "an aborted reporter answers locally");
      await r.close();
    } finally {
      sidecar.resume();
      client.close();
      await sidecar.stop();
    }
  });
});
