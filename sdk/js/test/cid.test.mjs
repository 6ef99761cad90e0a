// computeCidV0 and hashedCid against every vector of tests/vectors/cids.json (computed
// with ipfs-only-hash 4.0.0 and viem's keccak256).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { computeCidV0, hashedCid } from "@appliance/sdk";

const vectors = JSON.parse(await readFile(new URL("../../../tests/vectors/cids.json", import.meta.url), "utf8")).vectors;

function codeOf(v) {
  return v.repeat ? v.repeat.text.repeat(v.repeat.count) : v.code;
}

test("the vectors are all there", () => {
  assert.ok(vectors.length >= 8, `only ${vectors.length} vectors`);
  // A multi-chunk input (a parent node) is covered.
  assert.ok(vectors.some((v) => v.bytes > 262144));
});

for (const v of vectors) {
  test(`CIDv0 of ${v.bytes} bytes is ${v.cid}`, async () => {
    const code = codeOf(v);
    assert.equal(new TextEncoder().encode(code).length, v.bytes);
    assert.equal(await computeCidV0(code), v.cid);
    // The same bytes as a Uint8Array.
    assert.equal(await computeCidV0(new TextEncoder().encode(code)), v.cid);
  });
  test(`hashedCid of ${v.cid}`, () => {
    assert.equal(hashedCid(v.cid), v.hashed_cid);
  });
}

test("one byte more or less is another CID", async () => {
  assert.notEqual(await computeCidV0("hello world"), await computeCidV0("hello world!"));
  assert.notEqual(await computeCidV0("a".repeat(262144)), await computeCidV0("a".repeat(262145)));
});

test("strings are hashed as UTF-8", async () => {
  const text = "async function main() { return \"héllo ✓\"; }";
  assert.equal(await computeCidV0(text), await computeCidV0(new TextEncoder().encode(text)));
  assert.notEqual(await computeCidV0(text), await computeCidV0(Buffer.from(text, "latin1")));
});

test("wrong inputs are refused clearly", async () => {
  await assert.rejects(() => computeCidV0(42), /string or a Uint8Array/);
  assert.throws(() => hashedCid(null), /CID as a string/);
});
