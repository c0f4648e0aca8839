/**
 * The package as an application gets it: `npm pack`, installed into an empty project
 * with no network, imported as ESM and type-checked by tsc as a consumer would.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { VERSION } from "convomem";

const run = promisify(execFile);
const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const manifest = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf8")) as Record<
  string,
  unknown
>;
const folder = mkdtempSync(join(tmpdir(), "convomem-ts-consumer-"));
after(() => rmSync(folder, { recursive: true, force: true }));

test("the manifest: ESM, types, no runtime dependency, the version the client sends", () => {
  assert.equal(manifest["type"], "module");
  assert.equal(manifest["version"], VERSION);
  assert.equal(manifest["dependencies"], undefined);
  assert.deepEqual(manifest["exports"], {
    ".": { types: "./dist/index.d.ts", import: "./dist/index.js" },
    "./package.json": "./package.json",
  });
  assert.deepEqual(Object.keys(manifest["devDependencies"] as object).sort(), [
    "@types/node",
    "typescript",
  ]);
  for (const version of Object.values(manifest["devDependencies"] as Record<string, string>)) {
    assert.match(version, /^\d+\.\d+\.\d+$/); // pinned
  }
});

test("packed, installed offline and imported by an application, with its types", async () => {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const { stdout } = await run(
    npm,
    ["pack", "--ignore-scripts", "--json", "--pack-destination", folder],
    { cwd: PACKAGE },
  );
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(packed);
  const files = packed.files.map((f) => f.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"));
  assert.ok(
    files.every((f) => f === "package.json" || f === "README.md" || f.startsWith("dist/")),
    files.join(", "),
  );

  const env = { ...process.env, npm_config_cache: join(folder, "cache") };
  writeFileSync(
    join(folder, "package.json"),
    JSON.stringify({ name: "app", private: true, type: "module" }),
  );
  await run(
    npm,
    ["install", "--offline", "--no-audit", "--no-fund", join(folder, packed.filename)],
    { cwd: folder, env },
  );
  writeFileSync(
    join(folder, "main.ts"),
    [
      'import { Client, NotFound, type Session } from "convomem";',
      'const client = new Client("http://127.0.0.1:9", "key", { retries: 0 });',
      "const check: (s: Session) => number = (s) => s.last_seq;",
      "console.log(typeof client.createSession, NotFound.name, typeof check);",
      "",
    ].join("\n"),
  );
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  const options = [
    "--strict",
    "--module",
    "nodenext",
    "--moduleResolution",
    "nodenext",
    "--target",
    "es2022",
    "--types",
    "node",
    "--typeRoots",
    join(PACKAGE, "node_modules", "@types"),
  ];
  await run(process.execPath, [tsc, ...options, "main.ts"], { cwd: folder });
  const out = await run(process.execPath, ["main.js"], { cwd: folder });
  assert.equal(out.stdout, "function NotFound function\n");
});
