/**
 * The event-stream parser against a whole-stream oracle: random streams (every line end,
 * comments, fields with and without their space, unknown fields, ids, multi-byte text)
 * cut into random byte chunks, decoded as the chat stream decodes them, give exactly the
 * events of parsing the whole text at once.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { EventParser, type SseEvent } from "convomem";

/** A seeded PRNG (mulberry32): a failure is reproduced by its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(r: () => number, items: readonly T[]): T =>
  items[Math.floor(r() * items.length)] as T;

/** The oracle: the whole stream split into lines at once, then the spec's steps. */
function oracle(stream: string): SseEvent[] {
  const text = stream.startsWith("\uFEFF") ? stream.slice(1) : stream;
  const lines = text.split(/\r\n|\r|\n/);
  lines.pop(); // the unterminated rest is not a line
  const events: SseEvent[] = [];
  let type = "";
  let data: string[] = [];
  let id: string | null = null;
  for (const line of lines) {
    if (line === "") {
      if (data.length > 0) events.push({ event: type || "message", data: data.join("\n"), id });
      type = "";
      data = [];
      continue;
    }
    if (line[0] === ":") continue;
    const m = /^([^:]*)(?::(.*))?$/s.exec(line) as RegExpExecArray;
    const name = m[1] as string;
    let value = m[2] ?? "";
    if (value[0] === " ") value = value.slice(1);
    if (name === "data") data.push(value);
    if (name === "event") type = value;
    if (name === "id" && !value.includes("\0")) id = value;
  }
  return events;
}

const WORDS = [
  "hello",
  "wörld",
  "日本語",
  "🙂 emoji",
  "",
  " lead",
  "a:b",
  '{"content":"x"}',
  "\0nul",
  "data",
];

/** A random stream: fields, comments and blank lines with random line ends. */
function randomStream(r: () => number): string {
  const end = (): string => pick(r, ["\n", "\r", "\r\n"]);
  let out = r() < 0.1 ? "\uFEFF" : "";
  const lines = Math.floor(r() * 30);
  for (let i = 0; i < lines; i++) {
    const kind = r();
    if (kind < 0.35) out += `data:${r() < 0.7 ? " " : ""}${pick(r, WORDS)}`;
    else if (kind < 0.5) out += `event: ${pick(r, ["delta", "done", "error", ""])}`;
    else if (kind < 0.58) out += `id: ${pick(r, WORDS)}`;
    else if (kind < 0.65) out += `: comment ${pick(r, WORDS)}`;
    else if (kind < 0.7) out += pick(r, ["data", "retry: 10", "unknown: x", "event"]);
    // else: a blank line, which dispatches
    out += end();
  }
  if (r() < 0.3) out += `data: unterminated ${pick(r, WORDS)}`;
  return out;
}

/** The stream's UTF-8 bytes cut at random points (inside characters and `\r\n` too). */
function chunked(r: () => number, bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    const size = r() < 0.5 ? 1 + Math.floor(r() * 3) : 1 + Math.floor(r() * 40);
    out.push(bytes.subarray(at, at + size));
    at += size;
  }
  if (r() < 0.2) out.splice(Math.floor(r() * (out.length + 1)), 0, new Uint8Array(0));
  return out;
}

function parseChunks(chunks: Uint8Array[]): SseEvent[] {
  const decoder = new TextDecoder();
  const parser = new EventParser();
  const events: SseEvent[] = [];
  for (const c of chunks) events.push(...parser.feed(decoder.decode(c, { stream: true })));
  events.push(...parser.feed(decoder.decode()));
  events.push(...parser.close());
  return events;
}

test("any chunking of any stream gives the whole stream's events", () => {
  const encoder = new TextEncoder();
  let checked = 0;
  for (let seed = 1; seed <= 400; seed++) {
    const r = rng(seed);
    const stream = randomStream(r);
    const expected = oracle(stream);
    const bytes = encoder.encode(stream);
    for (let cut = 0; cut < 8; cut++) {
      assert.deepEqual(parseChunks(chunked(r, bytes)), expected, `seed ${seed}, chunking ${cut}`);
      checked++;
    }
  }
  assert.equal(checked, 3200);
});

test("a \\r\\n split across two chunks is one line end, not two", () => {
  const parser = new EventParser();
  assert.deepEqual(parser.feed("data: a\r"), []);
  assert.deepEqual(parser.feed("\ndata: b\r"), []);
  // \r then \n: had the \n counted as a second line end, "a" would have been dispatched.
  assert.deepEqual(parser.feed("\n\r"), [{ event: "message", data: "a\nb", id: null }]);
  assert.deepEqual(parser.feed("\n"), []);
});

test("the spec's examples: data lines joined, the type reset, the id kept", () => {
  const parser = new EventParser();
  const events = parser.feed(
    'event: delta\ndata: {"content":"Hi"}\n\ndata: one\ndata:two\nid: 7\n\n: ping\n\nevent: x\n\ndata\n\n',
  );
  assert.deepEqual(events, [
    { event: "delta", data: '{"content":"Hi"}', id: null },
    { event: "message", data: "one\ntwo", id: "7" },
    { event: "message", data: "", id: "7" }, // an event without data is dropped, "data" alone is ""
  ]);
});

test("the unterminated last event is discarded at the end of the stream", () => {
  const parser = new EventParser();
  assert.deepEqual(parser.feed("data: cut"), []);
  assert.deepEqual(parser.close(), []);
  assert.deepEqual(parser.feed("data: next\n\n"), [{ event: "message", data: "next", id: null }]);
});

test("one long line fed a character at a time is one event", () => {
  const parser = new EventParser();
  const line = "x".repeat(200_000);
  for (const ch of `data: ${line}`) parser.feed(ch);
  assert.deepEqual(parser.feed("\n\n"), [{ event: "message", data: line, id: null }]);
});
