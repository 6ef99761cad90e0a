// computeCidV0 against the real ipfs-only-hash 4.0.0 (what tests/vectors/cids.json was
// computed with) on inputs the vectors do not reach: exactly 174 chunks (one parent) and
// 174 chunks + 5 bytes (a second level). ipfs-only-hash comes from the tools cache that
// scripts/setup fills; without it this test is skipped and says so.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { computeCidV0 } from "@appliance/sdk";

const tools = process.env.APPLIANCE_TOOLS_DIR || join(homedir(), ".cache", "appliance-tools");
const modules = join(tools, "node", "node_modules");
const available = existsSync(join(modules, "ipfs-only-hash", "package.json"));
const skip = available ? false : `ipfs-only-hash is not in ${modules} (run scripts/setup)`;

const CHUNK = 262144;

for (const size of [174 * CHUNK, 174 * CHUNK + 5]) {
  test(`the CID of ${size} bytes is ipfs-only-hash's`, { skip, timeout: 120_000 }, async () => {
    const require = createRequire(join(modules, "noop.js"));
    assert.equal(require("ipfs-only-hash/package.json").version, "4.0.0");
    const Hash = require("ipfs-only-hash");
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i++) data[i] = (i * 7 + (i >> 18)) & 0xff;
    assert.equal(await computeCidV0(data), await Hash.of(data));
  });
}
