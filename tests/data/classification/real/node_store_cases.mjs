// Real failures of the Node clients of data stores, search, SSH, WebSockets and HTTP that agents'
// tools use, for holdout-real.jsonl: mongodb, pg, mysql2, @elastic/elasticsearch, @qdrant/js-client-rest,
// ssh2, ws and axios, at a closed port, at a port that accepts and never answers, and (the HTTP ones) at a
// loopback server answering as Elasticsearch 8 and Qdrant 1.x do (their servers' error bodies; the
// errors are the clients' own). Each outcome is read from the error by the TypeScript client itself
// (clients/ts, built: its outcomeFromError), one JSON line per case, labelled beforehand.
//
// Run: SDK_DIR=<a folder where `npm install mongodb pg mysql2 @elastic/elasticsearch @qdrant/js-client-rest
//      ssh2 ws axios` was run> node node_store_cases.mjs > node-stores.jsonl
// after `npx tsc -p tsconfig.json` in clients/ts (its dist/). Random ports are written as 8787 (the
// server), 8799 (a closed port) and 8798 (the port that never answers).

import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { loopback, reporter } from "./loopback.mjs";

const SDK_DIR = process.env.SDK_DIR;
if (!SDK_DIR) {
  console.error("node_store_cases.mjs: set SDK_DIR to a folder with the clients installed (see the top of this file)");
  process.exit(2);
}
const sdk = createRequire(path.join(path.resolve(SDK_DIR), "package.json"));
// Read from the file: some packages export no ./package.json.
const version = (name) =>
  `${name} ${JSON.parse(readFileSync(path.join(SDK_DIR, "node_modules", name, "package.json"), "utf8")).version}`;
const client = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../../clients/ts/dist/index.js");
const { outcomeFromError } = await import(client);

// Elasticsearch 8's error body, and its product header, which its client checks.
const esError = (type, reason, status, more = {}) => ({
  error: { root_cause: [{ type, reason, ...more }], type, reason, ...more },
  status,
});
const ES = { "x-elastic-product": "Elasticsearch" };
const ROUTES = {
  "es-401": [401, ES, esError("security_exception", "unable to authenticate user [agent] for REST request [/docs/_search]", 401)],
  "es-404": [404, ES, esError("index_not_found_exception", "no such index [docs]", 404, { "resource.type": "index_or_alias", "resource.id": "docs", index_uuid: "_na_", index: "docs" })],
  "es-400": [400, ES, esError("parsing_exception", "unknown query [mach]", 400, { line: 1, col: 19 })],
  "es-429": [429, ES, esError("es_rejected_execution_exception", "rejected execution of coordinating operation [coordinating_and_primary_bytes=0, replica_bytes=0, all_bytes=0, coordinating_operation_bytes=52428800, max_coordinating_and_primary_bytes=53687091]", 429)],
  "qdrant-401": [401, { "content-type": "text/plain" }, "Must provide an API key or an Authorization bearer token"],
  "qdrant-404": [404, {}, { status: { error: "Not found: Collection `docs` doesn't exist!" }, time: 0.000021 }],
  "qdrant-400": [400, {}, { status: { error: "Wrong input: Vector dimension error: expected dim: 384, got 3" }, time: 0.00004 }],
  "plain-429": [429, { "retry-after": "7" }, { error: { message: "Too many requests", type: "rate_limited" } }],
  "plain-503": [503, {}, { error: "service unavailable" }],
};
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const [status, headers, body] = ROUTES[req.url.split("/")[1]] ?? [200, {}, {}];
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(typeof body === "string" ? body : JSON.stringify(body));
  });
});
const { PORT, CLOSED, fixed } = await loopback(server);
const URL_ = `http://127.0.0.1:${PORT}`;

// A port that accepts connections and never answers: a server that hangs.
const held = [];
const silentServer = net.createServer((socket) => held.push(socket));
await new Promise((r) => silentServer.listen(0, "127.0.0.1", r));
const SILENT = silentServer.address().port;
const kase = reporter(outcomeFromError, (text) => fixed(text).replaceAll(String(SILENT), "8798"));

// ---------------------------------------------------------------- mongodb
const { MongoClient } = sdk("mongodb");
const MONGO = version("mongodb");
await kase("r-node-mongodb-refused", "network", MONGO, () =>
  new MongoClient(`mongodb://127.0.0.1:${CLOSED}/`, { serverSelectionTimeoutMS: 500 }).connect());
await kase("r-node-mongodb-no-answer", "timeout", MONGO, () =>
  new MongoClient(`mongodb://127.0.0.1:${SILENT}/`, { serverSelectionTimeoutMS: 800, connectTimeoutMS: 300 }).connect());
// A password with an @ in it, not percent-encoded: the tool's configured URI, which no retry fixes.
await kase("r-node-mongodb-unescaped-password", "validation", MONGO, async () => new MongoClient("mongodb://app:p@ss@127.0.0.1/db"));

// ---------------------------------------------------------------- pg
const pg = sdk("pg");
const PG = version("pg");
await kase("r-node-pg-refused", "network", PG, () => new pg.Client({ host: "127.0.0.1", port: CLOSED, user: "agent", database: "app" }).connect());
await kase("r-node-pg-no-answer", "timeout", PG, () =>
  new pg.Client({ host: "127.0.0.1", port: SILENT, user: "agent", database: "app", connectionTimeoutMillis: 500 }).connect());

// ---------------------------------------------------------------- mysql2
const mysql = sdk("mysql2/promise");
const MYSQL = version("mysql2");
await kase("r-node-mysql2-refused", "network", MYSQL, () => mysql.createConnection({ host: "127.0.0.1", port: CLOSED, user: "agent" }));
await kase("r-node-mysql2-no-answer", "timeout", MYSQL, () =>
  mysql.createConnection({ host: "127.0.0.1", port: SILENT, user: "agent", connectTimeout: 500 }));

// ---------------------------------------------------------------- @elastic/elasticsearch
const { Client: Elastic } = sdk("@elastic/elasticsearch");
const ELASTIC = version("@elastic/elasticsearch");
const elastic = (node, options = {}) => new Elastic({ node, maxRetries: 0, ...options });
const search = (node, options) => () => elastic(node, options).search({ index: "docs", query: { match: { title: "rust" } } });
await kase("r-node-elasticsearch-refused", "network", ELASTIC, search(`http://127.0.0.1:${CLOSED}`));
await kase("r-node-elasticsearch-no-answer", "timeout", ELASTIC, search(`http://127.0.0.1:${SILENT}`, { requestTimeout: 500 }));
for (const [route, category] of [["401", "auth"], ["404", "not_found"], ["400", "validation"], ["429", "rate_limited"]]) {
  await kase(`r-node-elasticsearch-${route}`, category, ELASTIC, search(`${URL_}/es-${route}`));
}

// ---------------------------------------------------------------- @qdrant/js-client-rest
const { QdrantClient } = sdk("@qdrant/js-client-rest");
const QDRANT = version("@qdrant/js-client-rest");
const qdrant = (url, options = {}) => new QdrantClient({ url, checkCompatibility: false, ...options });
await kase("r-node-qdrant-refused", "network", QDRANT, () => qdrant(`http://127.0.0.1:${CLOSED}`).getCollections());
await kase("r-node-qdrant-no-answer", "timeout", QDRANT, () => qdrant(`http://127.0.0.1:${SILENT}`, { timeout: 500 }).getCollections());
await kase("r-node-qdrant-401", "auth", QDRANT, () => qdrant(URL_, { prefix: "qdrant-401" }).getCollections());
for (const [route, category] of [["404", "not_found"], ["400", "validation"]]) {
  await kase(`r-node-qdrant-${route}`, category, QDRANT, () => qdrant(URL_, { prefix: `qdrant-${route}` }).query("docs", { query: [0.1, 0.2, 0.3] }));
}

// ---------------------------------------------------------------- ssh2
const { Client: SSH } = sdk("ssh2");
const SSH2 = version("ssh2");
const ssh = (port) => () =>
  new Promise((resolve, reject) => {
    const connection = new SSH();
    connection.on("ready", resolve).on("error", (error) => {
      connection.end();
      reject(error);
    });
    connection.connect({ host: "127.0.0.1", port, username: "agent", password: "x", readyTimeout: 800 });
  });
await kase("r-node-ssh2-refused", "network", SSH2, ssh(CLOSED));
await kase("r-node-ssh2-no-answer", "timeout", SSH2, ssh(SILENT));
// The loopback HTTP server is no SSH server: what pointing a tool at the wrong port gives.
await kase("r-node-ssh2-not-ssh", "network", SSH2, ssh(PORT));

// ---------------------------------------------------------------- ws
const WebSocket = sdk("ws");
const WS = version("ws");
const open = (url) => () =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { handshakeTimeout: 800 });
    socket.on("open", () => socket.close() || resolve()).on("error", reject);
  });
await kase("r-node-ws-refused", "network", WS, open(`ws://127.0.0.1:${CLOSED}/events`));
await kase("r-node-ws-no-answer", "timeout", WS, open(`ws://127.0.0.1:${SILENT}/events`));
// The loopback server answers an upgrade with its 401: the socket is refused for want of a key.
await kase("r-node-ws-401", "auth", WS, open(`ws://127.0.0.1:${PORT}/qdrant-401`));

// ---------------------------------------------------------------- axios
const axios = sdk("axios");
const AXIOS = version("axios");
await kase("r-node-axios-refused", "network", AXIOS, () => axios.get(`http://127.0.0.1:${CLOSED}/v1/search`));
await kase("r-node-axios-timeout", "timeout", AXIOS, () => axios.get(`http://127.0.0.1:${SILENT}/v1/search`, { timeout: 500 }));
await kase("r-node-axios-429", "rate_limited", AXIOS, () => axios.get(`${URL_}/plain-429`));
await kase("r-node-axios-503", "unavailable", AXIOS, () => axios.get(`${URL_}/plain-503`));

server.close();
silentServer.close();
held.forEach((socket) => socket.destroy());
process.exit(0); // the drivers' pools and monitors would keep the process alive
