/**
 * convomem: the TypeScript client of the convomem memory service (`convomem serve`).
 *
 *     import { Client } from "convomem";
 *     const c = new Client("http://127.0.0.1:8080", process.env.CONVOMEM_API_KEY);
 *     await c.createSession("u1", { id: "s1" });
 *     await c.append("s1", [{ role: "user", content: "Hello" }]);
 *     for await (const delta of c.chat("s1", "What did I just say?")) process.stdout.write(delta);
 *
 * ESM, no runtime dependency beyond `fetch`; see README.md.
 */

export { ChatStream } from "./chat.js";
export { Client } from "./client.js";
export type {
  AppendOptions,
  ChatMessage,
  ChatOptions,
  ContextOptions,
  CreateSessionOptions,
  FactChanges,
  FactOptions,
  PageOptions,
  SearchOptions,
} from "./options.js";
export {
  ConfigError,
  ConvomemError,
  MessageIdConflict,
  NotFound,
  type Problem,
  RateLimited,
  RequestInvalid,
  ServiceError,
  ServiceUnavailable,
  SessionMoved,
  TransientError,
  Unauthorized,
} from "./errors.js";
export { EventParser, type SseEvent } from "./sse.js";
export { type ClientOptions, RETRY_STATUSES } from "./transport.js";
export type * from "./types.js";
export { VERSION } from "./version.js";
export { PROBLEM_BASE } from "./wire.js";
