/**
 * The service's answers, as the JSON it sends (snake_case keys, as in its OpenAPI
 * document and the Python client's dicts). Types only: nothing here exists at run time.
 */

/** A message as a provider writes it (an OpenAI Chat or Anthropic Messages dict), or
 * convomem's own `Message.to_dict()`; an `id` key is kept as the message's id. */
export type MessageDict = Readonly<Record<string, unknown>>;

/** The format of messages sent: OpenAI Chat (the default), Anthropic Messages, or
 * convomem's own lossless dicts. */
export type MessageFormat = "openai" | "anthropic" | "convomem";

/** The format a context is rendered in. */
export type ContextFormat = "openai" | "anthropic";

/** One page of a listing: its items and the cursor of the next page (`null`: the end). */
export type Page<T> = readonly [items: T[], nextCursor: string | null];

/** A session: who owns it, what it holds, and its newest seq (also its `ETag`). */
export interface Session {
  id: string;
  user_id: string | null;
  metadata: Record<string, unknown>;
  created_at: number;
  updated_at: number;
  expires_at: number | null;
  ttl_seconds: number | null;
  message_count: number;
  last_seq: number;
}

/** The answer of an append: the session's newest seq and each message's id. */
export interface AppendResponse {
  session_id: string;
  last_seq: number;
  messages: { id: string; role: string }[];
}

/** A message of the log: `Message.to_dict()` plus its `seq`. */
export interface StoredMessage {
  seq: number;
  id: string;
  role: string;
  content: string | Record<string, unknown>[];
  tokens?: number;
  name?: string;
  metadata?: Record<string, unknown>;
  created_at?: number;
  priority?: number;
}

/** The summary standing for the evicted messages. */
export interface SummaryInfo {
  text: string;
  tokens: number;
  messages: number;
  degraded: boolean;
}

/** Where every message of the log is, and why. */
export interface Accounting {
  budget: number;
  tokens: number;
  fits: boolean;
  log_messages: number;
  /** Ids of the log's messages sent, oldest first. */
  kept: string[];
  summarized: number;
  omitted: number;
  waiting: number;
  compactions: number;
  summary: SummaryInfo | null;
  recalled: Record<string, unknown>[];
  /** `ok`, `failed`, `timeout`, `open` (breaker) or `off`. */
  recall_status: string;
  facts: Record<string, unknown> | null;
  split: Record<string, number>;
  why: Record<string, string>;
}

/** Anthropic's request shape: the system prompt apart from the messages. */
export interface AnthropicContext {
  system?: unknown;
  messages: Record<string, unknown>[];
}

/** The context to send now, in `format`, with its accounting. */
export interface ContextResponse<F extends ContextFormat = ContextFormat> {
  format: F;
  context: F extends "anthropic" ? AnthropicContext : Record<string, unknown>[];
  accounting: Accounting;
}

/** One recall hit of a user's past sessions. */
export interface SearchHit {
  message_id: string;
  session_id: string;
  score: number;
  text: string;
  /** `message`, `summary`, `fact`... */
  kind: string;
  seq: number | null;
  created_at: number;
  lexical: number | null;
  similarity: number | null;
}

/** The answer of a recall search. */
export interface SearchResponse {
  hits: SearchHit[];
}

/** One version of a long-term fact about a user, with its valid time. */
export interface Fact {
  /** Addresses this version (`fact`, `updateFact`, `deleteFact`). */
  id: string;
  subject: string;
  attribute: string;
  value: string;
  statement: string;
  /** False once a newer value superseded it (`valid_to` says when). */
  current: boolean;
  source_role: string | null;
  session_id: string | null;
  /** The message it was read in, or `manual:<key id>`. */
  message_id: string | null;
  seq: number | null;
  valid_from: number | null;
  valid_to: number | null;
  /** Set by hand through the API, not read in a message. */
  manual: boolean;
  /** The id of the API key that set it by hand. */
  set_by: string | null;
}

/** A user's facts: the current value of each, and with `history` every version. */
export interface FactsResponse {
  user_id: string;
  /** The facts' version (their `ETag`): what a write's `ifMatch` takes. */
  version: number;
  current: Fact[];
  /** Every version, oldest first per attribute (`null` unless asked for). */
  history: Fact[] | null;
}

/** What erasing a user removed. */
export interface Erased {
  user_id: string;
  sessions: number;
  items: number;
}

/** The chat stream's last event: the stored reply and the turn's usage. */
export interface ChatDone {
  message_id: string;
  seq: number;
  user_message_id: string;
  finish_reason: string | null;
  usage: ChatUsage;
}

/** Token usage of a chat turn (the upstream's, else the session tokenizer's counts). */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** `GET /readyz`: every store answers. */
export interface Readiness {
  status: string;
  checks: Record<string, string>;
}
