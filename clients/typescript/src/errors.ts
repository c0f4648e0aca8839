/**
 * The client's one error hierarchy, mirroring the Python client's
 * (`convomem.errors`): every failure is a `ConvomemError`.
 *
 * - `ConfigError`: an argument the client cannot send (it names the field and value);
 *   nothing was sent.
 * - `TransientError`: the service could not be reached (refused, reset, timed out).
 * - `ServiceError` and its subclasses: the service answered with a problem document
 *   (RFC 9457): `RequestInvalid` (400, 413, 422), `Unauthorized` (401, 403),
 *   `NotFound` (404), `SessionMoved` (409 of `If-Match`), `MessageIdConflict` (409 of a
 *   message id or `Idempotency-Key` reused with other content), `ServiceUnavailable`
 *   (502, 503, 504 and a failed chat upstream) and `RateLimited` (429).
 *
 * `transient` is true on the errors worth retrying later (`TransientError`,
 * `ServiceUnavailable`, `RateLimited`), as the Python ones derive from `TransientError`.
 */

/** An RFC 9457 problem document: the body of every error the service answers. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  field?: string | null;
  value?: unknown;
  [extension: string]: unknown;
}

/** The root of every error this client throws. */
export class ConvomemError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  /** True when the same call may succeed if it is made again later. */
  get transient(): boolean {
    return false;
  }
}

/** An argument the client cannot send; `field` and `value` name it. Nothing was sent. */
export class ConfigError extends ConvomemError {
  readonly field: string;
  readonly value: unknown;

  constructor(field: string, value: unknown, problem: string) {
    super(`${field}=${shown(value)}: ${problem}`);
    this.field = field;
    this.value = value;
  }
}

/** The service could not be reached: a connection refused or reset, or a timeout. */
export class TransientError extends ConvomemError {
  override get transient(): boolean {
    return true;
  }
}

/**
 * The service answered with a problem. `status` is the HTTP status; `type`, `title`,
 * `detail`, `field` (`""` when the problem names none) and `value` come from the
 * problem document, which `details` holds whole (extension members included).
 */
export class ServiceError extends ConvomemError {
  readonly status: number;
  readonly details: Problem;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly field: string;
  readonly value: unknown;

  constructor(status: number, problem: Problem) {
    const type = typeof problem.type === "string" && problem.type ? problem.type : "about:blank";
    const field =
      problem.field === undefined || problem.field === null ? "" : String(problem.field);
    const detail =
      problem.detail === undefined || problem.detail === null ? "" : String(problem.detail);
    const title =
      problem.title === undefined || problem.title === null ? "" : String(problem.title);
    const where = field ? ` (field ${field}=${shown(problem.value)})` : "";
    const text = detail || title || "the service gave no detail";
    super(`HTTP ${status} ${type}: ${text}${where}`);
    this.status = status;
    this.details = { ...problem };
    this.type = type;
    this.title = title;
    this.detail = detail;
    this.field = field;
    this.value = problem.value;
  }

  /** The last part of the problem's `type` URI (`".../not-found"` is `"not-found"`). */
  get slug(): string {
    return problemSlug(this.type);
  }
}

/** The service refused the request's input (400, 413, 422); nothing was written. */
export class RequestInvalid extends ServiceError {}

/** The API key is missing, unknown or revoked (401), or not allowed (403). */
export class Unauthorized extends ServiceError {}

/** No such session, user or route for this key's tenant (404). */
export class NotFound extends ServiceError {}

/**
 * `If-Match` named a seq the session has moved past (409); nothing was written.
 * `actual` is the session's seq now (from the problem or the `ETag`; -1 when unknown):
 * re-read and retry, or pass `retryConflicts` to `append`.
 */
export class SessionMoved extends ServiceError {
  readonly sessionId: string;
  readonly expected: number;
  actual: number;

  constructor(status: number, problem: Problem) {
    super(status, problem.field ? problem : { ...problem, field: "seq" });
    this.sessionId = typeof problem["session_id"] === "string" ? problem["session_id"] : "";
    this.expected = intOr(problem["expected"], -1);
    this.actual = intOr(problem["actual"], -1);
  }
}

/** A message id (or an `Idempotency-Key`) the session holds with other content (409). */
export class MessageIdConflict extends ServiceError {
  readonly sessionId: string;
  readonly messageId: string;
  readonly seq: number;

  constructor(status: number, problem: Problem) {
    super(status, problem);
    this.sessionId = typeof problem["session_id"] === "string" ? problem["session_id"] : "";
    const id = problem["message_id"] ?? problem.value;
    this.messageId = id === undefined || id === null ? "" : String(id);
    this.seq = intOr(problem["seq"], -1);
  }
}

/**
 * The service or one of its stores is unavailable for now (502, 503, 504), or the chat
 * upstream failed; `retryAfter` is the server's hint in seconds, if it gave one.
 */
export class ServiceUnavailable extends ServiceError {
  readonly retryAfter: number | null;

  constructor(status: number, problem: Problem, retryAfter: number | null = null) {
    super(status, problem);
    this.retryAfter = retryAfter;
  }

  override get transient(): boolean {
    return true;
  }
}

/** The key is over its rate limit (429); retry after `retryAfter` seconds. */
export class RateLimited extends ServiceUnavailable {}

/** The last part of a problem `type` URI (`".../not-found"` is `"not-found"`). */
export function problemSlug(type: unknown): string {
  return typeof type === "string" ? (type.replace(/\/+$/, "").split("/").pop() ?? "") : "";
}

function intOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isInteger(value) ? value : fallback;
}

/** A value shown in a message, bounded (a 50 MB input is not echoed). */
export function shown(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? "undefined" : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}
