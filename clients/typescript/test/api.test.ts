/**
 * The client against a real `convomem serve` (SQLite store, recall on, no rate limit):
 * every route's answer, its typed errors, idempotency, `If-Match`, paging, tenancy.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  Client,
  ConfigError,
  MessageIdConflict,
  NotFound,
  RequestInvalid,
  ServiceError,
  SessionMoved,
  Unauthorized,
} from "convomem";

import { type Served, serve } from "./helpers/serve.js";

let served: Served;
let c: Client;
let other: Client; // a key of another tenant
let n = 0;
const fresh = (prefix: string): string => `${prefix}-${++n}`;

before(async () => {
  served = await serve(["--rate", "0"], ["acme", "globex"]);
  c = new Client(served.url, served.keys["acme"]);
  other = new Client(served.url, served.keys["globex"]);
});
after(async () => {
  await served?.stop();
});

test("operations: health, readiness and metrics", async () => {
  assert.deepEqual(await c.health(), { status: "ok" });
  assert.equal((await c.ready()).status, "ready");
  assert.match(await c.metrics(), /convomem_requests_total/);
});

test("createSession: the new session; again with the same owner it is the same one", async () => {
  const id = fresh("s");
  const made = await c.createSession("u1", { id, metadata: { plan: "pro" }, ttlSeconds: 3600 });
  assert.equal(made.id, id);
  assert.equal(made.user_id, "u1");
  assert.deepEqual(made.metadata, { plan: "pro" });
  assert.equal(made.ttl_seconds, 3600);
  assert.equal(made.message_count, 0);
  assert.ok(made.expires_at !== null && made.expires_at > made.updated_at);
  assert.deepEqual(
    await c.createSession("u1", { id, metadata: { plan: "pro" }, ttlSeconds: 3600 }),
    made,
  );
  assert.deepEqual(await c.session(id), made);
  await assert.rejects(
    c.createSession("u2", { id }),
    (e: unknown) =>
      e instanceof ServiceError &&
      e.status === 409 &&
      e.field === "id" &&
      !(e instanceof SessionMoved),
  );
  const anonymous = await c.createSession("u1");
  assert.match(anonymous.id, /^[0-9a-f]{32}$/);
});

test("a bad input is a RequestInvalid naming the field and value; nothing is stored", async () => {
  const id = fresh("s");
  await assert.rejects(
    c.createSession("u1", { id, metadata: { budget: 10 } }),
    (e: unknown) =>
      e instanceof RequestInvalid &&
      e.status === 422 &&
      e.field === "metadata.budget" &&
      e.value === 10,
  );
  await assert.rejects(c.session(id), NotFound);
  await c.createSession("u1", { id });
  await assert.rejects(
    c.append(id, [
      { role: "user", content: "ok" },
      { role: "robot", content: "x" },
    ]),
    (e: unknown) => e instanceof RequestInvalid && /role/.test(e.field) && e.value !== undefined,
  );
  assert.equal((await c.session(id)).message_count, 0); // all checked before any is written
  await assert.rejects(
    c.listSessions(null, { limit: 0 }),
    (e: unknown) => e instanceof RequestInvalid && e.field === "limit",
  );
  await assert.rejects(
    c.append(id, { role: "user" } as never),
    (e: unknown) => e instanceof ConfigError && e.field === "messages",
  );
});

test("append, then the log page by page and whole, oldest first", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  const sent = Array.from({ length: 7 }, (_, i) => ({
    role: i % 2 ? "assistant" : "user",
    content: `message ${i}`,
  }));
  const first = await c.append(id, sent.slice(0, 4));
  assert.equal(first.session_id, id);
  assert.deepEqual(
    first.messages.map((m) => m.role),
    ["user", "assistant", "user", "assistant"],
  );
  const second = await c.append(id, sent.slice(4));
  assert.ok(second.last_seq > first.last_seq);
  const [page, cursor] = await c.messages(id, { limit: 3 });
  assert.deepEqual(
    page.map((m) => m.content),
    ["message 0", "message 1", "message 2"],
  );
  assert.ok(cursor !== null);
  const all = [];
  for await (const m of c.iterMessages(id, { pageSize: 2 })) all.push(m);
  assert.deepEqual(
    all.map((m) => m.content),
    sent.map((m) => m.content),
  );
  assert.deepEqual(
    all.map((m) => m.id),
    [...first.messages, ...second.messages].map((m) => m.id),
  );
  const seqs = all.map((m) => m.seq);
  assert.deepEqual(
    seqs,
    [...seqs].sort((a, b) => a - b),
  );
  assert.equal(seqs.at(-1), second.last_seq);
  assert.equal((await c.session(id)).message_count, 7);
});

test("an Idempotency-Key repeated with the same body appends nothing; with another body it is a conflict", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  const messages = [{ role: "user", content: "Book the 9:40 train" }];
  const once = await c.append(id, messages, { idempotencyKey: "turn-1" });
  const twice = await c.append(id, messages, { idempotencyKey: "turn-1" });
  assert.deepEqual(twice, once);
  assert.equal((await c.session(id)).message_count, 1);
  await assert.rejects(
    c.append(id, [{ role: "user", content: "Another" }], { idempotencyKey: "turn-1" }),
    (e: unknown) => e instanceof MessageIdConflict && e.field === "Idempotency-Key",
  );
  assert.equal((await c.session(id)).message_count, 1);
});

test("a message id sent again with other content is a MessageIdConflict", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  await c.append(id, [{ id: "m-1", role: "user", content: "first" }]);
  await c.append(id, [{ id: "m-1", role: "user", content: "first" }]); // the same: nothing new
  assert.equal((await c.session(id)).message_count, 1);
  await assert.rejects(
    c.append(id, [{ id: "m-1", role: "user", content: "changed" }]),
    MessageIdConflict,
  );
});

test("If-Match: a moved session is a SessionMoved with its seq, or re-read and sent again", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  const { last_seq: seen } = await c.append(id, [{ role: "user", content: "one" }]);
  const { last_seq: now } = await c.append(id, [{ role: "user", content: "two" }]); // another writer
  await assert.rejects(
    c.append(id, [{ role: "user", content: "three" }], { ifMatch: seen }),
    (e: unknown) => e instanceof SessionMoved && e.actual === now && e.status === 409,
  );
  assert.equal((await c.session(id)).message_count, 2);
  const done = await c.append(id, [{ role: "user", content: "three" }], {
    ifMatch: seen,
    retryConflicts: 1,
  });
  assert.ok(done.last_seq > now);
  const ok = await c.append(id, [{ role: "user", content: "four" }], { ifMatch: done.last_seq });
  assert.equal(ok.messages.length, 1);
  assert.equal((await c.session(id)).message_count, 4);
});

test("append in Anthropic's format (with its system prompt) and in convomem's own", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  await c.append(id, [{ role: "user", content: [{ type: "text", text: "Hi from Anthropic" }] }], {
    format: "anthropic",
    system: "Be brief.",
  });
  await c.append(
    id,
    [{ id: "own-1", role: "assistant", content: "Hello", metadata: { source: "ts" } }],
    { format: "convomem" },
  );
  const [log] = await c.messages(id);
  assert.deepEqual(
    log.map((m) => m.role),
    ["system", "user", "assistant"],
  );
  assert.equal(log[0]?.content, "Be brief.");
  assert.equal(log[2]?.id, "own-1");
  assert.deepEqual(log[2]?.metadata, { source: "ts" });
  await assert.rejects(
    c.append(id, [{ role: "user", content: "x" }], { system: "only with anthropic" }),
    (e: unknown) => e instanceof RequestInvalid && e.field === "system",
  );
});

test("context: OpenAI messages or Anthropic's shape, with the accounting of every message", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  await c.append(id, [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Where is my parcel?" },
    { role: "assistant", content: "At the depot." },
  ]);
  const openai = await c.context(id);
  assert.equal(openai.format, "openai");
  // The log's messages, in order (the service may add its own tiers: facts, recall).
  const texts = openai.context
    .map((m) => m["content"])
    .filter((t) => typeof t === "string" && !t.includes("\n"));
  assert.deepEqual(texts, ["You are terse.", "Where is my parcel?", "At the depot."]);
  assert.deepEqual(openai.context.at(-1), { role: "assistant", content: "At the depot." });
  assert.equal(openai.accounting.log_messages, 3);
  assert.equal(openai.accounting.fits, true);
  const [log] = await c.messages(id);
  assert.deepEqual(
    openai.accounting.kept,
    log.map((m) => m.id),
  );
  const anthropic = await c.context(id, { format: "anthropic" });
  assert.match(String(anthropic.context.system), /^You are terse\./);
  assert.deepEqual(
    anthropic.context.messages.map((m) => m["role"]),
    ["user", "assistant"],
  );
  // A budget too small for the conversation: the pinned system prompt and the current
  // turn (the newest user message, the newest reply) are sent anyway, and fits says so.
  const small = await c.context(id, { budget: 12 });
  assert.deepEqual(small.accounting.kept, log.map((m) => m.id));
  assert.equal(small.accounting.fits, false);
  assert.ok(small.accounting.budget <= 12);
  await assert.rejects(
    c.context(id, { budget: 0 }),
    (e: unknown) => e instanceof RequestInvalid && e.field === "budget",
  );
});

test("sessions: one user's page by page, newest first; deleted ones are gone", async () => {
  const user = fresh("lister");
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await c.createSession(user, { id: fresh("ls") })).id);
  const [page, cursor] = await c.listSessions(user, { limit: 2 });
  assert.equal(page.length, 2);
  assert.ok(cursor !== null);
  const every = [];
  for await (const s of c.iterSessions(user, { pageSize: 2 })) every.push(s.id);
  assert.deepEqual(every, [...ids].reverse());
  await c.deleteSession(ids[0] as string);
  await assert.rejects(c.session(ids[0] as string), NotFound);
  await assert.rejects(c.messages(ids[0] as string), NotFound);
  await assert.rejects(c.deleteSession(ids[0] as string), NotFound);
  const left = [];
  for await (const s of c.iterSessions(user)) left.push(s.id);
  assert.deepEqual(left, ids.slice(1).reverse());
});

test("ids that need escaping reach their own session", async () => {
  // Not "/": the service's routes cannot take an id holding one (see the report).
  const id = "team:a?b#c d%25é&x=1";
  const user = "user ?&#%é";
  await c.createSession(user, { id });
  await c.append(id, [{ role: "user", content: "escaped" }]);
  assert.equal((await c.session(id)).user_id, user);
  const [sessions] = await c.listSessions(user);
  assert.deepEqual(
    sessions.map((s) => s.id),
    [id],
  );
  assert.equal((await c.facts(user)).user_id, user);
  await assert.rejects(c.session("team:a"), NotFound);
});

test("recall, facts and the erasure of a user", async () => {
  const user = fresh("user");
  const id = fresh("s");
  await c.createSession(user, { id });
  await c.append(id, [{ role: "user", content: "I live in Lyon and I am allergic to peanuts." }]);
  const { hits } = await c.search(user, "peanuts allergy", { k: 3 });
  assert.ok(hits.length > 0);
  assert.match(hits[0]?.text ?? "", /peanuts/);
  assert.equal(hits[0]?.session_id, id);
  const onlyFacts = await c.search(user, "peanuts allergy", { k: 3, kinds: ["fact"] });
  assert.ok(onlyFacts.hits.every((h) => h.kind === "fact"));
  const facts = await c.facts(user);
  assert.equal(facts.user_id, user);
  assert.ok(facts.current.length > 0, JSON.stringify(facts));
  assert.ok(
    facts.current.every(
      (f) =>
        typeof f.attribute === "string" && typeof f.statement === "string" && f.valid_to === null,
    ),
  );
  await assert.rejects(other.search(user, "peanuts"), NotFound); // not a user of that tenant
  const erased = await c.eraseUser(user);
  assert.deepEqual([erased.user_id, erased.sessions], [user, 1]);
  assert.ok(erased.items > 0);
  await assert.rejects(c.session(id), NotFound);
  await assert.rejects(c.facts(user), NotFound);
  await assert.rejects(c.search(user, "peanuts"), NotFound);
});

test("another tenant's session is not found, exactly as a missing one", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  await c.append(id, [{ role: "user", content: "acme only" }]);
  const theirs = await other.session(id).catch((e: unknown) => e);
  const missing = await other.session(fresh("missing")).catch((e: unknown) => e);
  assert.ok(theirs instanceof NotFound && missing instanceof NotFound);
  assert.equal(theirs.title, missing.title);
  await assert.rejects(other.append(id, [{ role: "user", content: "x" }]), NotFound);
  await assert.rejects(other.context(id), NotFound);
  await assert.rejects(other.deleteSession(id), NotFound);
  assert.equal((await c.session(id)).message_count, 1);
});

test("a missing, unknown or malformed key is Unauthorized", async () => {
  for (const key of [undefined, "cm_000000000000_nope"]) {
    await assert.rejects(
      new Client(served.url, key).session("s"),
      (e: unknown) => e instanceof Unauthorized && e.status === 401 && e.slug === "unauthorized",
    );
  }
});

test("chat without an upstream model is the service's 501, typed", async () => {
  const id = fresh("s");
  await c.createSession("u1", { id });
  await assert.rejects(
    async () => {
      for await (const _ of c.chat(id, "Hello")) void _;
    },
    (e: unknown) => e instanceof ServiceError && e.status === 501 && e.slug === "not-implemented",
  );
});
