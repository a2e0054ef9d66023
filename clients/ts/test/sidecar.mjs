// Starts and stops the real rebound binary for the tests and the benchmark:
// `rebound serve`, its ready line read from stdout. Plain JavaScript (type-checked
// through JSDoc) so that bench.mjs runs it without a build step.

import { spawn } from "node:child_process";
import { accessSync, constants, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** How long a start may take; a debug build starts in a few seconds at most. */
const READY_TIMEOUT_MS = 30_000;
/** How long the drain after SIGTERM may take before the process is killed. */
const STOP_TIMEOUT_MS = 15_000;
/** How long every thread may take to stop after SIGSTOP. */
const PAUSE_TIMEOUT_MS = 5_000;

/**
 * Whether every thread of process `pid` is stopped (state T in /proc/PID/task/*\/stat); true where
 * there is no /proc to read, which leaves the signal to do what it can.
 * @param {number | undefined} pid
 */
function stopped(pid) {
  const tasks = `/proc/${pid}/task`;
  if (!existsSync(tasks)) return true;
  try {
    return readdirSync(tasks).every((t) => {
      // The state follows the command's closing parenthesis: "PID (comm) STATE ...".
      const stat = readFileSync(`${tasks}/${t}/stat`, "utf8");
      return ["T", "t"].includes(stat.slice(stat.lastIndexOf(")") + 1).trim().split(" ")[0] ?? "");
    });
  } catch {
    return false; // a thread came or went meanwhile: read again
  }
}

/**
 * The sidecar binary: $REBOUND_BIN, or the repository's target/debug/rebound.
 * @returns {string}
 */
export function sidecarBin() {
  // This file is clients/ts/test/sidecar.mjs (or its copy in clients/ts/build/test/): the
  // repository holds clients/ts, so walk up to the folder that has target/ next to clients/.
  const bin = process.env.REBOUND_BIN || fileURLToPath(new URL(repoRelative(), import.meta.url));
  try {
    if (!statSync(bin).isFile()) throw new Error("not a file");
    accessSync(bin, constants.X_OK);
  } catch (err) {
    throw new Error(
      `the rebound binary ${bin} is missing or not executable (build it with cargo build, or set REBOUND_BIN): ${String(err)}`,
    );
  }
  return bin;
}

/** @returns {string} the binary's path relative to this file */
function repoRelative() {
  return import.meta.url.includes("/build/test/") ? "../../../../target/debug/rebound" : "../../../target/debug/rebound";
}

/** One running sidecar. */
export class Sidecar {
  /** @type {import("node:child_process").ChildProcess} */
  #child;
  /** @type {string[]} */
  #stderr;
  /** @type {Promise<number | string>} */
  #exited;

  /**
   * Use `Sidecar.start`.
   * @param {import("node:child_process").ChildProcess} child
   * @param {string[]} stderr
   * @param {Promise<number | string>} exited
   * @param {string} grpc
   * @param {string} metrics
   */
  constructor(child, stderr, exited, grpc, metrics) {
    this.#child = child;
    this.#stderr = stderr;
    this.#exited = exited;
    /** The address clients dial: host:port or unix:/path. */
    this.grpc = grpc;
    /** The host:port of the Prometheus endpoint. */
    this.metrics = metrics;
  }

  /**
   * Runs `rebound serve --listen <listen> --metrics-listen 127.0.0.1:0` and waits
   * for its ready line. The NOT_SERVING delay after SIGTERM is turned off so that
   * tests stop sidecars quickly.
   * @param {string} [listen]
   * @param {readonly string[]} [extraArgs]
   * @returns {Promise<Sidecar>}
   */
  static async start(listen = "127.0.0.1:0", extraArgs = []) {
    const bin = sidecarBin();
    const child = spawn(bin, ["serve", "--listen", listen, "--metrics-listen", "127.0.0.1:0", ...extraArgs], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, REBOUND_SERVER_SHUTDOWN_DELAY_MS: "0" },
    });
    /** @type {string[]} */
    const stderr = [];
    let stderrChars = 0;
    child.stderr?.setEncoding("utf8").on("data", (/** @type {string} */ chunk) => {
      // Keep the tail only: a long test must not hold every log line.
      stderr.push(chunk);
      stderrChars += chunk.length;
      while (stderrChars > 16_384 && stderr.length > 1) stderrChars -= stderr.shift()?.length ?? 0;
    });
    /** @type {Promise<number | string>} */
    const exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"));
    });
    if (child.stdout === null) throw new Error("the sidecar's stdout is not a pipe");
    const lines = createInterface({ input: child.stdout });
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    try {
      const line = await Promise.race([
        /** @type {Promise<string>} */ (new Promise((resolve) => lines.once("line", resolve))),
        exited.then((how) => {
          throw new Error(`the sidecar exited (${how}) before it was ready; stderr:\n${stderr.join("")}`);
        }),
        /** @type {Promise<never>} */ (
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`the sidecar was not ready after ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
          })
        ),
      ]);
      const ready = JSON.parse(line);
      if (ready?.event !== "ready" || typeof ready.grpc !== "string" || typeof ready.metrics !== "string") {
        throw new Error(`expected a ready line on stdout, got ${line}`);
      }
      // Keep draining stdout so that the sidecar never blocks on a full pipe.
      lines.on("line", () => {});
      return new Sidecar(child, stderr, exited, ready.grpc, ready.metrics);
    } catch (err) {
      child.kill("SIGKILL");
      await exited;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * SIGTERM, then waits for the drain; rejects unless the sidecar exits 0 in time (it is killed then).
   * @returns {Promise<void>}
   */
  async stop() {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGTERM");
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const how = await Promise.race([
      this.#exited,
      new Promise((resolve) => {
        timer = setTimeout(() => resolve("timeout"), STOP_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (how === "timeout") {
      await this.kill();
      throw new Error(`the sidecar did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM; killed`);
    }
    if (how !== 0) throw new Error(`the sidecar exited ${how} after SIGTERM; stderr:\n${this.logs()}`);
  }

  /**
   * SIGKILL, the way a crash or an OOM kill ends it, and waits for the exit.
   * @returns {Promise<void>}
   */
  async kill() {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGKILL");
    await this.#exited;
  }

  /**
   * Freezes the sidecar (SIGSTOP): connections stay open but nothing is answered, as when it hangs.
   * Resolves once every thread of it has stopped: the signal reaches each thread on its own, and one
   * still running could answer a call made right after.
   */
  async pause() {
    this.#child.kill("SIGSTOP");
    const deadline = Date.now() + PAUSE_TIMEOUT_MS;
    while (!stopped(this.#child.pid)) {
      if (Date.now() > deadline) throw new Error(`sidecar ${this.#child.pid}: not stopped ${PAUSE_TIMEOUT_MS} ms after SIGSTOP`);
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  /** Lets a paused sidecar run again (SIGCONT). */
  resume() {
    this.#child.kill("SIGCONT");
  }

  /**
   * One series of the sidecar's Prometheus metrics, named as its line starts,
   * e.g. `rebound_config_reloads_total{result="ok"}`; undefined when absent.
   * @param {string} series
   * @returns {Promise<number | undefined>}
   */
  async metric(series) {
    const resp = await fetch(`http://${this.metrics}/metrics`);
    if (!resp.ok) throw new Error(`GET /metrics: HTTP ${resp.status}`);
    const line = (await resp.text()).split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  }

  /**
   * The tail of the sidecar's stderr.
   * @returns {string}
   */
  logs() {
    return this.#stderr.join("").trim();
  }
}
