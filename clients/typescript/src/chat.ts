/**
 * One chat turn's reply, streamed: `POST /v1/sessions/{id}/chat` answers server-sent
 * events: `delta` (`{"content": "..."}`) while the model writes, then `done` (the stored
 * reply's id, its seq and the usage) or `error` (a problem document: nothing of the
 * reply was stored). The twin of the Python client's `ChatStream` / `ChatReply`.
 */

import { ConfigError, ServiceUnavailable, type Problem } from "./errors.js";
import { EventParser, type SseEvent } from "./sse.js";
import { Deadline, type Transport } from "./transport.js";
import type { ChatDone, ChatUsage } from "./types.js";
import { errorFor, type WireRequest } from "./wire.js";

/**
 * Iterate it (once) with `for await` for the reply's text pieces as the model writes
 * them; then `text`, `messageId`, `usage` and `done` describe the stored reply. The
 * request is sent when the iteration starts; leaving the loop early (`break`, a throw)
 * or aborting `signal` closes the stream, and the service then stores nothing of the
 * reply.
 */
export class ChatStream implements AsyncIterable<string> {
  readonly #transport: Transport;
  readonly #request: WireRequest;
  readonly #signal: AbortSignal | undefined;
  readonly #parts: string[] = [];
  #started = false;
  /** The `done` event's data, once the stream delivered it. */
  done: ChatDone | null = null;

  constructor(transport: Transport, request: WireRequest, signal?: AbortSignal) {
    this.#transport = transport;
    this.#request = request;
    this.#signal = signal;
  }

  /** The reply's text received so far (the whole reply once iterated). */
  get text(): string {
    return this.#parts.join("");
  }

  /** The id of the stored assistant message (once done). */
  get messageId(): string | null {
    return typeof this.done?.message_id === "string" ? this.done.message_id : null;
  }

  /** The turn's token usage as the service reported it (once done). */
  get usage(): ChatUsage | null {
    const usage = this.done?.usage;
    return usage !== null && typeof usage === "object" ? usage : null;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string, void, undefined> {
    if (this.#started) {
      throw new ConfigError("ChatStream", "iterated again", "a chat stream is iterated once");
    }
    this.#started = true;
    const what = `${this.#request.method} ${this.#request.path}`;
    const deadline = new Deadline(this.#transport.timeoutMs, this.#signal);
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    try {
      const response = await this.#transport.open(this.#request, deadline);
      if (response.body === null) throw this.#cut();
      reader = response.body.getReader();
      const decoder = new TextDecoder();
      const parser = new EventParser();
      for (;;) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        deadline.reset(); // the service's silence is timed, not the time the caller takes
        try {
          chunk = await reader.read();
        } catch (e) {
          throw deadline.failure(e, what);
        }
        deadline.pause();
        const text = chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
        for (const event of parser.feed(text)) {
          const delta = this.#onEvent(event);
          if (delta !== null) yield delta;
        }
        if (chunk.done) break;
      }
      parser.close();
      if (this.done === null) throw this.#cut();
    } finally {
      deadline.clear();
      // Left early (break, a throw): close the connection; the service stores nothing.
      if (reader !== undefined && this.done === null) await reader.cancel().catch(() => undefined);
    }
  }

  /** Take one event: a delta's text is returned; an error event is thrown. */
  #onEvent(event: SseEvent): string | null {
    let data: unknown = null;
    try {
      data = JSON.parse(event.data);
    } catch {
      data = null;
    }
    const object = data !== null && typeof data === "object" && !Array.isArray(data);
    if (event.event === "delta") {
      const text = object ? (data as { content?: unknown }).content : undefined;
      if (typeof text === "string" && text) {
        this.#parts.push(text);
        return text;
      }
      return null;
    }
    if (event.event === "done") {
      this.done = (object ? data : {}) as ChatDone;
      return null;
    }
    if (event.event === "error") {
      const problem: Problem = object ? (data as Problem) : { detail: event.data };
      const status = problem.status;
      const code = typeof status === "number" && status >= 400 && status < 600 ? status : 502;
      const body = JSON.stringify(problem);
      throw errorFor({ status: code, headers: new Headers(), body }, this.#transport.now());
    }
    return null;
  }

  #cut(): ServiceUnavailable {
    return new ServiceUnavailable(502, {
      title: "chat stream cut",
      detail: "the chat stream ended before its done event; the reply was not stored",
    });
  }
}
