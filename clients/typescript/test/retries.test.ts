/**
 * The client's transport behaviour against a scripted local server: which answers are
 * retried and how long it waits (`Retry-After` honoured, through an injected sleep, so
 * no test waits), that a write keeps one `Idempotency-Key` across its retries, that a
 * chat stream is retried only on 429, and the deadlines.
 */

import assert from "node:assert/strict";
import { after, test } from "node:test";

import {
  Client,
  type ClientOptions,
  ConfigError,
  RateLimited,
  RequestInvalid,
  ServiceUnavailable,
  SessionMoved,
  TransientError,
} from "convomem";

import { type Answer, type Scripted, scripted } from "./helpers/fakes.js";

const servers: Scripted[] = [];
after(async () => {
  for (const s of servers) await s.close();
});

/** A client of a server answering `script`, its sleeps recorded instead of waited. */
async function rig(script: Answer[], options: ClientOptions = {}) {
  const server = await scripted(script);
  servers.push(server);
  const sleeps: number[] = [];
  const client = new Client(server.url, "cm_test_key", {
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0.5,
    ...options,
  });
  return { server, client, sleeps };
}

const SESSION = {
  id: "s1",
  user_id: "u1",
  metadata: {},
  created_at: 1,
  updated_at: 1,
  expires_at: null,
  ttl_seconds: null,
  message_count: 0,
  last_seq: 0,
};
const APPENDED = { session_id: "s1", last_seq: 2, messages: [{ id: "m1", role: "user" }] };
const limited = (after: string): Answer => ({
  status: 429,
  headers: { "Retry-After": after, "Content-Type": "application/problem+json" },
  body: {
    type: "https://convomem.dev/problems/rate-limited",
    title: "Too many requests",
    status: 429,
    detail: "slow down",
  },
});
const unavailable = (after?: string): Answer => ({
  status: 503,
  headers: after === undefined ? {} : { "Retry-After": after },
  body: { type: "https://convomem.dev/problems/unavailable", status: 503, detail: "store down" },
});

test("429 then 503 then 200: waits what Retry-After says, and answers the 200", async () => {
  const { server, client, sleeps } = await rig([
    limited("2"),
    unavailable("1"),
    { status: 200, body: SESSION },
  ]);
  assert.deepEqual(await client.session("s1"), SESSION);
  assert.deepEqual(sleeps, [2000, 1000]);
  assert.equal(server.requests.length, 3);
  for (const r of server.requests) {
    assert.equal(r.headers["authorization"], "Bearer cm_test_key");
    assert.match(String(r.headers["user-agent"]), /^convomem-ts\/\d/);
  }
});

test("a write keeps one Idempotency-Key across its retries; each call has its own", async () => {
  const { server, client } = await rig([
    limited("1"),
    unavailable("0"),
    { status: 201, body: APPENDED },
  ]);
  const messages = [{ role: "user", content: "Hello" }];
  assert.deepEqual(await client.append("s1", messages), APPENDED);
  const keys = server.requests.map((r) => r.headers["idempotency-key"]);
  assert.equal(keys.length, 3);
  assert.match(
    String(keys[0]),
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  assert.deepEqual(new Set(keys).size, 1);
  for (const r of server.requests) {
    assert.deepEqual(JSON.parse(r.body), { messages });
    assert.equal(r.headers["content-type"], "application/json");
  }
  await client.append("s1", messages);
  assert.notEqual(server.requests[3]?.headers["idempotency-key"], keys[0]);
});

test("the caller's Idempotency-Key is sent as given; one a header cannot carry is refused", async () => {
  const { server, client } = await rig([unavailable("0"), { status: 201, body: APPENDED }]);
  await client.append("s1", [{ role: "user", content: "x" }], { idempotencyKey: "order-42" });
  assert.deepEqual(
    server.requests.map((r) => r.headers["idempotency-key"]),
    ["order-42", "order-42"],
  );
  for (const bad of ["", "naïve", "a\nb", " lead", "x".repeat(201)]) {
    await assert.rejects(
      client.append("s1", [{ role: "user", content: "x" }], { idempotencyKey: bad }),
      (e: unknown) => e instanceof ConfigError && e.field === "idempotencyKey",
    );
  }
  assert.equal(server.requests.length, 2); // nothing sent for the refused ones
});

test("createSession makes the id when none is given, so its retry finds the same session", async () => {
  const { server, client } = await rig(["reset", { status: 200, body: SESSION }]);
  await client.createSession("u1", { metadata: { plan: "pro" }, ttlSeconds: 60 });
  const [first, second] = server.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
  assert.match(String(first?.["id"]), /^[0-9a-f]{32}$/);
  assert.deepEqual(second, first);
  assert.deepEqual(first, {
    user_id: "u1",
    id: first?.["id"],
    metadata: { plan: "pro" },
    ttl_seconds: 60,
  });
  const keys = server.requests.map((r) => r.headers["idempotency-key"]);
  assert.equal(keys[0], keys[1]);
});

test("retries run out: the last answer's typed error, with its Retry-After", async () => {
  const { server, client, sleeps } = await rig([limited("1")], { retries: 3 });
  await assert.rejects(
    client.session("s1"),
    (e: unknown) =>
      e instanceof RateLimited && e.retryAfter === 1 && e.detail === "slow down" && e.transient,
  );
  assert.equal(server.requests.length, 4);
  assert.deepEqual(sleeps, [1000, 1000, 1000]);
});

test("retries: 0 sends once", async () => {
  const { server, client, sleeps } = await rig([unavailable("1")], { retries: 0 });
  await assert.rejects(client.session("s1"), ServiceUnavailable);
  assert.equal(server.requests.length, 1);
  assert.deepEqual(sleeps, []);
});

test("a Retry-After longer than maxRetryWaitMs is not waited: the error says when", async () => {
  const { server, client, sleeps } = await rig([limited("30"), { status: 200, body: SESSION }]);
  await assert.rejects(
    client.session("s1"),
    (e: unknown) => e instanceof RateLimited && e.retryAfter === 30,
  );
  assert.equal(server.requests.length, 1);
  assert.deepEqual(sleeps, []);
  const patient = await rig([limited("30"), { status: 200, body: SESSION }], {
    maxRetryWaitMs: 60_000,
  });
  assert.deepEqual(await patient.client.session("s1"), SESSION);
  assert.deepEqual(patient.sleeps, [30_000]);
});

test("Retry-After as an HTTP date is read against the injected clock", async () => {
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  const { client, sleeps } = await rig(
    [limited("Wed, 21 Oct 2015 07:28:03 GMT"), { status: 200, body: SESSION }],
    { now: () => now },
  );
  await client.session("s1");
  assert.deepEqual(sleeps, [3000]);
});

test("without Retry-After the pause is the jittered backoff, growing per attempt", async () => {
  const { client, sleeps } = await rig(
    [
      unavailable(),
      { status: 502, body: "bad gateway" },
      { status: 504 },
      { status: 200, body: SESSION },
    ],
    { retries: 3 },
  );
  await client.session("s1");
  assert.deepEqual(sleeps, [50, 100, 200]); // random() = 0.5 of 100, 200, 400 ms
});

test("a connection reset is retried (a TransientError when it persists)", async () => {
  const { server, client, sleeps } = await rig(["reset", "reset", { status: 200, body: SESSION }]);
  assert.deepEqual(await client.session("s1"), SESSION);
  assert.equal(server.requests.length, 3);
  assert.equal(sleeps.length, 2);
  const down = await rig(["reset"], { retries: 1 });
  await assert.rejects(
    down.client.session("s1"),
    (e: unknown) =>
      e instanceof TransientError && e.transient && /GET \/v1\/sessions\/s1/.test(e.message),
  );
  assert.equal(down.server.requests.length, 2);
});

test("a server that never answers ends at the deadline, and is retried", async () => {
  // 1 s: ample for a local answer on a busy machine; the hang costs that second once.
  const { server, client } = await rig(["hang", { status: 200, body: SESSION }], {
    timeoutMs: 1000,
  });
  assert.deepEqual(await client.session("s1"), SESSION);
  assert.equal(server.requests.length, 2);
  const stuck = await rig(["hang"], { timeoutMs: 50, retries: 0 });
  await assert.rejects(
    stuck.client.session("s1"),
    (e: unknown) => e instanceof TransientError && /no answer within 50 ms/.test(e.message),
  );
});

test("nothing refused for its input is retried", async () => {
  const invalid: Answer = {
    status: 422,
    body: {
      type: "https://convomem.dev/problems/bad-request",
      status: 422,
      detail: "bad",
      field: "limit",
      value: 0,
    },
  };
  const { server, client } = await rig([invalid]);
  await assert.rejects(
    client.listSessions(null, { limit: 0 }),
    (e: unknown) => e instanceof RequestInvalid && e.field === "limit" && !e.transient,
  );
  assert.equal(server.requests.length, 1);
  assert.equal(server.requests[0]?.url, "/v1/sessions?limit=0");
});

test("a body that is no JSON is a ConfigError, and nothing is sent", async () => {
  const { server, client } = await rig([{ status: 201, body: APPENDED }]);
  const cyclic: Record<string, unknown> = { role: "user", content: "x" };
  cyclic["self"] = cyclic;
  await assert.rejects(
    client.append("s1", [cyclic]),
    (e: unknown) => e instanceof ConfigError && e.field === "body",
  );
  await assert.rejects(client.append("s1", [{ role: "user", content: 1n }]), ConfigError);
  await assert.rejects(async () => {
    for await (const _ of client.chat("s1", { message: cyclic })) void _;
  }, ConfigError);
  await assert.rejects(
    client.append("s1", [null as never]),
    (e: unknown) => e instanceof ConfigError && e.field === "messages[0]",
  );
  assert.equal(server.requests.length, 0);
});

test("append with ifMatch: a moved session is re-read from the ETag and sent again", async () => {
  const moved: Answer = {
    status: 409,
    headers: { ETag: '"5"' },
    body: {
      type: "https://convomem.dev/problems/precondition-failed",
      status: 409,
      detail: "moved",
      field: "If-Match",
      value: '"3"',
    },
  };
  const { server, client, sleeps } = await rig([moved, { status: 201, body: APPENDED }]);
  await client.append("s1", [{ role: "user", content: "x" }], { ifMatch: 3, retryConflicts: 1 });
  assert.deepEqual(
    server.requests.map((r) => r.headers["if-match"]),
    ['"3"', '"5"'],
  );
  const [k0, k1] = server.requests.map((r) => String(r.headers["idempotency-key"]));
  assert.equal(k1, `${k0}-1`); // the refused attempt wrote nothing: a key of its own
  assert.equal(sleeps.length, 1);

  const strict = await rig([moved]);
  await assert.rejects(
    strict.client.append("s1", [{ role: "user", content: "x" }], { ifMatch: 3 }),
    (e: unknown) => e instanceof SessionMoved && e.actual === 5,
  );
  assert.equal(strict.server.requests.length, 1);
});

test("append with ifMatch: without a seq in the answer, the session is read for it", async () => {
  const moved: Answer = {
    status: 409,
    body: {
      type: "https://convomem.dev/problems/precondition-failed",
      status: 409,
      detail: "moved",
    },
  };
  const { server, client } = await rig([
    moved,
    { status: 200, body: { ...SESSION, last_seq: 8 } },
    { status: 201, body: APPENDED },
  ]);
  await client.append("s1", [{ role: "user", content: "x" }], { ifMatch: 3, retryConflicts: 2 });
  assert.deepEqual(
    server.requests.map((r) => `${r.method} ${r.url} ${r.headers["if-match"] ?? ""}`),
    [
      'POST /v1/sessions/s1/messages "3"',
      "GET /v1/sessions/s1 ",
      'POST /v1/sessions/s1/messages "8"',
    ],
  );
});

const sse = (...events: [string, unknown][]): string[] =>
  events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`);
const DONE = {
  message_id: "a1",
  seq: 4,
  user_message_id: "u1",
  finish_reason: "stop",
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
};

test("chat: a 429 is retried after Retry-After; the stream then delivers its deltas", async () => {
  const stream: Answer = {
    status: 200,
    headers: { "Content-Type": "text/event-stream" },
    pieces: sse(["delta", { content: "Hel" }], ["delta", { content: "lo" }], ["done", DONE]),
  };
  const { server, client, sleeps } = await rig([limited("1"), stream]);
  const reply = client.chat("s1", "Hi");
  const deltas: string[] = [];
  for await (const d of reply) deltas.push(d);
  assert.deepEqual(deltas, ["Hel", "lo"]);
  assert.deepEqual([reply.text, reply.messageId, reply.usage?.total_tokens], ["Hello", "a1", 5]);
  assert.deepEqual(sleeps, [1000]);
  assert.equal(server.requests.length, 2);
  assert.equal(server.requests[1]?.headers["accept"], "text/event-stream");
  assert.deepEqual(JSON.parse(server.requests[1]?.body ?? ""), { content: "Hi" });
});

test("chat: a 503 or a cut stream is not retried (the turn may be half done)", async () => {
  const { server, client } = await rig([unavailable("0")]);
  await assert.rejects(async () => {
    for await (const _ of client.chat("s1", "Hi")) void _;
  }, ServiceUnavailable);
  assert.equal(server.requests.length, 1);
  const cut = await rig([
    {
      status: 200,
      headers: { "Content-Type": "text/event-stream" },
      pieces: [...sse(["delta", { content: "Hel" }]), "<cut>"],
    },
  ]);
  const reply = cut.client.chat("s1", "Hi");
  const seen: string[] = [];
  await assert.rejects(async () => {
    for await (const d of reply) seen.push(d);
  }, TransientError);
  assert.deepEqual(seen, ["Hel"]);
  assert.equal(reply.done, null);
  assert.equal(cut.server.requests.length, 1);
});

test("chat: a stream that ends without its done event is a cut reply, not a silent one", async () => {
  const { client } = await rig([
    {
      status: 200,
      headers: { "Content-Type": "text/event-stream" },
      pieces: sse(["delta", { content: "Hel" }]),
    },
  ]);
  const reply = client.chat("s1", "Hi");
  await assert.rejects(
    async () => {
      for await (const _ of reply) void _;
    },
    (e: unknown) =>
      e instanceof ServiceUnavailable && e.status === 502 && /before its done event/.test(e.detail),
  );
  assert.equal(reply.text, "Hel");
});

test("chat: an error event is its problem's typed error", async () => {
  const problem = {
    type: "https://convomem.dev/problems/upstream-failed",
    title: "Upstream failed",
    status: 502,
    detail: "the model overloaded",
  };
  const { client } = await rig([
    {
      status: 200,
      headers: { "Content-Type": "text/event-stream" },
      pieces: sse(["delta", { content: "x" }], ["error", problem]),
    },
  ]);
  await assert.rejects(
    async () => {
      for await (const _ of client.chat("s1", "Hi")) void _;
    },
    (e: unknown) =>
      e instanceof ServiceUnavailable &&
      e.slug === "upstream-failed" &&
      e.detail === "the model overloaded",
  );
});

test("chat: the deadline times the service, not a caller slower than it", async () => {
  const pieces = sse(["delta", { content: "a" }], ["delta", { content: "b" }], ["done", DONE]);
  const stream: Answer = { status: 200, headers: { "Content-Type": "text/event-stream" }, pieces };
  // The pause after the 429 and the caller's work per delta both outlast the 250 ms deadline.
  const slow = (ms: number) => new Promise<void>((done) => setTimeout(done, Math.max(ms, 400)));
  const { client } = await rig([limited("0"), stream], { timeoutMs: 250, sleep: slow });
  const seen: string[] = [];
  for await (const delta of client.chat("s1", "Hi")) {
    seen.push(delta);
    await slow(0);
  }
  assert.deepEqual(seen, ["a", "b"]);
});

test("chat: a stream silent for longer than the deadline ends with a TransientError", async () => {
  const { client } = await rig(["hang"], { timeoutMs: 50 });
  await assert.rejects(
    async () => {
      for await (const _ of client.chat("s1", "Hi")) void _;
    },
    (e: unknown) => e instanceof TransientError && /no answer within 50 ms/.test(e.message),
  );
});

test("chat: a stream is iterated once; bad input is refused before anything is sent", async () => {
  const stream: Answer = {
    status: 200,
    headers: { "Content-Type": "text/event-stream" },
    pieces: sse(["done", DONE]),
  };
  const { server, client } = await rig([stream]);
  const reply = client.chat("s1", "Hi");
  for await (const _ of reply) void _;
  await assert.rejects(async () => {
    for await (const _ of reply) void _;
  }, ConfigError);
  assert.throws(
    () => client.chat("s1", "  "),
    (e: unknown) => e instanceof ConfigError && e.field === "content",
  );
  assert.throws(
    () => client.chat("s1", { message: [] as never }),
    (e: unknown) => e instanceof ConfigError && e.field === "input",
  );
  assert.throws(
    () => client.chat("..", "Hi"),
    (e: unknown) => e instanceof ConfigError && e.field === "id",
  );
  assert.equal(server.requests.length, 1);
});

test("options are checked when the client is made, naming the option", () => {
  const bad: [string, () => unknown][] = [
    ["baseUrl", () => new Client("ftp://x")],
    ["apiKey", () => new Client("http://x", "")],
    ["apiKey", () => new Client("http://x", "key\nInjected: 1")],
    ["retries", () => new Client("http://x", "k", { retries: -1 })],
    ["retries", () => new Client("http://x", "k", { retries: 1.5 })],
    ["timeoutMs", () => new Client("http://x", "k", { timeoutMs: 0 })],
    ["maxRetryWaitMs", () => new Client("http://x", "k", { maxRetryWaitMs: Number.NaN })],
  ];
  for (const [field, make] of bad)
    assert.throws(make, (e: unknown) => e instanceof ConfigError && e.field === field, field);
  assert.equal(new Client("http://127.0.0.1:1/").baseUrl, "http://127.0.0.1:1");
});
