// Real failures of the LLM SDKs and agent frameworks TypeScript agents are built with, for
// holdout-real.jsonl: the OpenAI and Anthropic Node SDKs against a loopback server answering as those
// APIs answer errors (their documented error bodies and headers), at a closed port and at one that never
// answers; the OpenAI Agents SDK running an agent on that server's model when the model calls a tool
// wrongly; LangGraph's ToolNode given a model's wrong tool call; and LangChain's ChatOpenAI on the
// server's errors. Each outcome is read from the error by the TypeScript client itself (clients/ts,
// built: its outcomeFromError), one JSON line per case, labelled beforehand by DESIGN.md's table.
//
// Run: SDK_DIR=<a folder where `npm install openai @anthropic-ai/sdk @openai/agents @langchain/langgraph
//      @langchain/core @langchain/openai zod` was run> node node_agent_cases.mjs > node-agents.jsonl
// after `npx tsc -p tsconfig.json` in clients/ts (its dist/). Random ports are written as 8787 (the
// server), 8799 (a closed port) and 8798 (a port that accepts and never answers). The outcome's stack
// trace (`detail`) is left out, as in node_cases.mjs.

import { readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { loopback, reporter } from "./loopback.mjs";

const SDK_DIR = process.env.SDK_DIR;
if (!SDK_DIR) {
  console.error("node_agent_cases.mjs: set SDK_DIR to a folder with the packages named at the top installed");
  process.exit(2);
}
const sdk = createRequire(path.join(path.resolve(SDK_DIR), "package.json"));
// A package's version, read from its package.json as a file: openai's exports leave that file out.
const version = (name) => {
  const file = path.join(path.resolve(SDK_DIR), "node_modules", name, "package.json");
  return `${name} ${JSON.parse(readFileSync(file, "utf8")).version}`;
};
const client = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../../clients/ts/dist/index.js");
const { outcomeFromError } = await import(client);

// The OpenAI API's error bodies (https://platform.openai.com/docs/guides/error-codes), by route.
const openaiError = (message, type, code, param = null) => ({ error: { message, type, param, code } });
const OPENAI = {
  key: [401, {}, openaiError("Incorrect API key provided: sk-fake. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")],
  region: [403, {}, openaiError("Country, region, or territory not supported", "request_forbidden", "unsupported_country_region_territory")],
  model: [404, {}, openaiError("The model `gpt-9` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")],
  context: [400, {}, openaiError("This model's maximum context length is 128000 tokens. However, your messages resulted in 130415 tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded", "messages")],
  flagged: [400, {}, openaiError("Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting", "invalid_request_error", "invalid_prompt")],
  rate: [429, { "retry-after": "20", "x-ratelimit-reset-requests": "20s", "x-ratelimit-remaining-requests": "0" }, openaiError("Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.", "requests", "rate_limit_exceeded")],
  quota: [429, {}, openaiError("You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.", "insufficient_quota", "insufficient_quota")],
  server: [500, {}, openaiError("The server had an error while processing your request. Sorry about that!", "server_error", null)],
  overloaded: [503, {}, openaiError("The engine is currently overloaded, please try again later", "server_error", null)],
};
// The Anthropic API's (https://docs.anthropic.com/en/api/errors).
const anthropicError = (status, type, message, headers = {}) =>
  [status, { "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", ...headers }, { type: "error", error: { type, message } }];
const ANTHROPIC = {
  key: anthropicError(401, "authentication_error", "invalid x-api-key"),
  permission: anthropicError(403, "permission_error", "Your API key does not have permission to use the specified resource."),
  model: anthropicError(404, "not_found_error", "model: claude-sonnet-9"),
  context: anthropicError(400, "invalid_request_error", "prompt is too long: 210417 tokens > 200000 maximum"),
  credit: anthropicError(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."),
  rate: anthropicError(429, "rate_limit_error", "This request would exceed the rate limit for your organization (a8c1a8a8-5d0f-4b32-a3c1-0e3b5d6f7a90) of 50 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.", { "retry-after": "12", "anthropic-ratelimit-input-tokens-remaining": "0" }),
  server: anthropicError(500, "api_error", "Internal server error"),
  overloaded: anthropicError(529, "overloaded_error", "Overloaded"),
};
const completion = (message, finish) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1764460800,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: null, refusal: null, ...message }, finish_reason: finish }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
});
// The model calls `name` with `args` (JSON text, as the API sends it).
const toolCall = (name, args) =>
  completion({ tool_calls: [{ id: "call_1", type: "function", function: { name, arguments: args } }] }, "tool_calls");
const MODEL = {
  unknown: [200, {}, toolCall("get_wether", '{"city":"Paris"}')],
  "bad-json": [200, {}, toolCall("get_weather", '{"city": "Par')],
  "bad-input": [200, {}, toolCall("get_weather", '{"town": "Paris"}')],
};
const ROUTES = { openai: OPENAI, anthropic: ANTHROPIC, model: MODEL };

const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const [api, route] = req.url.split("/").slice(1, 3);
    const [status, headers, body] = ROUTES[api]?.[route] ?? [404, {}, { error: { message: `no route ${req.url}` } }];
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
});
const { PORT, CLOSED, fixed: fixedTwo } = await loopback(server);
// A port that takes connections and never answers.
const silent = net.createServer(() => {});
await new Promise((r) => silent.listen(0, "127.0.0.1", r));
const SILENT = silent.address().port;
const fixed = (text) => fixedTwo(text).replaceAll(String(SILENT), "8798");
const kase = reporter(outcomeFromError, fixed);
const base = (api, route, port = PORT) => `http://127.0.0.1:${port}/${api}/${route}/v1`;

// OpenAI's Node SDK.
const OpenAI = sdk("openai").default ?? sdk("openai");
const OPENAI_SDK = version("openai");
const openai = (route, port, options = {}) =>
  new OpenAI({ baseURL: base(route in MODEL ? "model" : "openai", route, port), apiKey: "sk-fake", maxRetries: 0, ...options });
const chat = (c, options) => c.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }, options);
for (const [route, category] of [
  ["key", "auth"], ["region", "permission_denied"], ["model", "not_found"], ["context", "context_length"],
  ["flagged", "content_filter"], ["rate", "rate_limited"], ["quota", "quota_exceeded"], ["server", "internal"],
  ["overloaded", "unavailable"],
]) {
  await kase(`r-node-openai-${route}`, category, OPENAI_SDK, () => chat(openai(route)));
}
await kase("r-node-openai-refused", "network", OPENAI_SDK, () => chat(openai("any", CLOSED)));
await kase("r-node-openai-no-answer", "timeout", OPENAI_SDK, () => chat(openai("any", SILENT, { timeout: 300 })));
await kase("r-node-openai-aborted", "cancelled", OPENAI_SDK, () => chat(openai("any", SILENT), { signal: AbortSignal.timeout(300) }));
await kase("r-node-openai-no-key", "auth", OPENAI_SDK, async () => {
  delete process.env.OPENAI_API_KEY;
  return new OpenAI({});
});

// Anthropic's Node SDK.
const Anthropic = sdk("@anthropic-ai/sdk").default ?? sdk("@anthropic-ai/sdk");
const ANTHROPIC_SDK = version("@anthropic-ai/sdk");
const anthropic = (route, port, options = {}) =>
  new Anthropic({ baseURL: base("anthropic", route, port).replace(/\/v1$/, ""), apiKey: "sk-ant-fake", maxRetries: 0, ...options });
const message = (c) => c.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
for (const [route, category] of [
  ["key", "auth"], ["permission", "permission_denied"], ["model", "not_found"], ["context", "context_length"],
  ["credit", "quota_exceeded"], ["rate", "rate_limited"], ["server", "internal"], ["overloaded", "unavailable"],
]) {
  await kase(`r-node-anthropic-${route}`, category, ANTHROPIC_SDK, () => message(anthropic(route)));
}
await kase("r-node-anthropic-refused", "network", ANTHROPIC_SDK, () => message(anthropic("any", CLOSED)));
await kase("r-node-anthropic-no-answer", "timeout", ANTHROPIC_SDK, () => message(anthropic("any", SILENT, { timeout: 300 })));
await kase("r-node-anthropic-no-key", "auth", ANTHROPIC_SDK, () => {
  delete process.env.ANTHROPIC_API_KEY;
  return message(new Anthropic({ baseURL: `http://127.0.0.1:${PORT}/anthropic/key`, maxRetries: 0 }));
});

// The OpenAI Agents SDK: an agent whose model (the server's) calls a tool wrongly.
const { z } = sdk("zod");
const agents = sdk("@openai/agents");
const AGENTS = version("@openai/agents");
agents.setTracingDisabled(true);
const weatherTool = agents.tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
  // Its failures raised to the agent's code rather than answered to the model with a fixed sentence.
  errorFunction: null,
});
const runAgent = (route) => {
  const model = new agents.OpenAIChatCompletionsModel(openai(route, PORT), "gpt-4o-mini");
  const agent = new agents.Agent({ name: "Assistant", instructions: "Answer.", tools: [weatherTool], model });
  return agents.run(agent, "The weather in Paris?", { maxTurns: 2 });
};
await kase("r-node-openai-agents-unknown-tool", "unknown_tool", AGENTS, () => runAgent("unknown"));
// Arguments that are not JSON raise nothing: the SDK answers the model with a sentence in the tool's
// result and runs on (here to its turn limit); the agent reads that result, as the model does.
await kase("r-node-openai-agents-bad-json", "format", AGENTS, () =>
  runAgent("bad-json").catch((error) => {
    const results = (error.state?._generatedItems ?? []).map((i) => i.rawItem).filter((r) => r.type === "function_call_result");
    throw new Error(results.at(-1)?.output?.text ?? error.message);
  }));
await kase("r-node-openai-agents-bad-input", "validation", AGENTS, () => runAgent("bad-input"));

// LangGraph's ToolNode given a model's tool call: with its errors handled (the ToolMessage the model
// reads back), and raised.
const { ToolNode } = sdk("@langchain/langgraph/prebuilt");
const { tool: lcTool } = sdk("@langchain/core/tools");
const { AIMessage } = sdk("@langchain/core/messages");
const LANGGRAPH = `${version("@langchain/langgraph")}, ${version("@langchain/core")}`;
const lcWeather = lcTool(async ({ city }) => `sunny in ${city}`, {
  name: "get_weather",
  description: "The weather in a city",
  schema: z.object({ city: z.string() }),
});
const callTool = async (name, args, handleToolErrors) => {
  const node = new ToolNode([lcWeather], { handleToolErrors });
  const call = new AIMessage({ content: "", tool_calls: [{ id: "call_1", name, args }] });
  const out = await node.invoke({ messages: [call] });
  const reply = out.messages.find((m) => m.status === "error");
  if (reply) throw new Error(reply.content);
};
await kase("r-node-langgraph-unknown-tool", "unknown_tool", LANGGRAPH, () => callTool("get_wether", { city: "Paris" }, true));
await kase("r-node-langgraph-bad-input", "validation", LANGGRAPH, () => callTool("get_weather", { town: "Paris" }, true));
await kase("r-node-langgraph-unknown-tool-raised", "unknown_tool", LANGGRAPH, () => callTool("get_wether", { city: "Paris" }, false));
await kase("r-node-langgraph-bad-input-raised", "validation", LANGGRAPH, () => callTool("get_weather", { town: "Paris" }, false));

// LangChain's ChatOpenAI on the OpenAI API's errors.
const { ChatOpenAI } = sdk("@langchain/openai");
const LANGCHAIN = `${version("@langchain/openai")}, ${version("@langchain/core")}`;
const lcChat = (route, port = PORT) =>
  new ChatOpenAI({ model: "gpt-4o-mini", apiKey: "sk-fake", maxRetries: 0, configuration: { baseURL: base("openai", route, port) } });
for (const [route, category] of [["key", "auth"], ["model", "not_found"], ["context", "context_length"], ["rate", "rate_limited"], ["quota", "quota_exceeded"]]) {
  await kase(`r-node-langchain-openai-${route}`, category, LANGCHAIN, () => lcChat(route).invoke("hi"));
}
await kase("r-node-langchain-openai-refused", "network", LANGCHAIN, () => lcChat("any", CLOSED).invoke("hi"));

server.close();
silent.close();
