// Building outcomes from real errors: each one is thrown by the real library
// (fetch/undici, Node's net, fs and child_process, axios, the OpenAI and
// Anthropic SDKs, Qdrant's client, @grpc/grpc-js) against a local server, not imitated.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import { credentials } from "@grpc/grpc-js";
import { QdrantClient } from "@qdrant/js-client-rest";
import axios from "axios";
import OpenAI from "openai";

import { MAX_TEXT_BYTES } from "../src/checks.js";
import * as pb from "../src/gen/rebound/v1/rebound.js";
import { HttpError, InvalidInputError, outcomeFromError } from "../src/index.js";
import { kindName } from "../src/names.js";
import { checkOutcome, RETRY_HEADERS, type ReportOptions } from "../src/outcome.js";
import { NGINX_502_PAGE, OPENAI_QUOTA_BODY } from "./helpers.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A local HTTP server whose handler each test sets; it answers scripted failures. */
let server: Server;
let base = "";
let handler: Handler = (_req, res) => res.end("ok");
/** A port nothing listens on: bound once, then closed. */
let closedPort = 0;

before(async () => {
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** The error `fn` throws (it must throw). */
async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail("expected the call to throw");
}

function build(error: unknown, extra: Omit<ReportOptions, "error"> = {}): pb.Outcome {
  const o = outcomeFromError("tool", { error, ...extra });
  checkOutcome(o);
  return o;
}

describe("outcomes from real errors", () => {
  it("fetch to a port nothing listens on: the cause's errno and message", async () => {
    const err = await thrown(() => fetch(`http://127.0.0.1:${closedPort}/`));
    const o = build(err);
    assert.equal(o.ok, false);
    assert.equal(o.exceptionType, "TypeError");
    assert.equal(o.code, "ECONNREFUSED");
    assert.match(o.message, /^fetch failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    assert.match(o.detail, /^TypeError: fetch failed\n[\s\S]*\n\[cause\]: Error: connect ECONNREFUSED/);
    assert.equal(kindName(o.kind), "tool_error");
  });

  it("JSON.parse of an error page the tool fetched is a tool error, not the model's malformed call", async () => {
    handler = (_req, res) => {
      res.writeHead(502, { "Content-Type": "text/html" });
      res.end(NGINX_502_PAGE);
    };
    const err = await thrown(async () => JSON.parse(await (await fetch(base)).text()) as unknown);
    assert.ok(err instanceof SyntaxError, `got ${String(err)}`);
    const o = build(err);
    assert.equal(o.exceptionType, "SyntaxError");
    assert.equal(kindName(o.kind), "tool_error");
    // An explicit kind still wins: the model's own arguments that do not parse.
    assert.equal(kindName(build(err, { kind: "invalid_tool_call" }).kind), "invalid_tool_call");
  });

  it("fetch past AbortSignal.timeout is a timeout", async () => {
    handler = () => {}; // never answers
    const err = await thrown(() => fetch(base, { signal: AbortSignal.timeout(50) }));
    const o = build(err);
    assert.equal(kindName(o.kind), "timeout");
    assert.equal(o.exceptionType, "TimeoutError");
  });

  it("fetch aborted by its caller is cancelled", async () => {
    handler = () => {};
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const o = build(await thrown(() => fetch(base, { signal: controller.signal })));
    assert.equal(kindName(o.kind), "cancelled");
    assert.equal(o.exceptionType, "AbortError");
  });

  it("a wait aborted by AbortSignal.timeout is a timeout, though thrown as AbortError", async () => {
    const o = build(await thrown(() => delay(10_000, undefined, { signal: AbortSignal.timeout(20) })));
    assert.equal(o.exceptionType, "AbortError");
    assert.equal(kindName(o.kind), "timeout", "the cause (TimeoutError) says what happened");
  });

  it("HttpError.fromResponse carries status, headers and body", async () => {
    handler = (_req, res) => {
      res.writeHead(429, { "Retry-After": "1", "Content-Type": "text/plain" });
      res.end("rate limit exceeded, slow down");
    };
    const res = await fetch(base);
    const o = build(await HttpError.fromResponse(res));
    assert.equal(o.httpStatus, 429);
    assert.equal(o.headers["retry-after"], "1");
    assert.equal(o.exceptionType, "HttpError");
    assert.equal(o.message, "HTTP 429 Too Many Requests: rate limit exceeded, slow down");
    assert.equal(o.code, "");
  });

  it("HttpError.fromResponse takes the provider's error code from a JSON body, as the Python client", async () => {
    // Anthropic's 429 (docs.anthropic.com/en/api/errors): no code, the error's type.
    const anthropic = JSON.stringify({
      type: "error",
      error: { type: "rate_limit_error", message: "Number of request tokens has exceeded your per-minute rate limit" },
    });
    // An OpenAI error whose code is null: its type.
    const openaiInvalid = JSON.stringify({
      error: { message: "Invalid type for 'max_tokens': expected an integer.", type: "invalid_request_error", param: "max_tokens", code: null },
    });
    const cases: [number, string, string | undefined][] = [
      [429, OPENAI_QUOTA_BODY, "insufficient_quota"],
      [429, anthropic, "rate_limit_error"],
      [400, openaiInvalid, "invalid_request_error"],
      [502, NGINX_502_PAGE, undefined],
      [429, JSON.stringify({ error: "rate limited" }), undefined],
    ];
    for (const [status, body, code] of cases) {
      handler = (_req, res) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(body);
      };
      const err = await HttpError.fromResponse(await fetch(base));
      assert.equal(err.code, code, body);
      assert.equal(build(err).code, code ?? "", body);
    }
  });

  it("leaves the client's own frames out of the stack trace it sends", async () => {
    handler = (_req, res) => {
      res.writeHead(503);
      res.end("upstream overloaded");
    };
    const err = await HttpError.fromResponse(await fetch(base));
    // This file runs as build/test/outcome.test.js, the client as build/src/.
    const client = fileURLToPath(new URL("../src/", import.meta.url));
    assert.ok(err.stack?.includes(`${client}outcome.js`), `the error's own stack: ${err.stack}`);
    const o = build(err);
    assert.ok(!o.detail.includes(client), `a frame of the client was sent: ${o.detail}`);
    assert.ok(o.detail.startsWith("HttpError: HTTP 503 Service Unavailable: upstream overloaded\n"), o.detail);
    assert.ok(o.detail.includes(fileURLToPath(import.meta.url)), `the caller's frame is gone: ${o.detail}`);
  });

  it("keeps only the Retry-After family of a response's headers, however many others it has", async () => {
    // OpenAI's rate-limit headers (platform.openai.com/docs/guides/rate-limits), behind 70 others
    // that sort before them, with a cookie and a credential that must not leave the process.
    const family = {
      "retry-after": "7",
      "x-ratelimit-remaining-tokens": "0",
      "x-ratelimit-reset-tokens": "19.5s",
      "x-should-retry": "true",
    };
    const others = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`x-amzn-trace-${String(i).padStart(2, "0")}`, "1"]));
    const secrets = { "Set-Cookie": "session=secret-cookie", Authorization: "Bearer sk-secret" };
    handler = (_req, res) => {
      res.writeHead(429, { ...others, ...secrets, ...family });
      res.end();
    };
    const error = await HttpError.fromResponse(await fetch(base));
    // The error keeps the family and other headers for the caller; only the family goes into the outcome.
    assert.equal(error.headers["retry-after"], "7");
    assert.equal(error.headers["x-should-retry"], "true");
    assert.equal(error.headers["x-amzn-trace-00"], "1");
    const fetched = build(error);
    assert.deepEqual(fetched.headers, family);
    const axiosError = build(await thrown(() => axios.get(base)));
    assert.deepEqual(axiosError.headers, family);
    // Given explicitly, as a plain object in any case, the family last: the same.
    const upper = Object.fromEntries(Object.entries(family).map(([k, v]) => [k.toUpperCase(), v]));
    const o = build(new Error("rate limited"), { headers: { ...others, ...secrets, ...upper } });
    assert.deepEqual(o.headers, family);
    // Set by hand on the generated message, they are dropped before it is sent.
    const raw = pb.Outcome.fromPartial({ tool: "t", headers: { ...secrets, "Retry-After": "7" } });
    checkOutcome(raw);
    assert.deepEqual(raw.headers, { "retry-after": "7" });
  });

  it("keeps the same headers as the sidecar reads (PROVIDER_HEADERS in src/backoff.rs)", () => {
    // This file runs as clients/ts/build/test/outcome.test.js; the sidecar's source is the repository's src.
    const source = readFileSync(fileURLToPath(new URL("../../../../src/backoff.rs", import.meta.url)), "utf8");
    const listed = /pub const PROVIDER_HEADERS: \[&str; \d+\] = \[([^\]]*)\];/.exec(source)?.[1];
    assert.ok(listed !== undefined, "no PROVIDER_HEADERS in src/backoff.rs: has it moved or changed shape?");
    const read = [...listed.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
    assert.ok(read.length >= 10, listed);
    assert.deepEqual([...RETRY_HEADERS].sort(), read.sort());
  });

  it("the OpenAI SDK's RateLimitError: status, Retry-After headers, provider code", async () => {
    handler = (_req, res) => {
      res.writeHead(429, { "Content-Type": "application/json", "retry-after-ms": "250", "x-request-id": "req_1" });
      res.end(JSON.stringify({ error: { message: "Rate limit reached for gpt-4o", type: "requests", code: "rate_limit_exceeded" } }));
    };
    const openai = new OpenAI({ apiKey: "sk-test", baseURL: `${base}/v1`, maxRetries: 0 });
    const err = await thrown(() => openai.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }));
    assert.ok(err instanceof OpenAI.RateLimitError);
    const o = build(err);
    assert.equal(o.exceptionType, "RateLimitError");
    assert.equal(kindName(o.kind), "provider_error", "an LLM provider's SDK failed, as the Python client says");
    assert.equal(o.httpStatus, 429);
    assert.equal(o.code, "rate_limit_exceeded");
    assert.equal(o.headers["retry-after-ms"], "250");
    assert.match(o.message, /Rate limit reached for gpt-4o/);
  });

  /** The base class of the Vercel AI SDK's errors, named as in its builds (exported as `AISDKError`). */
  class _AISDKError extends Error {}
  const AISDKError = _AISDKError;

  it("the Vercel AI SDK's errors for a tool call the model got wrong are the model's, not the tool's", () => {
    // The shapes of ai 6.0.326's NoSuchToolError and InvalidToolInputError (its cause a TypeValidationError),
    // as generateText kept them on the tool-call parts the model got wrong (node_sdk_cases.mjs makes them).
    const named = (name: string, message: string, cause?: unknown) => {
      const e = new AISDKError(message, { cause });
      e.name = name;
      return e;
    };
    const unknown = build(named("AI_NoSuchToolError", "Model tried to call unavailable tool 'search_web'. Available tools: get_weather."));
    assert.deepEqual([kindName(unknown.kind), unknown.exceptionType], ["unknown_tool", "AI_NoSuchToolError"]);
    const schema = named("AI_TypeValidationError", "Type validation failed: Value: {\"city\":42}.");
    const invalid = build(named("AI_InvalidToolInputError", "Invalid input for tool get_weather: Type validation failed", schema));
    assert.deepEqual([kindName(invalid.kind), invalid.exceptionType], ["invalid_tool_call", "AI_InvalidToolInputError"]);
    // The AI SDK 4's name for it.
    assert.equal(kindName(build(named("AI_InvalidToolArgumentsError", "Invalid arguments for tool get_weather")).kind), "invalid_tool_call");
    // Its other errors are a provider's, known by their base class as the OpenAI SDK's are: a plain
    // Error with such a name is the tool's.
    assert.equal(kindName(build(named("AI_NoSuchModelError", "No such languageModel: gpt-9")).kind), "provider_error");
    const lookalike = new Error("No such languageModel: gpt-9");
    lookalike.name = "AI_NoSuchModelError";
    assert.equal(kindName(build(lookalike).kind), "tool_error");
  });

  it("the Vercel AI SDK's errors: the status, the provider's code and Retry-After, through its retries", () => {
    // The shapes of @ai-sdk/provider's APICallError (`statusCode`, `responseHeaders`, `data`: the parsed
    // error body) and of ai's RetryError (`errors`, `lastError`), as ai 6.0.326 with @ai-sdk/openai 3.0.141
    // threw them against a server answering as the OpenAI API does (tests/data/classification/real/
    // node_sdk_cases.mjs runs them, through this client, for holdout-real).
    class APICallError extends AISDKError {
      constructor(
        message: string,
        readonly statusCode: number,
        readonly responseHeaders: Record<string, string>,
        readonly data: unknown,
      ) {
        super(message);
        this.name = "AI_APICallError";
      }
    }
    class RetryError extends AISDKError {
      constructor(
        message: string,
        readonly errors: unknown[],
        readonly lastError: unknown,
      ) {
        super(message);
        this.name = "AI_RetryError";
      }
    }
    const said = "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.";
    const body = { error: { message: said, type: "requests", param: null, code: "rate_limit_exceeded" } };
    const attempt = () => new APICallError(said, 429, { "content-type": "application/json", "retry-after": "20" }, body);
    const attempts = [attempt(), attempt()];
    const o = build(new RetryError(`Failed after 2 attempts. Last error: ${said}`, attempts, attempts[1]));
    assert.equal(o.exceptionType, "AI_RetryError");
    assert.equal(kindName(o.kind), "provider_error", "an LLM SDK failed, not the tool");
    assert.deepEqual([o.httpStatus, o.code, o.headers], [429, "rate_limit_exceeded", { "retry-after": "20" }]);
    // Retries that met a server error first and a rate limit last: the last attempt's signals.
    const overloaded = { error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } };
    const mixed = [new APICallError(overloaded.error.message, 500, {}, overloaded), attempt()];
    const last = build(new RetryError(`Failed after 2 attempts. Last error: ${said}`, mixed, mixed[1]));
    assert.deepEqual([last.httpStatus, last.code, last.headers], [429, "rate_limit_exceeded", { "retry-after": "20" }]);
    const key = { error: { message: "Incorrect API key provided: sk-test.", type: "invalid_request_error", param: null, code: "invalid_api_key" } };
    const refused = build(new APICallError(key.error.message, 401, {}, key));
    assert.deepEqual([refused.exceptionType, refused.httpStatus, refused.code], ["AI_APICallError", 401, "invalid_api_key"]);
  });

  it("the OpenAI SDK's connection error to a closed port", async () => {
    const openai = new OpenAI({ apiKey: "sk-test", baseURL: `http://127.0.0.1:${closedPort}/v1`, maxRetries: 0 });
    const err = await thrown(() => openai.models.list());
    assert.ok(err instanceof OpenAI.APIConnectionError);
    const o = build(err);
    assert.equal(o.exceptionType, "APIConnectionError");
    assert.equal(o.code, "ECONNREFUSED");
    assert.equal(o.httpStatus, 0);
  });

  it("the Anthropic SDK's overloaded error: the body's error type as the code", async () => {
    handler = (_req, res) => {
      res.writeHead(529, { "Content-Type": "application/json", "retry-after": "3" });
      res.end(JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }));
    };
    const anthropic = new Anthropic({ apiKey: "sk-ant-test", baseURL: base, maxRetries: 0 });
    const err = await thrown(() =>
      anthropic.messages.create({ model: "claude-test-model", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }),
    );
    assert.ok(err instanceof Anthropic.APIError);
    const o = build(err);
    assert.equal(o.httpStatus, 529);
    assert.equal(kindName(o.kind), "provider_error");
    assert.equal(o.code, "overloaded_error");
    assert.equal(o.headers["retry-after"], "3");
    assert.notEqual(o.exceptionType, "");
  });

  it("axios: the response's status and AxiosHeaders", async () => {
    handler = (_req, res) => {
      res.writeHead(503, { "Retry-After": "2" });
      res.end("upstream overloaded");
    };
    const o = build(await thrown(() => axios.get(base)));
    assert.equal(o.exceptionType, "AxiosError");
    assert.equal(o.httpStatus, 503);
    assert.equal(o.headers["retry-after"], "2");
  });

  it("Qdrant's client: what its body says beside the status text, which is all its error's text is", async () => {
    // Qdrant 1.x's answer for a collection that does not exist; its client's ApiError says "Not Found".
    handler = (_req, res) => {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ status: { error: "Not found: Collection `docs` doesn't exist!" }, time: 0.000021 }));
    };
    const qdrant = new QdrantClient({ url: base, checkCompatibility: false });
    const o = build(await thrown(() => qdrant.getCollection("docs")));
    assert.deepEqual([o.message, o.httpStatus], ["Not Found: Not found: Collection `docs` doesn't exist!", 404]);
    // Its API key check answers in plain text, which it keeps as text: nothing to add.
    handler = (_req, res) => {
      res.writeHead(401, { "Content-Type": "text/plain" });
      res.end("Must provide an API key or an Authorization bearer token");
    };
    const unauthorized = build(await thrown(() => qdrant.getCollections()));
    assert.deepEqual([unauthorized.message, unauthorized.httpStatus], ["Unauthorized", 401]);
  });

  it("axios: the provider's code and message in the response body, which its own code and text leave out", async () => {
    // OpenAI's answer to a used-up quota, called through axios: ERR_BAD_REQUEST and "Request failed with
    // status code 429" say only the status, and the sidecar would retry it as a rate limit.
    const said = "You exceeded your current quota, please check your plan and billing details.";
    handler = (_req, res) => {
      res.writeHead(429, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: { message: said, type: "insufficient_quota", param: null, code: "insufficient_quota" } }));
    };
    const o = build(await thrown(() => axios.post(base, {})));
    assert.deepEqual([o.code, o.httpStatus], ["insufficient_quota", 429]);
    assert.equal(o.message, `Request failed with status code 429: ${said}`);
    // A body with no code keeps axios's; a body that is no JSON adds nothing.
    handler = (_req, res) => {
      res.writeHead(422, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ detail: "field 'query' is required" }));
    };
    const fastapi = build(await thrown(() => axios.post(base, {})));
    assert.deepEqual([fastapi.code, fastapi.message], ["ERR_BAD_REQUEST", "Request failed with status code 422: field 'query' is required"]);
    handler = (_req, res) => {
      res.writeHead(502);
      res.end("<html>Bad Gateway</html>");
    };
    const gateway = build(await thrown(() => axios.get(base)));
    assert.deepEqual([gateway.code, gateway.message], ["ERR_BAD_RESPONSE", "Request failed with status code 502"]);
  });

  it("axios: its own timeout (ECONNABORTED 'timeout of … exceeded') is a timeout", async () => {
    handler = () => {};
    const o = build(await thrown(() => axios.get(base, { timeout: 50 })));
    assert.equal(kindName(o.kind), "timeout");
    assert.equal(o.code, "ECONNABORTED");
  });

  it("a child process killed by its timeout is a timeout", async () => {
    const o = build(await thrown(() => promisify(execFile)("sleep", ["5"], { timeout: 100 })));
    assert.equal(kindName(o.kind), "timeout");
    assert.equal(o.exitCode, undefined);
  });

  it("a child process that exits non-zero: exit code and stderr", async () => {
    const o = build(await thrown(() => promisify(execFile)("sh", ["-c", "echo 'rg: command not found' >&2; exit 127"])));
    assert.equal(o.exitCode, 127);
    assert.equal(o.detail.trim(), "rg: command not found");
    assert.equal(kindName(o.kind), "tool_error");
  });

  it("a child process's message is Node's first line, its stderr the detail, not both", async () => {
    // A Python script that logs as it works, then fails with a traceback.
    const dir = mkdtempSync(join(tmpdir(), "rebound-ts-"));
    const script = join(dir, "collect.py");
    writeFileSync(
      script,
      [
        "import sys",
        "for i in range(300):",
        "    print(f'collecting item {i} ... ok', file=sys.stderr)",
        "int('abc')",
        "",
      ].join("\n"),
    );
    try {
      const err = await thrown(() => promisify(execFile)("python3", [script]));
      const stderr = (err as { stderr: string }).stderr;
      assert.match(stderr, /collecting item 299 \.\.\. ok\nTraceback[\s\S]*ValueError: invalid literal for int\(\) with base 10: 'abc'\n$/);
      assert.ok((err as Error).message.endsWith(stderr), "Node's message holds all of stderr");
      const o = build(err);
      assert.equal(o.message, `Command failed: python3 ${script}`);
      assert.equal(o.detail, stderr);
      assert.equal(o.exitCode, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a gRPC call to a closed port: the status code", async () => {
    const client = new pb.ReboundClient(`127.0.0.1:${closedPort}`, credentials.createInsecure());
    try {
      const err = await thrown(
        () =>
          new Promise((resolve, reject) =>
            client.admit(pb.AdmitRequest.create({ sessionId: "s", tool: "t" }), (e, r) => (e ? reject(e) : resolve(r))),
          ),
      );
      const o = build(err);
      assert.equal(o.grpcCode, 14);
      assert.equal(o.code, "", "a numeric gRPC code is no errno name");
    } finally {
      client.close();
    }
  });

  it("an MCP server's JSON-RPC error: its numeric code, as text", () => {
    // The shape of @modelcontextprotocol/sdk's McpError (src/types.ts): a numeric `code`, `data`, and the
    // message "MCP error <code>: <message>"; here the SDK's answer to a resource the server does not have.
    class McpError extends Error {
      constructor(
        readonly code: number,
        message: string,
        readonly data?: unknown,
      ) {
        super(`MCP error ${code}: ${message}`);
        this.name = "McpError";
      }
    }
    const o = build(new McpError(-32602, "Unknown resource: file:///nope.txt"));
    assert.deepEqual([o.exceptionType, o.code, o.message], ["McpError", "-32602", "MCP error -32602: Unknown resource: file:///nope.txt"]);
    assert.equal(build(new McpError(-32603, "Internal error")).code, "-32603");
    // A number outside JSON-RPC's reserved codes is no error code: an HTTP status, a count.
    assert.equal(build(Object.assign(new Error("Not Found"), { code: 404 })).code, "");
    assert.equal(build(Object.assign(new Error("x"), { code: -31999 })).code, "");
  });

  it("an AWS SDK v3 error: its name as the code, its $metadata's status", () => {
    // The shape of @smithy/smithy-client's ServiceException, which every AWS SDK for JavaScript v3 error
    // is: `name` the service's error code, `$fault`, `$metadata`; here Bedrock's answer to too many requests.
    class ServiceException extends Error {
      readonly $fault: "client" | "server";
      readonly $metadata: { httpStatusCode?: number; requestId?: string; attempts?: number };
      constructor(options: { name: string; $fault: "client" | "server"; $metadata: ServiceException["$metadata"]; message: string }) {
        super(options.message);
        this.name = options.name;
        this.$fault = options.$fault;
        this.$metadata = options.$metadata;
      }
    }
    const throttled = new ServiceException({
      name: "ThrottlingException",
      $fault: "client",
      $metadata: { httpStatusCode: 429, requestId: "b7a1f0c2-0000-4000-8000-000000000000", attempts: 3 },
      message: "Too many requests, please wait before trying again.",
    });
    const o = build(throttled);
    assert.deepEqual([o.exceptionType, o.code, o.httpStatus], ["ThrottlingException", "ThrottlingException", 429]);
    // Without `$fault` it is no AWS error, and its name is no code.
    assert.equal(build(Object.assign(new Error("x"), { name: "QuotaError", $metadata: {} })).code, "");
  });

  it("a file that does not exist: ENOENT", async () => {
    const o = build(await thrown(() => readFile("/nonexistent/rebound-test")));
    assert.equal(o.code, "ENOENT");
  });

  it("an error wrapping another: the first telling type and the inner status", () => {
    const o = build(new Error("search failed", { cause: new HttpError(502, { body: "bad gateway" }) }));
    assert.equal(o.exceptionType, "HttpError");
    assert.equal(o.httpStatus, 502);
    assert.equal(o.message, "search failed: HTTP 502 Bad Gateway: bad gateway");
  });

  it("a subclass without its own name is named by its class", () => {
    class QuotaExceededError extends Error {}
    assert.equal(build(new QuotaExceededError("no credits")).exceptionType, "QuotaExceededError");
  });

  it("a thrown string or plain object", () => {
    assert.equal(build("boom").message, "boom");
    assert.equal(build({ status: 404 }).httpStatus, 404);
  });

  it("an error whose getters throw does not break the report", () => {
    const hostile = new Proxy(new Error("hostile"), {
      get(target, key) {
        if (key === "message") return "hostile";
        if (key === "status" || key === "cause") throw new Error("no");
        return Reflect.get(target, key);
      },
    });
    assert.equal(build(hostile).message, "hostile");
  });

  it("explicit fields override what the error said", () => {
    const o = build(new HttpError(500), { httpStatus: 503, exceptionType: "", kind: "provider_error", cost: 0.25, durationMs: 12.7 });
    assert.equal(o.httpStatus, 503);
    assert.equal(o.exceptionType, "");
    assert.equal(kindName(o.kind), "provider_error");
    assert.equal(o.cost, 0.25);
    assert.equal(o.durationMs, 12);
  });

  it("no error is a success; ok: false without one is a failure", () => {
    assert.equal(outcomeFromError("t").ok, true);
    assert.equal(outcomeFromError("t", { error: null }).ok, true);
    const o = outcomeFromError("t", { ok: false, kind: "unknown_tool", message: "Tool t not found" });
    assert.equal(o.ok, false);
    assert.equal(kindName(o.kind), "unknown_tool");
  });

  it("makes text safe to send: lone surrogates replaced, huge output cut on a character boundary", () => {
    const o = build(new Error(`bad \uD800 text`), { detail: "é".repeat(MAX_TEXT_BYTES) });
    assert.equal(o.message, "bad \uFFFD text");
    assert.ok(Buffer.byteLength(o.detail, "utf8") <= MAX_TEXT_BYTES);
    assert.ok(o.detail.endsWith("é"));
  });

  it("rejects the error itself passed as the options, instead of reporting a success", async () => {
    // report(tool, err) type-checks, and an Error's message, stack and cause are not enumerable keys.
    const err = await thrown(() => fetch(`http://127.0.0.1:${closedPort}/`));
    assert.ok(err instanceof TypeError, `got ${String(err)}`);
    assert.throws(
      () => outcomeFromError("search", err as ReportOptions),
      (e: unknown) => e instanceof InvalidInputError && /report\("search"\): got an Error \("fetch failed"\); pass the error as \{ error \}/.test(e.message),
    );
  });

  describe("rejects bad input, naming it", () => {
    const bad: [string, () => unknown, RegExp][] = [
      ["an empty tool", () => outcomeFromError(" "), /tool/],
      ["a tool with a newline", () => outcomeFromError("a\nb"), /control characters/],
      ["a tool over 256 bytes", () => outcomeFromError("t".repeat(257)), /256 bytes/],
      ["a tool that is no string", () => outcomeFromError(42 as unknown as string), /must be a string/],
      ["an unknown kind", () => outcomeFromError("t", { ok: false, kind: "oops" as "timeout" }), /kind/],
      ["an HTTP status of 42", () => outcomeFromError("t", { ok: false, httpStatus: 42 }), /HTTP status/],
      ["a gRPC code of 17", () => outcomeFromError("t", { ok: false, grpcCode: 17 }), /gRPC code/],
      ["a negative cost", () => outcomeFromError("t", { cost: -1 }), /cost/],
      ["a NaN duration", () => outcomeFromError("t", { durationMs: Number.NaN }), /duration/],
      ["ok: true with an error", () => outcomeFromError("t", { ok: true, error: new Error("x") }), /ok: true/],
      ["a misspelt option", () => outcomeFromError("t", { http_status: 500 } as ReportOptions), /unknown option "http_status"/],
      ["a plain Error as the options", () => outcomeFromError("t", new Error("boom") as ReportOptions), /pass the error as \{ error \}/],
      ["an array as the options", () => outcomeFromError("t", [] as ReportOptions), /report options: got an array; must be a plain object/],
      ["a class instance as the options", () => outcomeFromError("t", new URL("http://x/") as ReportOptions), /report options: got a URL; must be a plain object/],
      ["headers that are a string", () => outcomeFromError("t", { headers: "Retry-After: 1" as unknown as Record<string, string> }), /headers/],
    ];
    for (const [name, fn, message] of bad) {
      it(name, () => {
        assert.throws(fn, (err: unknown) => err instanceof InvalidInputError && message.test(err.message));
      });
    }
  });
});
