// The cases of run.mjs: each example of examples/actions/reference, as the reference
// documents it, run through the SDK against the development appliance, with what a user
// would check of its answer. Started by run.mjs (which passes REF_CONTEXT and trusts the
// dev certificate through NODE_EXTRA_CA_CERTS); not meant to be run by hand.
//
// The only changes made to an example are its addresses and keys: the URLs of the services
// it calls (the chain, the price, weather and auth services, the RPC provider) become the
// local stand-ins', and a placeholder address ("0xAbc123...") becomes a real one. Each
// replacement must match the example's text, so an example that changes upstream fails
// here instead of running something else.

import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const ctx = JSON.parse(process.env.REF_CONTEXT);
const { world } = ctx;
const requireTool = createRequire(path.join(ctx.nodeModules, "noop.js"));
const { ethers } = requireTool("ethers"); // 5.7.2, as scripts/setup pins it
const solc = requireTool("solc");
const { encode: cborEncode } = await import(
  pathToFileURL(path.join(ctx.nodeModules, "cbor-x/index.js")).href
);
const sdk = await import(pathToFileURL(path.join(ctx.root, "sdk/js/dist/index.js")).href);

const EXAMPLES = path.join(ctx.root, "examples/actions/reference");
const BASE_RPC = "https://mainnet.base.org";

/** Anvil's development account #8 (unlocked: anvil signs for it). */
const FUNDER = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f";

const chain = new ethers.providers.JsonRpcProvider(ctx.rpcUrl);
chain.pollingInterval = 100; // anvil mines at once; ethers' default waits 4 s between polls
const funder = chain.getSigner(FUNDER);

// --- an account, its wallets, a token ---------------------------------------------------

const anonymous = sdk.createClient({ baseUrl: ctx.baseUrl });
const { api_key } = await anonymous.newAccount({ account_name: "reference-examples" });
const client = anonymous.withApiKey(api_key);
const vault = (await client.createWallet({ name: "vault" })).wallet_address;
const payer = (await client.createWallet({ name: "payer" })).wallet_address;

async function fund(address, eth) {
  const tx = await funder.sendTransaction({ to: address, value: ethers.utils.parseEther(eth) });
  await tx.wait();
}

function deployToken(supply) {
  const input = {
    language: "Solidity",
    sources: { "Token.sol": { content: fs.readFileSync(new URL("Token.sol", import.meta.url), "utf8") } },
    settings: { outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  assert.deepEqual(errors, [], "Token.sol compiles");
  const { abi, evm } = output.contracts["Token.sol"].Token;
  return new ethers.ContractFactory(abi, evm.bytecode.object, funder).deploy(supply);
}

await fund(payer, "2");
await fund(vault, "1");
const token = await deployToken(ethers.utils.parseUnits("1000000", 18));
await token.deployTransaction.wait();
const TOKENS = "1234.5";
await (await token.transfer(vault, ethers.utils.parseUnits(TOKENS, 18))).wait();

// --- running an example -----------------------------------------------------------------

const results = [];
const seen = new Set();

/** The example's code with each `[from, to]` replaced; `from` must occur in it. */
function load(name, replacements = []) {
  let code = fs.readFileSync(path.join(EXAMPLES, `${name}.js`), "utf8");
  for (const [from, to] of replacements) {
    assert.ok(code.includes(from), `${name}.js no longer contains ${JSON.stringify(from)}`);
    code = code.split(from).join(to);
  }
  return code;
}

/** Runs `code` with `params`; the whole answer (`response`, `logs`, `has_error`, `error`). */
async function run(code, params) {
  return client.litAction({ code, js_params: params });
}

/** Runs `code` and returns its response, failing on an action error. */
async function ok(name, code, params) {
  const answer = await run(code, params);
  assert.equal(answer.has_error, false, `${name}: ${JSON.stringify(answer.error)}\n${answer.logs}`);
  return answer.response;
}

/** Runs `code` and returns the action's error message, failing if it succeeded. */
async function fails(name, code, params) {
  const answer = await run(code, params);
  assert.equal(answer.has_error, true, `${name} should have failed: ${JSON.stringify(answer.response)}`);
  return answer.error?.message ?? "";
}

/**
 * Gaps this runtime still has, by example, with the reason; the example must fail so (and
 * once it runs, this fails until the entry and docs/compatibility.md are updated). Format:
 * `"imports-9-x": { reason: "…", message: /what its error says/ }`. None today.
 */
const KNOWN_GAPS = {};

async function example(name, body) {
  seen.add(name);
  const start = performance.now();
  try {
    await body();
    if (KNOWN_GAPS[name]) {
      throw new Error(`${name} now runs: take it off KNOWN_GAPS (and docs/compatibility.md)`);
    }
    results.push([name, "runs", performance.now() - start]);
  } catch (err) {
    const gap = KNOWN_GAPS[name];
    if (gap && gap.message.test(String(err?.message ?? err))) {
      results.push([name, `KNOWN GAP: ${gap.reason}`, performance.now() - start]);
      return;
    }
    results.push([name, "FAILS", performance.now() - start]);
    console.error(`✗ ${name}:`, err);
    process.exitCode = 1;
  }
}

const signedBy = (message, signature, address) =>
  assert.equal(ethers.utils.verifyMessage(message, signature), ethers.utils.getAddress(address));

// --- examples.mdx -------------------------------------------------------------------------

await example("examples-1-sign-message", async () => {
  const r = await ok("1", load("examples-1-sign-message"), { pkpId: vault, message: "hello from the vault" });
  assert.equal(r.message, "hello from the vault");
  signedBy(r.message, r.signature, vault);
});

let secretCiphertext;
await example("examples-2-encrypt-secret", async () => {
  const r = await ok("2", load("examples-2-encrypt-secret"), { pkpId: vault, secret: "the launch code" });
  assert.match(r.ciphertext, /^[0-9a-f]+$/);
  secretCiphertext = r.ciphertext;
});

await example("examples-3-decrypt-secret", async () => {
  const code = load("examples-3-decrypt-secret");
  const r = await ok("3", code, { pkpId: vault, ciphertext: secretCiphertext });
  assert.equal(r.plaintext, "the launch code");
  // another wallet's key does not open it
  await fails("3 (other wallet)", code, { pkpId: payer, ciphertext: secretCiphertext });
});

const COINGECKO = ["https://api.coingecko.com", ctx.webBase];
await example("examples-4-price-proof", async () => {
  const r = await ok("4", load("examples-4-price-proof", [COINGECKO]), { pkpId: vault });
  assert.equal(r.price, world.ethUsd);
  assert.equal(r.payload, `ETH/USD: ${world.ethUsd}`);
  signedBy(r.payload, r.signature, vault);
});

await example("examples-5-weather-gate", async () => {
  const encrypted = await ok("5 (encrypt the key)", load("examples-2-encrypt-secret"), {
    pkpId: vault,
    secret: world.weatherApiKey,
  });
  const code = load("examples-5-weather-gate", [["https://api.openweathermap.org", ctx.webBase]]);
  const params = (city, minTempCelsius) => ({
    pkpId: vault,
    city,
    minTempCelsius,
    message: "Approved",
    encryptedWeatherApiKey: encrypted.ciphertext,
  });
  const warm = await ok("5 (London)", code, params("London", 20));
  assert.equal(warm.signed, true);
  assert.equal(warm.temp, world.weatherCelsius.London);
  signedBy("Approved", warm.signature, vault);
  const cold = await ok("5 (Oslo)", code, params("Oslo", 20));
  assert.deepEqual(cold, {
    signed: false,
    reason: `Temperature ${world.weatherCelsius.Oslo}°C is below threshold of 20°C`,
  });
});

await example("examples-6-read-contract", async () => {
  const r = await ok("6", load("examples-6-read-contract", [[BASE_RPC, ctx.rpcUrl]]), {
    pkpId: vault,
    contractAddress: token.address,
    holderAddress: vault,
  });
  assert.equal(r.balance, TOKENS);
  assert.equal(r.symbol, "REF");
  assert.equal(r.payload, `${vault} holds ${TOKENS} REF`);
  signedBy(r.payload, r.signature, vault);
});

const recipient = ethers.Wallet.createRandom().address;
await example("examples-7-send-eth", async () => {
  assert.equal((await chain.getBalance(recipient)).toString(), "0");
  const before = await chain.getBalance(payer);
  const r = await ok("7", load("examples-7-send-eth"), {
    pkpId: payer,
    toAddress: recipient,
    amountEth: "0.25",
    chainId: 31337,
    rpcUrl: ctx.rpcUrl,
  });
  assert.equal(r.from, payer);
  assert.equal(r.to, recipient);
  const receipt = await chain.getTransactionReceipt(r.txHash);
  assert.equal(receipt.status, 1);
  assert.equal(receipt.blockNumber, r.blockNumber);
  assert.equal(receipt.from, payer);
  assert.equal((await chain.getBalance(recipient)).toString(), ethers.utils.parseEther("0.25").toString());
  const spent = before.sub(await chain.getBalance(payer));
  const fee = receipt.gasUsed.mul(receipt.effectiveGasPrice);
  assert.equal(spent.toString(), ethers.utils.parseEther("0.25").add(fee).toString());
});

// --- patterns.mdx -------------------------------------------------------------------------

await example("patterns-1-eth-balance-gate", async () => {
  const code = load("patterns-1-eth-balance-gate", [[BASE_RPC, ctx.rpcUrl]]);
  const pass = await ok("p1", code, {
    pkpId: vault,
    minBalanceWei: ethers.utils.parseEther("0.5").toString(),
    message: "rich enough",
  });
  assert.equal(pass.balanceEth, ethers.utils.formatEther(await chain.getBalance(vault)));
  signedBy("rich enough", pass.signature, vault);
  const refused = await ok("p1 (too poor)", code, {
    pkpId: vault,
    minBalanceWei: ethers.utils.parseEther("100").toString(),
    message: "rich enough",
  });
  assert.match(refused.error, /^Balance [0-9.]+ ETH is below the required minimum$/);
});

await example("patterns-2-erc20-balance-gate", async () => {
  const code = load("patterns-2-erc20-balance-gate", [[BASE_RPC, ctx.rpcUrl]]);
  const params = (requiredAmount) => ({
    pkpId: vault,
    contractAddress: token.address,
    requiredAmount,
    message: "holder",
  });
  const pass = await ok("p2", code, params(ethers.utils.parseUnits("1000", 18).toString()));
  signedBy("holder", pass.signature, vault);
  const refused = await ok("p2 (too few)", code, params(ethers.utils.parseUnits("2000", 18).toString()));
  assert.deepEqual(refused, { error: "Insufficient token balance" });
});

await example("patterns-3-action-identity-price-feed", async () => {
  const code = load("patterns-3-action-identity-price-feed", [COINGECKO]);
  const r = await ok("p3", code, {});
  assert.equal(r.price, world.ethUsd);
  assert.match(r.payload, new RegExp(`^ETH/USD: ${world.ethUsd} at \\d{13}$`));
  signedBy(r.payload, r.signature, r.signerAddress);
  // the signer is the identity of exactly this code, as another action finds it
  const ipfsId = await sdk.computeCidV0(code);
  const identity = await ok(
    "p3 (identity)",
    "async function main({ ipfsId }) { return ethers.utils.computeAddress(await Lit.Actions.getLitActionPublicKey({ ipfsId })); }",
    { ipfsId },
  );
  assert.equal(identity, r.signerAddress);
  // one byte more is another action, with another key
  const other = await ok("p3 (changed)", `${code}\n`, {});
  assert.notEqual(other.signerAddress, r.signerAddress);
});

await example("patterns-4-allowed-pkp", async () => {
  const code = load("patterns-4-allowed-pkp", [['"0xAbc123..."', JSON.stringify(vault)]]);
  const allowed = await run(code, { pkpAddress: vault.toLowerCase() });
  assert.equal(allowed.has_error, false, JSON.stringify(allowed.error));
  const message = await fails("p4 (other pkp)", code, { pkpAddress: payer });
  assert.match(message, /Unauthorized: PKP not allowed to run this action/);
});

await example("patterns-5-caller-signature", async () => {
  const caller = ethers.Wallet.createRandom();
  const code = load("patterns-5-caller-signature", [['"0xAbc123..."', JSON.stringify(caller.address)]]);
  const message = `run the job, nonce ${Date.now()}`;
  const allowed = await run(code, { message, signature: await caller.signMessage(message) });
  assert.equal(allowed.has_error, false, JSON.stringify(allowed.error));
  const stranger = ethers.Wallet.createRandom();
  const refused = await fails("p5 (stranger)", code, { message, signature: await stranger.signMessage(message) });
  assert.match(refused, /Unauthorized: caller signature does not match allowed address/);
});

let vaultCiphertext;
await example("patterns-6-vault-encrypt", async () => {
  const r = await ok("p6", load("patterns-6-vault-encrypt"), { pkpId: vault, plaintext: "alice's record" });
  vaultCiphertext = r.ciphertext;
  const back = await ok("p6 (decrypt)", load("examples-3-decrypt-secret"), { pkpId: vault, ciphertext: vaultCiphertext });
  assert.equal(back.plaintext, "alice's record");
});

await example("patterns-7-token-gated-decrypt", async () => {
  const code = load("patterns-7-token-gated-decrypt", [["https://auth.your-app.com", ctx.webBase]]);
  const pass = await ok("p7", code, { pkpId: vault, ciphertext: vaultCiphertext, userToken: world.validToken });
  assert.deepEqual(pass, { plaintext: "alice's record" });
  const refused = await ok("p7 (bad token)", code, { pkpId: vault, ciphertext: vaultCiphertext, userToken: "forged" });
  assert.deepEqual(refused, { error: "Unauthorized" });
});

await example("patterns-8-nft-gated-decrypt", async () => {
  // any contract with balanceOf(address) serves: the token stands in for the NFT
  const code = load("patterns-8-nft-gated-decrypt", [[BASE_RPC, ctx.rpcUrl]]);
  const params = (holderAddress) => ({
    pkpId: vault,
    ciphertext: vaultCiphertext,
    holderAddress,
    nftContractAddress: token.address,
  });
  assert.deepEqual(await ok("p8", code, params(vault)), { plaintext: "alice's record" });
  assert.deepEqual(await ok("p8 (no token)", code, params(recipient)), { error: "NFT not held — access denied" });
});

let rpcKeyCiphertext;
await example("patterns-9-encrypt-rpc-key", async () => {
  const r = await ok("p9", load("patterns-9-encrypt-rpc-key"), { pkpId: vault, apiKey: world.rpcApiKey });
  rpcKeyCiphertext = r.ciphertext;
});

await example("patterns-10-rpc-url-from-secret", async () => {
  const code = load("patterns-10-rpc-url-from-secret", [["https://sepolia.infura.io", ctx.webBase]]);
  const r = await ok("p10", code, { pkpId: vault, encryptedApiKey: rpcKeyCiphertext, targetAddress: recipient });
  assert.deepEqual(r, { balance: "0.25" });
});

// --- imports.mdx --------------------------------------------------------------------------

await example("imports-1-zod", async () => {
  const code = load("imports-1-zod");
  const userData = { email: "alice@example.com", age: 33, name: "Alice" };
  const r = await ok("i1", code, { pkpId: vault, userData });
  assert.deepEqual(r.validated, userData);
  signedBy(JSON.stringify(userData), r.signature, vault);
  const bad = await ok("i1 (invalid)", code, { pkpId: vault, userData: { ...userData, email: "nope", age: -1 } });
  assert.equal(bad.error, "Validation failed");
  assert.deepEqual(bad.issues.map((i) => i.path[0]).sort(), ["age", "email"]);
});

await example("imports-2-date-fns-tz", async () => {
  const before = Date.now();
  const r = await ok("i2", load("imports-2-date-fns-tz"), { pkpId: vault, timezone: "Asia/Tokyo" });
  assert.equal(r.timezone, "Asia/Tokyo");
  assert.match(r.timestamp, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} GMT\+9$/);
  // Tokyo is UTC+9 all year: the formatted time is within a few seconds of now
  const shown = Date.parse(`${r.timestamp.slice(0, 19).replace(" ", "T")}+09:00`);
  assert.ok(Math.abs(shown - before) < 60_000, r.timestamp);
  signedBy(r.timestamp, r.signature, vault);
});

await example("imports-3-cbor-x", async () => {
  const payload = { kind: "reading", values: [1, 2.5, -7], ok: true, note: "héllo" };
  const r = await ok("i3", load("imports-3-cbor-x"), { pkpId: vault, payload });
  assert.equal(r.cbor, Buffer.from(cborEncode(payload)).toString("hex"), "the same bytes as cbor-x under node");
  signedBy(r.cbor, r.signature, vault);
});

await example("imports-4-ajv", async () => {
  const code = load("imports-4-ajv");
  const schema = {
    type: "object",
    properties: { id: { type: "integer", minimum: 1 }, tags: { type: "array", items: { type: "string" } } },
    required: ["id"],
    additionalProperties: false,
  };
  const data = { id: 7, tags: ["a", "b"] };
  const r = await ok("i4", code, { pkpId: vault, data, schema });
  assert.equal(r.valid, true);
  signedBy(JSON.stringify(data), r.signature, vault);
  const bad = await ok("i4 (invalid)", code, { pkpId: vault, data: { id: 0 }, schema });
  assert.equal(bad.error, "Schema validation failed");
  assert.deepEqual(
    bad.errors.map((e) => [e.instancePath, e.keyword]),
    [["/id", "minimum"]],
  );
});

await example("imports-5-show-import-details", async () => {
  const r = await ok("i5", load("imports-5-show-import-details"), {});
  const url = `${ctx.cdnBase}zod@3.22.4/+esm`;
  assert.deepEqual(r, [{ url, hash: ctx.integrity[url] }]);
});

// the specifier forms the page lists, each importing the same module
await example("imports-specifier-forms", async () => {
  const url = `${ctx.cdnBase}zod@3.22.4/+esm`;
  const pin = ctx.integrity[url];
  for (const specifier of ["zod@3.22.4", "zod@3.22.4/+esm", url, `zod@3.22.4#${pin}`, `${url}#${pin}`]) {
    const code = `import { z } from "${specifier}";\nasync function main() { return z.string().parse("ok"); }`;
    assert.equal(await ok(specifier, code, {}), "ok", specifier);
  }
  const wrong = pin.replace(/^sha384-./, (s) => (s.endsWith("A") ? "sha384-B" : "sha384-A"));
  const message = await fails("wrong pin", `import { z } from "zod@3.22.4#${wrong}";\nasync function main() {}`, {});
  assert.match(message, /sha384|integrity/i);
  for (const unpinned of ["zod", "zod@^3.22.4", "zod@latest"]) {
    await fails(unpinned, `import { z } from "${unpinned}";\nasync function main() {}`, {});
  }
});

// --- every file ran -----------------------------------------------------------------------

const files = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith(".js")).map((f) => f.slice(0, -3));
const missed = files.filter((f) => !seen.has(f));
if (missed.length) {
  console.error(`examples with no case here: ${missed.join(", ")}`);
  process.exitCode = 1;
}

const width = Math.max(...results.map(([n]) => n.length));
console.log(`reference examples against ${ctx.baseUrl} (anvil ${ctx.rpcUrl}):`);
for (const [name, status, ms] of results) {
  console.log(`  ${name.padEnd(width)}  ${ms.toFixed(0).padStart(6)} ms  ${status}`);
}
const runs = results.filter(([, s]) => s === "runs").length;
console.log(`${runs} of ${results.length} run; ${results.filter(([, s]) => s.startsWith("KNOWN")).length} known gap(s)`);
