/**
 * What goes over the wire, with no I/O: requests as values, paths, idempotency keys,
 * `Retry-After`, and the mapping of problem documents to typed errors (the Python
 * client's `_wire.py`).
 */

import {
  ConfigError,
  MessageIdConflict,
  NotFound,
  type Problem,
  problemSlug,
  RateLimited,
  RequestInvalid,
  ServiceError,
  ServiceUnavailable,
  SessionMoved,
  Unauthorized,
} from "./errors.js";

/** The prefix of the service's problem `type` URIs; the rest is a stable slug. */
export const PROBLEM_BASE = "https://convomem.dev/problems/";

/** One HTTP request to the service, relative to its base URL. */
export interface WireRequest {
  readonly method: "GET" | "POST" | "PATCH" | "DELETE";
  readonly path: string;
  readonly params?: Readonly<Record<string, string | number | boolean | null | undefined>>;
  readonly json?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What came back: the status, the headers and the body's text. */
export interface WireResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/**
 * `/v1/...` with each part percent-encoded (an id may hold `/` or `?`). An empty id, or
 * one a URL cannot address (`.` and `..` are dot segments, which URLs resolve away), is
 * a `ConfigError`.
 */
export function path(...parts: readonly unknown[]): string {
  const out: string[] = [];
  for (const part of parts) out.push(encodeURIComponent(checkId("id", part)));
  return `/v1/${out.join("/")}`;
}

/** `value` when it is an id a URL path can hold, else a `ConfigError` naming `field`. */
export function checkId(field: string, value: unknown): string {
  if (typeof value !== "string" || value === "") {
    throw new ConfigError(field, value, "must be a non-empty string");
  }
  if (value === "." || value === "..") {
    throw new ConfigError(field, value, "a URL path cannot address this id (a dot segment)");
  }
  return value;
}

/** The query string of `params` (`undefined` and `null` values are left out). */
export function query(params: WireRequest["params"]): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params ?? {})) {
    if (value !== undefined && value !== null) search.append(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** A fresh `Idempotency-Key`: a retry of a write that carries it never writes twice. */
export function newKey(): string {
  return crypto.randomUUID();
}

/**
 * The `Retry-After` header in seconds: the delta form, or an HTTP date measured from
 * `nowMs` (a date in the past is 0). `null` when absent or unreadable.
 */
export function retryAfter(value: string | null, nowMs: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const at = Date.parse(text);
  if (Number.isNaN(at) || !/[a-z]/i.test(text)) return null;
  return Math.max(0, (at - nowMs) / 1000);
}

function problemOf(response: WireResponse): Problem {
  let doc: unknown = null;
  try {
    doc = response.body ? JSON.parse(response.body) : null;
  } catch {
    doc = null;
  }
  if (doc !== null && typeof doc === "object" && !Array.isArray(doc)) return doc as Problem;
  return { title: `HTTP ${response.status}`, detail: response.body.slice(0, 200) };
}

const SEQ_FIELDS = new Set(["If-Match", "seq", "state_version"]);

/**
 * The typed error of a non-2xx response (problem document or not). The status decides
 * the family; within 409 the problem's `type` tells a reused message id or
 * `Idempotency-Key` from a session that moved past `If-Match` (whose seq the `ETag`
 * carries) from other conflicts. An `Idempotency-Key` reused with another body is a
 * 422 since the service binds the key to the body's digest: a `MessageIdConflict` too,
 * as in the Python client.
 */
export function errorFor(response: WireResponse, nowMs: number = Date.now()): ServiceError {
  const problem = problemOf(response);
  const status = response.status;
  const kind = problemSlug(problem.type);
  if (kind === "idempotency-conflict" && (status === 409 || status === 422)) {
    return new MessageIdConflict(status, problem);
  }
  if (status === 409) {
    if (kind === "message-conflict") {
      return new MessageIdConflict(status, problem);
    }
    if (kind === "precondition-failed" || SEQ_FIELDS.has(String(problem.field))) {
      const moved = new SessionMoved(status, problem);
      if (moved.actual < 0) {
        let seq = etagSeq(response.headers.get("etag"));
        if (seq === null && (moved.field === "seq" || moved.field === "state_version")) {
          seq = Number.isInteger(moved.value) ? (moved.value as number) : null;
        }
        moved.actual = seq ?? -1;
      }
      return moved;
    }
    return new ServiceError(status, problem);
  }
  if (status === 401 || status === 403) return new Unauthorized(status, problem);
  if (status === 404) return new NotFound(status, problem);
  const hint = retryAfter(response.headers.get("retry-after"), nowMs);
  if (status === 429) return new RateLimited(status, problem, hint);
  if (status === 502 || status === 503 || status === 504) {
    return new ServiceUnavailable(status, problem, hint);
  }
  if (status >= 400 && status < 500) return new RequestInvalid(status, problem);
  return new ServiceError(status, problem);
}

/** The seq of an `ETag: "12"` header (weak or strong), or `null`. */
export function etagSeq(etag: string | null): number | null {
  if (etag === null) return null;
  const text = etag.trim().replace(/^W\//, "").replace(/^"|"$/g, "");
  return /^\d+$/.test(text) ? Number(text) : null;
}

/** An answer that is not what the API documents (a proxy's page, another service). */
export function badAnswer(what: string, problem: string): ServiceError {
  return new ServiceError(502, { title: "unexpected answer", detail: `${what}: ${problem}` });
}

/** The JSON body of a successful response (`null` for an empty one); else its error. */
export function decode(response: WireResponse, nowMs?: number): unknown {
  if (response.status < 200 || response.status >= 300) throw errorFor(response, nowMs);
  if (!response.body) return null;
  try {
    return JSON.parse(response.body) as unknown;
  } catch (e) {
    throw new ServiceError(response.status, {
      title: "not JSON",
      detail: `the service answered a body that is not JSON: ${String(e)}`,
    });
  }
}

/** `value` when it is a JSON object, else a `badAnswer` naming `what`. */
export function asObject<T>(value: unknown, what: string): T {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw badAnswer(
      what,
      `answered ${Array.isArray(value) ? "an array" : typeof value}, not an object`,
    );
  }
  return value as T;
}
