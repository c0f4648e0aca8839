/**
 * `Client`: the memory service's API, one method per route (the Python client's method
 * names in camelCase), everything scoped to the API key's tenant.
 */

import { ChatStream } from "./chat.js";
import { ConfigError, SessionMoved } from "./errors.js";
import {
  type AppendOptions,
  type ChatMessage,
  type ChatOptions,
  type ContextOptions,
  type CreateSessionOptions,
  type FactChanges,
  type FactOptions,
  type PageOptions,
  type SearchOptions,
  factBody,
  idempotencyKey,
  isDict,
  messageList,
  pageOf,
} from "./options.js";
import { type ClientOptions, Transport, count } from "./transport.js";
import type {
  AppendResponse,
  ContextFormat,
  ContextResponse,
  Erased,
  Fact,
  FactsResponse,
  MessageDict,
  Page,
  Readiness,
  SearchResponse,
  Session,
  StoredMessage,
} from "./types.js";
import {
  asObject,
  badAnswer,
  checkId,
  decode,
  errorFor,
  newKey,
  path,
  type WireRequest,
} from "./wire.js";

/**
 * The memory service's API. Answers are the service's JSON; failures are typed errors
 * (`ServiceError` and its subclasses, `TransientError`, `ConfigError`).
 *
 * `retries` repeats a request that is safe to repeat after a transport failure, 429,
 * 502, 503 or 504 (honouring `Retry-After`); every write carries an `Idempotency-Key`,
 * kept across the repeats, so a repeat never writes twice.
 */
export class Client {
  readonly #t: Transport;

  constructor(baseUrl = "http://127.0.0.1:8080", apiKey?: string, options: ClientOptions = {}) {
    this.#t = new Transport(baseUrl, apiKey, options);
  }

  /** The service's base URL (without a trailing slash). */
  get baseUrl(): string {
    return this.#t.baseUrl;
  }

  async #fetch<T>(request: WireRequest, retryable = true): Promise<T> {
    const response = await this.#t.call(request, retryable);
    return decode(response, this.#t.now()) as T;
  }

  async #object<T>(request: WireRequest): Promise<T> {
    return asObject<T>(await this.#fetch(request), `${request.method} ${request.path}`);
  }

  // -- sessions -------------------------------------------------------------------------

  /** `POST /v1/sessions`: the new session (or, for a known `id`, the existing one). */
  async createSession(userId: string, options: CreateSessionOptions = {}): Promise<Session> {
    const body: Record<string, unknown> = {
      user_id: checkId("userId", userId),
      // Made here, not by the service: a repeat after a lost answer finds it (200).
      id: options.id === undefined ? newKey().replaceAll("-", "") : checkId("id", options.id),
    };
    if (options.metadata !== undefined) body["metadata"] = options.metadata;
    if (options.ttlSeconds !== undefined) body["ttl_seconds"] = options.ttlSeconds;
    const headers = { "Idempotency-Key": idempotencyKey(options.idempotencyKey) };
    return this.#object({ method: "POST", path: "/v1/sessions", json: body, headers });
  }

  /** `GET /v1/sessions/{id}` (`NotFound` when this tenant has no such session). */
  async session(sessionId: string): Promise<Session> {
    return this.#object({ method: "GET", path: path("sessions", sessionId) });
  }

  /** One page of `GET /v1/sessions` (of one user with `userId`), newest first. */
  async listSessions(userId?: string | null, options: PageOptions = {}): Promise<Page<Session>> {
    const user = userId === undefined || userId === null ? undefined : checkId("userId", userId);
    return this.#page("/v1/sessions", "sessions", { user_id: user, ...options });
  }

  /** Every session (of `userId`), page after page, as they are needed. */
  async *iterSessions(
    userId?: string | null,
    options: { pageSize?: number } = {},
  ): AsyncGenerator<Session, void, undefined> {
    let cursor: string | undefined;
    do {
      const [items, next] = await this.listSessions(userId, pageOf(cursor, options.pageSize));
      yield* items;
      cursor = next ?? undefined;
    } while (cursor !== undefined);
  }

  /** `DELETE /v1/sessions/{id}`: the session, its log, derived state and recall items. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.#fetch({ method: "DELETE", path: path("sessions", sessionId) });
  }

  // -- messages -------------------------------------------------------------------------

  /**
   * `POST /v1/sessions/{id}/messages`: append messages (all checked before any is
   * written). With `ifMatch`, a session that moved past that seq gives `SessionMoved`
   * (409), or, with `retryConflicts: n`, is re-read and the append sent again up to n
   * times (a refused attempt wrote nothing).
   */
  async append(
    sessionId: string,
    messages: readonly MessageDict[],
    options: AppendOptions = {},
  ): Promise<AppendResponse> {
    const url = path("sessions", sessionId, "messages");
    const body: Record<string, unknown> = { messages: messageList(messages) };
    if (options.format !== undefined) body["format"] = options.format;
    if (options.system !== undefined) body["system"] = options.system;
    let ifMatch = options.ifMatch === undefined ? undefined : count("ifMatch", options.ifMatch);
    const tries = count("retryConflicts", options.retryConflicts ?? 0);
    const base = idempotencyKey(options.idempotencyKey);
    for (let conflicts = 0; ;) {
      // A refused attempt wrote nothing, so each one after a conflict has a key of its
      // own (a service that remembered the 409 under the key would repeat it).
      const headers: Record<string, string> = {
        "Idempotency-Key": conflicts === 0 ? base : `${base}-${conflicts}`,
      };
      if (ifMatch !== undefined) headers["If-Match"] = `"${ifMatch}"`;
      const response = await this.#t.call({ method: "POST", path: url, json: body, headers });
      if (response.status === 409 && ifMatch !== undefined && conflicts < tries) {
        const error = errorFor(response, this.#t.now());
        if (error instanceof SessionMoved) {
          conflicts += 1;
          await this.#t.pause(conflicts); // writers that met stop meeting
          ifMatch = error.actual >= 0 ? error.actual : (await this.session(sessionId)).last_seq;
          continue;
        }
      }
      return asObject(decode(response, this.#t.now()), `POST ${url}`);
    }
  }

  /** One page of `GET /v1/sessions/{id}/messages`: the log, oldest first. */
  async messages(sessionId: string, options: PageOptions = {}): Promise<Page<StoredMessage>> {
    return this.#page(path("sessions", sessionId, "messages"), "messages", { ...options });
  }

  /** The session's whole log, oldest first, one page in memory at a time. */
  async *iterMessages(
    sessionId: string,
    options: { pageSize?: number } = {},
  ): AsyncGenerator<StoredMessage, void, undefined> {
    let cursor: string | undefined;
    do {
      const [items, next] = await this.messages(sessionId, pageOf(cursor, options.pageSize));
      yield* items;
      cursor = next ?? undefined;
    } while (cursor !== undefined);
  }

  /** `GET /v1/sessions/{id}/context`: the context to send now, and its accounting. */
  async context<F extends ContextFormat = "openai">(
    sessionId: string,
    options: ContextOptions<F> = {},
  ): Promise<ContextResponse<F>> {
    const params = {
      format: options.format ?? "openai",
      budget: options.budget,
      query: options.query,
    };
    return this.#object({ method: "GET", path: path("sessions", sessionId, "context"), params });
  }

  // -- users and recall -----------------------------------------------------------------

  /** `POST /v1/recall/search`: the `k` items of the user's sessions best matching `query`. */
  async search(
    userId: string,
    query: string,
    options: SearchOptions = {},
  ): Promise<SearchResponse> {
    const body: Record<string, unknown> = {
      user_id: checkId("userId", userId),
      query,
      k: options.k ?? 10,
    };
    if (options.kinds !== undefined) body["kinds"] = [...options.kinds];
    return this.#object({ method: "POST", path: "/v1/recall/search", json: body });
  }

  /**
   * `GET /v1/users/{id}/facts`: the user's current facts (each with its `id`), and with
   * `{ history: true }` every version (superseded ones with their valid times).
   * `version` is what the writes' `ifMatch` takes.
   */
  async facts(userId: string, options: { history?: boolean } = {}): Promise<FactsResponse> {
    const params = options.history === true ? { history: "true" } : {};
    return this.#object({ method: "GET", path: path("users", userId, "facts"), params });
  }

  /** `GET /v1/users/{id}/facts/{factId}`: one version of a fact, current or not. */
  async fact(userId: string, factId: string): Promise<Fact> {
    return this.#object({ method: "GET", path: path("users", userId, "facts", factId) });
  }

  /**
   * `POST /v1/users/{id}/facts`: set a fact by hand; it supersedes the attribute's
   * current value (the same value again changes nothing). With `ifMatch` (the facts
   * `version` this is based on), facts that moved give `SessionMoved` (`actual`: the
   * version now) and nothing is written.
   */
  async addFact(
    userId: string,
    attribute: string,
    value: string,
    options: FactOptions & { subject?: string } = {},
  ): Promise<Fact> {
    const body = factBody({ attribute, value, subject: options.subject });
    const url = path("users", userId, "facts");
    const answer = await this.#factWrite({ method: "POST", path: url, json: body }, options);
    return asObject(answer, `POST ${url}`);
  }

  /**
   * `PATCH /v1/users/{id}/facts/{factId}`: correct a current fact (what is not given
   * stays); the new version is returned, the old one is superseded, not lost
   * (`facts(userId, { history: true })` lists it).
   */
  async updateFact(userId: string, factId: string, changes: FactChanges): Promise<Fact> {
    const body = factBody({
      value: changes.value,
      attribute: changes.attribute,
      subject: changes.subject,
    });
    const url = path("users", userId, "facts", factId);
    const answer = await this.#factWrite({ method: "PATCH", path: url, json: body }, changes);
    return asObject(answer, `PATCH ${url}`);
  }

  /** `DELETE /v1/users/{id}/facts/{factId}`: a version of a fact and its recall item. */
  async deleteFact(userId: string, factId: string, options: FactOptions = {}): Promise<void> {
    const url = path("users", userId, "facts", factId);
    await this.#factWrite({ method: "DELETE", path: url }, options);
  }

  /** A fact write: safe to repeat (the same value or correction again changes nothing,
   * and it carries an `Idempotency-Key`), so it is retried like a read. */
  async #factWrite(request: Omit<WireRequest, "headers">, options: FactOptions): Promise<unknown> {
    const headers: Record<string, string> = {
      "Idempotency-Key": idempotencyKey(options.idempotencyKey),
    };
    if (options.ifMatch !== undefined) {
      headers["If-Match"] = `"${count("ifMatch", options.ifMatch)}"`;
    }
    return this.#fetch({ ...request, headers });
  }

  /** `DELETE /v1/users/{id}`: the user's sessions, summaries, facts and vectors. */
  async eraseUser(userId: string): Promise<Erased> {
    return this.#object({ method: "DELETE", path: path("users", userId) });
  }

  // -- chat -----------------------------------------------------------------------------

  /**
   * `POST /v1/sessions/{id}/chat`: one turn with the service's model. `input` is the
   * user's text, or `{message, format}` (a dict; its `id` makes the turn idempotent).
   * Iterate the result with `for await` for the reply's text pieces; a failed model
   * throws `ServiceUnavailable` (nothing of the reply was stored). Only a 429 is
   * retried (the service refused before doing anything).
   */
  chat(sessionId: string, input: string | ChatMessage, options: ChatOptions = {}): ChatStream {
    const body: Record<string, unknown> = {};
    if (typeof input === "string") {
      if (!input.trim()) throw new ConfigError("content", input, "the user's text is empty");
      body["content"] = input;
    } else if (input !== null && typeof input === "object" && isDict(input.message)) {
      body["message"] = input.message;
      if (input.format !== undefined) body["format"] = input.format;
    } else {
      throw new ConfigError("input", input, "give the user's text or {message: {...}}");
    }
    if (options.budget !== undefined) body["budget"] = options.budget;
    if (options.query !== undefined) body["query"] = options.query;
    const request: WireRequest = {
      method: "POST",
      path: path("sessions", sessionId, "chat"),
      json: body,
      headers: { Accept: "text/event-stream" },
    };
    return new ChatStream(this.#t, request, options.signal);
  }

  // -- operations -----------------------------------------------------------------------

  /** `GET /healthz`: the process answers. */
  async health(): Promise<{ status: string }> {
    return this.#object({ method: "GET", path: "/healthz" });
  }

  /** `GET /readyz` (`ServiceUnavailable` when a store is unreachable; not retried). */
  async ready(): Promise<Readiness> {
    return asObject(await this.#fetch({ method: "GET", path: "/readyz" }, false), "GET /readyz");
  }

  /** `GET /metrics`: the Prometheus text. */
  async metrics(): Promise<string> {
    const response = await this.#t.call({ method: "GET", path: "/metrics" });
    if (response.status < 200 || response.status >= 300) throw errorFor(response, this.#t.now());
    return response.body;
  }

  async #page<T>(
    url: string,
    key: string,
    params: Record<string, string | number | undefined>,
  ): Promise<Page<T>> {
    const body = await this.#object<Record<string, unknown>>({ method: "GET", path: url, params });
    const items = body[key];
    if (!Array.isArray(items)) throw badAnswer(`GET ${url}`, `no list ${JSON.stringify(key)}`);
    const next = body["next_cursor"];
    return [items as T[], typeof next === "string" && next ? next : null];
  }
}
