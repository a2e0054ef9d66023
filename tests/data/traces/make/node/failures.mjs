// Node failures for the trace set: each scenario really throws; node's report of the
// uncaught error becomes one file. Run by regenerate.sh: node failures.mjs NAME.
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, get } from "node:http";
import { createServer } from "node:net";

function renderUser(user) {
  return user.profile.name.toUpperCase();
}

async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function searchWeb(query) {
  const response = await fetch(`http://127.0.0.1:${await closedPort()}/search?q=${encodeURIComponent(query)}`);
  return response.json();
}

function parseToolCall(text) {
  return JSON.parse(text);
}

function loadConfig(path) {
  return readFileSync(path, "utf8");
}

function depth(n) {
  return depth(n + 1) + 1;
}

class ToolError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ToolError";
  }
}

async function runTool() {
  try {
    loadConfig("/etc/agent/tools.json");
  } catch (err) {
    throw new ToolError("tool registry could not be loaded", { cause: err });
  }
}

function orderTotal(order) {
  return order.lines.reduce((sum, line) => sum + line.price * line.qty, 0);
}

async function httpHandler() {
  const orders = { "o-1": { lines: [{ price: 3, qty: 2 }] } };
  const server = createHttpServer((req, res) => {
    const id = new URL(req.url, "http://x").searchParams.get("id");
    res.end(String(orderTotal(orders[id])));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  get(`http://127.0.0.1:${server.address().port}/orders?id=o-42`);
}

const scenarios = {
  http_handler: () => httpHandler(),
  type_error: () => renderUser({ id: 7 }),
  fetch_refused: () => searchWeb("rust sidecar"),
  json_parse: () => parseToolCall('{"name": "search", "arguments": {"query": "x",}}'),
  enoent: () => loadConfig("/etc/agent/tools.json"),
  stack_overflow: () => depth(0),
  error_cause: () => runTool(),
};

await scenarios[process.argv[2]]();
