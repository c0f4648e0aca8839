/**
 * The one place the client does I/O: `fetch` with a deadline, and the retries.
 *
 * A request that is safe to repeat (reads, deletes, and writes carrying an
 * `Idempotency-Key`, which every write of this client does) is repeated after a
 * transport failure, 429, 502, 503 or 504, up to `retries` times. The pause honours
 * `Retry-After` (seconds or an HTTP date); a server asking for longer than
 * `maxRetryWaitMs` is not retried (its error, with `retryAfter`, is thrown at once),
 * and without the header the pause is a full-jitter exponential backoff. The sleep and
 * the clock are injectable, so the tests wait no wall-clock time.
 */

import { ConfigError, ConvomemError, TransientError } from "./errors.js";
import { VERSION } from "./version.js";
import { errorFor, query, retryAfter, type WireRequest, type WireResponse } from "./wire.js";

/** How a `Client` talks to the service. Every option has a default. */
export interface ClientOptions {
  /** Repeats of a request that is safe to repeat after a transient failure (default 2). */
  retries?: number;
  /** Milliseconds a request may take; a chat stream: between two chunks (default 30000). */
  timeoutMs?: number;
  /** The longest `Retry-After` pause waited before a retry, in ms (default 5000). */
  maxRetryWaitMs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /** How a retry waits `ms` milliseconds (default: a timer). */
  sleep?: (ms: number) => Promise<void>;
  /** The clock, in ms since the epoch, that `Retry-After` dates are read against. */
  now?: () => number;
  /** The source of the backoff's jitter, uniform in [0, 1) (default: `Math.random`). */
  random?: () => number;
}

/** The statuses worth repeating a request for. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** Full jitter: uniform in `[0, min(cap, base * 2**attempt)]` milliseconds. */
export function backoffMs(
  attempt: number,
  random: () => number,
  baseMs = 50,
  capMs = 2000,
): number {
  return random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
}

const defaultSleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/**
 * An abort signal that fires when `ms` pass without `reset()`, or when the caller's own
 * signal fires; `timedOut` tells the two apart.
 */
export class Deadline {
  readonly #controller = new AbortController();
  readonly #ms: number;
  readonly #outer: AbortSignal | undefined;
  readonly #onOuter = (): void => this.#controller.abort(this.#outer?.reason);
  #timer: ReturnType<typeof setTimeout> | undefined;
  timedOut = false;

  constructor(ms: number, outer?: AbortSignal) {
    this.#ms = ms;
    this.#outer = outer;
    if (outer?.aborted) this.#controller.abort(outer.reason);
    else outer?.addEventListener("abort", this.#onOuter, { once: true });
    this.reset();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Start the wait again (a chunk is awaited). */
  reset(): void {
    this.pause();
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.#controller.abort(new TransientError(`no answer within ${this.#ms} ms`));
    }, this.#ms);
  }

  /** Stop the wait (the caller's signal still counts): the time is the reader's. */
  pause(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Stop the timer and forget the caller's signal. */
  clear(): void {
    this.pause();
    this.#outer?.removeEventListener("abort", this.#onOuter);
  }

  /** The error a failed `fetch` or body read is thrown as. */
  failure(e: unknown, what: string): unknown {
    if (this.#outer?.aborted) return this.#outer.reason ?? e; // the caller's own abort
    if (e instanceof ConvomemError) return e;
    if (this.timedOut) return new TransientError(`${what}: no answer within ${this.#ms} ms`);
    const cause = (e as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
    const why = cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
    return new TransientError(`${what}: ${String(why)}`, { cause: e });
  }
}

/** Requests to one service with one key (see the module comment). */
export class Transport {
  readonly baseUrl: string;
  readonly retries: number;
  readonly timeoutMs: number;
  readonly now: () => number;
  readonly #apiKey: string | undefined;
  readonly #maxWaitMs: number;
  readonly #fetch: typeof fetch;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #random: () => number;

  constructor(baseUrl: string, apiKey: string | undefined, options: ClientOptions) {
    if (typeof baseUrl !== "string" || !/^https?:\/\/[^/]/.test(baseUrl)) {
      throw new ConfigError("baseUrl", baseUrl, "must be an http:// or https:// URL");
    }
    if (apiKey !== undefined) headerValue("apiKey", apiKey);
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.retries = count("retries", options.retries ?? 2);
    this.timeoutMs = positive("timeoutMs", options.timeoutMs ?? 30_000);
    this.#maxWaitMs = count("maxRetryWaitMs", options.maxRetryWaitMs ?? 5_000);
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new ConfigError("fetch", f, "no fetch: pass options.fetch");
    this.#fetch = f;
    this.#sleep = options.sleep ?? defaultSleep;
    this.now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
  }

  /** The URL and the options of `fetch` for `request` (a `ConfigError` for a body that
   * is no JSON: a cycle, a `BigInt`). */
  #init(request: WireRequest): [string, RequestInit] {
    const headers: Record<string, string> = {
      Accept: "application/json, application/problem+json",
      "User-Agent": `convomem-ts/${VERSION}`,
    };
    if (this.#apiKey !== undefined) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    const init: RequestInit = { method: request.method, headers };
    if (request.json !== undefined) {
      headers["Content-Type"] = "application/json";
      try {
        init.body = JSON.stringify(request.json);
      } catch (e) {
        throw new ConfigError("body", request.json, `cannot be sent as JSON (${String(e)})`);
      }
    }
    Object.assign(headers, request.headers);
    return [this.baseUrl + request.path + query(request.params), init];
  }

  /** One attempt: the response with its body read, or a `TransientError`. */
  async send(request: WireRequest): Promise<WireResponse> {
    const [url, init] = this.#init(request);
    const deadline = new Deadline(this.timeoutMs);
    const what = `${request.method} ${request.path}`;
    try {
      const response = await this.#fetch(url, { ...init, signal: deadline.signal });
      const body = await response.text();
      return { status: response.status, headers: response.headers, body };
    } catch (e) {
      throw deadline.failure(e, what);
    } finally {
      deadline.clear();
    }
  }

  /**
   * `send`, repeated on a transient failure while `retryable` (see the module comment).
   * Returns the last response, an error status included.
   */
  async call(request: WireRequest, retryable = true): Promise<WireResponse> {
    return this.#retrying(() => this.send(request), retryable ? RETRY_STATUSES : null, retryable);
  }

  /**
   * A streaming request: the response whose body is still to be read, once it is a
   * success (its typed error otherwise). Only a 429 is repeated: the service refused
   * the request before doing anything; any other failure may have done part of it.
   */
  async open(request: WireRequest, deadline: Deadline): Promise<Response> {
    const what = `${request.method} ${request.path}`;
    const [url, init] = this.#init(request);
    const once = async (): Promise<Response> => {
      deadline.reset();
      try {
        return await this.#fetch(url, { ...init, signal: deadline.signal });
      } catch (e) {
        throw deadline.failure(e, what);
      } finally {
        deadline.pause(); // a retry's pause is not the service's silence
      }
    };
    const response = await this.#retrying(once, new Set([429]), false, async (r) => {
      await r.body?.cancel();
    });
    if (response.status >= 200 && response.status < 300) return response;
    let body: string;
    try {
      body = await response.text();
    } catch (e) {
      throw deadline.failure(e, what);
    }
    throw errorFor({ status: response.status, headers: response.headers, body }, this.now());
  }

  /** The backoff's pause before attempt `attempt + 1` (after a conflict, say). */
  async pause(attempt: number): Promise<void> {
    await this.#sleep(backoffMs(attempt, this.#random));
  }

  async #retrying<R extends { status: number; headers: Headers }>(
    once: () => Promise<R>,
    statuses: ReadonlySet<number> | null,
    retryTransport: boolean,
    discard?: (response: R) => Promise<void>,
  ): Promise<R> {
    for (let attempt = 1; ; attempt++) {
      let response: R;
      try {
        response = await once();
      } catch (e) {
        if (!(e instanceof TransientError) || !retryTransport || attempt > this.retries) throw e;
        await this.#sleep(backoffMs(attempt, this.#random));
        continue;
      }
      if (statuses === null || !statuses.has(response.status) || attempt > this.retries) {
        return response;
      }
      const hint = retryAfter(response.headers.get("retry-after"), this.now());
      const waitMs = hint === null ? backoffMs(attempt, this.#random) : hint * 1000;
      if (waitMs > this.#maxWaitMs) return response; // the server asks for longer: give up
      await discard?.(response);
      await this.#sleep(waitMs);
    }
  }
}

/** A non-negative integer option (`retries`, `retryConflicts`...). */
export function count(field: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new ConfigError(field, value, "must be an integer >= 0");
  }
  return value;
}

function positive(field: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(field, value, "must be a number > 0");
  }
  return value;
}

/** A string an HTTP header can carry: visible ASCII (inner spaces allowed), at most
 * `max` characters (the service takes an `Idempotency-Key` of up to 256). */
export function headerValue(field: string, value: unknown, max = 4096): string {
  const ok =
    typeof value === "string" &&
    value.length <= max &&
    /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value);
  if (!ok) throw new ConfigError(field, value, `must be 1-${max} visible ASCII characters`);
  return value;
}
