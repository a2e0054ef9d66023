#!/usr/bin/env node
// The TypeScript client under chaos: reports tool outcomes through one client
// for a fixed time, whatever happens to the sidecar, and prints what it saw as
// JSON lines for tests/chaos/run to judge (the same fields as the Go driver).
//
//   node clients/ts/chaos_load.mjs --addr 127.0.0.1:50051 --seconds 12
//
// Every second: {"t":..,"calls":..,"fallbacks":..,"sidecar":..,"errors":..}
// (sidecar: verdicts that came from the sidecar in that second). At the end:
// {"event":"done",...} with the totals and the client's own fallback counter.
// Needs a built client (clients/ts/test.sh, or npm ci in clients/ts).

import { parseArgs } from "node:util";

import { Client } from "rebound-client";

const { values } = parseArgs({
  options: { addr: { type: "string" }, seconds: { type: "string", default: "12" } },
  strict: true,
});
const seconds = Number(values.seconds);
if (values.addr === undefined || values.addr === "" || !Number.isInteger(seconds) || seconds < 1 || seconds > 600) {
  console.error("chaos_load: --addr is required and --seconds must be 1 to 600");
  process.exit(2);
}

/** @typedef {{ t: number, calls: number, fallbacks: number, sidecar: number, errors: number }} Tick */

/** @returns {Tick} */
const tick = () => ({ t: 0, calls: 0, fallbacks: 0, sidecar: 0, errors: 0 });

/**
 * @param {string} addr
 * @param {number} lengthMs
 * @returns {Promise<void>}
 */
async function run(addr, lengthMs) {
  // A short call deadline: a dead sidecar must not slow the agent much. Warnings
  // go to stderr, which the chaos runner keeps apart from this JSON.
  const client = new Client(addr, { callTimeoutMs: 100 });
  const start = performance.now();
  const total = tick();
  let second = tick();
  let next = start + 1000;
  const failing = new Error("HTTP 503: Service Unavailable");
  try {
    for (let i = 0; performance.now() - start < lengthMs; i++) {
      // A new session every 50 calls, as agent runs come and go.
      const session = client.session(`chaos-ts-${process.pid}-${Math.floor(i / 50)}`);
      second.calls++;
      try {
        const v = await session.report("search", i % 4 === 3 ? { error: failing } : {});
        if (v.fallback) second.fallbacks++;
        else second.sidecar++;
      } catch {
        second.errors++;
      }
      const now = performance.now();
      if (now >= next) {
        second.t = Math.floor((now - start) / 1000);
        console.log(JSON.stringify(second));
        total.calls += second.calls;
        total.fallbacks += second.fallbacks;
        total.sidecar += second.sidecar;
        total.errors += second.errors;
        second = tick();
        next += 1000;
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  } finally {
    client.close();
  }
  total.calls += second.calls;
  total.fallbacks += second.fallbacks;
  total.sidecar += second.sidecar;
  total.errors += second.errors;
  total.t = Math.floor((performance.now() - start) / 1000);
  console.log(JSON.stringify({ ...total, event: "done", client_fallback_counter: client.fallbacks }));
}

run(values.addr, seconds * 1000).catch((err) => {
  console.error("chaos_load:", err);
  process.exitCode = 1;
});
