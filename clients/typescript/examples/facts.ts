// What the service knows about a user, corrected by hand: facts set, corrected and
// deleted by id (needs the service's facts routes).
import { Client } from "convomem";

const client = new Client(process.env.CONVOMEM_URL, process.env.CONVOMEM_API_KEY);
const user = `user-${Date.now()}`;
const { id } = await client.createSession(user);
await client.append(id, [{ role: "user", content: "My email is ana@old.example" }]);

// Each current fact has an id; `version` is the facts' ETag, what `ifMatch` takes.
const { current, version } = await client.facts(user);
for (const fact of current) console.log(`${fact.attribute}: ${fact.value}`);

// Correct one, unless the facts changed since they were read (then: SessionMoved).
// The old value is superseded, kept with its valid time, not lost.
const email = current.find((fact) => fact.attribute === "email");
if (email) await client.updateFact(user, email.id, { value: "ana@new.example", ifMatch: version });

// Set one by hand, then every version with its valid time.
const city = await client.addFact(user, "city", "Porto");
const { history } = await client.facts(user, { history: true });
for (const fact of history ?? []) {
  console.log(`${fact.attribute}=${fact.value} ${fact.current ? "current" : "superseded"}`);
}

// Delete one: it leaves the facts, every context's profile and recall search.
await client.deleteFact(user, city.id);
console.log((await client.facts(user)).current.map((fact) => fact.attribute).join(", "));
