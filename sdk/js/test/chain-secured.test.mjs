// The ChainSecured envelope and signatures against every vector of tests/vectors/eip712.json
// (signed with viem 2.57.20 signTypedData), and the X-Wallet-Auth encoding.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { privateKeyToAccount } from "viem/accounts";
import { createWalletClient, custom, hashTypedData } from "viem";
import {
  chainSecuredTypedData,
  decodeWalletAuthHeader,
  signChainSecured,
  walletAuthHeader,
} from "@appliance/sdk/chain-secured";
import { walletAuthHeader as coreWalletAuthHeader } from "@appliance/sdk";

const vectors = JSON.parse(await readFile(new URL("../../../tests/vectors/eip712.json", import.meta.url), "utf8")).vectors;

test("the vectors cover every flow and both chains", () => {
  const flows = new Set(vectors.map((v) => v.typed_data.primaryType));
  assert.deepEqual([...flows].sort(), ["AddUsageApiKey", "BillingAuth", "ConvertAccount", "CreateWallet"]);
  assert.deepEqual([...new Set(vectors.map((v) => v.typed_data.domain.chainId))].sort(), ["31337", "8453"]);
});

for (const [i, v] of vectors.entries()) {
  const { primaryType, domain, message } = v.typed_data;
  const name = `vector ${i}: ${primaryType} on chain ${domain.chainId}`;

  test(`${name}: chainSecuredTypedData builds the vector's JSON`, () => {
    const built = chainSecuredTypedData(primaryType, {
      address: message.address.toLowerCase(),
      chainId: Number(domain.chainId),
      issuedAt: BigInt(message.issuedAt),
    });
    // Same values, same key order: the JSON text is identical.
    assert.equal(JSON.stringify(built), JSON.stringify(v.typed_data));
    assert.equal(hashTypedData({ ...built, domain: { ...built.domain, chainId: BigInt(domain.chainId) } }), v.digest);
  });

  test(`${name}: signChainSecured with the vector's key gives its signature`, async () => {
    const account = privateKeyToAccount(v.private_key);
    assert.equal(account.address, v.address);
    const signed = await signChainSecured(account, primaryType, { chainId: domain.chainId, issuedAt: message.issuedAt });
    assert.deepEqual(signed, { typed_data: v.typed_data, signature: v.signature });
  });
}

test("a WalletClient signs the same as its account", async () => {
  const v = vectors[0];
  const account = privateKeyToAccount(v.private_key);
  const wallet = createWalletClient({
    account,
    transport: custom({
      request: async () => {
        throw new Error("a local account signs without the transport");
      },
    }),
  });
  const { domain } = v.typed_data;
  const signed = await signChainSecured(wallet, v.typed_data.primaryType, {
    chainId: BigInt(domain.chainId),
    issuedAt: Number(v.typed_data.message.issuedAt),
  });
  assert.equal(signed.signature, v.signature);
});

test("issuedAt defaults to now and a fresh signature differs", async () => {
  const account = privateKeyToAccount(vectors[0].private_key);
  const before = Math.floor(Date.now() / 1000);
  const a = await signChainSecured(account, "CreateWallet", { chainId: 31337 });
  const after = Math.floor(Date.now() / 1000);
  const issued = Number(a.typed_data.message.issuedAt);
  assert.ok(issued >= before && issued <= after, `${issued} not in [${before}, ${after}]`);
  const b = await signChainSecured(account, "CreateWallet", { chainId: 31337, issuedAt: issued + 1 });
  assert.notEqual(a.signature, b.signature);
});

test("default issuedAt never repeats for the same signer, flow and chain", async () => {
  const account = privateKeyToAccount(vectors[1].private_key);
  const signed = [];
  for (let i = 0; i < 3; i++) signed.push(await signChainSecured(account, "BillingAuth", { chainId: 8453 }));
  const issued = signed.map((s) => Number(s.typed_data.message.issuedAt));
  assert.ok(issued[0] < issued[1] && issued[1] < issued[2], `issuedAt ${issued} not increasing`);
  assert.equal(new Set(signed.map((s) => s.signature)).size, 3);
  assert.ok(issued[2] - Math.floor(Date.now() / 1000) < 10);
});

test("bad arguments are refused with a sentence", () => {
  const address = vectors[0].address;
  assert.throws(() => chainSecuredTypedData("Transfer", { address, chainId: 1 }), /primaryType must be one of/);
  assert.throws(() => chainSecuredTypedData("CreateWallet", { address, chainId: -1 }), /chainId must be a non-negative integer/);
  assert.throws(() => chainSecuredTypedData("CreateWallet", { address, chainId: 1, issuedAt: "0x10" }), /issuedAt/);
  assert.throws(() => chainSecuredTypedData("CreateWallet", { address: "0x1234", chainId: 1 }), /Address/);
});

test("walletAuthHeader is standard base64 of {typed_data, signature} and round-trips", () => {
  const v = vectors.find((x) => x.typed_data.primaryType === "BillingAuth");
  const signed = { typed_data: v.typed_data, signature: v.signature };
  const header = walletAuthHeader(signed);
  assert.match(header, /^[A-Za-z0-9+/]+={0,2}$/);
  // What the server decodes (appliance/src/http/auth.rs): base64 → JSON.
  assert.deepEqual(JSON.parse(Buffer.from(header, "base64").toString("utf8")), signed);
  assert.equal(Buffer.from(header, "base64").toString("base64"), header);
  assert.deepEqual(decodeWalletAuthHeader(header), signed);
  assert.equal(coreWalletAuthHeader(signed), header);
  // Non-ASCII survives (UTF-8), although the envelope itself is ASCII.
  const odd = { typed_data: { note: "é ✓" }, signature: "0x00" };
  assert.deepEqual(decodeWalletAuthHeader(walletAuthHeader(odd)), odd);
  assert.throws(() => walletAuthHeader({ signature: "0x" }), /typed_data, signature/);
});
