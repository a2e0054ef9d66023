#!/usr/bin/env node
// A small agent loop against real tools that fail in scripted ways. It follows
// Rebound's verdicts and prints what it did:
//
//   - search: a local HTTP API that answers 429 with Retry-After: 1, then 503, then 200;
//   - shell:  `sleep 5` run with a 500 ms timeout, which always times out;
//   - the LLM naming a tool that does not exist.
//
// Run it against a sidecar:
//
//   node examples/agentloop.mjs --addr 127.0.0.1:50051 [--timeout-ms 250]
//
// Without --addr it uses $REBOUND_ADDR, else 127.0.0.1:50051.
//
// Without a sidecar it still runs: the client's local fallback policy decides.

import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { parseArgs, promisify } from "node:util";

import { AbortRunError, Client, EscalationError, HttpError, RecoverError } from "rebound-client";

/** How long the scripted command may run; it sleeps far longer. */
const SHELL_TIMEOUT_MS = 500;

/**
 * @param {import("rebound-client").Verdict} v
 * @returns {string}
 */
const source = (v) => (v.fallback ? " [local fallback: sidecar unreachable]" : "");

/**
 * @param {string} text
 * @returns {string}
 */
const indent = (text) => (text.trim() === "" ? "    (empty)" : `    ${text.trim().replaceAll("\n", "\n    ")}`);

/**
 * A local API that answers 429 with Retry-After: 1, then 503, then 200 from then on.
 * @returns {Promise<{ url: string, close: () => void }>}
 */
async function flakyApi() {
  let calls = 0;
  const server = createServer((req, res) => {
    calls++;
    if (calls === 1) {
      res.writeHead(429, { "Retry-After": "1", "Content-Type": "text/plain" });
      res.end("rate limit exceeded, slow down");
    } else if (calls === 2) {
      res.writeHead(503, { "Content-Type": "text/plain" });
      res.end("upstream overloaded");
    } else {
      const q = new URL(req.url ?? "/", "http://localhost").searchParams.get("q");
      res.end(`3 results for ${JSON.stringify(q)}`);
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the API has no TCP address");
  return { url: `http://127.0.0.1:${address.port}`, close: () => server.close() };
}

/**
 * Calls the API and acts on each verdict by hand, to show the loop `session.run` runs.
 * @param {import("rebound-client").Session} session
 * @param {string} url
 * @returns {Promise<string>}
 */
async function search(session, url) {
  for (let attempt = 1; ; attempt++) {
    const start = performance.now();
    /** @type {unknown} */
    let error;
    let body = "";
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      if (!res.ok) throw await HttpError.fromResponse(res);
      body = await res.text();
    } catch (err) {
      error = err;
    }
    const v = await session.report("search", {
      ...(error === undefined ? {} : { error }),
      attempt,
      durationMs: performance.now() - start,
    });
    const outcome = error === undefined ? "ok" : error instanceof Error ? error.message : String(error);
    const category = v.category === "unspecified" ? "success" : v.category;
    console.log(`  attempt ${attempt}: ${outcome} -> ${v.action} (${category})${source(v)}`);
    switch (v.action) {
      case "continue":
        return body;
      case "retry": {
        const why = v.retry?.providerDelay ? "the provider's Retry-After" : "backoff";
        console.log(`    waiting ${v.delayMs} ms (${why})`);
        await new Promise((resolve) => setTimeout(resolve, v.delayMs));
        break;
      }
      default:
        throw new Error(`search did not recover: the verdict says ${v.action}:\n${v.snippet}`);
    }
  }
}

/**
 * Runs a command that always times out, letting `session.run` follow the verdicts.
 * @param {import("rebound-client").Session} session
 * @returns {Promise<void>}
 */
async function shell(session) {
  let attempts = 0;
  try {
    await session.run("shell", async ({ attempt, signal }) => {
      attempts = attempt;
      console.log(`  attempt ${attempt}: running \`sleep 5\``);
      await promisify(execFile)("sleep", ["5"], { timeout: SHELL_TIMEOUT_MS, ...(signal ? { signal } : {}) });
    });
    console.log("  the command finished");
  } catch (err) {
    if (err instanceof EscalationError) {
      console.log(`  escalated after ${attempts} attempts${source(err.verdict)}: a human is needed. Report:\n${indent(err.report)}`);
    } else if (err instanceof RecoverError) {
      console.log(`  ${err.action} after ${attempts} attempts${source(err.verdict)}; for the LLM:\n${indent(err.snippet)}`);
    } else if (err instanceof AbortRunError) {
      console.log(`  the run must end after ${attempts} attempts${source(err.verdict)}: ${err.message}`);
    } else {
      throw err;
    }
  }
}

/**
 * @param {string | undefined} addr the sidecar; undefined: $REBOUND_ADDR, else 127.0.0.1:50051
 * @param {number} callTimeoutMs
 * @returns {Promise<void>}
 */
async function main(addr, callTimeoutMs) {
  const api = await flakyApi();
  const client = new Client(addr, { callTimeoutMs });
  try {
    const session = client.session(`agentloop-${process.pid}-${Date.now()}`, { tools: ["search", "shell"] });
    console.log(`session ${session.id} on sidecar ${client.address}`);

    console.log("\n== search: a local API that answers 429 (Retry-After: 1), then 503, then 200");
    const result = await search(session, `${api.url}/search?q=rebound`);
    console.log(`  result: ${result}`);

    console.log(`\n== shell: \`sleep 5\` with a ${SHELL_TIMEOUT_MS} ms timeout, run through session.run`);
    await shell(session);

    console.log("\n== the LLM calls a tool that does not exist: serch");
    const v = await session.report("serch", { ok: false, kind: "unknown_tool", message: "Tool serch not found" });
    console.log(`  verdict: ${v.action}${source(v)}`);
    console.log(indent(v.snippet));

    const context = await session.context();
    console.log(`\n== context for the LLM's next turn (${context.errorsShown} error(s) shown)`);
    console.log(indent(context.text));

    const sum = await session.end();
    console.log(
      `\n== session summary: ${sum.calls} calls, ${sum.errors} errors ${JSON.stringify(sum.errorsByCategory)}, ` +
        `${sum.retries} retries, ${sum.escalations} escalations; ${client.fallbacks} local fallback decisions`,
    );
  } finally {
    client.close();
    api.close();
  }
}

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    // Each call's deadline before the local fallback decides (the client's default is 250 ms).
    "timeout-ms": { type: "string", default: "250" },
  },
  strict: true,
});
const timeoutMs = Number(values["timeout-ms"]);
if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
  console.error("agentloop: --timeout-ms must be a positive whole number of milliseconds");
  process.exit(2);
}
main(values.addr, timeoutMs).catch((err) => {
  console.error("agentloop:", err);
  process.exitCode = 1;
});
