/**
 * The examples run against a real `convomem serve` (its model a local fake), and every
 * TypeScript block of the READMEs and of docs/typescript.md is a part of an example, so
 * what the docs show is compiled by tsc and run here.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { type FakeUpstream, fakeUpstream } from "./helpers/fakes.js";
import { type Served, serve } from "./helpers/serve.js";

const run = promisify(execFile);
const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const REPO = join(PACKAGE, "..", "..");

let fake: FakeUpstream;
let served: Served;

before(async () => {
  fake = await fakeUpstream("The week of May 12th is the cheapest.", 4);
  served = await serve(["--rate", "0", "--upstream-url", fake.url, "--upstream-model", "fake"]);
});
after(async () => {
  await served?.stop();
  await fake?.close();
});

async function example(name: string): Promise<string> {
  const env = { ...process.env, CONVOMEM_URL: served.url, CONVOMEM_API_KEY: served.keys["acme"] };
  const script = join(PACKAGE, "build", "examples", `${name}.js`);
  const { stdout } = await run(process.execPath, [script], { env, timeout: 60_000 });
  return stdout;
}

test("quickstart: a session, its context and a streamed chat turn", async () => {
  const out = await example("quickstart");
  assert.match(out, /^3 messages, \d+ of 4000 tokens\n/);
  assert.match(out, /The week of May 12th is the cheapest\.\n\(stored as \S+, \d+ tokens\)\n$/);
});

test("writes: an idempotent append and the two ways of meeting another writer", async () => {
  const out = await example("writes");
  assert.equal(out, "true\nthe session moved on to seq 2; nothing was written\n3\n");
});

test("users: recall, facts, paging, a refused input and erasure", async () => {
  const lines = (await example("users")).trimEnd().split("\n");
  assert.match(lines[0] ?? "", /^\d\.\d{3} \[\w+\] .*peanuts/);
  assert.ok(
    lines.some((l) => /^\S+ 1 user$/.test(l)),
    lines.join("\n"),
  );
  assert.ok(lines.includes('refused: messages[0].role = "robot"'), lines.join("\n"));
  assert.match(lines.at(-2) ?? "", /^erased 1 session\(s\), [1-9]\d* recall item\(s\)$/);
  assert.equal(lines.at(-1), "gone");
});

test("facts: read, corrected with If-Match, set by hand, listed with history, deleted", async () => {
  const out = await example("facts");
  assert.equal(
    out,
    [
      "email: ana@old.example",
      "email=ana@old.example superseded",
      "email=ana@new.example current",
      "city=Porto current",
      "email",
      "",
    ].join("\n"),
  );
});

/** The ```ts blocks of a Markdown file. */
function blocks(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(/^```ts\n(.*?)^```$/gms)].map(
    (m) => m[1] as string,
  );
}

test("every TypeScript block of the docs is part of an example that runs above", () => {
  const examples = readdirSync(join(PACKAGE, "examples"))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => readFileSync(join(PACKAGE, "examples", f), "utf8"));
  const docs = [join(PACKAGE, "README.md"), join(REPO, "docs", "typescript.md")];
  let checked = 0;
  for (const doc of docs) {
    const found = blocks(doc);
    assert.ok(found.length >= 3, `${doc}: only ${found.length} ts blocks`);
    for (const block of found) {
      assert.ok(
        examples.some((e) => e.includes(block)),
        `${doc}: a block in no example:\n${block}`,
      );
      checked++;
    }
  }
  assert.ok(checked >= 6);
});
