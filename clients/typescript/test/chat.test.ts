/**
 * Chat against a real `convomem serve` whose model is a local fake OpenAI-compatible
 * server: the reply streamed and stored, a failed model, and a stream the client leaves
 * (break, abort) storing nothing of the reply.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, NotFound, RequestInvalid, ServiceUnavailable, type StoredMessage } from "convomem";

import { type FakeUpstream, deltasOf, fakeUpstream } from "./helpers/fakes.js";
import { type Served, serve } from "./helpers/serve.js";

let fake: FakeUpstream;
let served: Served;
let c: Client;
let n = 0;

before(async () => {
  fake = await fakeUpstream("It left the depot on Monday.", 3);
  served = await serve(["--rate", "0", "--upstream-url", fake.url, "--upstream-model", "fake"]);
  c = new Client(served.url, served.keys["acme"]);
});
after(async () => {
  await served?.stop();
  await fake?.close();
});

async function session(): Promise<string> {
  const id = `chat-${++n}`;
  await c.createSession("u1", { id });
  return id;
}

async function log(id: string): Promise<StoredMessage[]> {
  const out: StoredMessage[] = [];
  for await (const m of c.iterMessages(id)) out.push(m);
  return out;
}

test("a turn: the deltas as the model writes them, then the stored reply", async () => {
  fake.mode = null;
  const id = await session();
  const reply = c.chat(id, "Where is my parcel?");
  const deltas: string[] = [];
  for await (const delta of reply) deltas.push(delta);
  assert.deepEqual(deltas, deltasOf(fake.reply, fake.pieces));
  assert.equal(reply.text, fake.reply);
  assert.equal(reply.done?.finish_reason, "stop");
  assert.deepEqual(reply.usage, { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
  const stored = await log(id);
  assert.deepEqual(
    stored.map((m) => [m.role, m.content]),
    [
      ["user", "Where is my parcel?"],
      ["assistant", fake.reply],
    ],
  );
  assert.equal(stored[1]?.id, reply.messageId);
  assert.equal(stored[1]?.seq, reply.done?.seq);
  assert.equal(stored[0]?.id, reply.done?.user_message_id);
  const sent = fake.requests.at(-1) as {
    messages: { role: string; content: string }[];
    model: string;
  };
  assert.equal(sent.model, "fake");
  assert.deepEqual(sent.messages.at(-1), { role: "user", content: "Where is my parcel?" });
});

test("a turn sent as a message with an id is stored once, however often it is sent", async () => {
  fake.mode = null;
  const id = await session();
  const turn = { message: { id: "turn-1", role: "user", content: "Hello" } };
  for (let i = 0; i < 2; i++) for await (const _ of c.chat(id, turn)) void _;
  const stored = await log(id);
  assert.equal(stored.filter((m) => m.id === "turn-1").length, 1);
  assert.equal(stored.filter((m) => m.role === "assistant").length, 2);
  const anthropic = c.chat(
    id,
    { message: { role: "user", content: [{ type: "text", text: "Hi" }] }, format: "anthropic" },
    { budget: 200, query: "parcel" },
  );
  for await (const _ of anthropic) void _;
  assert.equal(anthropic.text, fake.reply);
});

test("a model that fails is a ServiceUnavailable; the user's message is kept, no reply", async () => {
  fake.mode = "status";
  const id = await session();
  const reply = c.chat(id, "Are you there?");
  await assert.rejects(
    async () => {
      for await (const _ of reply) void _;
    },
    (e: unknown) =>
      e instanceof ServiceUnavailable &&
      e.status === 502 &&
      e.slug === "upstream-failed" &&
      e.transient,
  );
  assert.equal(reply.done, null);
  assert.deepEqual(
    (await log(id)).map((m) => m.role),
    ["user"],
  );
  fake.mode = "cut";
  await assert.rejects(async () => {
    for await (const _ of c.chat(id, "Again?")) void _;
  }, ServiceUnavailable);
  assert.deepEqual(
    (await log(id)).map((m) => m.role),
    ["user", "user"],
  );
});

test("leaving the loop closes the stream: the service cancels the model and stores no reply", async () => {
  fake.mode = "hold";
  const id = await session();
  const reply = c.chat(id, "Tell me a long story");
  for await (const delta of reply) {
    assert.equal(delta, deltasOf(fake.reply, fake.pieces)[0]);
    break;
  }
  await fake.closed; // the service dropped its call to the model when the client left
  fake.release();
  assert.equal(reply.done, null);
  assert.deepEqual(
    (await log(id)).map((m) => m.role),
    ["user"],
  );
});

test("aborting the signal closes the stream the same way", async () => {
  fake.mode = "hold";
  const id = await session();
  const abort = new AbortController();
  // No deadline to fall back on: only the abort can end this stream before the test's timeout.
  const patient = new Client(served.url, served.keys["acme"], { timeoutMs: 3_600_000 });
  const reply = patient.chat(id, "Another long story", { signal: abort.signal });
  const seen: string[] = [];
  await assert.rejects(async () => {
    for await (const delta of reply) {
      seen.push(delta);
      abort.abort(new Error("the user closed the tab"));
    }
  }, /the user closed the tab/);
  assert.equal(seen.length, 1);
  await fake.closed;
  fake.release();
  assert.deepEqual(
    (await log(id)).map((m) => m.role),
    ["user"],
  );
});

test("errors before the stream starts are the usual typed errors", async () => {
  fake.mode = null;
  await assert.rejects(async () => {
    for await (const _ of c.chat("no-such-session", "Hi")) void _;
  }, NotFound);
  const id = await session();
  await assert.rejects(
    async () => {
      for await (const _ of c.chat(id, { message: { role: "assistant", content: "Hi" } })) void _;
    },
    (e: unknown) => e instanceof RequestInvalid && e.field === "message.role",
  );
  assert.deepEqual(await log(id), []);
});
