// Real failures of Node packages agents use, for holdout-real.jsonl: the Vercel AI SDK (ai, with
// @ai-sdk/openai pointed at a loopback server answering as the OpenAI API does, and at a closed port;
// its tool calls the model got wrong; a missing API key, model and provider) and ioredis (at a closed
// port) and the MCP TypeScript SDK's client (a stdio server whose command is not installed, one that
// exits at once, one that never answers; a call before connecting; an HTTP server at a closed port).
// Each outcome is read from the error by the TypeScript client itself
// (clients/ts, built: its outcomeFromError), one JSON line per case, labelled beforehand.
//
// Run: SDK_DIR=<a folder where `npm install ai @ai-sdk/openai ioredis zod @modelcontextprotocol/sdk` was run>
//      node node_sdk_cases.mjs > node-sdks.jsonl
// after `npx tsc -p tsconfig.json` in clients/ts (its dist/). Random ports are written as 8787 (the
// server) and 8799 (a closed port). The outcome's stack trace (`detail`) is left out, as in
// node_cases.mjs.

import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { loopback, reporter } from "./loopback.mjs";

const SDK_DIR = process.env.SDK_DIR;
if (!SDK_DIR) {
  console.error("node_sdk_cases.mjs: set SDK_DIR to a folder with ai, @ai-sdk/openai, ioredis and zod installed");
  process.exit(2);
}
const sdk = createRequire(path.join(path.resolve(SDK_DIR), "package.json"));
const { createProviderRegistry, customProvider, generateObject, generateText, tool } = sdk("ai");
const { createOpenAI } = sdk("@ai-sdk/openai");
const { z } = sdk("zod");
const Redis = sdk("ioredis").default ?? sdk("ioredis");
const version = (name) => `${name} ${sdk(`${name}/package.json`).version}`;
const client = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../../clients/ts/dist/index.js");
const { outcomeFromError } = await import(client);

const completion = (content) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1764460800,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
});
// The model calls `name` with `args` (JSON text, as the API sends it).
const toolCall = (name, args) => ({
  ...completion(null),
  choices: [{
    index: 0,
    message: { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name, arguments: args } }] },
    finish_reason: "tool_calls",
  }],
});
const ROUTES = {
  // A model that answers in prose where the schema asked for JSON.
  prose: [200, {}, completion("Sure! The weather in Paris is sunny, 21 degrees.")],
  rate: [429, { "retry-after": "20" }, { error: { message: "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", type: "requests", param: null, code: "rate_limit_exceeded" } }],
  // A tool the agent does not have; the right tool with a number for a string; cut-off JSON.
  unknown: [200, {}, toolCall("search_web", '{"query":"rust"}')],
  "bad-input": [200, {}, toolCall("get_weather", '{"city": 42}')],
  "cut-input": [200, {}, toolCall("get_weather", '{"city": "Par')],
  key: [401, {}, { error: { message: "Incorrect API key provided: sk-fake. You can find your API key at https://platform.openai.com/account/api-keys.", type: "invalid_request_error", param: null, code: "invalid_api_key" } }],
};
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const [status, headers, body] = ROUTES[req.url.split("/")[1]] ?? [404, {}, { error: { message: "no route" } }];
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
});
const { PORT, CLOSED, fixed } = await loopback(server);

const kase = reporter(outcomeFromError, fixed);

const AI = `${version("ai")}, ${version("@ai-sdk/openai")}`;
const model = (route, port = PORT) =>
  createOpenAI({ baseURL: `http://127.0.0.1:${port}/${route}/v1`, apiKey: "sk-fake" }).chat("gpt-4o-mini");
const weather = z.object({ city: z.string(), celsius: z.number() });
await kase("r-node-ai-no-object", "format", AI, () =>
  generateObject({ model: model("prose"), schema: weather, prompt: "The weather in Paris?", maxRetries: 0 }));
await kase("r-node-ai-rate-limited", "rate_limited", AI, () =>
  generateText({ model: model("rate"), prompt: "hi", maxRetries: 1 }));
await kase("r-node-ai-bad-key", "auth", AI, () => generateText({ model: model("key"), prompt: "hi", maxRetries: 0 }));
// A tool call the model got wrong does not throw: the SDK answers the model with a tool-error part
// and keeps the error itself on the step's tool-call part (marked invalid), where an agent reads it.
const tools = { get_weather: tool({ description: "The weather in a city", inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `sunny in ${city}` }) };
const invalidCall = async (route) => {
  const result = await generateText({ model: model(route), prompt: "The weather in Paris?", tools, maxRetries: 0 });
  const call = result.steps[0].content.find((part) => part.type === "tool-call" && part.invalid);
  if (call) throw call.error;
};
await kase("r-node-ai-no-such-tool", "unknown_tool", AI, () => invalidCall("unknown"));
await kase("r-node-ai-invalid-tool-input", "format", AI, () => invalidCall("bad-input"));
await kase("r-node-ai-tool-input-cut", "format", AI, () => invalidCall("cut-input"));
await kase("r-node-ai-no-api-key", "auth", AI, () => {
  delete process.env.OPENAI_API_KEY;
  return generateText({ model: createOpenAI({}).chat("gpt-4o-mini"), prompt: "hi", maxRetries: 0 });
});
const registry = createProviderRegistry({ openai: customProvider({ languageModels: { fast: model("prose") } }) });
await kase("r-node-ai-no-such-model", "not_found", AI, async () => registry.languageModel("openai:gpt-9"));
await kase("r-node-ai-no-such-provider", "not_found", AI, async () => registry.languageModel("anthropic:claude-sonnet-4"));
await kase("r-node-ai-refused", "network", AI, () =>
  generateText({ model: model("any", CLOSED), prompt: "hi", maxRetries: 0 }));

const redis = new Redis({ host: "127.0.0.1", port: CLOSED, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
redis.on("error", () => {}); // each failed connection; the command's own error is the case
await kase("r-node-ioredis-refused", "network", version("ioredis"), () => redis.get("session:42"));
redis.disconnect();

const MCP = version("@modelcontextprotocol/sdk");
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");
const mcpClient = () => new Client({ name: "agent", version: "1.0.0" });
const stdio = (command, args = []) => new StdioClientTransport({ command, args, stderr: "ignore" });
await kase("r-node-mcp-spawn-missing", "not_found", MCP, () => mcpClient().connect(stdio("rebound-no-such-mcp-server")));
await kase("r-node-mcp-server-exits", "network", MCP, () => mcpClient().connect(stdio(process.execPath, ["-e", "process.exit(0)"])));
const silent = stdio(process.execPath, ["-e", "setInterval(() => {}, 1000)"]);
await kase("r-node-mcp-timeout", "timeout", MCP, () => mcpClient().connect(silent, { timeout: 500 }));
await silent.close();
await kase("r-node-mcp-not-connected", "network", MCP, () => mcpClient().callTool({ name: "search", arguments: { query: "rust" } }));
await kase("r-node-mcp-http-refused", "network", MCP, () =>
  mcpClient().connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${CLOSED}/mcp`))));
server.close();
