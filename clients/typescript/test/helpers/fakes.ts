/**
 * Local HTTP servers on 127.0.0.1 for the tests:
 *
 * - `scripted(script)`: answers request i with `script[i]` (a status, headers and body;
 *   a body streamed in pieces, `"<cut>"` ending it unfinished; `"reset"` to drop the
 *   connection at once; `"hang"` to never answer), recording every request. It tests the client's transport behaviour (retries, `Retry-After`,
 *   idempotency keys, timeouts) deterministically; the API's behaviour is tested
 *   against the real `convomem serve`.
 * - `fakeUpstream()`: an OpenAI-compatible chat completions server that streams its
 *   reply (the paid model API the chat route calls); `mode` makes it fail.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Recorded {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export type Answer =
  | "reset"
  | "hang"
  | { status: number; headers?: Record<string, string>; body?: unknown; pieces?: string[] };

export interface Scripted {
  readonly url: string;
  readonly requests: Recorded[];
  close(): Promise<void>;
}

async function bodyOf(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function shut(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((done) => server.close(() => done()));
}

/** A server answering its requests from `script`, in order (the last answer repeats). */
export async function scripted(script: Answer[]): Promise<Scripted> {
  const requests: Recorded[] = [];
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const body = await bodyOf(request);
    requests.push({
      method: request.method ?? "",
      url: request.url ?? "",
      headers: request.headers,
      body,
    });
    const answer = script[Math.min(requests.length - 1, script.length - 1)];
    if (answer === undefined || answer === "reset") {
      request.socket.destroy();
      return;
    }
    if (answer === "hang") return; // never answers: the client's deadline must end it
    const text =
      answer.body === undefined
        ? ""
        : typeof answer.body === "string"
          ? answer.body
          : JSON.stringify(answer.body);
    const headers = { "Content-Type": "application/json", ...answer.headers };
    if (answer.pieces === undefined) {
      response.writeHead(answer.status, { ...headers, "Content-Length": Buffer.byteLength(text) });
      response.end(text);
      return;
    }
    response.writeHead(answer.status, headers);
    for (const piece of answer.pieces) {
      if (piece === "<cut>") {
        request.socket.end(); // the body ends unfinished (no last chunk), data delivered first
        return;
      }
      await new Promise((done) => response.write(piece, done)); // flushed before a reset
    }
    response.end();
  });
  const url = await listen(server);
  return { url, requests, close: () => shut(server) };
}

export interface FakeUpstream {
  readonly url: string;
  /** What the next replies are. */
  reply: string;
  pieces: number;
  /** `null`: a whole reply; `"status"`: 500 at once; `"cut"`: the connection closed
   * after the first delta; `"hold"`: the first delta, then nothing until `release()`. */
  mode: null | "status" | "cut" | "hold";
  readonly requests: Record<string, unknown>[];
  /** Resolves when a held stream's client went away (the connection closed). */
  closed: Promise<void>;
  release(): void;
  close(): Promise<void>;
}

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  const body = {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 0,
    model: "fake",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

/** The reply cut into `pieces` nearly equal parts (the stream's deltas). */
export function deltasOf(reply: string, pieces: number): string[] {
  const n = Math.max(1, Math.min(pieces, reply.length));
  const size = Math.ceil(reply.length / n);
  const out: string[] = [];
  for (let i = 0; i < reply.length; i += size) out.push(reply.slice(i, i + size));
  return out;
}

/** An OpenAI-compatible streaming chat completions server (see the module comment). */
export async function fakeUpstream(
  reply = "It left the depot on Monday.",
  pieces = 3,
): Promise<FakeUpstream> {
  let release: () => void = () => undefined;
  let closed: () => void = () => undefined;
  const fake: FakeUpstream = {
    url: "",
    reply,
    pieces,
    mode: null,
    requests: [],
    closed: Promise.resolve(),
    release: () => release(),
    close: async () => undefined,
  };
  const server = createServer(async (request, response) => {
    const body = JSON.parse((await bodyOf(request)) || "{}") as Record<string, unknown>;
    fake.requests.push(body);
    if (!request.url?.endsWith("/chat/completions") || fake.mode === "status") {
      const text = JSON.stringify({ error: { message: "fake failure", type: "server" } });
      response.writeHead(fake.mode === "status" ? 500 : 404, {
        "Content-Type": "application/json",
      });
      response.end(text);
      return;
    }
    response.writeHead(200, { "Content-Type": "text/event-stream", Connection: "close" });
    response.write(chunk({ role: "assistant", content: "" }));
    const deltas = deltasOf(fake.reply, fake.pieces);
    for (const [i, piece] of deltas.entries()) {
      response.write(chunk({ content: piece }));
      if (i === 0 && fake.mode === "cut") {
        request.socket.destroy();
        return;
      }
      if (i === 0 && fake.mode === "hold") {
        fake.closed = new Promise((done) => (closed = done));
        response.once("close", () => closed());
        await new Promise<void>((done) => (release = done));
        if (response.destroyed) return;
      }
    }
    response.write(chunk({}, "stop"));
    const usage = {
      prompt_tokens: 11,
      completion_tokens: deltas.length,
      total_tokens: 11 + deltas.length,
    };
    response.write(
      `data: ${JSON.stringify({ id: "chatcmpl-fake", choices: [], usage, model: "fake" })}\n\n`,
    );
    response.end("data: [DONE]\n\n");
  });
  const url = await listen(server);
  Object.assign(fake, { url: `${url}/v1`, close: () => shut(server) });
  return fake;
}
