// Real Node.js failures for holdout-real.jsonl: each case runs a Node API against something on this
// machine (a loopback server started here, a closed port, files, child processes, the resolver) and
// prints the outcome an agent would report, one JSON line per case, labelled beforehand, as the
// TypeScript client (clients/ts/src/outcome.ts) reads an error.
//
// Run: node node_cases.mjs > node.jsonl (Node 20, no packages). Random ports are written as 8787 (the
// server) and 8799 (a closed port). The outcome is the error's name, the messages of its cause chain,
// its code (the error's own, or its cause's: undici puts the socket error in `cause`), a child's exit
// status and stderr; without `kind` and the stack.

import { execSync } from "node:child_process";
import { promises as dns } from "node:dns";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";

import { loopback, RETRYABLE } from "./loopback.mjs";

const NODE = `Node.js ${process.version}`;
const server = http.createServer((req, res) => {
  if (req.url.startsWith("/slow")) {
    setTimeout(() => res.end("late"), 3000);
  } else if (req.url.startsWith("/drop")) {
    req.socket.destroy();
  } else {
    res.end("{}");
  }
});
const { PORT, CLOSED, fixed } = await loopback(server);

async function kase(id, category, source, run) {
  try {
    await run();
  } catch (error) {
    // As the TypeScript client reads an error: the cause chain's messages joined with ": ".
    const chain = [];
    for (let e = error; e && chain.length < 8; e = e.cause) chain.push(e);
    let message = "";
    for (const e of chain) {
      const m = String(e.message ?? e).trim();
      if (m && !message.includes(m)) message = message ? `${message}: ${m}` : m;
    }
    const outcome = { exception_type: error.name || error.constructor?.name || "", message: fixed(message) };
    const code = typeof error.code === "string" ? error.code : typeof error.cause?.code === "string" ? error.cause.code : "";
    if (code) outcome.code = code;
    if (typeof error.status === "number") outcome.exit_code = error.status;
    if (error.stderr && String(error.stderr).trim()) outcome.detail = fixed(String(error.stderr));
    console.log(JSON.stringify({ id, source, category, retryable: RETRYABLE.has(category), tags: [], outcome }));
    return;
  }
  console.error(`${id}: did not fail`);
}

// As an agent reports an error when it passes it on as text alone: `String(error)`, which names the
// type before the message, and nothing else.
async function kaseAsText(id, category, source, run) {
  try {
    await run();
  } catch (error) {
    const outcome = { message: fixed(String(error)) };
    console.log(JSON.stringify({ id, source, category, retryable: RETRYABLE.has(category), tags: ["type-in-message"], outcome }));
    return;
  }
  console.error(`${id}: did not fail`);
}

// fetch (undici)
await kase("r-node-fetch-refused", "network", NODE, () => fetch(`http://127.0.0.1:${CLOSED}/`));
await kase("r-node-fetch-timeout", "timeout", NODE, () => fetch(`http://127.0.0.1:${PORT}/slow`, { signal: AbortSignal.timeout(300) }));
await kase("r-node-fetch-aborted", "cancelled", NODE, () => {
  const controller = new AbortController();
  const pending = fetch(`http://127.0.0.1:${PORT}/slow`, { signal: controller.signal });
  controller.abort();
  return pending;
});
await kase("r-node-fetch-dropped", "network", NODE, () => fetch(`http://127.0.0.1:${PORT}/drop`));
await kase("r-node-fetch-dns", "network", NODE, () => fetch("http://api.nonexistent.invalid/v1"));
await kase("r-node-fetch-bad-url", "validation", NODE, () => fetch("localhost:3000/api"));

// http and net
await kase("r-node-http-hang-up", "network", NODE, () => new Promise((resolve, reject) => {
  http.get(`http://127.0.0.1:${PORT}/drop`, resolve).on("error", reject);
}));
await kase("r-node-net-refused", "network", NODE, () => new Promise((resolve, reject) => {
  net.connect(CLOSED, "127.0.0.1", resolve).on("error", reject);
}));
await kase("r-node-dns-lookup", "network", NODE, () => dns.lookup("db.nonexistent.invalid"));

// fs
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agent-"));
fs.writeFileSync(path.join(dir, "a.txt"), "x");
await kase("r-node-fs-enoent", "not_found", NODE, () => fs.promises.readFile("/srv/agent/config.yaml", "utf8"));
await kase("r-node-fs-eisdir", "not_found", NODE, () => fs.promises.readFile(dir, "utf8"));
await kase("r-node-fs-eexist", "conflict", NODE, () => fs.promises.mkdir(dir));
await kase("r-node-fs-enotempty", "conflict", NODE, () => fs.promises.rmdir(dir));
await kase("r-node-fs-enotdir", "not_found", NODE, () => fs.promises.readdir(path.join(dir, "a.txt")));

// JSON and modules
await kase("r-node-json-bad", "format", NODE, () => JSON.parse('{"query": "weather", "units": metric}'));
await kase("r-node-json-empty", "format", NODE, () => JSON.parse(""));
await kase("r-node-json-trailing", "format", NODE, () => JSON.parse('{"a": 1,}'));
await kase("r-node-import-missing", "not_found", NODE, () => import("left-pad-nonexistent"));

// child processes (the error carries status and stderr)
await kase("r-node-exec-missing-file", "not_found", NODE, () => execSync("cat /srv/agent/missing.txt", { stdio: "pipe" }));
await kase("r-node-exec-not-found", "not_found", NODE, () => execSync("terraformm plan", { stdio: "pipe" }));

// The same kind of failures sent as `String(error)` alone, with no type beside them.
const recurse = () => recurse();
await kaseAsText("r-node-text-fetch-timeout", "timeout", NODE, () => fetch(`http://127.0.0.1:${PORT}/slow`, { signal: AbortSignal.timeout(300) }));
await kaseAsText("r-node-text-json-bad", "format", NODE, () => JSON.parse('{"query": "weather", "units": metric}'));
await kaseAsText("r-node-text-stack", "internal", NODE, () => recurse());

// A port the loopback server already holds.
const listenTaken = () => new Promise((resolve, reject) => {
  const again = net.createServer().on("error", reject);
  again.listen(PORT, "127.0.0.1", () => again.close(resolve));
});
await kase("r-node-listen-in-use", "conflict", NODE, listenTaken);
await kaseAsText("r-node-text-listen-in-use", "conflict", NODE, listenTaken);

server.close();
