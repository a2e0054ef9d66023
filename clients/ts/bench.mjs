#!/usr/bin/env node
// Prints the TypeScript client's report round-trip latency, p50 and p99 in µs,
// over loopback TCP and over a Unix socket, for unary report() and for the
// streaming Reporter. It starts its own sidecars ($REBOUND_BIN, or the
// repository's target/debug/rebound) unless given running ones. Needs a built
// client (npm ci, or npm run build).
//
//   node bench.mjs --n 2000 --warmup 200
//   node bench.mjs --tcp 127.0.0.1:50051 --unix unix:/run/rebound/rebound.sock

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { Client } from "rebound-client";

import { Sidecar } from "./test/sidecar.mjs";

/** Bounds a run: the benchmark must stop by itself in reasonable time. */
const MAX_COUNT = 100_000;

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "2000" },
    warmup: { type: "string", default: "200" },
    tcp: { type: "string" },
    unix: { type: "string" },
  },
  strict: true,
});
const n = Number(values.n);
const warmup = Number(values.warmup);
if (!Number.isInteger(n) || n < 1 || n > MAX_COUNT || !Number.isInteger(warmup) || warmup < 0 || warmup > MAX_COUNT) {
  console.error(`bench: --n must be 1 to ${MAX_COUNT} and --warmup 0 to ${MAX_COUNT}`);
  process.exit(2);
}

/**
 * The latency at quantile p of sorted samples, in whole µs.
 * @param {number[]} sorted
 * @param {number} p
 * @returns {number}
 */
function quantile(sorted, p) {
  return Math.round(sorted[Math.min(Math.floor(p * sorted.length), sorted.length - 1)] ?? Number.NaN);
}

/**
 * Times n successful reports, each a full round trip (sent, answered), in µs.
 * @param {string} addr
 * @param {"unary" | "stream"} mode
 * @returns {Promise<number[]>}
 */
async function measure(addr, mode) {
  // A generous deadline: a slow answer must be measured, not replaced by the fallback.
  const client = new Client(addr, { callTimeoutMs: 5000 });
  try {
    const session = client.session(`bench-${mode}-${process.pid}-${Date.now()}`);
    const reporter = mode === "stream" ? session.reporter() : undefined;
    const report = reporter ? () => reporter.report("bench") : () => session.report("bench");
    /** @type {number[]} */
    const samples = [];
    for (let i = 0; i < warmup + n; i++) {
      const start = process.hrtime.bigint();
      const v = await report();
      const elapsed = Number(process.hrtime.bigint() - start) / 1000;
      if (v.fallback) throw new Error("the local fallback answered: the sidecar is not reachable");
      if (i >= warmup) samples.push(elapsed);
    }
    await reporter?.close();
    await session.end();
    return samples.sort((a, b) => a - b);
  } finally {
    client.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), "rb-bench"));
/** @type {Sidecar[]} */
const started = [];
try {
  const targets = [
    { transport: "tcp", addr: values.tcp, listen: "127.0.0.1:0" },
    { transport: "unix", addr: values.unix, listen: `unix:${join(dir, "rebound.sock")}` },
  ];
  for (const { transport, addr, listen } of targets) {
    let target = addr;
    if (target === undefined) {
      const sidecar = await Sidecar.start(listen);
      started.push(sidecar);
      target = sidecar.grpc;
    }
    for (const mode of /** @type {const} */ (["unary", "stream"])) {
      const samples = await measure(target, mode);
      const mean = Math.round(samples.reduce((a, b) => a + b, 0) / samples.length);
      console.log(`ts ${transport} ${mode} p50=${quantile(samples, 0.5)}us p99=${quantile(samples, 0.99)}us mean=${mean}us n=${n}`);
    }
  }
} finally {
  for (const sidecar of started) await sidecar.stop();
  rmSync(dir, { recursive: true, force: true });
}
