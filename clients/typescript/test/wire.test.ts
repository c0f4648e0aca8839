/**
 * The sans-I/O parts: problem documents to typed errors (every status family and every
 * 409 kind), `Retry-After` in both forms, `ETag` seqs, and paths.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ConfigError,
  ConvomemError,
  MessageIdConflict,
  NotFound,
  PROBLEM_BASE,
  RateLimited,
  RequestInvalid,
  ServiceError,
  ServiceUnavailable,
  SessionMoved,
  Unauthorized,
} from "convomem";

// The sans-I/O helpers are not public: the tests reach them through the package's
// private import map (package.json "imports").
import { errorFor, etagSeq, path, retryAfter } from "#dist/wire.js";

function answer(status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return { status, headers: new Headers(headers), body: text };
}

const problem = (slug: string, status: number, extra: Record<string, unknown> = {}) => ({
  type: PROBLEM_BASE + slug,
  title: "t",
  status,
  detail: `detail of ${slug}`,
  ...extra,
});

test("each status maps to its error class, which keeps the problem whole", () => {
  const cases: [number, string, new (...a: never[]) => ServiceError][] = [
    [400, "bad-request", RequestInvalid],
    [413, "too-large", RequestInvalid],
    [422, "invalid-message", RequestInvalid],
    [401, "unauthorized", Unauthorized],
    [403, "forbidden", Unauthorized],
    [404, "not-found", NotFound],
    [409, "conflict", ServiceError],
    [429, "rate-limited", RateLimited],
    [502, "upstream-failed", ServiceUnavailable],
    [503, "unavailable", ServiceUnavailable],
    [504, "timeout", ServiceUnavailable],
    [500, "internal", ServiceError],
  ];
  for (const [status, slug, kind] of cases) {
    const doc = problem(slug, status, { field: "messages[0].role", value: "robot", extension: 1 });
    const e = errorFor(answer(status, doc));
    assert.ok(e instanceof kind, `${status} -> ${e.name}`);
    assert.equal(e.name, kind.name);
    assert.ok(e instanceof ServiceError && e instanceof ConvomemError && e instanceof Error);
    assert.equal(e.status, status);
    assert.equal(e.type, PROBLEM_BASE + slug);
    assert.equal(e.slug, slug);
    assert.equal(e.detail, `detail of ${slug}`);
    assert.equal(e.field, "messages[0].role");
    assert.equal(e.value, "robot");
    assert.equal(e.details["extension"], 1);
    assert.match(
      e.message,
      new RegExp(
        `^HTTP ${status} .*${slug}: detail of ${slug} \\(field messages\\[0\\]\\.role="robot"\\)$`,
      ),
    );
    assert.equal(e.transient, status === 429 || status >= 502);
  }
});

test("a 409 tells a reused message id or key, a moved session and other conflicts apart", () => {
  const reused = errorFor(
    answer(409, problem("message-conflict", 409, { field: "id", value: "m1" })),
  );
  assert.ok(reused instanceof MessageIdConflict);
  assert.equal(reused.messageId, "m1");
  const key = errorFor(
    answer(409, problem("idempotency-conflict", 409, { field: "Idempotency-Key" })),
  );
  assert.ok(key instanceof MessageIdConflict);

  const moved = errorFor(
    answer(409, problem("precondition-failed", 409, { field: "If-Match", value: "3" }), {
      ETag: '"7"',
    }),
  );
  assert.ok(moved instanceof SessionMoved);
  assert.equal(moved.actual, 7); // from the ETag: where the session is now
  assert.equal(moved.field, "If-Match");
  const said = errorFor(
    answer(409, problem("conflict", 409, { field: "seq", value: 4, actual: 9, expected: 3 })),
  );
  assert.ok(said instanceof SessionMoved);
  assert.deepEqual([said.actual, said.expected], [9, 3]);
  const unknown = errorFor(answer(409, problem("precondition-failed", 409)));
  assert.ok(unknown instanceof SessionMoved);
  assert.deepEqual([unknown.actual, unknown.field], [-1, "seq"]);

  const other = errorFor(answer(409, problem("conflict", 409, { field: "id", value: "s1" })));
  assert.ok(!(other instanceof SessionMoved) && !(other instanceof MessageIdConflict));
  assert.equal(other.constructor, ServiceError);
});

test("a body that is no problem document still gives a typed error naming the status", () => {
  const e = errorFor(answer(502, "<html>bad gateway</html>"));
  assert.ok(e instanceof ServiceUnavailable);
  assert.equal(e.title, "HTTP 502");
  assert.equal(e.detail, "<html>bad gateway</html>");
  assert.equal(e.type, "about:blank");
  assert.ok(errorFor(answer(404, "")) instanceof NotFound);
  assert.ok(errorFor(answer(418, [1, 2])) instanceof RequestInvalid);
});

test("Retry-After: seconds, an HTTP date against the clock, or nothing", () => {
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  assert.equal(retryAfter("3", now), 3);
  assert.equal(retryAfter(" 0 ", now), 0);
  assert.equal(retryAfter("1.5", now), 1.5);
  assert.equal(retryAfter("Wed, 21 Oct 2015 07:28:04 GMT", now), 4);
  assert.equal(retryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), 0); // past: at once
  for (const bad of [null, "", "-1", "soon", "1e3", "12abc"])
    assert.equal(retryAfter(bad, now), null, String(bad));
  const limited = errorFor(answer(429, problem("rate-limited", 429), { "Retry-After": "2" }), now);
  assert.ok(limited instanceof RateLimited);
  assert.equal(limited.retryAfter, 2);
  assert.equal(
    (errorFor(answer(503, problem("unavailable", 503))) as ServiceUnavailable).retryAfter,
    null,
  );
});

test("ETag seqs, weak or strong", () => {
  assert.equal(etagSeq('"12"'), 12);
  assert.equal(etagSeq('W/"12"'), 12);
  assert.equal(etagSeq("12"), 12);
  assert.equal(etagSeq('"x"'), null);
  assert.equal(etagSeq(null), null);
});

test("paths encode every id, and refuse one no URL can address", () => {
  assert.equal(path("sessions", "a/b?c#d e%"), "/v1/sessions/a%2Fb%3Fc%23d%20e%25");
  assert.equal(path("users", "ü", "facts"), "/v1/users/%C3%BC/facts");
  for (const bad of ["", ".", "..", 3, null]) {
    assert.throws(
      () => path("sessions", bad),
      (e: unknown) => e instanceof ConfigError && e.field === "id" && e.value === bad,
    );
  }
});
