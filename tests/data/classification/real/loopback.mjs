// What the Node generators share: a loopback server listening on a random port, a port nothing
// listens on, and the rewriting of both to the fixed numbers the cases are written with.

import net from "node:net";

/** The categories an agent may retry, as the cases' `retryable` says. */
export const RETRYABLE = new Set(["timeout", "rate_limited", "network", "unavailable", "internal"]);

/**
 * Starts `server` on a random loopback port and frees another: `PORT`, `CLOSED`, and `fixed`,
 * which writes them as 8787 (the server) and 8799 (the closed port).
 */
export async function loopback(server) {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const PORT = server.address().port;
  const closed = net.createServer();
  await new Promise((r) => closed.listen(0, "127.0.0.1", r));
  const CLOSED = closed.address().port;
  await new Promise((r) => closed.close(r));
  const fixed = (text) => text.replaceAll(String(PORT), "8787").replaceAll(String(CLOSED), "8799");
  return { PORT, CLOSED, fixed };
}

/**
 * The case runner the Node generators share: `kase(id, category, source, run)` runs `run`, reads the error
 * it throws as the TypeScript client's `outcomeFromError` does, rewrites ports with `fixed`, and prints the
 * labelled case as one JSON line (without the stack trace, `detail`).
 */
export function reporter(outcomeFromError, fixed) {
  return async function kase(id, category, source, run) {
    try {
      await run();
      console.error(`${id}: did not fail`);
    } catch (error) {
      const o = outcomeFromError("tool", { error });
      const outcome = { exception_type: o.exceptionType, message: fixed(o.message) };
      if (o.code) outcome.code = o.code;
      if (o.httpStatus) outcome.http_status = o.httpStatus;
      if (Object.keys(o.headers).length > 0) outcome.headers = o.headers;
      console.log(JSON.stringify({ id, source, category, retryable: RETRYABLE.has(category), tags: [], outcome }));
    }
  };
}
