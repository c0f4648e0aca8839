// The quick start: a session, its messages, its context and one chat turn.
// Run: CONVOMEM_URL=http://127.0.0.1:8080 CONVOMEM_API_KEY=cm_... node build/examples/quickstart.js
import { Client } from "convomem";

const client = new Client(process.env.CONVOMEM_URL, process.env.CONVOMEM_API_KEY);

const session = await client.createSession("user-42", { metadata: { channel: "web" } });
await client.append(session.id, [
  { role: "system", content: "You are a helpful travel agent." },
  { role: "user", content: "I want to go to Lisbon in May." },
  { role: "assistant", content: "Lovely! Which dates work for you?" },
]);

// What to send to the model now, under the session's budget, and where every message is.
const { context, accounting } = await client.context(session.id);
console.log(`${context.length} messages, ${accounting.tokens} of ${accounting.budget} tokens`);

// One turn with the service's model, streamed as it is written, then stored.
const reply = client.chat(session.id, "Which week is the cheapest?");
for await (const delta of reply) process.stdout.write(delta);
console.log(`\n(stored as ${reply.messageId}, ${reply.usage?.total_tokens} tokens)`);
