/**
 * Server-sent events: an incremental parser of the event-stream format (the WHATWG
 * rules), fed whatever text chunks the transport delivers. An event may be split
 * anywhere, even inside a `\r\n`; the result is the same as parsing the whole stream at
 * once. The twin of the Python `convomem._sse.EventParser`.
 */

/** One dispatched event: its type (`"message"` when the stream names none), its data
 * (the `data:` lines joined by newlines) and the last event id seen, if any. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  readonly id: string | null;
}

const LINE_END = /\r\n|\r|\n/;

/** Feed text chunks; get the events they complete. */
export class EventParser {
  #buffer = "";
  #pendingCr = false;
  #started = false;
  #event = "";
  #data: string[] = [];
  #id: string | null = null;

  /** Parse `chunk` (any part of the stream) and return the events it completes. */
  feed(chunk: string): SseEvent[] {
    if (!chunk) return [];
    if (!this.#started) {
      this.#started = true;
      if (chunk.startsWith("\uFEFF")) chunk = chunk.slice(1); // a leading BOM is not data
    }
    if (this.#pendingCr && chunk.startsWith("\n")) chunk = chunk.slice(1); // \r|\n split
    this.#pendingCr = chunk.endsWith("\r");
    if (!chunk) return [];
    // Only the new chunk is scanned (the buffer holds no line end): linear in the stream.
    const lines = chunk.split(LINE_END);
    lines[0] = this.#buffer + lines[0];
    this.#buffer = lines.pop() ?? "";
    const events: SseEvent[] = [];
    for (const line of lines) {
      const event = this.#line(line);
      if (event !== null) events.push(event);
    }
    return events;
  }

  /** The end of the stream: an unterminated last event is discarded, as the spec says. */
  close(): SseEvent[] {
    this.#buffer = "";
    this.#pendingCr = false;
    this.#event = "";
    this.#data = [];
    return [];
  }

  #line(line: string): SseEvent | null {
    if (line === "") {
      if (this.#data.length === 0) {
        this.#event = "";
        return null;
      }
      const event = { event: this.#event || "message", data: this.#data.join("\n"), id: this.#id };
      this.#event = "";
      this.#data = [];
      return event;
    }
    if (line.startsWith(":")) return null; // a comment
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.#data.push(value);
    else if (name === "event") this.#event = value;
    else if (name === "id" && !value.includes("\0")) this.#id = value;
    return null;
  }
}
