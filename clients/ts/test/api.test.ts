// The session API against the real sidecar: run's retries and typed errors,
// declarations, context, admit, end, idempotency, the streaming reporter, and
// the checks on every input.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  AbortRunError,
  Client,
  connect,
  EscalationError,
  HttpError,
  InvalidInputError,
  RecoverError,
  type ClientOptions,
  type ReportOptions,
  type RunOptions,
  type Session,
  type SessionOptions,
  type Verdict,
} from "../src/index.js";
import {
  forget,
  LIVE_TIMEOUT_MS,
  LogRecorder,
  NGINX_502_PAGE,
  OPENAI_QUOTA_BODY,
  serve,
  sessionId,
  toolNames,
} from "./helpers.js";
import { Sidecar } from "./sidecar.mjs";

let sidecar: Sidecar;
const clients: Client[] = [];

before(async () => {
  sidecar = await Sidecar.start();
});

after(async () => {
  for (const c of clients) c.close();
  await sidecar.stop();
});

/** A client of the shared sidecar, closed when the tests end. */
function dial(options: ClientOptions = {}): Client {
  const c = new Client(sidecar.grpc, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: new LogRecorder(), ...options });
  clients.push(c);
  return c;
}

function open(c: Client, name: string, options?: SessionOptions): Session {
  return c.session(sessionId(name), options);
}

/** A 429 whose provider asks for a short wait, so that retry tests stay fast. */
function rateLimited(): HttpError {
  return new HttpError(429, { headers: { "retry-after-ms": "50" }, body: "Too Many Requests" });
}

/** The error a promise rejects with (it must reject). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return assert.fail("expected a rejection");
}

describe("Session.run", () => {
  it("retries as told, then resolves to the tool's value", async () => {
    const t = toolNames();
    const c = dial();
    const s = open(c, "run-retry");
    const attempts: number[] = [];
    const value = await s.run(t.search, async ({ attempt }) => {
      attempts.push(attempt);
      if (attempt === 1) throw rateLimited();
      return { hits: 3 };
    });
    assert.deepEqual(value, { hits: 3 });
    assert.deepEqual(attempts, [1, 2]);
    const sum = await s.end();
    assert.equal(sum.fallback, false);
    assert.deepEqual([sum.calls, sum.errors, sum.retries], [2, 1, 1]);
    assert.equal(c.fallbacks, 0);
  });

  it("escalates with an EscalationError carrying the verdict and the tool's error", async () => {
    const t = toolNames();
    const authErr = new HttpError(401, { body: "Incorrect API key provided" });
    const err = await rejection(open(dial(), "run-escalate").run(t.llm, () => Promise.reject(authErr)));
    assert.ok(err instanceof EscalationError, `got ${String(err)}`);
    assert.equal(err.cause, authErr);
    assert.equal(err.verdict.category, "auth");
    assert.equal(err.action, "escalate");
    assert.notEqual(err.report, "");
    assert.equal(err.tool, t.llm);
    assert.equal(err.message, `rebound: escalate after "${t.llm}" (auth) (reason category_policy): HTTP 401 Unauthorized: Incorrect API key provided`);
  });

  it("redacts the tool's error in its message, which agents log, and keeps the error as it was", async () => {
    const t = toolNames();
    const key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD";
    // OpenAI's 401 for a wrong key, answered by a local server.
    const api = await serve((_req, res) => {
      res.writeHead(401, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${key}.`, type: "invalid_request_error", param: null, code: "invalid_api_key" } }));
    });
    try {
      const err = await rejection(
        open(dial(), "run-redact").run(t.llm, async () => {
          const res = await fetch(api.url);
          if (!res.ok) throw await HttpError.fromResponse(res);
        }),
      );
      assert.ok(err instanceof EscalationError, `got ${String(err)}`);
      assert.ok(!err.message.includes(key), err.message);
      assert.match(err.message, /: HTTP 401 Unauthorized: .*Incorrect API key provided: \[REDACTED:openai_key\]/);
      assert.ok(err.cause instanceof HttpError && err.cause.message.includes(key), "the cause is the tool's error as it was");
    } finally {
      await api.close();
    }
  });

  it("describes a thrown value that is no Error by its message, else its JSON, cut short", async () => {
    const t = toolNames();
    const s = open(dial(), "run-thrown-values");
    const messageOf = async (value: unknown): Promise<string> => {
      const err = await rejection(s.run(t.fetch, () => Promise.reject(value)));
      assert.ok(err instanceof RecoverError || err instanceof EscalationError, `got ${String(err)}`);
      assert.equal(err.cause, value);
      return err.message;
    };
    // What Octokit-style code and hand-rolled clients throw.
    assert.match(await messageOf({ status: 404, message: "Repository not found" }), /: Repository not found$/);
    assert.match(await messageOf({ status: 422, errors: [{ field: "title" }] }), /: \{"status":422,"errors":\[\{"field":"title"\}\]\}$/);
    assert.match(await messageOf("no results for that query"), /: no results for that query$/);
    const long = await messageOf({ items: Array.from({ length: 100 }, (_, i) => `item-${i}`) });
    assert.match(long, /: \{"items":\["item-0",.*…$/);
    assert.ok(long.length < 400, long);
  });

  it("retries a tool whose JSON.parse met an error page, as the sidecar's internal error, not the model's format error", async () => {
    const t = toolNames();
    let requests = 0;
    const upstream = await serve((_req, res) => {
      // Down for the report's call and run's first attempt, back for its second.
      if (++requests <= 2) {
        res.writeHead(502, { "Content-Type": "text/html" });
        res.end(NGINX_502_PAGE);
      } else {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end('{"hits":3}');
      }
    });
    const search = async (): Promise<unknown> => JSON.parse(await (await fetch(upstream.url)).text());
    try {
      const s = open(dial(), "run-tool-parse");
      const parseError = await rejection(search());
      const v = await s.report(t.fetch, { error: parseError });
      assert.deepEqual([v.action, v.category, v.rule], ["retry", "internal", "kind.tool_error.parse"]);
      const attempts: number[] = [];
      const value = await s.run(t.search, ({ attempt }) => {
        attempts.push(attempt);
        return search();
      });
      assert.deepEqual(value, { hits: 3 });
      assert.deepEqual(attempts, [1, 2]);
    } finally {
      await upstream.close();
    }
  });

  it("escalates an OpenAI 429 that says insufficient_quota, instead of retrying it as rate limited", async () => {
    const t = toolNames();
    const api = await serve((_req, res) => {
      res.writeHead(429, { "Content-Type": "application/json" });
      res.end(OPENAI_QUOTA_BODY);
    });
    try {
      let calls = 0;
      const err = await rejection(
        open(dial(), "run-quota").run(t.llm, async () => {
          calls++;
          const res = await fetch(`${api.url}/v1/chat/completions`, { method: "POST" });
          if (!res.ok) throw await HttpError.fromResponse(res);
        }),
      );
      assert.ok(err instanceof EscalationError, `got ${String(err)}`);
      assert.deepEqual([err.verdict.category, err.verdict.rule], ["quota_exceeded", "code.insufficient_quota"]);
      assert.equal(calls, 1);
    } finally {
      await api.close();
    }
  });

  it("aborts with an AbortRunError when the tool was cancelled", async () => {
    const t = toolNames();
    const cancelled = new DOMException("The operation was aborted.", "AbortError");
    const err = await rejection(open(dial(), "run-abort").run(t.search, () => Promise.reject(cancelled)));
    assert.ok(err instanceof AbortRunError, `got ${String(err)}`);
    assert.equal(err.cause, cancelled);
    assert.equal(err.verdict.category, "cancelled");
  });

  it("hands a not-found back to the LLM with a RecoverError and a snippet", async () => {
    const t = toolNames();
    const err = await rejection(open(dial(), "run-recover").run(t.fetch, () => Promise.reject(new HttpError(404, { body: "no such item" }))));
    assert.ok(err instanceof RecoverError, `got ${String(err)}`);
    assert.equal(err.action, "recover");
    assert.ok(err.snippet.startsWith(`<error tool="${t.fetch}" type="not_found">\n`), err.snippet);
  });

  it("reclassifies an unknown tool, suggesting a declared one", async () => {
    const t = toolNames();
    const s = open(dial(), "run-reclassify", { tools: [t.search, t.fetch] });
    const err = await rejection(
      s.run(t.serch, () => Promise.reject(new Error(`Tool ${t.serch} not found`)), { kind: "unknown_tool" }),
    );
    assert.ok(err instanceof RecoverError, `got ${String(err)}`);
    assert.equal(err.action, "reclassify");
    assert.ok(err.snippet.includes(t.search), `the snippet does not suggest ${t.search}: ${err.snippet}`);
  });

  it("replans when the context is too long", async () => {
    const t = toolNames();
    const tooLong = new HttpError(400, { body: "This model's maximum context length is 8192 tokens." });
    const err = await rejection(
      open(dial(), "run-replan").run(t.llm, () => Promise.reject(tooLong), { kind: "provider_error", code: "context_length_exceeded" }),
    );
    assert.ok(err instanceof RecoverError, `got ${String(err)}`);
    assert.equal(err.action, "replan");
  });

  it("stops waiting to retry as soon as its signal aborts", async () => {
    const t = toolNames();
    const s = open(dial(), "run-signal");
    let calls = 0;
    const reason = new Error("the user pressed stop");
    const controller = new AbortController();
    setTimeout(() => controller.abort(reason), 100);
    const start = performance.now();
    // The provider asks for 5 s; the abort comes well before, and so must the rejection,
    // however slow a loaded machine makes the report itself.
    const err = await rejection(
      s.run(
        t.search,
        async () => {
          calls++;
          throw new HttpError(429, { headers: { "Retry-After": "5" } });
        },
        { signal: controller.signal },
      ),
    );
    assert.equal(err, reason);
    assert.equal(calls, 1);
    assert.ok(performance.now() - start < 3500, "the retry wait ignored the signal");
  });

  it("does not call the tool when its signal has already aborted", async () => {
    const t = toolNames();
    let calls = 0;
    const err = await rejection(open(dial(), "run-aborted").run(t.search, () => calls++, { signal: AbortSignal.abort() }));
    assert.equal((err as Error).name, "AbortError");
    assert.equal(calls, 0);
  });

  it("gives up after maxAttempts", async () => {
    const t = toolNames();
    let calls = 0;
    const err = await rejection(
      open(dial({ maxAttempts: 2 }), "run-max").run(t.llm, () => {
        calls++;
        throw rateLimited();
      }),
    );
    assert.ok(err instanceof RecoverError, `got ${String(err)}`);
    assert.match(err.message, /gave up after 2 attempts/);
    assert.equal(calls, 2);
  });

  it("rejects options that are run's own", async () => {
    const s = open(dial(), "run-own");
    await assert.rejects(s.run("t", () => 1, { callId: "x" } as never), InvalidInputError);
    await assert.rejects(s.run("t", "not a function" as never), InvalidInputError);
  });
});

describe("Session", () => {
  it("declares itself, gives the context, admits and ends with a summary", async () => {
    const t = toolNames();
    const s = open(dial(), "session", {
      tools: [t.search, t.fetch],
      stepLimit: 50,
      costLimit: 2.5,
      errorLimit: 8,
      labels: { team: "agents" },
    });
    const limits = await s.start();
    assert.ok(limits !== undefined);
    assert.deepEqual([limits.stepLimit, limits.costLimit, limits.errorLimit], [50, 2.5, 8]);

    const v = await s.report(t.fetch, {
      error: new HttpError(404, { body: "Not Found for url: https://api.example.com/v1/items/42" }),
      cost: 0.5,
    });
    assert.equal(v.action, "recover");
    assert.equal(v.category, "not_found");
    assert.equal(v.fallback, false);
    let cx = await s.context();
    assert.equal(cx.errorsShown, 1);
    assert.ok(cx.text.includes(`<error tool="${t.fetch}" type="not_found">\n`), cx.text);
    // A later success of the same tool resolves the error.
    assert.equal((await s.report(t.fetch)).action, "continue");
    cx = await s.context();
    assert.equal(cx.text, "");
    const admission = await s.admit(t.search);
    assert.equal(admission.allowed, true);
    assert.equal(admission.fallback, false);
    const sum = await s.end();
    assert.deepEqual([sum.calls, sum.errors, sum.cost, sum.errorsByCategory.not_found], [2, 1, 0.5, 1]);
    assert.equal(sum.fallback, false);
  });

  it("declares itself again when the sidecar has forgotten it, so an unknown tool still gets the declared ones", async () => {
    const t = toolNames();
    const c = dial();
    const s = open(c, "forgotten", { tools: [t.search, t.fetch] });
    assert.equal((await s.report(t.search)).breaker?.steps, 1);
    await forget(sidecar.grpc, s.id);
    // No call falls back: only the verdict's first step says that the sidecar started the session anew.
    assert.equal((await s.report(t.search)).breaker?.steps, 1);
    const v = await s.report(t.serch, { ok: false, kind: "unknown_tool", message: `Tool ${t.serch} not found` });
    assert.equal(v.action, "reclassify");
    assert.ok(v.snippet.includes(`Did you mean \`${t.search}\`?`), `the snippet does not suggest ${t.search}: ${v.snippet}`);
    assert.equal(c.fallbacks, 0);
  });

  it("aborts at the step limit, and run on the stopped session throws AbortRunError without a tool error", async () => {
    const t = toolNames();
    const s = open(dial(), "steps", { stepLimit: 2 });
    let first: Verdict | undefined;
    for (let i = 0; i < 3 && first === undefined; i++) {
      const v = await s.report(t.search);
      if (v.action !== "continue") first = v;
    }
    assert.equal(first?.action, "abort");
    assert.equal(first?.reason, "step_limit");
    const err = await rejection(s.run(t.search, () => "ok"));
    assert.ok(err instanceof AbortRunError, `got ${String(err)}`);
    assert.equal(err.cause, undefined);
  });

  it("keeps the tool's result when a verdict stops the run after a successful call, and names the reason", async () => {
    const t = toolNames();
    const s = open(dial(), "steps-result", { stepLimit: 2 });
    const charges: string[] = [];
    const charge = (): { chargeId: string } => {
      charges.push(`ch_${charges.length + 1}`);
      return { chargeId: charges.at(-1) ?? "" };
    };
    assert.deepEqual(await s.run(t.fetch, charge), { chargeId: "ch_1" });
    const err = await rejection(s.run(t.fetch, charge));
    assert.ok(err instanceof AbortRunError, `got ${String(err)}`);
    assert.equal(err.message, `rebound: abort after "${t.fetch}" (reason step_limit)`);
    assert.deepEqual(err.result, { chargeId: "ch_2" }, "the second charge happened: its result must not be lost");
    assert.equal(err.cause, undefined);
    assert.deepEqual(charges, ["ch_1", "ch_2"]);
  });

  it("does not paper over an argument the sidecar rejects", async () => {
    const t = toolNames();
    const c = dial();
    // The sidecar's config defines no profiles, so it rejects this one as an invalid argument.
    const s = open(c, "profile", { profile: "no-such-profile" });
    const err = await rejection(s.report(t.search));
    assert.ok(err instanceof InvalidInputError, `got ${String(err)}`);
    assert.match(err.message, /profile/);
    assert.equal(c.fallbacks, 0);
  });

  it("returns the first verdict again for a repeated call id", async () => {
    const t = toolNames();
    const s = open(dial(), "idempotent");
    const first = await s.report(t.search, { error: new HttpError(503), callId: "call-1" });
    const again = await s.report(t.search, { error: new HttpError(503), callId: "call-1" });
    assert.equal(again.replayed, true);
    assert.equal(again.delayMs, first.delayMs);
  });

  it("counts a repeated call id once, the local fallback as the sidecar", async () => {
    const t = toolNames();
    const down = new Client("unix:/nonexistent/rebound.sock", { logger: new LogRecorder() });
    clients.push(down);
    const seen = [];
    for (const c of [dial(), down]) {
      const s = open(c, "idempotent-counts");
      const verdicts: Verdict[] = [];
      for (let i = 0; i < 3; i++) verdicts.push(await s.report(t.search, { error: new HttpError(503), callId: "call-1" }));
      const sum = await s.end();
      assert.deepEqual(
        verdicts.map((v) => v.fallback),
        [c === down, c === down, c === down],
      );
      seen.push({
        actions: verdicts.map((v) => v.action),
        replayed: verdicts.map((v) => v.replayed),
        consecutive: verdicts.map((v) => v.proto.breaker?.consecutiveFailures),
        counts: [sum.calls, sum.errors, sum.retries, sum.escalations],
      });
    }
    const [sidecarSaw, fallbackSaw] = seen;
    assert.deepEqual(sidecarSaw, {
      actions: ["retry", "retry", "retry"],
      replayed: [false, true, true],
      consecutive: [1, 1, 1],
      counts: [1, 1, 1, 0],
    });
    assert.deepEqual(fallbackSaw, sidecarSaw);
  });

  it("applies a token budget to the context", async () => {
    const t = toolNames();
    // The sidecar loads its tokenizer on the first budgeted request, which takes seconds in a
    // debug build on a busy machine: a deadline that long keeps this a test of the budget.
    const s = open(dial({ callTimeoutMs: 30_000 }), "budget");
    for (const tool of [t.search, t.fetch, t.llm]) {
      await s.report(tool, { error: new HttpError(404, { body: "the item was not found in the catalogue ".repeat(4) }) });
    }
    await assert.rejects(s.context({ maxTokens: -1 }), InvalidInputError);
    const full = await s.context();
    const small = await s.context({ maxTokens: 60 });
    assert.deepEqual([full.fallback, small.fallback], [false, false], "the sidecar answered");
    assert.equal(full.errorsShown, 3);
    assert.ok(small.errorsShown < full.errorsShown, `with 60 tokens: ${small.errorsShown} shown`);
    assert.ok(small.tokens <= 60, `${small.tokens} tokens`);
  });
});

describe("Reporter", () => {
  it("streams many outcomes in order, pipelined and concurrent", async () => {
    const t = toolNames();
    const c = dial();
    const s = open(c, "reporter");
    const r = s.reporter();
    const n = 200;
    // Few enough errors to stay under the session's error limit (10 escalate).
    const failing = (i: number): boolean => i % 40 === 39;
    const verdicts = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        r.report(`tool-${"abcde"[i % 5]}${t.search}`, failing(i) ? { error: new HttpError(404) } : {}),
      ),
    );
    verdicts.forEach((v, i) => {
      assert.equal(v.fallback, false, `outcome ${i} fell back`);
      assert.equal(v.action, failing(i) ? "recover" : "continue", `outcome ${i}`);
    });
    const callIds = new Set(verdicts.map((v) => v.callId));
    assert.equal(callIds.size, n, "each verdict answers its own outcome");

    // Several loops awaiting one report at a time share the stream.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 25; i++) {
          const v = await r.report(t.search);
          assert.equal(v.action, "continue");
          assert.equal(v.fallback, false);
        }
      }),
    );
    await r.close();
    await assert.rejects(r.report(t.search), /closed Reporter/);
    const sum = await s.end();
    assert.equal(sum.calls, n + 200);
    assert.equal(c.fallbacks, 0);
  });

  it("declares the session again on the open stream when the sidecar has forgotten it", async () => {
    const t = toolNames();
    const c = dial();
    const s = open(c, "reporter-forgotten", { tools: [t.search, t.fetch] });
    const r = s.reporter();
    assert.equal((await r.report(t.search)).breaker?.steps, 1);
    await forget(sidecar.grpc, s.id);
    assert.equal((await r.report(t.search)).breaker?.steps, 1);
    const v = await r.report(t.serch, { ok: false, kind: "unknown_tool", message: `Tool ${t.serch} not found` });
    assert.equal(v.action, "reclassify");
    assert.ok(v.snippet.includes(`Did you mean \`${t.search}\`?`), `the snippet does not suggest ${t.search}: ${v.snippet}`);
    await r.close();
    assert.equal(c.fallbacks, 0);
  });

  it("rejects an argument the sidecar rejects instead of falling back", async () => {
    const t = toolNames();
    const c = dial();
    const r = open(c, "reporter-profile", { profile: "no-such-profile" }).reporter();
    await assert.rejects(r.report(t.search), /profile/);
    await r.close();
    assert.equal(c.fallbacks, 0);
  });
});

describe("input checks", () => {
  it("rejects malformed addresses and options at construction", () => {
    for (const addr of ["nope", "127.0.0.1:0", "127.0.0.1:70000", ":50051", "unix:", "unix:///", "http://127.0.0.1:1"]) {
      assert.throws(() => new Client(addr), InvalidInputError, addr);
    }
    assert.throws(() => new Client("127.0.0.1:1", { callTimeoutMs: 0 }), /callTimeoutMs/);
    assert.throws(() => new Client("127.0.0.1:1", { timeout: 5 } as ClientOptions), /unknown option "timeout"/);
    assert.throws(() => new Client("127.0.0.1:1", { fallbackPolicy: { jitter: 2 } }), /jitter/);
    const c = connect("[::1]:50051");
    c.close();
  });

  it("dials $REBOUND_ADDR when no address is given, else 127.0.0.1:50051", async () => {
    const saved = process.env.REBOUND_ADDR;
    try {
      process.env.REBOUND_ADDR = sidecar.grpc;
      const c = new Client(undefined, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: new LogRecorder() });
      clients.push(c);
      assert.equal(c.address, sidecar.grpc);
      assert.equal((await c.session(sessionId("env")).report("search")).fallback, false);
      delete process.env.REBOUND_ADDR;
      const d = connect();
      assert.equal(d.address, "127.0.0.1:50051");
      d.close();
    } finally {
      if (saved === undefined) delete process.env.REBOUND_ADDR;
      else process.env.REBOUND_ADDR = saved;
    }
  });

  it("rejects the tool's error passed where the options go, on every path, instead of reporting a success", async () => {
    const t = toolNames();
    const c = dial();
    const s = open(c, "error-as-options");
    const err = new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:9") });
    await assert.rejects(s.report(t.search, err as ReportOptions), /pass the error as \{ error \}/);
    const r = s.reporter();
    await assert.rejects(r.report(t.search, err as ReportOptions), /pass the error as \{ error \}/);
    await r.close();
    await assert.rejects(s.run(t.search, () => 1, err as RunOptions), /run options: got a TypeError; must be a plain object/);
    await assert.rejects(s.report(t.search, [err] as ReportOptions), /report options: got an array/);
    // Nothing reached the sidecar: the session was never created there.
    const sum = await s.end();
    assert.equal(sum.calls, 0);
  });

  it("rejects bad session ids and declarations", () => {
    const c = dial();
    assert.throws(() => c.session(""), /session id/);
    assert.throws(() => c.session("a\tb"), /control characters/);
    assert.throws(() => c.session("s", { stepLimit: -1 }), /stepLimit/);
    assert.throws(() => c.session("s", { tools: "search" as unknown as string[] }), /tools/);
    assert.throws(() => c.session("s", { tools: ["ok", ""] }), /tools\[1\]/);
    assert.throws(() => c.session("s", { labels: { team: "x".repeat(1025) } }), /1024 bytes/);
    assert.throws(() => c.session("s", { step_limit: 5 } as SessionOptions), /unknown option "step_limit"/);
  });
});
