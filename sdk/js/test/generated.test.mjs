// The committed generated files are what a fresh generation gives, byte for byte:
// src/schema.d.ts (openapi-typescript over the committed OpenAPI snapshot, which a Rust
// test keeps identical to what the server serves) and the browser bundle the dashboard
// embeds. Run `npm run build` and commit the result when one of these fails.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { bundle, dashboardCopy, sdkDir } from "../scripts/bundle.mjs";

const run = promisify(execFile);

test("src/schema.d.ts is what openapi-typescript generates from the OpenAPI snapshot", async () => {
  const pkg = JSON.parse(await readFile(join(sdkDir, "package.json"), "utf8"));
  // The very command `npm run generate` runs, into a temporary file.
  const generate = pkg.scripts.generate;
  assert.match(generate, /^openapi-typescript \.\.\/\.\.\/appliance\/tests\/data\/openapi\.json --output src\/schema\.d\.ts$/);
  const otsDir = join(sdkDir, "node_modules", "openapi-typescript");
  const ots = JSON.parse(await readFile(join(otsDir, "package.json"), "utf8"));
  const cli = join(otsDir, typeof ots.bin === "string" ? ots.bin : ots.bin["openapi-typescript"]);
  const dir = await mkdtemp(join(tmpdir(), "sdk-schema-"));
  try {
    const out = join(dir, "schema.d.ts");
    await run(process.execPath, [cli, "../../appliance/tests/data/openapi.json", "--output", out], { cwd: sdkDir });
    const fresh = await readFile(out);
    const committed = await readFile(join(sdkDir, "src/schema.d.ts"));
    assert.ok(fresh.length > 1000, "the generated schema is suspiciously small");
    assert.ok(fresh.equals(committed), "src/schema.d.ts is stale: run `npm run generate` in sdk/js and commit it");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the committed browser bundle is what a fresh build gives", async () => {
  const fresh = Buffer.from(await bundle());
  const committed = await readFile(dashboardCopy).catch(() => Buffer.alloc(0));
  assert.ok(
    fresh.equals(committed),
    "appliance/dashboard/assets/appliance-sdk.js is stale: run `npm run build` in sdk/js and commit it",
  );
});

test("the browser bundle is the core only: no viem, no node built-ins", async () => {
  const text = Buffer.from(await bundle()).toString("utf8");
  assert.doesNotMatch(text, /node:|require\(|signTypedData|privateKeyToAccount/);
  for (const name of ["createClient", "ApplianceError", "paginate", "listAll", "computeCidV0", "hashedCid", "walletAuthHeader"]) {
    assert.match(text, new RegExp(`\\b${name}\\b`), `the bundle does not export ${name}`);
  }
});

test("the browser bundle works as an ES module", async () => {
  const sdk = await import(`data:text/javascript;base64,${Buffer.from(await bundle()).toString("base64")}`);
  assert.equal(await sdk.computeCidV0("hello world"), "Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD");
  assert.equal(
    sdk.hashedCid("Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD"),
    "0xd81a3989ee7bd419c797813dfc27dd567737973eabdc6fd38b72442a7af0b5b5",
  );
  const client = sdk.createClient({
    baseUrl: "https://x.test",
    fetch: async () =>
      new Response(JSON.stringify({ error: { code: 404, reason: "Not Found", description: "no such action" } }), {
        status: 404,
        headers: { "content-type": "application/json" },
      }),
  });
  const err = await client.deleteAction({ action_ipfs_cid: "Qm" }).catch((e) => e);
  assert.ok(err instanceof sdk.ApplianceError);
  assert.equal(err.status, 404);
  assert.equal(err.description, "no such action");
});
