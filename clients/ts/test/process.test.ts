// The client as an agent's process uses it, each case a node process of its
// own: that it lets the process exit once closed.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
