#!/usr/bin/env node
// Prints the TypeScript client's report round-trip latency, p50 and p99 in µs,
// over loopback TCP and over a Unix socket, for unary report() and for the
// streaming Reporter. It starts its own sidecars ($REBOUND_BIN, or the
// repository's target/debug/rebound) unless given running ones. Needs a built
// client (npm ci, or npm run build).
//
// The figures are the client's steady state, as the Go and Python benches
// measure theirs. V8 compiles the hot path (this client, grpc-js, node's http2)
// with its optimizing compiler only after a few thousand calls, on background
// threads (about 0.7 s of CPU over the first 3,000 unary reports, node 20), and
// again in part for each new connection, whose handlers are new closures. On a
// small machine that compiling takes the CPU from the timed calls and from the
// sidecar, and shows as a p99 ten times the p50. So each connection sends
// --warmup and then --jit-warmup reports before the timed ones; stderr shows
// how the first of the latter fared: the cold start an agent's first reports see.
//
//   node bench.mjs --n 2000 --warmup 200
//   node bench.mjs --jit-warmup 0    # time the cold start instead
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
    "jit-warmup": { type: "string", default: "10000" },
    tcp: { type: "string" },
    unix: { type: "string" },
  },
  strict: true,
});
const n = Number(values.n);
const warmup = Number(values.warmup);
const jitWarmup = Number(values["jit-warmup"]);
const inRange = (/** @type {number} */ v, /** @type {number} */ min) => Number.isInteger(v) && v >= min && v <= MAX_COUNT;
if (!inRange(n, 1) || !inRange(warmup, 0) || !inRange(jitWarmup, 0)) {
  console.error(`bench: --n must be 1 to ${MAX_COUNT}, and --warmup and --jit-warmup 0 to ${MAX_COUNT}`);
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
 * Times reports on a connection of its own, each a full round trip (sent,
 * answered), in µs: --warmup untimed, --jit-warmup more whose first n are kept
 * as the cold start, then the n measured.
 * @param {string} addr
 * @param {"unary" | "stream"} mode
 * @returns {Promise<{ cold: number[], samples: number[] }>}
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
    for (let i = 0; i < warmup + jitWarmup + n; i++) {
      const start = process.hrtime.bigint();
      const v = await report();
      const elapsed = Number(process.hrtime.bigint() - start) / 1000;
      if (v.fallback) throw new Error("the local fallback answered: the sidecar is not reachable");
      if (i >= warmup) samples.push(elapsed);
    }
    await reporter?.close();
    await session.end();
    return { cold: samples.slice(0, Math.min(n, jitWarmup)), samples: samples.slice(jitWarmup) };
  } finally {
    client.close();
  }
}

/**
 * The figures of a run of samples: p50, p99 and mean in µs.
 * @param {number[]} samples
 * @returns {string}
 */
function figures(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = Math.round(sorted.reduce((a, b) => a + b, 0) / sorted.length);
  return `p50=${quantile(sorted, 0.5)}us p99=${quantile(sorted, 0.99)}us mean=${mean}us n=${sorted.length}`;
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
      const { cold, samples } = await measure(target, mode);
      if (cold.length > 0) console.error(`cold ${transport} ${mode} ${figures(cold)} (while V8 compiles; not in the figures)`);
      console.log(`ts ${transport} ${mode} ${figures(samples)}`);
    }
  }
} finally {
  for (const sidecar of started) await sidecar.stop();
  rmSync(dir, { recursive: true, force: true });
}
