// A user's memory across sessions: recall, facts, paging, errors and erasure.
import { Client, NotFound, RequestInvalid } from "convomem";

const client = new Client(process.env.CONVOMEM_URL, process.env.CONVOMEM_API_KEY);
const user = `user-${Date.now()}`;
const { id } = await client.createSession(user);
await client.append(id, [
  { role: "user", content: "I live in Lyon and I am allergic to peanuts." },
]);

// The items of the user's past sessions that best match a query (lexical + vectors).
const { hits } = await client.search(user, "food allergies", { k: 3 });
for (const hit of hits) console.log(`${hit.score.toFixed(3)} [${hit.kind}] ${hit.text}`);

// The user's long-term facts: the current value of each, and every value over time.
const facts = await client.facts(user);
for (const fact of facts.current) console.log(`${fact.attribute}: ${fact.value}`);

// Every session of the user and every message of one, a page at a time.
for await (const session of client.iterSessions(user)) {
  for await (const message of client.iterMessages(session.id, { pageSize: 100 })) {
    console.log(session.id, message.seq, message.role);
  }
}

// Failures are typed, with the service's problem document.
try {
  await client.append(id, [{ role: "robot", content: "beep" }]);
} catch (e) {
  if (!(e instanceof RequestInvalid)) throw e;
  console.log(`refused: ${e.field} = ${JSON.stringify(e.value)}`); // nothing was written
}

// Erase everything of the user: sessions, summaries, facts, recall items.
const erased = await client.eraseUser(user);
console.log(`erased ${erased.sessions} session(s), ${erased.items} recall item(s)`);
try {
  await client.session(id);
} catch (e) {
  if (!(e instanceof NotFound)) throw e;
  console.log("gone");
}
