/**
 * A user's facts by id: read (current, every version), set, corrected and deleted, with
 * `If-Match` on the facts' version. The wire against a scripted server; the behaviour
 * against a real `convomem serve` (it needs the service's facts routes: `GET ?history`,
 * `GET /{fact_id}`, `POST`, `PATCH /{fact_id}`, `DELETE /{fact_id}`).
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, ConfigError, NotFound, RequestInvalid, SessionMoved } from "convomem";

import { type Scripted, scripted } from "./helpers/fakes.js";
import { type Served, serve } from "./helpers/serve.js";

let served: Served;
let c: Client;
let other: Client;
let n = 0;
const fakes: Scripted[] = [];

before(async () => {
  served = await serve(["--rate", "0"], ["acme", "globex"]);
  c = new Client(served.url, served.keys["acme"]);
  other = new Client(served.url, served.keys["globex"]);
});
after(async () => {
  await served?.stop();
  for (const f of fakes) await f.close();
});

const FACT = {
  id: "f_1",
  subject: "user",
  attribute: "city",
  value: "Porto",
  statement: "city: Porto",
  current: true,
  source_role: null,
  session_id: null,
  message_id: "manual:k1",
  seq: null,
  valid_from: 1,
  valid_to: null,
  manual: true,
  set_by: "k1",
};

test("the wire: paths, bodies, If-Match and one Idempotency-Key per write across retries", async () => {
  const busy = { status: 503, headers: { "Retry-After": "0" }, body: { status: 503 } };
  const server = await scripted([
    busy,
    { status: 201, body: FACT },
    { status: 200, body: FACT },
    { status: 204 },
    { status: 200, body: { user_id: "u 1", version: 3, current: [FACT], history: [FACT] } },
  ]);
  fakes.push(server);
  const client = new Client(server.url, "k", { sleep: async () => undefined });
  assert.deepEqual(await client.addFact("u 1", "city", "Porto", { ifMatch: 2 }), FACT);
  await client.updateFact("u 1", "f_1", { value: "Faro", idempotencyKey: "fix-1" });
  await client.deleteFact("u 1", "f_1");
  const facts = await client.facts("u 1", { history: true });
  assert.equal(facts.version, 3);
  const seen = server.requests.map((r) => [r.method, r.url, r.body, r.headers["if-match"]]);
  assert.deepEqual(seen, [
    ["POST", "/v1/users/u%201/facts", '{"attribute":"city","value":"Porto"}', '"2"'],
    ["POST", "/v1/users/u%201/facts", '{"attribute":"city","value":"Porto"}', '"2"'],
    ["PATCH", "/v1/users/u%201/facts/f_1", '{"value":"Faro"}', undefined],
    ["DELETE", "/v1/users/u%201/facts/f_1", "", undefined],
    ["GET", "/v1/users/u%201/facts?history=true", "", undefined],
  ]);
  const keys = server.requests.map((r) => r.headers["idempotency-key"]);
  assert.equal(keys[0], keys[1]); // the retry of one write
  assert.equal(keys[2], "fix-1");
  assert.equal(new Set([keys[0], keys[2], keys[3]]).size, 3);
  assert.equal(keys[4], undefined); // a read carries none
  await assert.rejects(
    client.addFact("u", "city", 7 as never),
    (e: unknown) => e instanceof ConfigError && e.field === "value",
  );
  await assert.rejects(
    client.deleteFact("u", "f_1", { ifMatch: -1 }),
    (e: unknown) => e instanceof ConfigError && e.field === "ifMatch",
  );
  assert.equal(server.requests.length, 5);
});

test("set, corrected, listed with their history, and deleted by id", async () => {
  const user = `user-${++n}`;
  const { id } = await c.createSession(user);
  await c.append(id, [{ role: "user", content: "My email is ana@old.example" }]);
  const [email] = (await c.facts(user)).current;
  assert.ok(email !== undefined && email.current && !email.manual);
  const fixed = await c.updateFact(user, email.id, { value: "ana@new.example" });
  assert.equal(fixed.value, "ana@new.example");
  assert.ok(fixed.manual && fixed.set_by);
  const every = await c.facts(user, { history: true });
  assert.deepEqual(
    every.history?.map((f) => f.value),
    ["ana@old.example", "ana@new.example"],
  );
  assert.equal((await c.fact(user, email.id)).current, false); // superseded, not lost
  assert.equal((await c.facts(user)).history ?? null, null);

  const added = await c.addFact(user, "city", "Porto", { ifMatch: every.version });
  assert.equal(added.statement, "city: Porto");
  const moved = await c.addFact(user, "city", "Faro", { ifMatch: every.version }).catch((e) => e);
  assert.ok(moved instanceof SessionMoved, String(moved)); // the facts moved: nothing written
  assert.equal(moved.actual, (await c.facts(user)).version);
  assert.equal((await c.facts(user)).current.find((f) => f.attribute === "city")?.value, "Porto");
  await c.deleteFact(user, added.id);
  assert.deepEqual(
    (await c.facts(user)).current.map((f) => f.attribute),
    ["email"],
  );
  await assert.rejects(c.deleteFact(user, added.id), NotFound);
  await assert.rejects(
    c.updateFact(user, fixed.id, { value: "" }),
    (e: unknown) => e instanceof RequestInvalid && e.field === "value",
  );
  await assert.rejects(other.updateFact(user, fixed.id, { value: "x@y.z" }), NotFound); // another tenant
  assert.equal((await c.facts(user)).current[0]?.value, "ana@new.example");
});
