// Declaring a session again after the sidecar may have lost it, against sidecars
// of the tests' own: a re-declaration the sidecar refuses after a config reload,
// one StartSession (not two) once the sidecar is back after a fallback, and a
// StartSession answered after the client noticed a loss.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";

import { Client, proto, type Verdict } from "../src/index.js";
import { forget, LIVE_TIMEOUT_MS, LogRecorder, sessionId, toolNames } from "./helpers.js";
import { Sidecar } from "./sidecar.mjs";

const START_SESSIONS = 'rebound_rpc_duration_seconds_count{method="StartSession"}';

const scratch = mkdtempSync(join(tmpdir(), "rb"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Polls `done` every 100 ms, failing after 15 s (the sidecar re-reads its config every 2 s). */
async function until(what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (!(await done())) {
    if (performance.now() > deadline) assert.fail(`${what}: not after 15 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

it("goes on, warning once, when the sidecar refuses to declare the session again because a reload removed its profile", async () => {
  const t = toolNames();
  const config = join(scratch, "profiles.toml");
  writeFileSync(config, "[profiles.batch.retry]\nbase_ms = 2000\n");
  const sidecar = await Sidecar.start(undefined, ["--config", config]);
  const logs = new LogRecorder();
  const c = new Client(sidecar.grpc, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: logs });
  try {
    const s = c.session(sessionId("removed-profile"), { profile: "batch", tools: [t.search, t.fetch] });
    assert.equal((await s.report(t.search)).fallback, false);

    writeFileSync(config, "# the batch profile is gone\n");
    await until("the sidecar reloading its config", async () => (await sidecar.metric('rebound_config_reloads_total{result="ok"}')) === 1);
    await forget(sidecar.grpc, s.id);
    // The sidecar starts the session anew: its first step tells the client so.
    assert.equal((await s.report(t.search)).breaker?.steps, 1);
    // The re-declaration names the profile the sidecar no longer has.
    const v = await s.report(t.search);
    assert.equal(v.fallback, false);
    assert.equal(v.breaker?.steps, 2);
    assert.equal(await s.run(t.fetch, () => "fetched"), "fetched");
    assert.equal(await sidecar.metric(START_SESSIONS), 2, "the refused declaration is not sent again on every call");
    assert.equal(logs.count("warn"), 1, logs.toString());
    assert.ok(logs.lines[0]?.includes(s.id), logs.toString());
    assert.match(logs.lines[0] ?? "", /`profile` = \\?"batch\\?": no such profile/);

    // The same on an open stream.
    const r = s.reporter();
    assert.equal((await r.report(t.search)).fallback, false);
    await forget(sidecar.grpc, s.id);
    assert.equal((await r.report(t.search)).breaker?.steps, 1);
    const w: Verdict = await r.report(t.search);
    assert.deepEqual([w.fallback, w.breaker?.steps], [false, 2]);
    await r.close();
    assert.equal(logs.count("warn"), 2, logs.toString());
    assert.equal(c.fallbacks, 0);
  } finally {
    c.close();
    await sidecar.stop();
  }
});

it("declares the session once, not twice, when the sidecar is back after a fallback", async () => {
  const t = toolNames();
  const first = await Sidecar.start();
  const c = new Client(first.grpc, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: new LogRecorder() });
  let second: Sidecar | undefined;
  try {
    const s = c.session(sessionId("back-after-fallback"), { tools: [t.search] });
    await s.report(t.search);
    await s.report(t.search);
    await first.kill();
    assert.equal((await s.report(t.search)).fallback, true);

    // Back on the same address, without the session.
    second = await Sidecar.start(first.grpc);
    const deadline = performance.now() + 15_000;
    let v = await s.report(t.search);
    while (v.fallback) {
      if (performance.now() > deadline) assert.fail("still answered locally 15 s after the sidecar came back");
      await new Promise((resolve) => setTimeout(resolve, 50));
      v = await s.report(t.search);
    }
    // Step 1 of the session that the re-declaration created: expected, not another loss.
    assert.equal(v.breaker?.steps, 1);
    assert.equal((await s.report(t.search)).breaker?.steps, 2);
    assert.equal((await s.report(t.search)).breaker?.steps, 3);
    assert.equal(await second.metric(START_SESSIONS), 1);
  } finally {
    c.close();
    await second?.stop();
    await first.kill();
  }
});

it("does not count a StartSession answered after the client noticed a loss", async () => {
  const t = toolNames();
  const sidecar = await Sidecar.start();
  const c = new Client(sidecar.grpc, { callTimeoutMs: LIVE_TIMEOUT_MS, logger: new LogRecorder() });
  try {
    const s = c.session(sessionId("stale-start"), { tools: [t.search] });
    // The declaration goes out; before its answer arrives, another call falls
    // back (the sidecar may have restarted after taking the declaration).
    const declaring = s.ensureDeclared();
    const o = proto.Outcome.create({ sessionId: s.id, tool: t.search, ok: true });
    s.fallback(o, s.prepare(o));
    assert.equal(await declaring, true, "the sidecar answered the StartSession");
    assert.equal(s.undeclared, true, "a declaration sent before the loss must not count after it");

    const v = await s.report(t.search);
    assert.equal(v.fallback, false);
    assert.equal(s.undeclared, false);
    assert.equal(await sidecar.metric(START_SESSIONS), 2, "the report declared the session again");
  } finally {
    c.close();
    await sidecar.stop();
  }
});
