/**
 * A real `convomem serve` for the tests: started as `$CONVOMEM_PYTHON -m convomem serve`
 * on a free loopback port over a temporary SQLite store, with API keys made by
 * `convomem keys create`, and ready once `GET /readyz` answers 200. A process that
 * exits or is not ready in time FAILS the test with the tail of its log, never skips.
 * `stop()` ends the process it started (its own pid, nothing else), and so does the end
 * of the test process, however it ends.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Served {
  readonly url: string;
  readonly store: string;
  /** An API key of each tenant asked for. */
  readonly keys: Record<string, string>;
  logTail(): string;
  stop(): Promise<void>;
}

/** The python that has convomem (with its `server` extra) installed. */
export function python(): string {
  const python = process.env["CONVOMEM_PYTHON"];
  if (!python) {
    throw new Error(
      "CONVOMEM_PYTHON is not set: run these tests with `make test-ts`, or set it to a " +
        "python with convomem[server] installed",
    );
  }
  return python;
}

/** A free port on 127.0.0.1 (the kernel's choice). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A new API key of `tenant` (the last line `convomem keys create` prints). */
export function createKey(store: string, tenant: string): string {
  const done = spawnSync(
    python(),
    ["-m", "convomem", "keys", "create", "--tenant", tenant, "--store", store],
    {
      encoding: "utf8",
      timeout: 120_000,
    },
  );
  if (done.status !== 0) {
    throw new Error(
      `convomem keys create failed (${done.status}):\n${done.stdout}\n${done.stderr}`,
    );
  }
  const lines = done.stdout.trim().split("\n");
  return (lines[lines.length - 1] ?? "").trim();
}

/** Start `convomem serve ARGS` with keys of `tenants`; resolves once it is ready. */
export async function serve(args: string[] = [], tenants: string[] = ["acme"]): Promise<Served> {
  const folder = mkdtempSync(join(tmpdir(), "convomem-ts-"));
  const store = `sqlite:///${join(folder, "service.db")}`;
  const keys: Record<string, string> = {};
  for (const tenant of tenants) keys[tenant] = createKey(store, tenant);
  const port = await freePort();
  const log = join(folder, "serve.log");
  const out = openSync(log, "w");
  const child: ChildProcess = spawn(
    python(),
    [
      "-m",
      "convomem",
      "serve",
      "--store",
      store,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      ...args,
    ],
    { stdio: ["ignore", out, out] },
  );
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  // A test process that crashes, or that the runner ends (a timeout: SIGTERM), leaves no
  // server behind: the server is killed, then the signal's default action ends the process.
  const onSignal = (signal: NodeJS.Signals): void => {
    kill();
    rmSync(folder, { recursive: true, force: true });
    process.kill(process.pid, signal);
  };
  process.once("exit", kill);
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  const logTail = (): string => {
    try {
      return readFileSync(log, "utf8").slice(-4000);
    } catch {
      return "";
    }
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      const timer = setTimeout(kill, 10_000);
      await exited;
      clearTimeout(timer);
    }
    process.removeListener("exit", kill);
    process.removeListener("SIGTERM", onSignal);
    process.removeListener("SIGINT", onSignal);
    rmSync(folder, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const tail = logTail();
      await stop();
      throw new Error(`convomem serve exited (${child.exitCode ?? child.signalCode}):\n${tail}`);
    }
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      const tail = logTail();
      await stop();
      throw new Error(`convomem serve not ready after 90 s:\n${tail}`);
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  return { url, store, keys, logTail, stop };
}
