// Writes that are safe to repeat, and writers that do not overwrite each other.
import { Client, SessionMoved } from "convomem";

const client = new Client(process.env.CONVOMEM_URL, process.env.CONVOMEM_API_KEY, {
  retries: 4, // repeats after a network failure, 429, 502, 503 or 504
  maxRetryWaitMs: 10_000, // a Retry-After longer than this is thrown, not waited
  timeoutMs: 15_000,
});
const { id } = await client.createSession("user-42");

// Your own Idempotency-Key makes a write safe to repeat, even from another process:
// the service answers the repeat with the first answer and appends nothing.
const order = [{ role: "user", content: "Book the 9:40 train to Porto." }];
const first = await client.append(id, order, { idempotencyKey: "order-1017" });
const again = await client.append(id, order, { idempotencyKey: "order-1017" });
console.log(first.last_seq === again.last_seq); // true: appended once

// Optimistic concurrency: append only if nobody wrote since the seq this writer saw.
const seen = first.last_seq;
await client.append(id, [{ role: "assistant", content: "Booked." }]); // another writer
try {
  await client.append(id, [{ role: "user", content: "Thanks!" }], { ifMatch: seen });
} catch (e) {
  if (!(e instanceof SessionMoved)) throw e;
  console.log(`the session moved on to seq ${e.actual}; nothing was written`);
}
// Or let the client re-read where the session is and send again (up to 3 times):
await client.append(id, [{ role: "user", content: "Thanks!" }], {
  ifMatch: seen,
  retryConflicts: 3,
});
console.log((await client.session(id)).message_count); // 3
