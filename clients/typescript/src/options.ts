/**
 * The options of `Client`'s methods, and the checks of what a caller passes (each
 * refusal a `ConfigError` naming the field, before anything is sent).
 */

import { ConfigError } from "./errors.js";
import { headerValue } from "./transport.js";
import type { ContextFormat, MessageDict, MessageFormat } from "./types.js";
import { newKey } from "./wire.js";

/** What `createSession` may set besides the owner. */
export interface CreateSessionOptions {
  /** The session's id; when left out the client makes one, so a retry cannot create two. */
  id?: string;
  metadata?: Record<string, unknown>;
  /** The session expires this long after its last write. */
  ttlSeconds?: number;
  idempotencyKey?: string;
}

/** How `append` sends its messages. */
export interface AppendOptions {
  /** The messages' format: `"openai"` (the default), `"anthropic"` or `"convomem"`. */
  format?: MessageFormat;
  /** Anthropic's top-level system prompt (with `format: "anthropic"`). */
  system?: string | Record<string, unknown>[];
  /** The seq this writer saw: a session that moved past it answers `SessionMoved`. */
  ifMatch?: number;
  /** With `ifMatch`: re-read the session and send again, up to this many times. */
  retryConflicts?: number;
  /** The write's `Idempotency-Key` (default: a new UUID, kept across the retries). */
  idempotencyKey?: string;
}

/** One page of a listing. */
export interface PageOptions {
  cursor?: string;
  limit?: number;
}

/** What `context` assembles. */
export interface ContextOptions<F extends ContextFormat> {
  format?: F;
  /** A smaller budget for this request only. */
  budget?: number;
  /** What recall looks for (the user's past sessions). */
  query?: string;
}

/** What a recall search returns. */
export interface SearchOptions {
  /** How many hits (default 10, at most 100). */
  k?: number;
  /** `"message"`, `"summary"`, `"fact"`... */
  kinds?: string[];
}

/** A chat turn's user message as a dict (its `id` makes the turn idempotent). */
export interface ChatMessage {
  message: MessageDict;
  format?: MessageFormat;
}

/** What shapes one chat turn. */
export interface ChatOptions {
  /** A smaller budget for this turn's context. */
  budget?: number;
  /** What recall looks for (default: the user's own words). */
  query?: string;
  /** Aborting it closes the stream (nothing of the reply is stored). */
  signal?: AbortSignal;
}

/** What a fact write may say besides the fact. */
export interface FactOptions {
  /** The facts `version` the write is based on: facts that moved answer `SessionMoved`. */
  ifMatch?: number;
  /** The write's `Idempotency-Key` (default: a new UUID, kept across the retries). */
  idempotencyKey?: string;
}

/** A correction of a fact: what is given changes, the rest stays. */
export interface FactChanges extends FactOptions {
  value?: string;
  attribute?: string;
  /** Whom the fact is about (`"user"` unless set otherwise). */
  subject?: string;
}

/** The body of a fact write: the fields given, each a string. */
export function factBody(fields: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (typeof value !== "string") throw new ConfigError(name, value, "must be a string");
    out[name] = value;
  }
  return out;
}

/** A plain object: not null, not an array. */
export function isDict(value: unknown): value is MessageDict {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** `messages` when it is an array of objects. */
export function messageList(messages: unknown): MessageDict[] {
  if (!Array.isArray(messages)) {
    throw new ConfigError("messages", messages, "must be an array of messages, not one");
  }
  messages.forEach((m: unknown, i) => {
    if (!isDict(m)) throw new ConfigError(`messages[${i}]`, m, "must be a message object");
  });
  return messages as MessageDict[];
}

/** The caller's `Idempotency-Key` when a header can carry it, else a new one. */
export function idempotencyKey(given: string | undefined): string {
  return given === undefined ? newKey() : headerValue("idempotencyKey", given, 200);
}

/** The options of one page (left out: the service's defaults). */
export function pageOf(cursor: string | undefined, limit: number | undefined): PageOptions {
  const out: PageOptions = {};
  if (cursor !== undefined) out.cursor = cursor;
  if (limit !== undefined) out.limit = limit;
  return out;
}
