// The client as an agent's process uses it, each case a node process of its
// own: that it lets the process exit once closed, and that it keeps its own
// frames out of the stack traces it sends when installed from a folder
// (`npm install /path/to/clients/ts`, a symlink in node_modules).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";

import { Sidecar } from "./sidecar.mjs";

/** How long a script may take before it counts as hung: generous, the point is that it exits. */
const EXIT_BOUND_MS = 20_000;

let sidecar: Sidecar;
let dir = "";

before(async () => {
  sidecar = await Sidecar.start();
  dir = mkdtempSync(join(tmpdir(), "rebound-ts-app-"));
});

after(async () => {
  await sidecar.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `source` as an ES module in `dir` with node; resolves to its stdout, rejects if it fails or outlives the bound. */
async function runScript(name: string, source: string, args: readonly string[] = []): Promise<string> {
  const file = join(dir, name);
  writeFileSync(file, source);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [file, ...args], { cwd: dir, timeout: EXIT_BOUND_MS });
    return stdout;
  } catch (err) {
    const e = err as { killed?: boolean; stderr?: string };
    if (e.killed === true) assert.fail(`${name} was still running after ${EXIT_BOUND_MS} ms: something kept Node alive\n${e.stderr ?? ""}`);
    throw err;
  }
}

/** The built client (build/src/index.js, next to this file's build/test/), as an import specifier. */
const BUILT = new URL("../src/index.js", import.meta.url).href;

describe("client.close()", () => {
  it("lets the process exit while a Reporter's stream is open, its waiting outcome answered locally", async () => {
    const out = await runScript(
      "close-reporter.mjs",
      `import { Client } from ${JSON.stringify(BUILT)};
const c = new Client(process.argv[2], { callTimeoutMs: 3000, logger: { warn() {}, info() {} } });
const s = c.session("close-reporter-" + process.pid);
const r = s.reporter();
const first = await r.report("a");
const waiting = r.report("a");
c.close();
const second = await waiting;
console.log(JSON.stringify({ first: first.fallback, second: second.fallback }));
`,
      [sidecar.grpc],
    );
    assert.deepEqual(JSON.parse(out), { first: false, second: true }, "the stream was open, and close() answered what it left locally");
  });
});

describe("installed from a folder (a symlink in node_modules)", () => {
  it("sends the stack trace without the client's own frames", async () => {
    // clients/ts, which this file runs two folders below (build/test/).
    const pkg = fileURLToPath(new URL("../../", import.meta.url));
    mkdirSync(join(dir, "node_modules"), { recursive: true });
    symlinkSync(pkg, join(dir, "node_modules", "rebound-client"), "dir");
    const out = await runScript(
      "where.mjs",
      `import { createServer } from "node:http";
import { HttpError, outcomeFromError } from "rebound-client";
const server = createServer((_req, res) => { res.writeHead(503); res.end("upstream overloaded"); });
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const res = await fetch("http://127.0.0.1:" + server.address().port);
const err = await HttpError.fromResponse(res);
server.close();
console.log(JSON.stringify({ stack: err.stack, detail: outcomeFromError("search", { error: err }).detail }));
`,
    );
    const { stack, detail } = JSON.parse(out) as { stack: string; detail: string };
    const dist = join(realpathSync(pkg), "dist");
    assert.ok(stack.includes(`${dist}/outcome.js`), `the error's own stack: ${stack}`);
    assert.ok(!detail.includes(dist), `a frame of the client was sent: ${detail}`);
    assert.match(detail, /^HttpError: HTTP 503 Service Unavailable: upstream overloaded\n/);
    assert.ok(detail.includes(join(realpathSync(dir), "where.mjs")), `the agent's own frame is gone: ${detail}`);
  });
});
